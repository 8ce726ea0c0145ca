"""The divergence guard on a finite loss (callbacks.FiniteGuard): its threshold, its off switch, and that a
healthy run with a loss near 0 is not stopped by ordinary noise."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from lit_rnncells.command.callbacks import DIVERGENCE_PATIENCE, FiniteGuard, TrainingDiverged
from lit_rnncells.cli import run

ROOT = Path(__file__).resolve().parents[1]
LOGIC = str(ROOT / "configs" / "logic" / "mufuru.yaml")


class _Strategy:
    def reduce_boolean_decision(self, decision: bool, all: bool = True) -> bool:  # noqa: A002 - Lightning's name
        return decision


def _trainer():
    return SimpleNamespace(strategy=_Strategy(), global_step=0, current_epoch=0,
                           optimizers=[SimpleNamespace(param_groups=[{"lr": 1e6}])])


def _feed(guard: FiniteGuard, losses):
    trainer = _trainer()
    for step, loss in enumerate(losses):
        trainer.global_step = step
        guard.on_before_backward(trainer, None, torch.tensor(loss))


def test_stops_after_the_patience_of_exploded_steps_not_before():
    guard = FiniteGuard(threshold=10.0)
    _feed(guard, [4.0, 3.0] + [1e7] * (DIVERGENCE_PATIENCE - 1))  # one step short
    with pytest.raises(TrainingDiverged, match="1e\\+07 at step .* above 10x its running minimum 3 "):
        _feed(guard, [1e7])


def test_a_loss_near_zero_with_noise_above_ten_times_its_minimum_is_not_stopped():
    """Below the first loss: a logic task at 0.001 whose batches read 0.05 has not diverged."""
    _feed(FiniteGuard(threshold=10.0), [0.7, 0.001] + [0.05] * 50)


def test_a_spike_that_recovers_is_not_stopped():
    _feed(FiniteGuard(threshold=10.0), ([3.0, 2.0] + [100.0] * (DIVERGENCE_PATIENCE - 1) + [2.0]) * 3)


def test_a_resumed_run_judges_its_loss_against_its_own_first_loss():
    """The guard's state goes into the checkpoint: after a resume, a trained model's noise (0.41 against a running
    minimum of 0.03) is below the run's first loss (1.1) and not an explosion. Judged against the first loss after
    the resume (0.27) it was, and a resumed SemEval run stopped so. A checkpoint without the guard's state (written
    before it kept one) turns the explosion check off for the resumed fit; non-finite losses still stop it."""
    trained = FiniteGuard(threshold=10.0)
    _feed(trained, [1.1, 0.5] + [0.03] * 20)
    resumed = FiniteGuard(threshold=10.0)
    resumed.load_state_dict(trained.state_dict())
    _feed(resumed, [0.27, 0.03] + [0.41] * (DIVERGENCE_PATIENCE + 2))
    assert (resumed.first, resumed.minimum) == (pytest.approx(1.1), pytest.approx(0.03))
    trainer = _trainer()
    trainer.ckpt_path, trainer.gradient_clip_val = "old.ckpt", None  # resumed from a checkpoint without its state
    unknown = FiniteGuard(threshold=10.0)
    for step, loss in enumerate([0.27, 0.03] + [0.41] * (DIVERGENCE_PATIENCE + 2)):
        trainer.global_step = step
        unknown.on_before_backward(trainer, None, torch.tensor(loss))
    with pytest.raises(TrainingDiverged, match="loss became non-finite"):
        unknown.on_before_backward(trainer, None, torch.tensor(float("nan")))
    with pytest.raises(TrainingDiverged, match="exploded"):  # what a fresh guard did with that resumed run
        _feed(FiniteGuard(threshold=10.0), [0.27, 0.03] + [0.41] * (DIVERGENCE_PATIENCE + 2))


def test_threshold_zero_turns_the_check_off():
    _feed(FiniteGuard(threshold=0), [4.0, 3.0] + [1e7] * 100)


def test_threshold_zero_from_the_command_line_lets_the_run_finish(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run(["fit", "--config", LOGIC, "--data.init_args.train_size", "640", "--data.init_args.val_size", "16",
                "--data.init_args.test_size", "16", "--trainer.max_epochs", "1", "--trainer.logger", "false",
                "--trainer.enable_progress_bar", "false", "--test_after_fit", "false",
                "--model.init_args.optimizer.init_args.lr", "1e6", "--trainer.gradient_clip_val", "null",
                "--divergence_threshold", "0"]) == 0


def _spiking_module(spike_step: int):
    from lightning.pytorch import LightningModule

    class Spiking(LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            return loss * 1e4 if self.global_step == spike_step else loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val/loss", torch.nn.functional.mse_loss(self.layer(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1e-6)  # the spike's step moves the weights little

    return Spiking()


def _loader():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=generator)
    data = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True) + 3.0)
    return torch.utils.data.DataLoader(data, batch_size=4)


def test_a_spike_when_a_checkpoint_is_due_skips_that_save_and_the_run_goes_on(tmp_path, capsys):
    """One exploded step just before a validation: the checkpoint due then is not written (the diverged-looking
    model never becomes the last or best one), the run finishes, and the saves before and after it are there.
    Before, the guard raised at that save and a long run ended on one noisy batch."""
    from lightning.pytorch import Trainer
    from lightning.pytorch.callbacks import ModelCheckpoint

    checkpoints = ModelCheckpoint(dirpath=tmp_path, filename="{step}", save_top_k=-1)
    trainer = Trainer(max_steps=12, val_check_interval=3, limit_val_batches=1, logger=False,
                      enable_progress_bar=False, enable_model_summary=False,
                      callbacks=[FiniteGuard(threshold=10.0), checkpoints])
    trainer.fit(_spiking_module(spike_step=5), _loader(), _loader())  # validations after steps 3, 6, 9, 12
    assert trainer.global_step == 12
    assert sorted(p.name for p in tmp_path.glob("*.ckpt")) == ["step=12.ckpt", "step=3.ckpt", "step=9.ckpt"]
    err = capsys.readouterr().err
    assert err.count("skipped the checkpoint due now") == 1 and "step 6: the training loss" in err


def test_every_n_train_steps_saves_skip_an_exploded_step_too(tmp_path):
    from lightning.pytorch import Trainer
    from lightning.pytorch.callbacks import ModelCheckpoint

    checkpoints = ModelCheckpoint(dirpath=tmp_path, filename="{step}", save_top_k=-1, every_n_train_steps=2)
    Trainer(max_steps=8, limit_val_batches=0, logger=False, enable_progress_bar=False, enable_model_summary=False,
            callbacks=[FiniteGuard(threshold=10.0), checkpoints]).fit(_spiking_module(spike_step=3), _loader())
    assert sorted(p.name for p in tmp_path.glob("step=*.ckpt")) == ["step=2.ckpt", "step=6.ckpt", "step=8.ckpt"]
