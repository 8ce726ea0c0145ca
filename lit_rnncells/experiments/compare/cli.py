"""``python -m lit_rnncells.compare``: the comparison runner's command line (its parser and :func:`main`)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ...command import run_folder
from ...utils.arguments import OneLineParser
from ...utils.paths import check_writable_folder
from .child import child_main
from .options import PROGRESS_EVERY, Launch, Matching, RunOptions, Selection, argument_group
from .planning import CompareError
from .runner import Interrupted
from .launchers import launcher_from
from .slurm_settings import add_slurm_options
from .sweep import compare

DESCRIPTION = ("Fair comparisons of cells on any task config: matched budgets and parameters, seeds, a grid, "
               "resumable.")


def seconds(text: str) -> float:
    """An argparse type: a number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser: the plan's options, then one argument group per option group of
    :func:`.sweep.compare` (:mod:`.options`: matching, selection, runs, launch)."""
    ap = OneLineParser(allow_abbrev=False, prog="python -m lit_rnncells.compare", description=DESCRIPTION,
                       epilog="Arguments after -- go to the CLI of every run unchanged. See docs/compare.md.")
    ap.add_argument("--config", required=True, help="the task config every run starts from")
    ap.add_argument("--cells", nargs="+", required=True,
                    help="registered cell names, or Name(key=value,...) for cells that need options")
    seeds = ap.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=int, default=3, help="run seeds 1..N (default 3)")
    seeds.add_argument("--seed-list", type=int, nargs="+", help="run exactly these seeds")
    ap.add_argument("--budget", default="epochs=10", help="epochs=N, steps=N (optimiser steps) or time=SECONDS")
    ap.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2",
                    help="grid over a CLI key (repeatable), e.g. data.init_args.train_size=100,300,1000")
    ap.add_argument("--out", default="runs/compare", help="folder of the runs and the outputs")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    add_group_options(ap)
    return ap


def add_group_options(ap: argparse.ArgumentParser) -> None:
    """The options of compare's groups, each in the argument group of its dataclass (--help shows them so)."""
    size = argument_group(ap, "matching").add_mutually_exclusive_group()
    size.add_argument("--match-params", help="target parameter count: a number or CELL@HIDDEN (e.g. GRU@256)")
    size.add_argument("--hidden-size", type=int, help="one hidden size for every cell")
    selection = argument_group(ap, "selection")
    selection.add_argument("--monitor", help="validation metric of the kept checkpoint and the curves "
                                             "(default val/acc; val/loss for language models and seq2seq)")
    selection.add_argument("--mode", choices=("min", "max"), help="whether lower or higher --monitor is better "
                                                                  "(default from its name)")
    runs = argument_group(ap, "runs")
    runs.add_argument("--test-every-epoch", action="store_true",
                      help="also test each epoch's checkpoint (test metric per epoch, CARU Fig. 2)")
    runs.add_argument("--keep-epoch-checkpoints", action="store_true",
                      help="with --test-every-epoch: keep each epoch's checkpoint in <run>/epochs/ after testing it "
                           "(default: deleted, the test numbers kept)")
    runs.add_argument("--no-wandb", action="store_true", help="runs log nothing (--trainer.logger false)")
    launch = argument_group(ap, "launch")
    launch.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="runs at once (default 1): each gets its own GPU, round-robin over the visible ones, "
                             "or its share of the CPU cores")
    launch.add_argument("--dry-run", action="store_true",
                        help="plan the runs, parse every run's arguments, print each run's command line and stop: "
                             "nothing runs or is written")
    launch.add_argument("--progress-every", type=seconds, default=PROGRESS_EVERY, metavar="SECONDS",
                        help="every this many seconds while runs go, a line for each saying where it stands (the "
                             "last progress line of its log.txt; default %(default)g, 0: none)")
    add_slurm_options(ap, launch)


def groups_of(args: argparse.Namespace, extra: Sequence[str], out: Path) -> Dict[str, Any]:
    """compare's option groups from the parsed command line (``extra``: the arguments after ``--``); a Slurm
    launcher is built, and checked against the cluster, here."""
    launcher = launcher_from(args, out)
    return {"matching": Matching(args.match_params, args.hidden_size), "selection": Selection(args.monitor, args.mode),
            "runs": RunOptions(list(extra), args.test_every_epoch, args.no_wandb,
                               keep_epoch_checkpoints=args.keep_epoch_checkpoints),
            "launch": Launch(launcher, args.jobs, args.dry_run, args.progress_every)}


def error_exit(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def interrupted_exit(stop: Interrupted, out: Path) -> int:
    """Say which runs SIGTERM / Ctrl-C stopped and what each saved; the first stopped run's exit status."""
    if not stop.run_ids:
        print(f"compare: {stop.signal_name}: stopped before run {stop.run_id} started; rerun the same command to go "
              "on: finished runs are kept.", file=sys.stderr, flush=True)
    for run_id in stop.run_ids:
        checkpoint = out / run_id / run_folder.CHECKPOINTS / "interrupted.ckpt"
        saved = f"it saved {checkpoint}" if checkpoint.is_file() else "it saved no checkpoint"
        code = f"exit {stop.code}; " if run_id == stop.run_id else ""
        print(f"compare: {stop.signal_name}: stopped run {run_id} ({code}{saved}); rerun the same command to go "
              "on: finished runs are kept, unfinished ones resume from their checkpoints.", file=sys.stderr,
              flush=True)
    return stop.code


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        return child_main(argv)
    extra: List[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:
        return 0 if stop.code == 0 else 2
    failed: List[str] = []
    try:
        check_writable_folder(args.out, "--out")
    except OSError as error:
        return error_exit(str(error))
    try:
        rows = compare(args.config, args.cells, args.seed_list or args.seeds, args.budget, args.out, vary=args.vary,
                       failed=failed, **groups_of(args, extra, Path(args.out)))
    except CompareError as error:
        return error_exit(str(error))
    except Interrupted as stop:
        return interrupted_exit(stop, Path(args.out))
    except ValueError as error:  # the matcher's messages (a target no size reaches, ...)
        if os.environ.get("LIT_RNNCELLS_TRACEBACK"):
            raise
        return error_exit(str(error).splitlines()[0])
    out = Path(args.out)
    if rows:
        print((out / "summary.md").read_text())
        print(f"Runs: {out / 'runs.csv'}; curves: {out / 'curves_steps.png'}, {out / 'curves_seconds.png'}")
    return 1 if failed or not (rows or args.dry_run) else 0
