"""GradientNormLog (command/callbacks.py): the gradients' norm before clipping, and where it lies, printed during a
fit the user adds it to (how a capMZU+DT loss spike was traced, docs/reproduction/mzu.md)."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from lit_rnncells.cli import run
from lit_rnncells.command.callbacks import GradientNormLog, gradient_norms

LOGIC = str(Path(__file__).resolve().parents[1] / "configs" / "logic" / "mufuru.yaml")


def test_the_total_is_the_norm_of_every_gradient_together_and_parameters_come_largest_first():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1, bias=False))
    model[0].weight.grad = torch.full((2, 2), 1.0)  # norm 2
    model[0].bias.grad = torch.tensor([3.0, 4.0])  # norm 5
    model[1].weight.grad = None  # no gradient: left out
    total, norms = gradient_norms(model)
    assert total == pytest.approx(math.sqrt(4 + 25))
    assert norms == [("0.bias", pytest.approx(5.0)), ("0.weight", pytest.approx(2.0))]


def test_bad_settings_are_one_sentence_naming_the_fix():
    with pytest.raises(ValueError, match="every_n_steps of at least 1"):
        GradientNormLog(every_n_steps=0)


def test_a_fit_prints_the_norm_before_clipping_at_the_steps_asked_for(tmp_path, capsys):
    """Clipping at 1e-3 cuts every gradient, so the printed norms (before it) lie far above it."""
    assert run(["fit", "--config", LOGIC, "--data.init_args.train_size", "320", "--data.init_args.val_size", "16",
                "--data.init_args.test_size", "16", "--trainer.max_epochs", "1", "--trainer.logger", "false",
                "--trainer.enable_progress_bar", "false", "--test_after_fit", "false",
                "--trainer.gradient_clip_val", "0.001", "--run_dir", str(tmp_path / "run"),
                "--trainer.callbacks+=lit_rnncells.command.callbacks.GradientNormLog",
                "--trainer.callbacks.every_n_steps", "2", "--trainer.callbacks.from_step", "1",
                "--trainer.callbacks.top", "2"]) == 0
    printed = capsys.readouterr().err
    lines = re.findall(r"gradient norm, step (\d+): (\S+); largest: (\S+) (\S+), (\S+) (\S+)\n", printed)
    steps = [int(line[0]) for line in lines]
    assert steps and steps == list(range(1, steps[-1] + 1, 2))  # from step 1, every second step
    names = set(torch.load(next((tmp_path / "run" / "checkpoints").glob("*.ckpt")), weights_only=False)["state_dict"])
    for _, total, first, first_norm, second, second_norm in lines:
        assert {first, second} <= names  # the model's own parameter names
        assert float(total) > 0.01 and float(total) >= float(first_norm) >= float(second_norm)
