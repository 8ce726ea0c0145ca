"""Speed under load: the README's run command and a short LM fit, alone and beside a CPU-bound process.

Each job runs as its own ``python -m lit_rnncells fit`` process (start-up included, as a user sees it),
under each thread / OpenMP / allocator setting, once alone and once while another process keeps one
core busy (a pure-Python loop: it competes for a core without spinning OpenMP threads of its own). The
settings are interleaved round-robin over ``--repeats`` rounds so the machine's drift hits them alike; the
table gives the median wall-clock seconds and the loaded / alone ratio (a fair share of 2 cores is 2×).

    python scripts/bench_load.py                    # both jobs, every setting, 3 rounds
    python scripts/bench_load.py --jobs logic --repeats 1 --logic-epochs 2
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]

SETTINGS: Dict[str, Dict[str, str]] = {
    # what the command line does by default (lit_rnncells/command/cpu_defaults.py): one thread for a small model on
    # the CPU, glibc keeping freed memory
    "CLI default": {},
    # torch's own defaults: a thread per core, OpenMP threads spin-wait, glibc returns freed memory
    "torch defaults": {"LIT_RNNCELLS_CPU_DEFAULTS": "0"},
    # the other cure for spinning threads: they sleep between parallel regions
    "torch defaults + OMP_WAIT_POLICY=PASSIVE": {"LIT_RNNCELLS_CPU_DEFAULTS": "0", "OMP_WAIT_POLICY": "PASSIVE"},
}


def job_command(job: str, root: Path, args: argparse.Namespace) -> List[str]:
    common = ["--trainer.logger", "false", "--trainer.enable_progress_bar", "false", "--trainer.default_root_dir",
              str(root), "--trainer.enable_checkpointing", "false", "--trainer.callbacks", "null"]
    if job == "logic":  # the README's run command, fewer epochs
        return [sys.executable, "-m", "lit_rnncells", "fit", "--config", str(ROOT / "configs/logic/mufuru.yaml"),
                "--trainer.max_epochs", str(args.logic_epochs), *common]
    if job == "lm":  # a short PTB char LM fit: GRU 128, batch 32, BPTT 100
        return [sys.executable, "-m", "lit_rnncells", "fit", "--config",
                str(ROOT / "configs/lm/ptb_char_gru_reference.yaml"), "--trainer.max_time", "null",
                "--model.init_args.embedding_size", "64", "--model.init_args.hidden_size", "128",
                "--data.init_args.batch_size", "32", "--data.init_args.bptt", "100",
                "--trainer.max_steps", str(args.lm_steps), "--trainer.limit_val_batches", "0",
                "--test_after_fit", "false", *common]
    raise ValueError(f"Unknown job {job!r}; use logic or lm.")


def timed(cmd: Sequence[str], env: Dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(list(cmd), env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"bench_load: {' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return seconds


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, List[float]]]:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", nargs="+", default=["logic", "lm"], choices=["logic", "lm"])
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--logic-epochs", type=int, default=10)
    ap.add_argument("--lm-steps", type=int, default=150)
    ap.add_argument("--workdir", default="runs/bench_load")
    args = ap.parse_args(argv)
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "MKL_NUM_THREADS")}
    base.update(WANDB_MODE="disabled", PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    times: Dict[str, Dict[str, List[float]]] = {}
    for round_ in range(args.repeats):
        for job in args.jobs:
            for name in args.settings:
                env = {**base, **SETTINGS[name]}
                cmd = job_command(job, workdir / "run", args)
                alone = timed(cmd, env, workdir)
                hog = subprocess.Popen([sys.executable, "-c", "while True: pass"], env=base)
                try:
                    time.sleep(0.5)
                    loaded = timed(cmd, env, workdir)
                finally:
                    hog.kill()
                    hog.wait()
                times.setdefault(f"{job}|{name}|alone", []).append(alone)
                times.setdefault(f"{job}|{name}|loaded", []).append(loaded)
                print(f"round {round_ + 1} {job:5s} {name:24s} alone {alone:6.1f}s  loaded {loaded:6.1f}s",
                      file=sys.stderr, flush=True)
    print(f"\nWall-clock seconds per run (median of {args.repeats}, start-up included); loaded = beside a process "
          f"keeping one of the {os.cpu_count()} cores busy; logic = README run command at {args.logic_epochs} "
          f"epochs, lm = PTB char GRU 128, {args.lm_steps} steps.\n")
    print("| job | setting | alone s | loaded s | loaded / alone | alone vs CLI default |")
    print("|---|---|---|---|---|---|")
    for job in args.jobs:
        reference = statistics.median(times[f"{job}|{args.settings[0]}|alone"])
        for name in args.settings:
            alone = statistics.median(times[f"{job}|{name}|alone"])
            loaded = statistics.median(times[f"{job}|{name}|loaded"])
            print(f"| {job} | {name} | {alone:.1f} | {loaded:.1f} | {loaded / alone:.2f}× | {alone / reference:.2f}× |")
    return times


if __name__ == "__main__":
    main()
