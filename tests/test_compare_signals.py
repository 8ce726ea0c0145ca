"""SIGTERM to ``compare`` reaches its training child, which saves its checkpoint; the runner exits with the child's
status, and a run folder still being written by a child is never given to a second one (issue 19, item 19)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lit_rnncells import compare as cmp
from lit_rnncells import run_folder

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


def test_sigterm_to_compare_stops_its_child_with_a_checkpoint_and_the_folder_stays_locked_meanwhile(tmp_path, capsys):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "lit_rnncells.compare", *ARGS, "--out", str(out), *EXTRA],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        folder = out / "GRU-h4-s1"
        wait_for(folder / "config.yaml", proc)  # the child is training (its signal handlers are in place)
        child = int((folder / run_folder.LOCK_NAME).read_text())
        assert run_folder.lock_holder(folder) == f"process {child}"

        # Rerunning the command meanwhile must not start a second child in the same folder.
        before = {name: (folder / name).stat().st_mtime_ns for name in ("spec.json", "config.yaml", "log.txt")}
        assert cmp.main([*ARGS, "--out", str(out), *EXTRA]) == 2
        errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
        assert len(errors) == 1 and f"in use by another fit (process {child})" in errors[0], errors
        assert (folder / "spec.json").stat().st_mtime_ns == before["spec.json"]  # not removed nor started again
        assert run_folder.lock_holder(folder) == f"process {child}"

        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err[-3000:]
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
