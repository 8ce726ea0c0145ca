"""The option groups of :func:`.sweep.compare` (typed, frozen dataclasses) and the command line's argument groups
that match them: ``matching``, ``selection``, ``runs`` and ``launch``.

    compare("configs/logic/gru.yaml", ["GRU", "MuFuRU"], seeds=3, budget="epochs=20",
            matching=Matching(match_params="GRU@8"), runs=RunOptions(extra=["--trainer.limit_val_batches", "2"]),
            launch=Launch(jobs=2))

A group is given as the dataclass, a dict of its fields or ``None`` (every default). The flat keyword names of
before (``hidden_size=``, ``monitor=``, ``no_wandb=``, ``jobs=``, ...) still work for one release, each with one
deprecation line naming its new key (:data:`DEPRECATED_NAMES`).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Type, Union


@dataclass(frozen=True)
class Matching:
    """How each cell's hidden size is chosen (at most one of the two; neither: the config's size).

    Args:
        match_params: target parameter count, a number or CELL@HIDDEN (e.g. ``GRU@256``): each cell gets the
            hidden size whose model comes nearest it, per grid point.
        hidden_size: one hidden size for every cell.
    """

    match_params: Optional[Union[int, str]] = None
    hidden_size: Optional[int] = None


@dataclass(frozen=True)
class Selection:
    """Which checkpoint a run keeps and tests, and what the curves plot.

    Args:
        monitor: the validation metric (default ``val/acc``; ``val/loss`` for language models and seq2seq).
        mode: ``min`` or ``max``, whether lower or higher ``monitor`` is better (default from its name).
    """

    monitor: Optional[str] = None
    mode: Optional[str] = None


@dataclass(frozen=True)
class RunOptions:
    """What every run gets on top of the config.

    Args:
        extra: arguments passed to the CLI of every run unchanged (the command line's arguments after ``--``).
        test_every_epoch: also test each epoch's checkpoint (the test metric per epoch, CARU Fig. 2).
        no_wandb: runs log nothing (``--trainer.logger false``).
        env: environment variables set on top of this process's for every run.
        keep_epoch_checkpoints: with ``test_every_epoch``, keep each epoch's checkpoint in ``<run>/epochs/`` after
            testing it (for analyses over training; by default they are deleted, the numbers kept).
    """

    extra: Sequence[str] = ()
    test_every_epoch: bool = False
    no_wandb: bool = False
    env: Optional[Dict[str, str]] = None
    keep_epoch_checkpoints: bool = False


PROGRESS_EVERY = 600.0
"""Seconds between the lines saying where each running run stands (``--progress-every``; 0: none)."""


@dataclass(frozen=True)
class Launch:
    """Where the runs run and how many at once (Slurm: docs/compare.md, 'On a Slurm cluster').

    Args:
        launcher: a :class:`.runner.Launcher` that runs the runs (``None``: a :class:`.runner.LocalLauncher` of
            ``jobs``; the command line builds a Slurm launcher from ``--launcher slurm`` and its settings).
        jobs: runs at once on this machine (default 1): each gets its own GPU, round-robin over the visible ones,
            or its share of the CPU cores.
        dry_run: plan the runs and parse every grid point's arguments as a run would, print each run's command
            line, and stop: nothing runs and nothing is written (a check before spending a GPU's time).
        progress_every: every this many seconds while runs go (default 600; 0: never), a line for each running
            run saying where it stands: the last progress line of its ``log.txt``. Applies to the launcher built
            from ``jobs``; a given ``launcher`` keeps its own.
    """

    launcher: Optional[Any] = None
    jobs: int = 1
    dry_run: bool = False
    progress_every: float = PROGRESS_EVERY


GROUPS: Dict[str, Type[Any]] = {"matching": Matching, "selection": Selection, "runs": RunOptions,
                                 "launch": Launch}
"""``compare``'s keyword for each group → the group's dataclass."""

DEPRECATED_NAMES: Dict[str, str] = {
    "match_params": "matching.match_params", "hidden_size": "matching.hidden_size",
    "monitor": "selection.monitor", "mode": "selection.mode",
    "extra": "runs.extra", "test_every_epoch": "runs.test_every_epoch", "no_wandb": "runs.no_wandb",
    "env": "runs.env",
    "launcher": "launch.launcher", "jobs": "launch.jobs",
}
"""compare's flat keyword names of before → their ``group.field``; kept for one release."""


def argument_group(parser: argparse.ArgumentParser, name: str) -> Any:
    """The command line's argument group of the option group ``name``: titled with the keyword and dataclass
    of :func:`.sweep.compare` it fills, described by the dataclass's first docstring line."""
    group_type = GROUPS[name]
    summary = (group_type.__doc__ or "").strip().splitlines()[0]
    return parser.add_argument_group(f"{name} (compare's {name}={group_type.__name__}(...))", summary)
