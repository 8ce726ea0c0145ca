"""SIGTERM to ``compare`` reaches its training child, which saves its checkpoint; the runner exits with the child's
status, a run folder still being written by a child is never given to a second one, and rerunning the command
resumes the stopped run from its checkpoint, ending as a run that was never stopped (issue 19, item 19)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from lit_rnncells import compare as cmp
from lit_rnncells.command import run_folder
from lit_rnncells.experiments.curves import read_curves

ROOT = Path(__file__).resolve().parents[1]
CONFIG = str(ROOT / "configs" / "logic" / "gru.yaml")
ARGS = ["--config", CONFIG, "--cells", "GRU", "--seed-list", "1", "--hidden-size", "4", "--budget", "epochs=100000",
        "--no-wandb"]
EXTRA = ["--", "--data.init_args.train_size", "64", "--data.init_args.val_size", "16", "--data.init_args.test_size",
         "16", "--trainer.enable_progress_bar", "false"]


def wait_for(path: Path, proc: subprocess.Popen, seconds: float = 300) -> None:
    end = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.2)


def stop_with_sigterm(proc: subprocess.Popen, while_running: Callable[[], None]) -> str:
    """Run ``while_running`` while the compare trains, then SIGTERM it; its standard error (it must exit 143)."""
    try:
        while_running()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err[-3000:]
    return err


def test_sigterm_to_compare_stops_its_child_with_a_checkpoint_and_the_folder_stays_locked_meanwhile(tmp_path, capsys):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "lit_rnncells.compare", *ARGS, "--out", str(out), *EXTRA],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    folder, seen = out / "GRU-h4-s1", {}

    def check_the_lock() -> None:
        wait_for(folder / "config.yaml", proc)  # the child is training (its signal handlers are in place)
        child = seen["child"] = int((folder / run_folder.LOCK_NAME).read_text())
        assert run_folder.lock_holder(folder) == f"process {child}"

        # Rerunning the command meanwhile must not start a second child in the same folder.
        before = {name: (folder / name).stat().st_mtime_ns for name in ("spec.json", "config.yaml", "log.txt")}
        assert cmp.main([*ARGS, "--out", str(out), *EXTRA]) == 2
        errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
        assert len(errors) == 1 and f"in use by another fit (process {child})" in errors[0], errors
        assert (folder / "spec.json").stat().st_mtime_ns == before["spec.json"]  # not removed nor started again
        assert run_folder.lock_holder(folder) == f"process {child}"

    err = stop_with_sigterm(proc, check_the_lock)
    child = seen["child"]
    assert (folder / "checkpoints" / "interrupted.ckpt").is_file()
    assert "compare: SIGTERM: stopped run GRU-h4-s1 (exit 143; it saved" in err
    try:
        os.kill(child, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the training child outlived the runner"
    assert run_folder.lock_holder(folder) is None


def test_compare_writes_nothing_outside_out(tmp_path, monkeypatch):
    """Issue 19 item 5: each run's checkpoints and logs (here a CSV logger's, whose save_dir is relative) stay in
    its folder under --out; the working folder gains nothing else."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    out = tmp_path / "out"
    assert cmp.main(["--config", CONFIG, "--cells", "GRU", "--seed-list", "1", "--hidden-size", "4", "--budget",
                     "epochs=1", "--out", str(out), "--no-wandb", *EXTRA, "--trainer.logger",
                     "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", "runs"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    run = out / "GRU-h4-s1"
    assert (run / "logs" / "metrics.csv").is_file() and list((run / "checkpoints").glob("*.ckpt"))


def test_rerunning_a_stopped_compare_resumes_its_run_and_ends_as_an_uninterrupted_one(tmp_path, capsys, monkeypatch):
    """SIGTERM at step 5 of 8 (mid-epoch); the same command again resumes from interrupted.ckpt (and says so):
    its best and test metrics equal those of a compare never stopped, and its curve continues (every validation
    once, in order) instead of starting again."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    pause = {"class_path": "tests.examples.recorders.PauseOnceAtStep",
             "init_args": {"step": 5, "flag": str(tmp_path / "paused")}}
    args = lambda out: [*ARGS[:-2], "epochs=4", "--no-wandb", "--out", str(out), *EXTRA,
                        "--trainer.callbacks+=" + json.dumps(pause)]
    out = tmp_path / "stopped"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "lit_rnncells.compare", *args(out)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = stop_with_sigterm(proc, lambda: wait_for(tmp_path / "paused", proc))
    run = out / "GRU-h4-s1"
    ckpt = run / "checkpoints" / "interrupted.ckpt"
    assert ckpt.is_file() and not (run / "result.json").exists()
    assert "unfinished ones resume from their checkpoints" in err
    stopped_curve = read_curves(run / "curves.json")["validation"]
    assert [p["step"] for p in stopped_curve] == [2, 4]

    capsys.readouterr()
    assert cmp.main(args(out)) == 0
    assert f"GRU-h4-s1 resumes from {ckpt} (step 5)" in capsys.readouterr().err
    assert f"compare: resuming from {ckpt}" in (run / "log.txt").read_text()
    assert ckpt.is_file()  # the checkpoint it resumed from is kept

    assert cmp.main(args(tmp_path / "never-stopped")) == 0
    resumed = json.loads((run / "result.json").read_text())
    full = json.loads((tmp_path / "never-stopped" / "GRU-h4-s1" / "result.json").read_text())
    assert resumed["steps"] == full["steps"] == 8
    assert resumed["best val/acc"] == full["best val/acc"]
    assert resumed["test"] == full["test"]
    curves = [read_curves(folder / "GRU-h4-s1" / "curves.json")["validation"]
              for folder in (out, tmp_path / "never-stopped")]
    assert [p["step"] for p in curves[0]] == [p["step"] for p in curves[1]] == [2, 4, 6, 8]
    assert curves[0][:2] == stopped_curve  # continued, not restarted
    assert [p["val/loss"] for p in curves[0]] == [p["val/loss"] for p in curves[1]]
    assert curves[0][-1]["tokens"] == curves[1][-1]["tokens"]  # the stopped part's tokens are counted once
