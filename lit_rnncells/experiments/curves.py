"""Learning curves: a callback that records every validation of a fit (step, seconds, ``val/*``, tokens/s).

Add ``LearningCurves("curves.json")`` to a Trainer's callbacks; after every validation (the sanity check
excluded) it appends one point and rewrites the JSON file, so an interrupted fit keeps the curve so far::

    {"validation": [{"step": 32, "epoch": 0, "seconds": 4.1, "tokens": 23011, "tokens_per_s": 6120.5,
                     "val/acc": 0.71, "val/loss": 0.55}, ...],
     "test": [{"epoch": 0, "step": 32, "test/acc": 0.69}, ...]}

``seconds`` is wall-clock since the fit started (validation included); ``tokens`` counts the real tokens
of the training batches so far (:func:`batch_tokens`) and ``tokens_per_s`` divides them by the seconds
spent outside validation. The recorder's state (points, tokens, seconds) is saved in every checkpoint of the fit,
so a fit resumed from one continues its curves (and its seconds and tokens) rather than starting them again.
``test`` is filled by whoever evaluates per-epoch checkpoints
(:meth:`LearningCurves.add_test`; the comparison runner's ``--test-every-epoch``, for CARU Fig. 2).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import torch
from lightning.pytorch import Callback, LightningModule, Trainer


def batch_tokens(batch: Any) -> int:
    """Real tokens in a training batch of any task: the sum of ``lengths`` (logic, classification), of
    ``source_lengths`` and ``target_lengths`` (seq2seq), else the size of ``inputs`` (language-model BPTT)."""
    if not isinstance(batch, Mapping):
        return 0
    if "lengths" in batch and torch.is_tensor(batch["lengths"]):
        return int(batch["lengths"].sum())
    if "source_lengths" in batch:
        total = int(batch["source_lengths"].sum())
        if "target_lengths" in batch:
            total += int(batch["target_lengths"].sum())
        return total
    if "inputs" in batch and torch.is_tensor(batch["inputs"]):
        return int(batch["inputs"].numel())
    return 0


def read_curves(path: str | Path) -> Dict[str, List[Dict[str, Any]]]:
    """The curves a :class:`LearningCurves` wrote (``{"validation": [...], "test": [...]}``)."""
    return json.loads(Path(path).read_text())


class LearningCurves(Callback):
    """Records step, epoch, seconds, tokens and every ``val/*`` metric after each validation into ``path``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.validation: List[Dict[str, Any]] = []
        self.test: List[Dict[str, Any]] = []
        self.tokens = 0
        self._start: Optional[float] = None
        self._val_start: Optional[float] = None
        self._val_seconds = 0.0
        self._seconds_before = 0.0  # seconds of the fits this one resumes (from the checkpoint)
        self._loaded: Optional[Dict[str, Any]] = None  # a checkpoint's state, applied when a fit starts

    @property
    def seconds(self) -> float:
        """Wall-clock seconds since the fit started (0 before it), the resumed fits' seconds included."""
        return self._seconds_before + (0.0 if self._start is None else time.perf_counter() - self._start)

    @property
    def tokens_per_second(self) -> float:
        """Training tokens per second spent outside validation, so far."""
        train_seconds = self.seconds - self._val_seconds
        return self.tokens / train_seconds if train_seconds > 0 else 0.0

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self._loaded is not None:
            self._resume(self._loaded)
        self._loaded = None
        self._start = time.perf_counter()

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._loaded = None  # a test of a checkpoint restores its state too: that is not a resume

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self.tokens += batch_tokens(batch)

    def on_validation_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._val_start = time.perf_counter()

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self._val_start is not None:
            self._val_seconds += time.perf_counter() - self._val_start
            self._val_start = None
        if trainer.sanity_checking or self._start is None:
            return
        point: Dict[str, Any] = {"step": int(trainer.global_step), "epoch": int(trainer.current_epoch),
                                 "seconds": self.seconds, "tokens": self.tokens,
                                 "tokens_per_s": self.tokens_per_second}
        point.update({k: float(v) for k, v in sorted(trainer.callback_metrics.items()) if k.startswith("val/")})
        self.validation.append(point)
        if trainer.is_global_zero:
            self.save()

    def state_dict(self) -> Dict[str, Any]:
        """What a checkpoint keeps, so a fit resumed from it continues the curves."""
        return {"validation": [dict(p) for p in self.validation], "test": [dict(p) for p in self.test],
                "tokens": self.tokens, "seconds": self.seconds, "val_seconds": self._val_seconds}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Keep a checkpoint's curves; a fit resumed from it (Lightning calls this before ``on_fit_start``)
        continues them. Testing a checkpoint restores callbacks too, and changes nothing here."""
        self._loaded = dict(state_dict)

    def _resume(self, state_dict: Dict[str, Any]) -> None:
        """Continue from a checkpoint's curves; the file is rewritten from them, dropping points recorded after
        that checkpoint was saved, but keeping the per-epoch test points of a fit that had ended."""
        kept_tests: List[Dict[str, Any]] = []
        if self.path.is_file():
            try:
                kept_tests = read_curves(self.path).get("test", [])
            except (OSError, ValueError):
                kept_tests = []
        self.validation = [dict(p) for p in state_dict.get("validation", [])]
        self.test = [dict(p) for p in state_dict.get("test", [])]
        self.test += [p for p in kept_tests if p.get("epoch") not in {t["epoch"] for t in self.test}]
        self.tokens = int(state_dict.get("tokens", 0))
        self._seconds_before = float(state_dict.get("seconds", 0.0))
        self._val_seconds = float(state_dict.get("val_seconds", 0.0))
        self._start = None
        self.save()

    def add_test(self, epoch: int, step: int, metrics: Mapping[str, float]) -> None:
        """Record the test metrics of the checkpoint saved at the end of ``epoch`` (and save the file)."""
        self.test = [p for p in self.test if p.get("epoch") != int(epoch)]
        self.test.append({"epoch": int(epoch), "step": int(step), **{k: float(v) for k, v in metrics.items()}})
        self.save()

    def save(self) -> None:
        """Write the curves (atomically: a reader never sees half a file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps({"validation": self.validation, "test": self.test}, indent=1))
        os.replace(tmp, self.path)
