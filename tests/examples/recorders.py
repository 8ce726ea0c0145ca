"""Callbacks the reliability tests plug in through the CLI: record per-step losses, simulate SIGTERM."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer


class LossRecorder(Callback):
    """Appends ``{"step": global_step, "loss": training loss}`` of every training batch to a JSON-lines file."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        with self.path.open("a") as f:
            f.write(json.dumps({"step": trainer.global_step, "loss": float(loss)}) + "\n")


class SigtermAtStep(Callback):
    """Does what Lightning's SIGTERM handler does (sets ``trainer.received_sigterm``) once ``step`` steps are done,
    so a test stops a run by SIGTERM at an exact, reproducible point."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if trainer.global_step >= self.step:
            trainer._signal_connector.received_sigterm = True


class SaveWeightsAtEnd(Callback):
    """Rank 0 saves the model's state_dict to ``path`` when training ends (to compare runs' weights)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.global_rank == 0:
            import torch

            torch.save({k: v.detach().cpu() for k, v in pl_module.state_dict().items()}, self.path)


class SigtermInPredict(Callback):
    """Sends this process a real SIGTERM after predict batch ``batch`` (Lightning's handler sets the flag)."""

    def __init__(self, batch: int = 0) -> None:
        self.batch = batch

    def on_predict_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                             batch_idx: int, dataloader_idx: int = 0) -> None:
        if batch_idx == self.batch:
            import os
            import signal
            os.kill(os.getpid(), signal.SIGTERM)


class PauseOnceAtStep(Callback):
    """After step ``step``, the first time any run reaches it (``flag`` does not exist yet): creates ``flag`` and
    waits until the process receives SIGTERM (at most ``seconds``), so a test stops a run, from outside, at an
    exact step (the flag names the step and the run's folder, so a test knows which of several runs to stop). Later runs with the same callback (the resumed one, an uninterrupted one) are not paused."""

    def __init__(self, step: int, flag: str, seconds: float = 300.0) -> None:
        self.step, self.flag, self.seconds = step, Path(flag), seconds

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if trainer.global_step != self.step or self.flag.exists():
            return
        import time

        self.flag.write_text(f"{self.step}\n{trainer.default_root_dir}")  # the step, then the run's folder
        end = time.monotonic() + self.seconds
        while not trainer.received_sigterm and time.monotonic() < end:
            time.sleep(0.05)


class PauseEachRunAtStep(Callback):
    """After step ``step``, once per run folder (a file named after it in ``flags`` says it paused): waits until the
    process receives SIGTERM (at most ``seconds``), so a test stops several runs at once, from outside, each at an
    exact step. A resumed run (its flag there) is not paused again."""

    def __init__(self, step: int, flags: str, seconds: float = 300.0) -> None:
        self.step, self.flags, self.seconds = step, Path(flags), seconds

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        flag = self.flags / Path(trainer.checkpoint_callback.dirpath).parent.name
        if trainer.global_step != self.step or flag.exists():
            return
        import time

        self.flags.mkdir(parents=True, exist_ok=True)
        flag.write_text(str(self.step))
        end = time.monotonic() + self.seconds
        while not trainer.received_sigterm and time.monotonic() < end:
            time.sleep(0.05)


class PauseInTest(Callback):
    """After test batch 0, creates ``flag`` and waits until the process receives SIGTERM (at most ``seconds``),
    so a test sends a real SIGTERM from outside while a test loop is running (a stand-in for a long one)."""

    def __init__(self, flag: str, seconds: float = 300.0) -> None:
        self.flag, self.seconds = Path(flag), seconds

    def on_test_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                          batch_idx: int, dataloader_idx: int = 0) -> None:
        if batch_idx != 0:
            return
        import time

        self.flag.write_text("testing")
        end = time.monotonic() + self.seconds
        while not trainer.received_sigterm and time.monotonic() < end:
            time.sleep(0.05)


class SigtermInTestBatch(Callback):
    """Sends this process a real SIGTERM as test batch ``batch`` starts, before its decoding (Lightning's handler
    sets the flag): a stand-in for a signal that arrives during a long decoding batch."""

    def __init__(self, batch: int = 0) -> None:
        self.batch = batch

    def on_test_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int,
                            dataloader_idx: int = 0) -> None:
        if batch_idx == self.batch:
            import os
            import signal
            os.kill(os.getpid(), signal.SIGTERM)
