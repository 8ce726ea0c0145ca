"""CARU Fig. 2: test accuracy per epoch for several cells, from the comparison runner's curves.

``python -m lit_rnncells.analysis accuracy-per-epoch --runs runs/compare/imdb --metric test/acc --output fig.png``

Reads every ``<runs>/<run>/curves.json`` of a ``python -m lit_rnncells.compare ... --test-every-epoch`` sweep
(``test``: the test metrics of each epoch's checkpoint; without that flag, ``--metric val/acc`` draws the
validation metric at each epoch's last validation instead) and draws one line per cell: the mean over seeds,
with the min–max band over seeds. Cells are taken from each run's ``result.json`` (or ``spec.json`` for a
run still in progress).
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Dict, List

from .common import figure, save_figure
from ..experiments.compare import cell_label


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", required=True, help="the --out folder of a `python -m lit_rnncells.compare` sweep")
    parser.add_argument("--metric", default="test/acc",
                        help="test/* (needs the sweep's --test-every-epoch) or val/* (default test/acc)")
    parser.add_argument("--output", default="accuracy_per_epoch.png", help="PNG to write")


def run_cell(folder: Path) -> str:
    """The cell label of a run folder (``result.json``, else ``spec.json``)."""
    for name in ("result.json", "spec.json"):
        path = folder / name
        if path.is_file():
            cell = json.loads(path.read_text())["cell"]
            if isinstance(cell, dict):
                return cell_label(cell)
            return str(cell)
    return folder.name


def sweep_name(runs: Path) -> str:
    """The sweep folder and the config its runs trained, for the title."""
    for path in sorted(runs.glob("*/result.json")):
        config = Path(json.loads(path.read_text())["config"])
        return f"{runs.name} ({config.parent.name}/{config.name})"
    return runs.name


def per_epoch(curves: Dict[str, List[Dict[str, float]]], metric: str) -> Dict[int, float]:
    """``{epoch: value}``: the test points, or for ``val/*`` each epoch's last validation."""
    points = curves.get("test", []) if metric.startswith("test/") else curves.get("validation", [])
    values: Dict[int, float] = {}
    for point in points:
        if metric in point:
            values[int(point["epoch"])] = float(point[metric])  # later points of an epoch win
    return values


def collect(runs: Path, metric: str) -> Dict[str, Dict[int, List[float]]]:
    """``{cell: {epoch: [value of each seed]}}`` over the sweep's run folders."""
    table: Dict[str, Dict[int, List[float]]] = {}
    for path in sorted(runs.glob("*/curves.json")):
        values = per_epoch(json.loads(path.read_text()), metric)
        if values:
            cell = table.setdefault(run_cell(path.parent), {})
            for epoch, value in values.items():
                cell.setdefault(epoch, []).append(value)
    return table


@figure("accuracy-per-epoch", "CARU Fig. 2: a metric (test accuracy) per epoch for each cell of a comparison sweep.",
        add_arguments)
def accuracy_per_epoch(args: argparse.Namespace) -> Dict[str, Dict[int, float]]:
    """Draw the figure; returns ``{cell: {epoch (1-based): mean over seeds}}``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = Path(args.runs)
    if not runs.is_dir():
        raise FileNotFoundError(f"{runs} is not a folder; pass the --out folder of a comparison sweep.")
    table = collect(runs, args.metric)
    if not table:
        hint = " (run the sweep with --test-every-epoch)" if args.metric.startswith("test/") else ""
        raise ValueError(f"No run in {runs} recorded {args.metric!r} per epoch{hint}; pass another --metric or "
                         "--runs folder.")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    means: Dict[str, Dict[int, float]] = {}
    for cell, by_epoch in sorted(table.items()):
        epochs = sorted(by_epoch)
        xs = [e + 1 for e in epochs]  # the paper counts epochs from 1
        mean = [statistics.fmean(by_epoch[e]) for e in epochs]
        means[cell] = dict(zip(xs, mean))
        seeds = max(len(v) for v in by_epoch.values())
        line, = ax.plot(xs, mean, marker="o", label=f"{cell} (n={seeds})")
        ax.fill_between(xs, [min(by_epoch[e]) for e in epochs], [max(by_epoch[e]) for e in epochs],
                        color=line.get_color(), alpha=0.2)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"{args.metric} (mean over seeds, min–max band)")
    ax.set_title(f"CARU Fig. 2: {args.metric} per epoch, {sweep_name(runs)}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, args.output, wandb_key="analysis/accuracy_per_epoch")
    return means
