"""Callbacks the command line adds: writing predictions in input order."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch.distributed as dist
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import BasePredictionWriter


class PredictionWriter(BasePredictionWriter):
    """Writes what ``predict`` produced, one line per input line, in input order.

    A task's ``predict_step`` returns a list of records ``{"index": int, "text": str, ...}``
    (``index`` is the input line number). Records from every batch and every rank are gathered,
    sorted by index and their texts written to ``output`` (a file path) or standard output.
    Other return values (e.g. the language model's samples, which it prints itself) are ignored.
    """

    def __init__(self, output: Optional[str] = None) -> None:
        super().__init__(write_interval="batch")
        self.output = output
        self._records: List[Dict[str, Any]] = []

    def on_predict_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._records = []

    def write_on_batch_end(self, trainer: Trainer, pl_module: LightningModule, prediction: Any,
                           batch_indices: Any, batch: Any, batch_idx: int, dataloader_idx: int) -> None:
        if isinstance(prediction, list):
            self._records.extend(r for r in prediction if isinstance(r, dict) and "index" in r and "text" in r)

    def on_predict_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        records = self._records
        if dist.is_available() and dist.is_initialized() and trainer.world_size > 1:
            gathered: List[Any] = [None] * trainer.world_size
            dist.all_gather_object(gathered, records)
            records = [r for part in gathered for r in part]
        if trainer.global_rank != 0 or not records:
            return
        by_index = {int(r["index"]): str(r["text"]) for r in records}
        lines = "".join(by_index[i] + "\n" for i in sorted(by_index))
        if self.output:
            Path(self.output).expanduser().write_text(lines, encoding="utf-8")
        else:
            sys.stdout.write(lines)
            sys.stdout.flush()
