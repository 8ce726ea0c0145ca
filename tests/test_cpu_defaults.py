"""The command line's CPU defaults: one thread for small models on the CPU, glibc keeping freed memory."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lit_rnncells.cli import main
from lit_rnncells.command.cpu_defaults import SMALL_MODEL_PARAMETERS, threads_for

ROOT = Path(__file__).resolve().parents[1]
LOGIC = str(ROOT / "configs" / "logic" / "mufuru.yaml")


def test_a_small_model_gets_one_thread_a_large_one_keeps_torchs(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("LIT_RNNCELLS_CPU_DEFAULTS", raising=False)
    assert threads_for(torch.nn.Linear(10, 10)) == 1
    assert threads_for(torch.nn.Linear(1000, SMALL_MODEL_PARAMETERS // 1000 + 1)) is None
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the user's setting wins
    assert threads_for(torch.nn.Linear(10, 10)) is None
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setenv("LIT_RNNCELLS_CPU_DEFAULTS", "0")
    assert threads_for(torch.nn.Linear(10, 10)) is None


def test_the_command_line_runs_the_main_job_on_one_thread(monkeypatch, tmp_path):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("LIT_RNNCELLS_CPU_DEFAULTS", raising=False)
    before = torch.get_num_threads()
    try:
        main(["--config", LOGIC, "--trainer.logger", "false", "--trainer.default_root_dir", str(tmp_path)], run=False)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("env, expected", [({}, "keep_freed_memory=True"),
                                           ({"LIT_RNNCELLS_CPU_DEFAULTS": "0"}, "keep_freed_memory=False")])
def test_show_cpu_defaults_prints_the_settings(env, expected):
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "LIT_RNNCELLS_CPU_DEFAULTS")}
    out = subprocess.run([sys.executable, "-m", "lit_rnncells.show_cpu_defaults", "--config", LOGIC],
                         env={**base, "PYTHONPATH": str(ROOT), **env}, capture_output=True, text=True, check=True)
    assert expected in out.stdout
    assert ("model_threads=1" in out.stdout) == (not env)


@pytest.mark.parametrize("entry", ["run", "main"])
def test_a_run_in_process_gives_back_the_thread_count_it_found(entry, monkeypatch, tmp_path):
    """A small model's one-thread default ends with its run: a larger model fitted next in the same process
    (a benchmark or notebook running fits in turn) gets torch's thread count, not the last run's. The same
    from ``run`` (the command line's) and ``main`` (the library's: it left the process on one thread)."""
    from lit_rnncells import cli

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("LIT_RNNCELLS_CPU_DEFAULTS", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    seen = []
    original = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (seen.append(n), original(n))[1])
    try:
        getattr(cli, entry)(["fit", "--config", LOGIC, "--trainer.max_steps", "1", "--trainer.limit_val_batches",
                             "0", "--trainer.logger", "false", "--trainer.enable_checkpointing", "false",
                             "--trainer.default_root_dir", str(tmp_path), "--test_after_fit", "false",
                             "--data.init_args.train_size", "64", "--data.init_args.val_size", "32",
                             "--data.init_args.test_size", "32"])
        assert seen == [1, 2]  # the run's one thread, then the count it found
        assert torch.get_num_threads() == 2
    finally:
        original(before)
