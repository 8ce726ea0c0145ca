"""A DataModule that accepts ``checkpoint_path`` (used by test_cli.py to check the CLI passes ``--ckpt_path``)."""
from __future__ import annotations

from typing import Any, Optional

from lit_rnncells.data import LogicDataModule


class CheckpointAwareLogicData(LogicDataModule):
    """The logic data, remembering the checkpoint the CLI handed it."""

    def __init__(self, checkpoint_path: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.checkpoint_path = checkpoint_path
