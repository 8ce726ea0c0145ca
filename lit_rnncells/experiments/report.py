"""What a comparison writes: ``runs.csv``, the mean ± std table, learning curves as PNG, and the W&B log."""
from __future__ import annotations

import csv
import json
import math
import os
import statistics
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..utils.loggers import wandb_configured
from .seed_spread import ALPHA, SeedResult, p_text, welch_p

RESULT_FILE = "result.json"
CURVES_FILE = "curves.json"


def row_of(result: Dict[str, Any]) -> Dict[str, Any]:
    """The ``runs.csv`` row of a run's ``result.json``."""
    monitor = result["monitor"]
    row: Dict[str, Any] = {"run_id": result["run_id"], "cell": result["cell"], "seed": result["seed"]}
    row.update({k: v for k, v in result["grid"].items()})
    row.update(hidden_size=result["hidden_size"], params=result["params"],
               params_target=(result.get("match") or {}).get("target", ""), budget=result["budget"],
               steps=result["steps"], epochs=result["epochs"], seconds=round(result["seconds"], 3),
               tokens_per_s=round(result["tokens_per_s"], 1))
    row[f"best {monitor}"] = result[f"best {monitor}"]
    row.update(result["test"])
    return row


def write_csv(rows: List[Dict[str, Any]], path: Path) -> None:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def number(x: float) -> str:
    """4 significant digits, no exponent for large values (12345 rather than 1.234e+04)."""
    return f"{x:.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def decimals(x: float) -> int:
    """The decimals :func:`number` shows for ``x`` at 4 significant digits (0 from 1000 up)."""
    if x == 0 or not math.isfinite(x) or abs(x) >= 1000:
        return 0 if x != 0 else 4
    return max(0, 3 - math.floor(math.log10(abs(x))))


def mean_std(values: List[float], count: bool = False) -> str:
    """``mean ± sample std``, both to the decimals of the mean at 4 significant digits (``0.7345 ± 0.0035``); a
    single value alone, to the same decimals (``0.5300``, not ``0.53``, beside another cell's ``0.5634``). A
    ``count`` (steps) shows whole numbers (``400 ± 0``) where its mean is whole."""
    mean = statistics.fmean(values)
    places = 0 if count and float(mean).is_integer() else decimals(float(f"{mean:.4g}"))  # 9.9996 shows as 10.00
    if len(values) == 1:
        return f"{mean:.{places}f}"
    return f"{mean:.{places}f} ± {statistics.stdev(values):.{places}f}"


def summary_markdown(rows: List[Dict[str, Any]], config: str, budget: str, monitor: str,
                     grid_keys: Sequence[str], mode: Optional[str] = None, shared: Sequence[str] = ()) -> str:
    """Mean ± sample std over seeds per cell and grid point, with n, hidden size and parameters; with the
    monitor's ``mode`` (``min``/``max``), below the table each grid point's best cell by the monitored metric and
    whether the seeds separate the others from it (:func:`separation_line`). ``shared``: the cell options every
    cell has, left out of the rows' labels (:func:`distinct_labels`), named once above the table."""
    metrics = [f"best {monitor}"] + sorted({k for r in rows for k in r if k.startswith("test/")})
    header = ["cell", *[k.rsplit(".", 1)[-1] for k in grid_keys], "hidden", "params", "n", *metrics, "steps",
              "seconds", "tokens/s"]
    common = f" Every cell has {' '.join(shared)}, left out of its label." if shared else ""
    lines = [f"Comparison of `{config}` at budget {budget}; mean ± sample std over seeds; the best-{monitor} "
             f"checkpoint of each run is tested.{common}", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    groups: Dict[Tuple[Any, ...], List[Dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["cell"], *[r[k] for k in grid_keys], r["hidden_size"]), []).append(r)
    for key, members in groups.items():
        cells = [str(k) for k in key[:-1]] + [str(key[-1]), f"{members[0]['params']:,}", str(len(members))]
        for m in metrics:
            values = [float(r[m]) for r in members if r.get(m) not in (None, "")]
            cells.append(mean_std(values) if values else "")
        cells += [mean_std([float(r["steps"]) for r in members], count=True),
                  mean_std([float(r["seconds"]) for r in members]),
                  mean_std([float(r["tokens_per_s"]) for r in members])]
        lines.append("| " + " | ".join(cells) + " |")
    if mode in ("min", "max"):
        points: Dict[Tuple[Any, ...], Dict[str, List[float]]] = {}
        for (cell, *point, hidden), members in groups.items():
            values = [float(r[f"best {monitor}"]) for r in members if r.get(f"best {monitor}") not in (None, "")]
            if values:
                at_point = points.setdefault(tuple(point), {})
                at_point[f"{cell} (hidden {hidden})" if cell in at_point else cell] = values
        extra = [separation_line(by_cell, monitor, mode, dict(zip(grid_keys, point)))
                 for point, by_cell in points.items() if len(by_cell) > 1]
        lines += [""] + extra if extra else []
    return "\n".join(lines) + "\n"


def separation_line(by_cell: Dict[str, List[float]], monitor: str, mode: str, point: Dict[str, Any]) -> str:
    """``Best val/loss: GRU; against it (Welch's t-test over seeds): CARU p = 0.012, MGU p = 0.41 (within the
    seeds' spread).`` for the cells of one grid point (their per-seed values of the monitored metric)."""
    seeds = {cell: SeedResult.of(values) for cell, values in by_cell.items()}
    best = (min if mode == "min" else max)(seeds, key=lambda c: seeds[c].mean)
    where = "".join(f" at {k.rsplit('.', 1)[-1]} {v}" for k, v in point.items())
    others = []
    for cell, result in seeds.items():
        if cell != best:
            p = welch_p(result, seeds[best])
            others.append(f"{cell} {p_text(p)}" + (" (within the seeds' spread)" if p is not None and p >= ALPHA
                                                   else ""))
    return f"- Best {monitor}{where}: {best}; against it (Welch's t-test over seeds): {', '.join(others)}."


def load_result(folder: Path) -> Dict[str, Any]:
    """A finished run's ``result.json``, read from ``folder`` and made to name it: a run folder moved or copied
    since (a whole comparison copied off a remote machine, runs gathered into one folder) keeps its curves and
    checkpoint path, which the file names by where the run was when it finished."""
    folder = Path(folder)
    result = json.loads((folder / RESULT_FILE).read_text())
    written = result.get("folder")
    result["folder"] = str(folder)
    checkpoint = result.get("checkpoint")
    if written and checkpoint and Path(checkpoint).is_relative_to(written):
        result["checkpoint"] = str(folder / Path(checkpoint).relative_to(written))
    return result


def grid_label(cell: str, grid: Dict[str, Any], keys: Optional[Sequence[str]] = None) -> str:
    """A run's label: its cell and its grid point's ``keys`` (default all), each by its last name part
    (``CapMZU gradient_clip_val=1.0``)."""
    return " ".join([cell] + [f"{k.rsplit('.', 1)[-1]}={grid[k]}" for k in (grid if keys is None else keys)])


def distinct_labels(runs: Dict[str, Tuple[str, Sequence[str], Sequence[str]]]) -> Tuple[Dict[str, str], List[str]]:
    """Short labels for a table of several cells: ``runs`` maps each full label to its cell's name, its
    ``key=value`` options and its grid point's (:func:`grid_label`'s parts). Each short label keeps the name and
    only the options and grid values that not every label shares (``GRUDT-transition_depth=0`` beside
    ``SatMZU-transition_depth=1``, both with ``layer_norm=True``). Returns ``{full label: short label}`` and the
    shared settings left out; the full labels unchanged where shortening would merge two of them."""
    options = [set(o) for _, o, _ in runs.values()]
    grids = [set(g) for _, _, g in runs.values()]
    shared_options = set.intersection(*options) if len(runs) > 1 else set()
    shared_grid = set.intersection(*grids) if len(runs) > 1 else set()
    short = {full: " ".join(["-".join([name, *(o for o in opts if o not in shared_options)]),
                             *(g for g in grid if g not in shared_grid)])
             for full, (name, opts, grid) in runs.items()}
    if len(set(short.values())) < len(short):
        return {full: full for full in runs}, []
    first_options, first_grid = next(iter(runs.values()))[1:] if runs else ((), ())
    return short, [o for o in first_options if o in shared_options] + [g for g in first_grid if g in shared_grid]


def curve_groups(results: List[Dict[str, Any]], grid_keys: Sequence[str]) -> Dict[str, List[Path]]:
    """Curve files of the seeds of each cell and grid point, by legend label."""
    groups: Dict[str, List[Path]] = {}
    for r in results:
        label = grid_label(r["cell"], r.get("grid", {}), grid_keys)
        groups.setdefault(label, []).append(Path(r["folder"]) / CURVES_FILE)
    return groups


def band(series: List[Tuple[List[float], List[float]]]) -> Tuple[Any, Any, Any, Any]:
    """Mean, min and max over seeds on the union of their x values (each seed interpolated inside its range)."""
    import numpy as np

    xs = np.unique(np.concatenate([np.asarray(x, dtype=float) for x, _ in series]))
    ys = np.full((len(series), len(xs)), np.nan)
    for i, (x, y) in enumerate(series):
        inside = (xs >= min(x)) & (xs <= max(x))
        ys[i, inside] = np.interp(xs[inside], x, y)
    keep = ~np.all(np.isnan(ys), axis=0)
    xs, ys = xs[keep], ys[:, keep]
    return xs, np.nanmean(ys, 0), np.nanmin(ys, 0), np.nanmax(ys, 0)


LINE_STYLES = ("-", "--", ":", "-.")
"""Line styles of the cells in a grid's figure, whose colours are the grid points."""


def line_styles(labels: Sequence[str]) -> Dict[str, Dict[str, str]]:
    """Matplotlib's colour and line style of each curve (label ``"<cell> <grid point>"``, :func:`curve_groups`):
    none without a grid (a colour per cell, matplotlib's cycle); in a grid a colour per grid point and a line style
    per cell, so that 7 hidden sizes of 2 cells do not repeat the cycle's 10 colours."""
    cells = list(dict.fromkeys(label.partition(" ")[0] for label in labels))
    points = list(dict.fromkeys(label.partition(" ")[2] for label in labels))
    if len(points) < 2:
        return {label: {} for label in labels}
    return {label: {"color": f"C{points.index(label.partition(' ')[2]) % 10}",
                    "linestyle": LINE_STYLES[cells.index(label.partition(" ")[0]) % len(LINE_STYLES)]}
            for label in labels}


def plot_curves(groups: Dict[str, List[Path]], x_key: str, metric: str, title: str, output: Path) -> Path:
    """Validation ``metric`` against ``x_key`` (steps or seconds): one line per group, mean over seeds,
    min–max band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = line_styles(list(groups))
    for label, paths in groups.items():
        series = []
        for path in paths:
            points = [p for p in json.loads(path.read_text())["validation"] if metric in p] if path.is_file() else []
            if points:
                series.append(([p[x_key] for p in points], [p[metric] for p in points]))
        if not series:
            continue
        xs, mean, low, high = band(series)
        line, = ax.plot(xs, mean, marker="o" if len(xs) < 30 else None, label=f"{label} (n={len(series)})",
                        **styles[label])
        ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.2)
    ax.set_xlabel("optimiser steps" if x_key == "step" else "wall-clock seconds since fit start")
    ax.set_ylabel(f"{metric} (mean over seeds, min–max band)")
    ax.set_title("\n".join(textwrap.wrap(title, 90)), fontsize=10)  # a long config path stays inside the figure
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(output, dpi=120)
    plt.close(fig)
    return output


def plot_validation_curves(groups: Dict[str, List[Path]], metric: str, title: str, folder: Path) -> List[Path]:
    """``curves_steps.png`` and ``curves_seconds.png`` in ``folder``: :func:`plot_curves` against both."""
    return [plot_curves(groups, "step", metric, title, folder / "curves_steps.png"),
            plot_curves(groups, "seconds", metric, title, folder / "curves_seconds.png")]


def log_to_wandb(out: Path, config: str, rows: List[Dict[str, Any]], images: List[Path]) -> None:
    """Log the table and the PNGs as one W&B run (``job_type=compare``) unless W&B is disabled."""
    if os.environ.get("WANDB_MODE") == "disabled":
        return
    try:
        import wandb
    except ImportError:
        return
    mode = "online" if wandb_configured() and os.environ.get("WANDB_MODE") not in ("offline", "dryrun") else "offline"
    run = wandb.init(project=os.environ.get("WANDB_PROJECT", "lit_rnncells"), job_type="compare",
                     name=f"compare-{out.name}", dir=str(out), mode=mode, config={"config": config})
    columns = list(dict.fromkeys(k for r in rows for k in r))
    run.log({"compare/runs": wandb.Table(columns=columns, data=[[r.get(c) for c in columns] for r in rows]),
             **{f"compare/{p.stem}": wandb.Image(str(p)) for p in images}})
    run.finish()
