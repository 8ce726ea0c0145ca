"""``compare --launcher slurm`` (issue 31, item 2): the settings checked before anything is submitted, then a grid
through the real local Slurm (scripts/start_slurm.sh): preempted (Slurm's early warning) it is requeued and
resumes; cancelled with ``scancel`` it is reported with its log, and a rerun resumes it."""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lit_rnncells import compare as cmp
from lit_rnncells.experiments.compare.slurm_settings import (SlurmSettingsError, add_slurm_options, settings_from,
                                                             time_minutes)

from .slurm_cluster import slurm  # noqa: F401  (the fixture)
from .test_reliability import error_line

ROOT = Path(__file__).resolve().parents[1]
CONFIG = str(ROOT / "configs" / "logic" / "gru.yaml")
GRID = ["--config", CONFIG, "--cells", "GRU", "--seed-list", "1", "2", "3", "--hidden-size", "4",
        "--budget", "epochs=4", "--no-wandb"]  # 3 runs of 8 steps (64 examples, batch 32): 2 CPUs, 3 waves
TINY = ["--data.init_args.train_size", "64", "--data.init_args.val_size", "16", "--data.init_args.test_size", "16",
        "--trainer.enable_progress_bar", "false"]


@pytest.mark.parametrize("text, minutes", [("90", 90), ("1:30", 2), ("01:30:00", 90), ("1-0", 1440),
                                           ("1-12:00", 2160), ("0-0:0:59", 1)])
def test_slurm_time_limits_are_read_in_every_format_slurm_has(text, minutes):
    assert time_minutes(text, "--time") == minutes


def parse(argv, tmp_path: Path) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_slurm_options(parser)
    return parser.parse_args(argv)


def test_the_command_line_options_win_over_the_slurm_config_file(tmp_path):
    config = tmp_path / "slurm.yaml"
    config.write_text("partition: gpu\ntime: 02:00:00\nmem: 16G\ngpus-per-run: 2\n")
    settings = settings_from(parse(["--slurm-config", str(config), "--time", "30"], tmp_path))
    assert (settings.partition, settings.time, settings.mem, settings.gpus_per_run) == ("gpu", "30", "16G", 2)
    config.write_text("partition: gpu\nqueue: long\n")
    with pytest.raises(SlurmSettingsError, match="unknown keys queue; the keys are partition, time"):
        settings_from(parse(["--slurm-config", str(config)], tmp_path))


def compare_error(argv, tmp_path, capsys) -> str:
    """``compare`` with ``argv``: exit 2 with one ``error:`` line, and nothing submitted or written."""
    out = tmp_path / "out"
    assert cmp.main([*argv, "--out", str(out), "--", *TINY]) == 2
    assert not out.exists()
    return error_line(capsys.readouterr().err)


def test_no_sbatch_on_path_is_one_error_line_before_anything_is_submitted(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm needed: here there is none
    line = compare_error([*GRID, "--launcher", "slurm"], tmp_path, capsys)
    assert "needs Slurm's sbatch on PATH" in line and "drop --launcher slurm" in line


def test_reproduce_takes_the_slurm_launcher_and_checks_it_the_same_way(tmp_path, capsys, monkeypatch):
    from lit_rnncells.experiments.reproduce import main as reproduce_main

    monkeypatch.setenv("PATH", str(tmp_path))
    out = tmp_path / "out"
    assert reproduce_main(["mzu", "--launcher", "slurm", "--out", str(out)]) == 2
    assert "needs Slurm's sbatch on PATH" in error_line(capsys.readouterr().err) and not out.exists()


def test_jobs_and_the_slurm_launcher_together_are_one_error_line(tmp_path, capsys):
    assert "drop --jobs" in compare_error([*GRID, "--launcher", "slurm", "--jobs", "2"], tmp_path, capsys)


@pytest.mark.parametrize("option, value, said", [("--time", "1:xx", "is not a Slurm time limit"),
                                                 ("--time", "0", "is no time at all"),
                                                 ("--mem", "16 GB", "is not a Slurm memory size")])
def test_a_bad_setting_is_one_error_line_before_anything_is_submitted(tmp_path, capsys, option, value, said):
    assert said in compare_error([*GRID, "--launcher", "slurm", option, value], tmp_path, capsys)


def test_an_unknown_partition_is_one_error_line_naming_the_known_ones(slurm, tmp_path, capsys):  # noqa: F811
    line = compare_error([*GRID, "--launcher", "slurm", "--partition", "nosuchpartition"], tmp_path, capsys)
    assert "'nosuchpartition' is not a partition of this cluster; sinfo lists" in line


def test_a_job_slurm_would_refuse_is_one_error_line_before_anything_is_submitted(slurm, tmp_path, capsys):  # noqa: F811
    line = compare_error([*GRID, "--launcher", "slurm", "--mem", "999999999G"], tmp_path, capsys)
    assert "Slurm would refuse the runs' jobs (" in line and "--mem" in line


def wait_for(path: Path, proc: subprocess.Popen, seconds: float = 300) -> str:
    end = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.2)
    time.sleep(0.2)
    return path.read_text()


def slurm_job_of(out: Path, flag_text: str) -> tuple:
    """The run the flag of ``PauseOnceAtStep`` names, and its Slurm job id."""
    run_id = Path(flag_text.splitlines()[1]).name
    return run_id, json.loads((out / "slurm" / "jobs.json").read_text())[run_id]


@pytest.mark.slow
def test_a_slurm_grid_requeues_a_preempted_run_and_a_rerun_resumes_a_cancelled_one(slurm, tmp_path):  # noqa: F811
    """3 runs as a Slurm job array. The first run to reach step 3 gets Slurm's early warning (USR2, as before a
    preemption or the time limit): it saves interrupted.ckpt, its job is requeued and resumes from it. The first
    to reach step 5 is cancelled (scancel): compare reports it with its log and exits 1; the rerun keeps the 2
    finished runs and resumes that one from the checkpoint it saved, and the grid completes."""
    pauses = [{"class_path": "tests.examples.recorders.PauseOnceAtStep",
               "init_args": {"step": step, "flag": str(tmp_path / f"paused{step}")}} for step in (3, 5)]
    out = tmp_path / "out"
    argv = [*GRID, "--launcher", "slurm", "--time", "10", "--out", str(out), "--progress-every", "1", "--", *TINY,
            *["--trainer.callbacks+=" + json.dumps(p) for p in pauses]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "lit_rnncells.compare", *argv]
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        preempted, job = slurm_job_of(out, wait_for(tmp_path / "paused3", proc))
        subprocess.run(["scancel", "--signal", "USR2", job], check=True, timeout=60)
        cancelled, job = slurm_job_of(out, wait_for(tmp_path / "paused5", proc))
        subprocess.run(["scancel", job], check=True, timeout=60)
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            subprocess.run(["scancel", "--name", "lit_rnncells-compare"], timeout=60)
    assert proc.returncode == 1, err[-3000:]
    assert f"compare: {cancelled} failed; its log is {out / cancelled / 'log.txt'}" in err
    assert re.search(r"^compare: \[\d/3\] \S+: (no progress line yet|fit: )", err, re.M), err[-3000:]  # each second
    interrupted = out / cancelled / "checkpoints" / "interrupted.ckpt"
    assert interrupted.is_file() and not (out / cancelled / "result.json").exists()

    log = (out / preempted / "log.txt").read_text()  # requeued: the same job started again, from step 3
    assert "(start 2), resuming from" in log and "interrupted.ckpt (step 3)" in log, log[-3000:]
    if preempted != cancelled:
        assert json.loads((out / preempted / "result.json").read_text())["steps"] == 8

    rerun = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"{cancelled} resumes from {interrupted} (step 5)" in rerun.stderr
    assert rerun.stderr.count("finished earlier, kept") == 2
    with open(out / "runs.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 3 and {r["steps"] for r in rows} == {"8"}


def test_leaderboard_takes_the_slurm_launcher_and_checks_it_before_any_run(tmp_path, capsys, monkeypatch):
    from lit_rnncells.experiments.leaderboard import main as leaderboard_main

    monkeypatch.setenv("PATH", str(tmp_path))
    out = tmp_path / "out"
    assert leaderboard_main(["--cells", "GRU", "--tasks", "logic", "--seeds", "1", "--launcher", "slurm",
                             "--out", str(out)]) == 2
    assert "needs Slurm's sbatch on PATH" in error_line(capsys.readouterr().err)
    assert not any(out.rglob("result.json"))


def test_slurm_options_without_the_slurm_launcher_are_refused_by_every_runner(tmp_path, capsys):
    """``--partition gpu`` without ``--launcher slurm`` ran every run on this machine (the options did nothing): in
    compare, reproduce and leaderboard it is one line naming the missing option, before any run."""
    from lit_rnncells.experiments.leaderboard import main as leaderboard_main
    from lit_rnncells.experiments.reproduce import main as reproduce_main

    line = compare_error([*GRID, "--partition", "gpu"], tmp_path, capsys)
    assert line == ("error: --partition is an option of --launcher slurm, but the runs would run on this machine "
                    "(--launcher local, the default); add --launcher slurm, or drop --partition.")
    line = compare_error([*GRID, "--dry-run", "--time", "90", "--gpus-per-run", "1"], tmp_path, capsys)
    assert "--time and --gpus-per-run are options of --launcher slurm" in line
    out = tmp_path / "out"
    assert reproduce_main(["mzu", "--mem", "16G", "--out", str(out)]) == 2
    assert "--mem is an option of --launcher slurm" in error_line(capsys.readouterr().err) and not out.exists()
    assert leaderboard_main(["--cells", "GRU", "--tasks", "logic", "--seeds", "1", "--account", "lab",
                             "--out", str(out)]) == 2
    assert "--account is an option of --launcher slurm" in error_line(capsys.readouterr().err)
    assert not out.exists()


def test_importing_submitit_leaves_the_logging_handlers_already_installed_open(tmp_path):
    """submitit configures logging when imported (``logging.config.dictConfig``), which closes every handler the
    process had: a user's log files, and in an xdist worker pytest's own capture (the rest of that worker's tests
    then errored). The launcher imports it without that configuration; a fresh process shows no handler closed."""
    pytest.importorskip("submitit")
    script = (
        "import logging\n"
        "closed = []\n"
        "class Watched(logging.StreamHandler):\n"
        "    def close(self):\n"
        "        closed.append(self)\n"
        "        super().close()\n"
        "logging.getLogger().addHandler(Watched())\n"
        "from lit_rnncells.experiments.compare.slurm_settings import import_submitit\n"
        "import_submitit()\n"
        "print('closed', len(closed))\n")
    env = {k: v for k, v in os.environ.items() if k != "SUBMITIT_LOG_LEVEL"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("closed 0"), proc.stdout
