"""CARU Fig. 2 (test accuracy per epoch), or another per-epoch metric, for several cells, from the runner's curves.

``python -m lit_rnncells.analysis accuracy-per-epoch --runs runs/compare/imdb --metric test/acc --output fig.png``

Reads every ``<runs>/<run>/curves.json`` of a ``python -m lit_rnncells.compare ... --test-every-epoch`` sweep
(``test``: the test metrics of each epoch's checkpoint; without that flag, ``--metric val/acc`` draws the
validation metric at each epoch's last validation instead) and draws one line per cell: the mean over seeds,
with the min–max band over seeds. Cells are taken from each run's ``result.json`` (or ``spec.json`` for a
run still in progress), with the run's grid point (``--vary``) when it has one, and its hidden size when the
runs have that cell at several. Several ``--runs`` folders are read together; a run folder copied into two of
them (the same cell, grid point, hidden size and seed) counts once.

It also prints the numbers as a table: each cell's mean ± sample std over seeds at each epoch and, with
``--against CELL``, each other cell's difference to that one with Welch's p over the seeds
(:mod:`lit_rnncells.experiments.seed_spread`). A label keeps only the settings that differ between the cells
(``GRUDT-transition_depth=0`` beside ``GRUDT-transition_depth=1-share_transition=True`` when both have
``layer_norm=True``); the settings every cell shares are printed once above the table and in the title.
"""
from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .common import figure, save_figure
from ..experiments.compare import cell_label, label_parts
from ..experiments.report import distinct_labels, grid_label
from ..experiments.seed_spread import SeedResult, p_value, welch_p


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", required=True, nargs="+", metavar="FOLDER",
                        help="the --out folder of a `python -m lit_rnncells.compare` sweep (several: their runs "
                             "together)")
    parser.add_argument("--metric", default="test/acc",
                        help="test/* (needs the sweep's --test-every-epoch) or val/* (default test/acc)")
    parser.add_argument("--output", default="accuracy_per_epoch.png", help="PNG to write")
    parser.add_argument("--against", metavar="CELL",
                        help="also print each other cell's difference to this one at each epoch, with Welch's p "
                             "over seeds (a label the table prints, or its unique start)")


LabelParts = Tuple[str, Sequence[str], Sequence[str]]  # a cell's name, its options, its grid point's values


@dataclass(frozen=True)
class RunIdentity:
    """What tells a run apart in the table: its label (cell and grid point, as the runner's curves label it),
    the label's parts (:func:`~lit_rnncells.experiments.report.distinct_labels`), its hidden size and seed."""
    label: str
    parts: LabelParts = field(compare=False)
    hidden: Optional[int] = None
    seed: Optional[int] = None


def run_label(folder: Path) -> RunIdentity:
    """The identity of a run folder, from its ``result.json`` (else ``spec.json``): the label is its cell and
    grid point, if any (``CapMZU-layer_norm=True gradient_clip_val=1.0``)."""
    for name in ("result.json", "spec.json"):
        path = folder / name
        if path.is_file():
            run = json.loads(path.read_text())
            spec = run.get("cell_spec") or run["cell"]  # result.json: the label and the spec; spec.json: the spec
            cell = cell_label(spec) if isinstance(spec, dict) else str(spec)
            grid = run.get("grid") or {}
            parts = grid_label("", grid).split()
            return RunIdentity(grid_label(cell, grid), (*label_parts(spec, cell), tuple(parts)), run.get("hidden_size"),
                               run.get("seed"))
    return RunIdentity(folder.name, (folder.name, (), ()))


def sweep_name(runs: Path) -> str:
    """The sweep folder and the config its runs trained, for the title."""
    for path in sorted(runs.glob("*/result.json")):
        config = Path(json.loads(path.read_text())["config"])
        return f"{runs.name} ({config.parent.name}/{config.name})"
    return runs.name


def figure_title(metric: str, sweeps: Sequence[str], shared: Sequence[str]) -> str:
    """The figure's title: what is drawn; below it the sweeps, and the settings every cell shares.

    Only test accuracy per epoch is CARU's Fig. 2, so only that title names the paper's figure.
    """
    paper = "CARU Fig. 2: " if metric == "test/acc" else ""
    common = f"\nevery cell: {' '.join(shared)}" if shared else ""
    return f"{paper}{metric} per epoch\n{', '.join(sweeps)}{common}"


def per_epoch(curves: Dict[str, List[Dict[str, float]]], metric: str) -> Dict[int, float]:
    """``{epoch: value}``: the test points, or for ``val/*`` each epoch's last validation."""
    points = curves.get("test", []) if metric.startswith("test/") else curves.get("validation", [])
    values: Dict[int, float] = {}
    for point in points:
        if metric in point:
            values[int(point["epoch"])] = float(point[metric])  # later points of an epoch win
    return values


def collect(runs: Path, metric: str, found: Optional[Dict[RunIdentity, Dict[int, float]]] = None
            ) -> Dict[RunIdentity, Dict[int, float]]:
    """``{run: {epoch: value}}`` over the sweep's run folders (added to ``found`` when given). A run found in an
    earlier folder too (the same cell, grid point, hidden size and seed: a run folder copied into two sweeps) is
    kept once, from the first."""
    found = {} if found is None else found
    for path in sorted(runs.glob("*/curves.json")):
        values = per_epoch(json.loads(path.read_text()), metric)
        run = run_label(path.parent)
        if values and (run.seed is None or run not in found):
            found[run if run.seed is not None else RunIdentity(str(path.parent), run.parts)] = values
    return found


def by_cell(found: Dict[RunIdentity, Dict[int, float]]
            ) -> Tuple[Dict[str, Dict[int, List[float]]], Dict[str, LabelParts]]:
    """``{cell: {epoch: [value of each seed]}}`` and each cell's label parts; a cell run at several hidden sizes
    is one cell per size (``... hidden=187``)."""
    sizes: Dict[str, set] = {}
    for run in found:
        sizes.setdefault(run.label, set()).add(run.hidden)
    table: Dict[str, Dict[int, List[float]]] = {}
    parts: Dict[str, LabelParts] = {}
    for run, values in found.items():
        label, (name, options, grid) = run.label, run.parts
        if len(sizes[run.label]) > 1:
            label, grid = f"{label} hidden={run.hidden}", (*grid, f"hidden={run.hidden}")
        parts[label] = (name, options, grid)
        for epoch, value in values.items():
            table.setdefault(label, {}).setdefault(epoch, []).append(value)
    return table, parts


def shortened(table: Dict[str, Dict[int, List[float]]], parts: Dict[str, LabelParts]
              ) -> Tuple[Dict[str, Dict[int, List[float]]], Dict[str, str], List[str]]:
    """The table under short labels (only the settings that differ between its cells), ``{full label: short}``
    and the settings every cell shares."""
    short, shared = distinct_labels({label: parts[label] for label in table})
    return {short[label]: values for label, values in table.items()}, short, shared


def reference_cell(table: Dict[str, Dict[int, List[float]]], against: str,
                   full: Optional[Dict[str, str]] = None) -> str:
    """The cell ``--against`` names: its label, or the one label that starts with it; with ``full`` (``{full
    label: the table's label}``) a full label, or its unique start, names its cell too."""
    names = {cell: cell for cell in table}
    for long, short in (full or {}).items():
        names.setdefault(long, short)
    if against in names:
        return names[against]
    starting = {names[name] for name in names if name.startswith(against)}
    if len(starting) == 1:
        return starting.pop()
    known = "; ".join(sorted(table))
    why = "starts more than one cell's label" if starting else "is no cell of these runs"
    raise ValueError(f"--against {against!r} {why}; pass one of: {known}.")


def per_epoch_table(table: Dict[str, Dict[int, List[float]]], metric: str, against: Optional[str] = None) -> str:
    """A Markdown table: per epoch (from 1), each cell's mean ± sample std over seeds (n) of ``metric`` and, with
    ``against``, each other cell's difference to it with Welch's p (``–`` below two seeds either side)."""
    cells = sorted(table)
    others = [c for c in cells if c != against] if against else []
    header = ["epoch", *[f"{c} {metric}" for c in cells], *[f"{c} − {against} (p)" for c in others]]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for epoch in sorted({e for by_epoch in table.values() for e in by_epoch}):
        seeds = {c: SeedResult.of(table[c][epoch]) for c in cells if table[c].get(epoch)}
        row = [str(epoch + 1)]
        for c in cells:
            r = seeds.get(c)
            row.append("–" if r is None else f"{r.mean:.3f}" + (f" ± {r.std:.3f}" if r.std is not None else "")
                       + f" (n {r.n})")
        for c in others:
            if c not in seeds or against not in seeds:
                row.append("–")
                continue
            p = welch_p(seeds[c], seeds[against])
            row.append(f"{seeds[c].mean - seeds[against].mean:+.3f} ({'–' if p is None else p_value(p)})")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


@figure("accuracy-per-epoch", "CARU Fig. 2: a metric (test accuracy) per epoch for each cell of a comparison sweep.",
        add_arguments)
def accuracy_per_epoch(args: argparse.Namespace) -> Dict[str, Dict[int, float]]:
    """Draw the figure; returns ``{cell: {epoch (1-based): mean over seeds}}``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folders = [Path(runs) for runs in ([args.runs] if isinstance(args.runs, str) else args.runs)]
    found: Dict[RunIdentity, Dict[int, float]] = {}
    for runs in folders:
        if not runs.is_dir():
            raise FileNotFoundError(f"{runs} is not a folder; pass the --out folder of a comparison sweep.")
        collect(runs, args.metric, found)
    table, parts = by_cell(found)
    if not table:
        hint = " (run the sweep with --test-every-epoch)" if args.metric.startswith("test/") else ""
        raise ValueError(f"No run in {', '.join(map(str, folders))} recorded {args.metric!r} per epoch{hint}; "
                         "pass another --metric or --runs folder.")
    table, short, shared = shortened(table, parts)
    against = reference_cell(table, args.against, short) if getattr(args, "against", None) else None
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
    ax.set_title(figure_title(args.metric, [sweep_name(f) for f in folders], shared), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, args.output, wandb_key="analysis/accuracy_per_epoch")
    if shared:
        print(f"Settings every cell shares, left out of the labels: {' '.join(shared)}", flush=True)
    print(per_epoch_table(table, args.metric, against), flush=True)
    return means
