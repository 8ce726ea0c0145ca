"""What the command line checks and says before work starts (lit_rnncells/command/start_checks.py): a GPU trainer
config on a machine without a GPU is one error line; every run names its parameter count and device; a
GPU-sized model on a CPU gets a warning with the options that shrink it."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from lightning.pytorch import Trainer

from lit_rnncells.command import start_checks
from lit_rnncells.experiments.param_match import count_parameters
from lit_rnncells.cli import run
from lit_rnncells.tasks import LanguageModel

ROOT = Path(__file__).resolve().parents[1]
LOGIC = str(ROOT / "configs" / "logic" / "mufuru.yaml")
TINY = ["--data.init_args.train_size", "32", "--data.init_args.val_size", "8", "--data.init_args.test_size", "8",
        "--trainer.max_epochs", "1", "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary",
        "false", "--trainer.logger", "false", "--test_after_fit", "false"]


def error_lines(text: str):
    return [ln for ln in text.splitlines() if ln.startswith("error: ")]


@pytest.mark.parametrize("trainer_config", ["gpu.yaml", "multi_gpu.yaml"])
def test_a_gpu_trainer_config_without_a_gpu_is_one_error_line(trainer_config, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(start_checks, "_mps_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    code = run(["fit", "--config", LOGIC, "--config", str(ROOT / "configs" / "trainer" / trainer_config), *TINY])
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    lines = error_lines(err)
    assert len(lines) == 1 and "asks for accelerator 'gpu'" in lines[0], err[-2000:]
    assert "--trainer.accelerator cpu --trainer.devices 1" in lines[0]
    assert "Traceback" not in err and not list(tmp_path.rglob("*"))


def test_an_unknown_compile_mode_is_one_error_line_before_anything_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LIT_RNNCELLS_COMPILE_MODE", "cudagraphs")
    monkeypatch.chdir(tmp_path)
    code = run(["fit", "--config", LOGIC, *TINY, "--model.init_args.compile", "true"])
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    lines = error_lines(err)
    assert len(lines) == 1 and "LIT_RNNCELLS_COMPILE_MODE='cudagraphs' is not a torch.compile mode" in lines[0]
    assert "reduce-overhead" in lines[0] and "Traceback" not in err and not list(tmp_path.rglob("*"))


def test_fit_names_the_parameter_count_and_device_at_start(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    assert run(["fit", "--config", LOGIC, *TINY, "--trainer.default_root_dir", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if ln.startswith("LogicEvaluator: "))
    count = int(line.split(": ")[1].split(" parameters")[0].replace(",", ""))
    weights = torch.load(next(tmp_path.rglob("*.ckpt")), weights_only=True)["state_dict"]
    assert count == sum(v.numel() for k, v in weights.items() if "running_" not in k) > 0
    assert "; fit on cpu (" in line and "GPU-sized" not in err
    if not os.environ.get("OMP_NUM_THREADS"):  # a small model trains on one thread (cpu_defaults): the line says so
        assert line.endswith("(1 thread)."), line
    assert torch.get_num_threads() == threads  # and run() gives the caller's thread count back


def test_a_gpu_sized_model_on_the_cpu_is_warned_with_the_options_that_shrink_it():
    trainer = Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False)
    big = LanguageModel("GRU", vocab_size=50, embedding_size=64, hidden_size=2600)
    assert count_parameters(big) > start_checks.GPU_SIZED_PARAMETERS
    lines = start_checks.describe_start(big, trainer, "fit")
    assert lines[0].startswith(f"LanguageModel: {count_parameters(big):,} parameters; fit on cpu")
    assert len(lines) == 2 and lines[1].startswith("warning: this config is GPU-sized (")
    assert "--model.init_args.hidden_size 256 --model.init_args.embedding_size 128" in lines[1]
    small = LanguageModel("GRU", vocab_size=50, embedding_size=8, hidden_size=16)
    assert len(start_checks.describe_start(small, trainer, "fit")) == 1


def test_a_classification_run_prints_its_class_counts_at_start(tmp_path, capsys, monkeypatch):
    from tests.test_bad_input import imdb_args, write_imdb

    folder = write_imdb(tmp_path / "imdb")
    monkeypatch.chdir(tmp_path)
    assert run(["fit", *imdb_args(folder), "--trainer.logger", "false"]) == 0
    err = capsys.readouterr().err
    # 8 reviews of each class per split; 4 training reviews held out (seeded) for validation
    assert "classes: train negative 5, positive 7; validation negative 3, positive 1; test negative 8, positive 8." \
        in err, err[-2000:]


def test_the_plateau_check_counts_the_same_validation_metrics_as_the_monitor_check():
    """``val_loss`` (Lightning's own naming) is a validation metric for both checks: with validation off the
    plateau check refuses it before training, as it refuses ``val/loss``; a training metric passes."""
    from lit_rnncells.command.start_checks import check_validation_for_scheduler

    def model(monitor: str) -> dict:
        return {"init_args": {"lr_scheduler": {"class_path": "torch.optim.lr_scheduler.ReduceLROnPlateau"},
                              "scheduler_monitor": monitor}}

    for monitor in ("val/loss", "val_loss"):
        with pytest.raises(ValueError, match=f"steps on {monitor} at each epoch's end"):
            check_validation_for_scheduler({"limit_val_batches": 0}, model(monitor))
    check_validation_for_scheduler({"limit_val_batches": 0}, model("train/loss"))


SCRATCH = ["--model", "tests.examples.scratch_task.LastStateLogicTask", "--model.init_args.cell", "CapMZU",
           "--data", "lit_rnncells.data.LogicDataModule", *TINY]


def test_a_task_written_from_scratch_fits_and_a_step_it_lacks_is_refused_before_any_work(tmp_path, capsys,
                                                                                        monkeypatch):
    """A task without ``test_step`` trained a whole fit with ``--test_after_fit`` and then failed; ``test`` said
    "Lightning refuses this run's settings: No `test_step()` method defined ...; change the options it names"."""
    monkeypatch.chdir(tmp_path)
    assert run(["fit", *SCRATCH, "--run_dir", "fitted"]) == 0
    capsys.readouterr()
    ckpt = str(next((tmp_path / "fitted").rglob("*.ckpt")))
    for argv, runs, instead in (
            (["fit", *SCRATCH, "--test_after_fit", "true", "--run_dir", "refused"], "--test_after_fit",
             " or drop --test_after_fit (the task configs set it true)"),
            (["test", *SCRATCH, "--ckpt_path", ckpt], "test", "")):
        assert run(argv) == 2
        err = capsys.readouterr().err
        assert error_lines(err) == [f"error: LastStateLogicTask has no test_step(self, batch, batch_idx), which {runs} "
                                    f"runs; define it in the task{instead}."], err[-2000:]
        assert "Epoch" not in err and "fit: started" not in err
    assert not (tmp_path / "refused").exists()
    assert run(["validate", *SCRATCH, "--ckpt_path", ckpt]) == 0  # the steps it has run
