"""Shared fixtures: deterministic seeds, W&B kept offline, and the real-data folder."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Optional, Set

import pytest
import torch

CLONE = Path(__file__).resolve().parents[1]
_CACHES = ("__pycache__/", ".pytest_cache/", ".egg-info/")


def clone_files() -> Optional[Set[str]]:
    """Untracked and ignored files in the clone (caches aside); ``None`` outside a git checkout."""
    try:
        listed = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=CLONE,
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if listed.returncode != 0:
        return None
    paths = {line[3:] for line in listed.stdout.splitlines() if line[:2] in ("??", "!!")}
    return {p for p in paths if not any(c in p for c in _CACHES) and not p.endswith(".pyc")}


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config._clone_files_before = clone_files()  # type: ignore[attr-defined]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A test run leaves nothing in the clone: no new untracked or ignored file (``runs/`` gains nothing: every
    fit in a test writes under a temporary folder; see docs/runs.md)."""
    before = getattr(session.config, "_clone_files_before", None)
    after = clone_files()
    if before is None or after is None or hasattr(session.config, "workerinput"):
        return
    leftovers = sorted(after - before)  # runs/ is ignored, so a fit's files there are listed too
    if leftovers:
        shown = ", ".join(leftovers[:20])
        print(f"\nThe tests left files in the clone: {shown}; a test must write under tmp_path "
              "(pass --run_dir or --trainer.default_root_dir, or chdir to tmp_path).")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _seed_and_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    monkeypatch.setenv("WANDB_MODE", "disabled")


def _threads_per_test() -> int:
    """The torch thread count every test starts with: the cores shared out among pytest-xdist's workers (one each
    for ``-n 2`` on two cores, where torch's default of two threads in each worker would put four busy threads on
    two cores), else torch's own default."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers > 1:
        return max(1, len(os.sched_getaffinity(0)) // workers)
    return torch.get_num_threads()


_THREADS = _threads_per_test()


@pytest.fixture(autouse=True)
def _torch_threads_set_afresh() -> None:
    """Each test starts on :func:`_threads_per_test`'s thread count, whatever the test before it left (an in-process
    ``main(..., run=False)`` keeps a small model's one thread for its caller), so a test's speed does not depend on
    which tests ran before it in its worker."""
    if torch.get_num_threads() != _THREADS:
        torch.set_num_threads(_THREADS)


@pytest.fixture(autouse=True)
def _deprecation_lines_said_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """An old option name's deprecation line is printed once per process: once per test here, so a test that
    checks it does not depend on which test ran before."""
    from lit_rnncells.utils import arguments
    monkeypatch.setattr(arguments, "_said_deprecated", set())


@pytest.fixture(autouse=True)
def _signal_handlers_restored():
    """A test leaves SIGINT and SIGTERM as it found them: an in-process fit may change them (Lightning ignores
    SIGINT after a Ctrl-C and never restores it), and processes a later test starts would inherit that."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in saved.items():
        if signal.getsignal(signum) is not handler and handler is not None:
            signal.signal(signum, handler)


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
