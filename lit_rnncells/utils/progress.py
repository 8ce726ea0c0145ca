"""Progress for logs and pipes: when standard output is not a terminal, a few plain lines instead of tqdm's
one line per batch (a 100-epoch run redirected to a file printed over a thousand lines).

:class:`LineProgress` prints a line when a stage starts, at most one every ``interval`` seconds while it
runs, and one when it ends; the command line uses it instead of tqdm whenever ``sys.stdout`` is not a TTY
(``--trainer.enable_progress_bar false`` still turns progress off, and a progress bar in
``--trainer.callbacks`` is kept).
"""
from __future__ import annotations

import math
import re
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional, TextIO

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import ProgressBar


def _number(value: Any) -> str:
    try:
        return f"{float(value):.4g}"
    except (TypeError, ValueError):
        return str(value)


def _total(value: Any) -> str:
    return "?" if value is None or (isinstance(value, float) and math.isinf(value)) else str(int(value))


def plural(count: Any, word: str, many: Optional[str] = None) -> str:
    """``1 epoch``, ``3 epochs``, ``? batches`` (``many``: the plural when it is not ``word + "s"``)."""
    shown = count if isinstance(count, str) else f"{int(count):,}"
    return f"{shown} {word if shown == '1' else (many or word + 's')}"


STAGE_LINE = re.compile(r"^(?:fit|validate|test|predict): ")
"""How each line :class:`LineProgress` prints begins: the stage it reports on."""


class LineProgress(ProgressBar):
    """Progress as sparse plain lines: ``fit: epoch 3/100, batch 12/32, step 108, train/loss 0.52, val/acc 0.91
    (41 s)``, printed at the start, at most every ``interval`` seconds, and at the end of each stage."""

    def __init__(self, interval: float = 20.0, stream: Optional[TextIO] = None) -> None:
        super().__init__()
        self.interval = interval
        self.stream = stream
        self._enabled = True
        self._start = 0.0
        self._last = -math.inf

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def _emit(self, text: str) -> None:
        if self._enabled and self.trainer.is_global_zero:
            print(f"{text} ({time.monotonic() - self._start:.0f} s)", file=self.stream or sys.stdout, flush=True)
            self._last = time.monotonic()

    def _due(self) -> bool:
        return time.monotonic() - self._last >= self.interval

    def _metrics(self, trainer: Trainer, pl_module: LightningModule) -> str:
        metrics: Dict[str, Any] = {k: v for k, v in self.get_metrics(trainer, pl_module).items() if k != "v_num"}
        return "".join(f", {k} {_number(v)}" for k, v in sorted(metrics.items()))

    def _fit_line(self, trainer: Trainer, pl_module: LightningModule, batch: Optional[int]) -> str:
        epochs = trainer.max_epochs if trainer.max_epochs not in (None, -1) else None
        where = f"fit: epoch {trainer.current_epoch + 1}" + (f"/{epochs}" if epochs else "")
        if batch is not None:
            where += f", batch {batch}/{_total(self.total_train_batches)}"
        return where + f", step {trainer.global_step}" + self._metrics(trainer, pl_module)

    # --- fit -------------------------------------------------------------------------------------------
    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._start = time.monotonic()
        self._emit(f"fit: started, {plural(_total(self.total_train_batches), 'batch', 'batches')} an epoch")

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self._due():
            self._emit(self._fit_line(trainer, pl_module, batch_idx + 1))

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._emit(f"fit: ended after {plural(trainer.current_epoch, 'epoch')}, step {trainer.global_step}"
                   + self._metrics(trainer, pl_module))

    # --- evaluation outside fit ------------------------------------------------------------------------
    def _eval_start(self, stage: str, total: Any) -> None:
        self._start = time.monotonic()
        self._emit(f"{stage}: started, {plural(_total(total), 'batch', 'batches')}")

    def _eval_batch(self, stage: str, batch_idx: int, total: Any) -> None:
        if self._due():
            self._emit(f"{stage}: batch {batch_idx + 1}/{_total(total)}")

    def _eval_end(self, stage: str, total: Any) -> None:
        self._emit(f"{stage}: done, {plural(_total(total), 'batch', 'batches')}")

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn == "validate":
            self._eval_end("validate", self.total_val_batches)

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._eval_end("test", sum(trainer.num_test_batches))

    def on_predict_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._eval_end("predict", sum(trainer.num_predict_batches))

    def on_validation_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn == "validate":
            self._eval_start("validate", self.total_val_batches)

    def on_validation_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                                batch_idx: int, dataloader_idx: int = 0) -> None:
        if trainer.state.fn == "validate":
            self._eval_batch("validate", batch_idx, trainer.num_val_batches[dataloader_idx])
        elif not trainer.sanity_checking and self._due():
            self._emit(self._fit_line(trainer, pl_module, None) + f", validating batch {batch_idx + 1}/"
                       f"{_total(trainer.num_val_batches[dataloader_idx])}")

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._eval_start("test", sum(trainer.num_test_batches))

    def on_test_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                          batch_idx: int, dataloader_idx: int = 0) -> None:
        self._eval_batch("test", batch_idx, trainer.num_test_batches[dataloader_idx])

    def on_predict_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._eval_start("predict", sum(trainer.num_predict_batches))

    def on_predict_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                             batch_idx: int, dataloader_idx: int = 0) -> None:
        self._eval_batch("predict", batch_idx, trainer.num_predict_batches[dataloader_idx])


def last_progress_line(log_file: Path, tail_bytes: int = 16_384) -> Optional[str]:
    """The last line :class:`LineProgress` printed into ``log_file`` (a run's ``log.txt``), looked for in the
    file's last ``tail_bytes``; ``None`` when there is none there, or no file yet."""
    try:
        with open(log_file, "rb") as handle:
            handle.seek(max(0, handle.seek(0, 2) - tail_bytes))
            lines = handle.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return next((line.strip() for line in reversed(lines) if STAGE_LINE.match(line)), None)


def wants_line_progress(stream: Optional[TextIO] = None) -> bool:
    """Whether progress should be plain lines: standard output is not a terminal."""
    stream = stream or sys.stdout
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):
        return True
