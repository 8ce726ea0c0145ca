"""Shared fixtures: deterministic seeds, W&B kept offline, and the real-data folder."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed_and_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    monkeypatch.setenv("WANDB_MODE", "disabled")


def real_data_dir() -> Path | None:
    value = os.environ.get("LIT_RNNCELLS_DATA")
    return Path(value) if value else None


@pytest.fixture
def data_dir() -> Path:
    """The real datasets folder; skips (with the reason) when LIT_RNNCELLS_DATA is unset."""
    path = real_data_dir()
    if path is None or not path.is_dir():
        pytest.skip("real data not available: set LIT_RNNCELLS_DATA to the datasets folder (see README)")
    return path


@pytest.fixture
def reference_programs() -> Path:
    """The folder of plain-PyTorch reference programs the side-by-side benchmarks run (not shipped with the
    package); skips (with the reason) when LIT_RNNCELLS_ANCHORS is unset or not a folder."""
    value = os.environ.get("LIT_RNNCELLS_ANCHORS")
    if not value or not Path(value).is_dir():
        pytest.skip("reference programs not available: set LIT_RNNCELLS_ANCHORS to their folder")
    return Path(value)
