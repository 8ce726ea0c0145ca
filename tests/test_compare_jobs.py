"""``compare --jobs N``: runs at once, each with its own GPU or share of the CPU; the same outputs as one at a time;
SIGTERM reaches every child and a rerun resumes them all (issue 31, item 1)."""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest

from lit_rnncells import compare as cmp
from lit_rnncells.command import run_folder
from lit_rnncells.experiments.compare import runner
from .test_compare_signals import stop_with_sigterm

ROOT = Path(__file__).resolve().parents[1]
CONFIG = str(ROOT / "configs" / "logic" / "gru.yaml")
TINY = ["--data.init_args.train_size", "64", "--data.init_args.val_size", "32", "--data.init_args.test_size", "32",
        "--trainer.enable_progress_bar", "false"]
ENV = {"WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
TIMED = ("seconds", "tokens_per_s")  # wall-clock columns: the only ones allowed to differ


def without_timings(out: Path) -> tuple:
    """runs.csv rows, the summary table and each run's validation curve, less their wall-clock figures."""
    with open(out / "runs.csv") as f:
        rows = [{k: v for k, v in r.items() if k not in TIMED} for r in csv.DictReader(f)]
    summary = [ln.rsplit("|", 3)[0] if ln.startswith("| ") else ln for ln in (out / "summary.md").read_text().splitlines()]
    curves = {r["run_id"]: [{k: v for k, v in p.items() if k not in ("seconds", "time", "tokens_per_s")}
                            for p in json.loads((out / r["run_id"] / "curves.json").read_text())["validation"]]
              for r in rows}
    return rows, summary, curves


def test_two_jobs_write_the_same_runs_summary_and_curves_as_one(tmp_path):
    logs = {}
    for jobs in (1, 2):
        logs[jobs] = io.StringIO()
        rows = cmp.compare(CONFIG, ["GRU", "MuFuRU"], seeds=[1, 2], budget="epochs=2", out=tmp_path / f"jobs{jobs}",
                           matching=cmp.Matching(hidden_size=4), runs=cmp.RunOptions(extra=TINY, no_wandb=True, env=ENV),
                           launch=cmp.Launch(jobs=jobs), log=logs[jobs])
        assert len(rows) == 4, logs[jobs].getvalue()
    one, two = without_timings(tmp_path / "jobs1"), without_timings(tmp_path / "jobs2")
    assert [r["run_id"] for r in one[0]] == ["GRU-h4-s1", "GRU-h4-s2", "MuFuRU-h4-s1", "MuFuRU-h4-s2"]  # the plan's
    assert one[0] == two[0]  # every metric, to the last digit runs.csv holds
    assert one[1] == two[1] and len(one[1]) == 8 and one[1][-1].startswith("- Best val/acc: ")  # the table, separation
    assert one[2] == two[2] and all(len(points) == 2 for points in one[2].values())
    assert (tmp_path / "jobs1" / "curves_steps.png").read_bytes() == (tmp_path / "jobs2" / "curves_steps.png").read_bytes()
    assert (tmp_path / "jobs2" / "curves_seconds.png").stat().st_size > 5000  # seconds: wall-clock, may differ
    assert logs[2].getvalue().count(" done in ") == 4


def test_each_slot_gets_its_gpu_round_robin_or_its_share_of_the_cores(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runner, "cpu_cores", lambda: 8)
    launcher = runner.LocalLauncher(3, devices=["0", "1"])
    assert [launcher.slot_env(slot, None) for slot in range(3)] == [
        {"CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "2"}, {"CUDA_VISIBLE_DEVICES": "1", "OMP_NUM_THREADS": "2"},
        {"CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "2"}]
    shared = runner.LocalLauncher(2, devices=["3"])  # every run on one GPU, sharing it
    assert [shared.slot_env(slot, None)["CUDA_VISIBLE_DEVICES"] for slot in range(2)] == ["3", "3"]
    assert runner.LocalLauncher(2, devices=[]).slot_env(1, None) == {"OMP_NUM_THREADS": "4"}
    assert runner.LocalLauncher(2, devices=[]).slot_env(1, {"OMP_NUM_THREADS": "1"}) == {}  # the caller's wins
    assert runner.LocalLauncher(1, devices=["0", "1"]).slot_env(0, None) == {}  # one at a time: as before
    monkeypatch.setattr(runner, "cpu_cores", lambda: 2)
    assert runner.LocalLauncher(3, devices=[]).slot_env(2, None) == {"OMP_NUM_THREADS": "1"}  # more runs than cores
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert runner.visible_gpus() == ["2", "5"]


def test_a_runs_start_line_names_its_gpu_and_its_threads_in_words():
    assert runner.where_it_runs({"OMP_NUM_THREADS": "1"}) == " (1 thread)"
    assert runner.where_it_runs({"CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "4"}) == " on GPU 0 (4 threads)"
    assert runner.where_it_runs({}) == ""


def test_a_launcher_returns_results_in_any_order_and_run_specs_keeps_the_plans(tmp_path):
    """The Launcher interface: a launcher only runs the jobs it is given (here: reversed, as if the last ended
    first); the results come back in the plan's order, a failed run's id in ``failed``."""
    class Reversed(runner.Launcher):
        def run(self, jobs, env, log):
            return {job.spec.run_id: (None if job.index == 2 else {"run_id": job.spec.run_id, "resumed": str(job.resume_from)})
                    for job in reversed(jobs)}

    specs = [cmp.RunSpec(run_id=f"GRU-s{s}", folder=str(tmp_path / f"GRU-s{s}"), config=CONFIG, cell="GRU", seed=s,
                         grid={}, hidden_size=4, budget="steps=1", monitor="val/acc", mode="max") for s in (1, 2, 3)]
    failed: list = []
    results = cmp.run_specs(specs, log=io.StringIO(), failed=failed, launcher=Reversed())
    assert [r["run_id"] for r in results] == ["GRU-s1", "GRU-s3"] and failed == ["GRU-s2"]
    assert all((tmp_path / f"GRU-s{s}" / "spec.json").is_file() for s in (1, 2, 3))  # folders prepared for it


@pytest.mark.parametrize("jobs", ["0", "-2"])
def test_jobs_below_one_is_one_line(jobs, capsys, tmp_path):
    assert cmp.main(["--config", CONFIG, "--cells", "GRU", "--jobs", jobs, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --jobs {jobs} is not a positive number") and len(err.splitlines()) == 1


class Talking(runner.Job):
    """A job whose child prints what a run's progress prints into its log.txt, with pauses, and saves no result."""

    def command(self, time_limit=None):
        lines = ["fit: started, 8 batches an epoch (0 s)", "fit: epoch 1/2, batch 3/8, step 3, train/loss_step 0.69 (1 s)"]
        script = "; ".join(f"print({line!r}, flush=True); time.sleep(0.8)" for line in lines)
        return [sys.executable, "-c", "import time; time.sleep(0.8); " + script]


def test_every_progress_every_seconds_each_running_run_says_where_it_stands(tmp_path):
    specs = [cmp.RunSpec(run_id=f"GRU-s{s}", folder=str(tmp_path / f"GRU-s{s}"), config=CONFIG, cell="GRU", seed=s,
                         grid={}, hidden_size=4, budget="steps=1", monitor="val/acc", mode="max") for s in (1, 2)]
    for spec in specs:
        Path(spec.folder).mkdir()
    jobs = [Talking(spec, None, i, 2) for i, spec in enumerate(specs, 1)]
    log = io.StringIO()
    runner.LocalLauncher(2, devices=[], progress_every=0.3).run(jobs, None, log)
    said = [line for line in log.getvalue().splitlines() if line.startswith("compare: [") and "..." not in line]
    assert "compare: [1/2] GRU-s1: no progress line yet" in said  # its child has printed nothing yet
    assert "compare: [2/2] GRU-s2: fit: started, 8 batches an epoch (0 s)" in said
    assert said.count("compare: [2/2] GRU-s2: fit: epoch 1/2, batch 3/8, step 3, train/loss_step 0.69 (1 s)") >= 1
    assert "compare: GRU-s1 failed; its log is" in log.getvalue()  # no result.json: the lines above came first

    quiet = io.StringIO()
    runner.ProgressLines(0)(jobs, quiet)  # 0: never
    assert quiet.getvalue() == ""
    with pytest.raises(cmp.CompareError, match=r"--progress-every -1 is not a number of seconds"):
        runner.LocalLauncher(1, progress_every=-1)


def test_sigterm_with_two_jobs_reaches_both_children_and_a_rerun_resumes_both(tmp_path, capsys, monkeypatch):
    """Two runs train at once and pause at step 5; SIGTERM to compare stops both, each saving interrupted.ckpt;
    the same command again resumes both from step 5 and ends them at the budget's 8 steps."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    flags = tmp_path / "paused"
    pause = {"class_path": "tests.examples.recorders.PauseEachRunAtStep", "init_args": {"step": 5, "flags": str(flags)}}
    out = tmp_path / "out"
    args = ["--config", CONFIG, "--cells", "GRU", "MuFuRU", "--seed-list", "1", "--hidden-size", "4", "--budget",
            "epochs=4", "--no-wandb", "--jobs", "2", "--out", str(out), "--", *TINY[:4], "--data.init_args.val_size",
            "16", "--trainer.enable_progress_bar", "false", "--trainer.callbacks+=" + json.dumps(pause)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "lit_rnncells.compare", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs = [out / "GRU-h4-s1", out / "MuFuRU-h4-s1"]
    children: List[int] = []

    def both_paused() -> None:
        end = time.monotonic() + 300
        while not all((flags / run.name).exists() for run in runs):  # both children at step 5 at once
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < end, "the two runs never trained at the same time"
            time.sleep(0.2)
        children.extend(int((run / run_folder.LOCK_NAME).read_text()) for run in runs)

    err = stop_with_sigterm(proc, both_paused)  # it exits 143
    for run, child in zip(runs, children):
        assert (run / "checkpoints" / "interrupted.ckpt").is_file() and not (run / "result.json").exists()
        assert f"compare: SIGTERM: stopped run {run.name} (" in err
        with pytest.raises(ProcessLookupError):
            os.kill(child, 0)  # the child did not outlive the runner
    capsys.readouterr()
    assert cmp.main(args) == 0
    log = capsys.readouterr().err
    for run in runs:
        assert f"{run.name} resumes from {run / 'checkpoints' / 'interrupted.ckpt'} (step 5)" in log
        assert json.loads((run / "result.json").read_text())["steps"] == 8
