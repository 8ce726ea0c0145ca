"""Every fit gets its own run folder (issue 19, items 5, 8, 9, 10, 20): config, checkpoints and logs all inside it,
whatever the logger; a resume writes into the same folder without overwriting; a folder holding another run, or
locked by another fit, is refused with one line."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict

import pytest

from lit_rnncells.command import run_folder
from lit_rnncells.cli import run

ROOT = Path(__file__).resolve().parents[1]
LOGIC = str(ROOT / "configs" / "logic" / "mufuru.yaml")
TINY = ["--config", LOGIC, "--data.init_args.train_size", "64", "--data.init_args.val_size", "16",
        "--data.init_args.test_size", "32", "--trainer.max_epochs", "1", "--trainer.enable_progress_bar", "false",
        "--test_after_fit", "false"]
CSV = ["--trainer.logger", "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", "runs"]


def files(folder: Path) -> Dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_run_folder(cwd: Path) -> Path:
    folders = [p for p in (cwd / "runs").iterdir()]
    assert len(folders) == 1, folders
    return folders[0]


@pytest.mark.parametrize("logger", [["--trainer.logger", "false"], CSV, []], ids=["no-logger", "csv", "wandb"])
def test_a_fit_writes_only_inside_its_own_run_folder(logger, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run(["fit", *TINY, *logger]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["runs"]  # nothing in the working folder outside runs/
    folder = one_run_folder(tmp_path)
    assert (folder / "config.yaml").is_file() and list((folder / "checkpoints").glob("*.ckpt"))
    if logger == CSV:
        assert (folder / "logs" / "metrics.csv").is_file()
    assert f"Run folder: {folder}" in capsys.readouterr().out


def test_two_fits_get_two_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run(["fit", *TINY, "--trainer.logger", "false"]) == 0
    assert run(["fit", *TINY, "--trainer.logger", "false"]) == 0
    folders = sorted((tmp_path / "runs").iterdir())
    assert len(folders) == 2 and all((f / "config.yaml").is_file() for f in folders)


def test_resume_writes_into_the_same_folder_without_overwriting(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run(["fit", *TINY, *CSV, "--run_dir", "runs/one"]) == 0
    folder = tmp_path / "runs" / "one"
    before = files(folder)
    ckpt = next((folder / "checkpoints").glob("*.ckpt"))
    capsys.readouterr()
    assert run(["fit", "--config", str(folder / "config.yaml"), "--trainer.max_epochs", "2",
                "--ckpt_path", str(ckpt)]) == 0
    after = files(folder)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing of the first fit changed
    assert "config-resume-1.yaml" in after and "logs-resume-1/metrics.csv" in after
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["one"]
    assert "config-resume-1.yaml" in capsys.readouterr().out


def own_checkpoint(mode: str) -> str:
    """The argument adding a config's own checkpoint on val/acc that keeps ``last.ckpt``, as the shipped configs have."""
    own = {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
           "init_args": {"monitor": "val/acc", "mode": mode, "save_last": True}}
    return "--trainer.callbacks+=" + json.dumps(own)


@pytest.mark.parametrize("val_check_interval", ["1.0", "0.5"], ids=["saved-at-epoch-end", "saved-at-validation"])
def test_last_ckpt_is_the_newest_validation_also_where_the_monitored_metric_did_not_improve(val_check_interval,
                                                                                          tmp_path, monkeypatch):
    """Lightning writes last.ckpt only where its checkpoint saved a top-k one (with save_top_k=1: where the metric
    improved); a fit keeps it at the newest validation, so a resume goes on from where the run stopped. With one
    validation an epoch the checkpoint saves at the epoch's end, with more after each validation."""
    from lit_rnncells.data.checkpoint_state import read_checkpoint

    monkeypatch.chdir(tmp_path)
    assert run(["fit", *TINY, "--trainer.max_epochs", "3", "--trainer.logger", "false", "--run_dir", "runs/one",
                "--trainer.val_check_interval", val_check_interval,
                own_checkpoint("min")]) == 0  # the accuracy rises: its minimum is early
    checkpoints = tmp_path / "runs" / "one" / "checkpoints"
    (best,) = checkpoints.glob("epoch=*.ckpt")
    last = read_checkpoint(str(checkpoints / "last.ckpt"))
    assert read_checkpoint(str(best))["epoch"] < 2 == last["epoch"]  # the best is not the newest; last.ckpt is
    assert last["global_step"] == 3 * 2  # 64 formulas, batch 32: 2 steps an epoch


def test_a_fit_ending_between_validations_keeps_its_last_step_and_a_longer_fit_goes_on_from_it(tmp_path, monkeypatch):
    """Validation every 2 steps of a 3-step epoch: the epoch ends after its last validation. last.ckpt holds the
    run's final step, so the same run taken on to a fourth epoch trains only that epoch, to the weights a 4-epoch
    fit ends with (before, last.ckpt stayed at step 8 of 9 and the third epoch's last batch was trained again)."""
    import torch

    from lit_rnncells.data.checkpoint_state import read_checkpoint

    monkeypatch.chdir(tmp_path)
    between = [*TINY, "--data.init_args.train_size", "96", "--trainer.val_check_interval", "2",
               "--trainer.logger", "false", own_checkpoint("max")]  # 3 steps an epoch (batch 32)
    assert run(["fit", *between, "--trainer.max_epochs", "3", "--run_dir", "runs/on"]) == 0
    last = tmp_path / "runs" / "on" / "checkpoints" / "last.ckpt"
    assert read_checkpoint(str(last))["global_step"] == 3 * 3
    assert run(["fit", *between, "--trainer.max_epochs", "4", "--run_dir", "runs/on", "--ckpt_path", str(last)]) == 0
    assert run(["fit", *between, "--trainer.max_epochs", "4", "--run_dir", "runs/once"]) == 0
    went_on, once = (read_checkpoint(str(tmp_path / "runs" / name / "checkpoints" / "last.ckpt"))
                     for name in ("on", "once"))
    assert went_on["global_step"] == once["global_step"] == 4 * 3
    for name, weights in once["state_dict"].items():
        torch.testing.assert_close(went_on["state_dict"][name], weights, msg=name)


def test_a_folder_holding_another_run_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run(["fit", *TINY, *CSV, "--run_dir", "runs/one"]) == 0
    before = files(tmp_path)
    capsys.readouterr()
    assert run(["fit", *TINY, *CSV, "--run_dir", "runs/one"]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "already holds another run" in lines[0] and "--run_dir" in lines[0], lines
    assert files(tmp_path) == before


def test_a_locked_folder_is_refused(tmp_path, monkeypatch, capsys):
    """Another process writing into the run folder holds its lock: a second fit there stops before training."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "runs" / "busy"
    folder.mkdir(parents=True)
    import fcntl

    fd = os.open(folder / run_folder.LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, b"4242")
        assert run_folder.lock_holder(folder) == "process 4242"
        assert run(["fit", *TINY, "--trainer.logger", "false", "--run_dir", str(folder)]) == 2
    finally:
        os.close(fd)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "in use by another fit (process 4242)" in lines[0], lines
    assert [p.name for p in folder.iterdir()] == [run_folder.LOCK_NAME]
    assert run_folder.lock_holder(folder) is None


def test_a_failed_fit_leaves_no_empty_run_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run(["fit", *TINY, "--model.init_args.hidden_size", "0"]) == 2
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("where", [[], ["--run_dir", "runs/tried"]], ids=["new-folder", "run_dir"])
def test_fast_dev_run_says_nothing_was_kept_rather_than_naming_a_folder_it_never_made(where, tmp_path, monkeypatch,
                                                                                       capsys):
    """Lightning's fast_dev_run writes no config, checkpoint or log; the summary named `<run>/checkpoints`, which
    did not exist."""
    monkeypatch.chdir(tmp_path)
    assert run(["fit", *TINY, "--trainer.fast_dev_run", "true", *where]) == 0
    out = capsys.readouterr().out
    assert "Run folder:" not in out and "Resume it:" not in out
    assert out.rstrip().endswith("Nothing kept: fast_dev_run tries a batch or a few and writes no config, checkpoint "
                                 "or log; drop --trainer.fast_dev_run for a run you can test and resume.")
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("*"))


def test_fit_prints_test_and_resume_when_no_best_checkpoint_exists(tmp_path, monkeypatch, capsys):
    """max_steps ends before the first validation: no best checkpoint, but last.ckpt tests and resumes."""
    monkeypatch.chdir(tmp_path)
    best = {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
            "init_args": {"monitor": "val/acc", "mode": "max", "save_last": True}}
    assert run(["fit", *TINY, "--trainer.logger", "false", "--trainer.max_steps", "1",
                "--trainer.check_val_every_n_epoch", "2", "--trainer.callbacks+=" + json.dumps(best)]) == 0
    out = capsys.readouterr().out
    last = one_run_folder(tmp_path) / "checkpoints" / "last.ckpt"
    assert f"Test it:   python -m lit_rnncells test --config {last.parent.parent / 'config.yaml'} " \
           f"--ckpt_path {last}" in out
    assert f"--ckpt_path {last}" in out.split("Resume it:")[1]
    assert run(["test", "--config", str(last.parent.parent / "config.yaml"), "--ckpt_path", str(last)]) == 0


def test_resuming_a_finished_run_says_so_and_trains_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run(["fit", *TINY, *CSV, "--run_dir", "runs/done"]) == 0
    folder = tmp_path / "runs" / "done"
    ckpt = next((folder / "checkpoints").glob("*.ckpt"))
    before = files(tmp_path)
    capsys.readouterr()
    assert run(["fit", "--config", str(folder / "config.yaml"), "--ckpt_path", str(ckpt)]) == 0
    out = capsys.readouterr().out
    assert "had finished" in out and "raise --trainer.max_epochs (e.g. --trainer.max_epochs 2)" in out
    assert "test/acc" not in out and "Run folder" not in out
    assert files(tmp_path) == before  # no new config, logs, checkpoint or W&B run


def test_resuming_a_run_that_reached_max_time_says_to_raise_max_time_and_trains_nothing(tmp_path, monkeypatch,
                                                                                       capsys):
    """Lightning's Timer counts max_time over the run, resumes included: the resume printed after a time-limited
    fit stopped at once, then tested and wrote config-resume-1.yaml and logs as if it had trained. The checkpoint
    is a real one whose Timer state says 5 s were trained (a fit stopped by its time limit saves its checkpoint at
    the stop or before it, depending on where validation falls: that is timing, which a test cannot fix)."""
    import torch

    monkeypatch.chdir(tmp_path)
    assert run(["fit", *TINY, *CSV, "--trainer.max_time", "00:00:00:05", "--run_dir", "runs/timed"]) == 0
    folder = tmp_path / "runs" / "timed"
    ckpt = next((folder / "checkpoints").glob("*.ckpt"))
    checkpoint = torch.load(ckpt, weights_only=False)
    timer = next(k for k in checkpoint["callbacks"] if str(k).startswith("Timer"))  # Lightning's, from max_time
    checkpoint["callbacks"][timer]["time_elapsed"]["train"] = 5.25  # as where the limit stopped the run
    torch.save(checkpoint, ckpt)
    before = files(tmp_path)
    capsys.readouterr()
    assert run(["fit", "--config", str(folder / "config.yaml"), "--ckpt_path", str(ckpt), "--trainer.max_epochs",
                "10"]) == 0
    out = capsys.readouterr().out
    assert ("had finished: it trained for 00:00:00:05 of max_time 00:00:00:05 (Lightning counts max_time over the "
            "run, resumes included); to train further, raise --trainer.max_time (e.g. --trainer.max_time "
            "00:00:01:05)") in out, out
    assert "test/acc" not in out and "Run folder" not in out
    assert files(tmp_path) == before  # no new config, logs, checkpoint or W&B run


def test_a_max_time_a_resume_has_not_reached_lets_it_train():
    checkpoint = {"global_step": 4, "callbacks": {"Timer": {"time_elapsed": {"train": 7.5, "validate": 1.0}}}}
    assert run_folder.finished(checkpoint, -1, -1, "00:00:00:10") is None
    assert run_folder.finished(checkpoint, -1, -1, {"seconds": 7}).startswith("it trained for 00:00:00:07 of "
                                                                                 "max_time 00:00:00:07")
    assert run_folder.finished(checkpoint, -1, -1, None) is None  # no time limit, no epoch or step limit
    assert run_folder.finished({"global_step": 4}, -1, -1, "00:00:00:01") is None  # no Timer ran: nothing counted


def test_resuming_a_run_that_reached_max_steps_says_to_raise_max_steps(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run(["fit", *TINY, "--trainer.logger", "false", "--trainer.max_epochs", "5", "--trainer.max_steps", "3",
                "--run_dir", "runs/steps"]) == 0
    ckpt = next((tmp_path / "runs" / "steps" / "checkpoints").glob("*.ckpt"))
    capsys.readouterr()
    assert run(["fit", "--config", str(tmp_path / "runs" / "steps" / "config.yaml"), "--ckpt_path", str(ckpt)]) == 0
    assert "raise --trainer.max_steps (e.g. --trainer.max_steps 6)" in capsys.readouterr().out


def test_logic_predict_writes_one_line_per_test_formula_in_order(tmp_path, monkeypatch, capsys):
    """Issue 19 item 2: every task writes its predictions to --predict_output and says where."""
    monkeypatch.chdir(tmp_path)
    assert run(["fit", *TINY, "--trainer.logger", "false", "--run_dir", "runs/p"]) == 0
    ckpt = next((tmp_path / "runs" / "p" / "checkpoints").glob("*.ckpt"))
    capsys.readouterr()
    out = tmp_path / "pred.txt"
    assert run(["predict", *TINY, "--ckpt_path", str(ckpt), "--predict_output", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 32 and set(lines) <= {"0", "1"}
    printed = capsys.readouterr()
    assert f"predict: wrote 32 lines to {out}" in printed.out
    assert "Couldn't infer the batch indices" not in printed.err + printed.out  # item 13


def test_a_logger_save_dir_is_where_run_folders_go(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run(["fit", *TINY, "--trainer.logger", "lightning.pytorch.loggers.CSVLogger",
                "--trainer.logger.save_dir", "elsewhere"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["elsewhere"]
    folder = next((tmp_path / "elsewhere").iterdir())
    assert (folder / "config.yaml").is_file() and (folder / "logs" / "metrics.csv").is_file()
