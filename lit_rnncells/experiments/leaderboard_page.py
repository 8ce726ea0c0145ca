"""The leaderboard's page: a cells x tasks table (mean ± std over seeds, the paper's figure where one exists),
the ranks per task as a heatmap (PNG beside the page), and each task's learning curves (the runner's plot).

Every number comes from the rows of the tasks' ``runs.csv`` (:func:`lit_rnncells.experiments.report.row_of`),
formatted as the comparison runner formats them (:func:`lit_rnncells.experiments.report.mean_std`)."""
from __future__ import annotations

import math
import os
import re
import shlex
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from .compare import cell_label, check_cell
from .leaderboard_tasks import TASKS, Task
from .report import mean_std, number
from .reproduce import spec_label
from .seed_spread import ALPHA, SeedResult, p_value, welch_p


@dataclass
class TaskResult:
    """One task's comparison: its rows of ``runs.csv``, folder, budget and parameter target."""

    task: Task
    rows: List[Dict[str, Any]]
    folder: Path
    budget: str
    target: str


@dataclass
class Entry:
    """One cell on one task: the metric over seeds (shown scale), the paper's figure, the model's size."""

    values: List[float]
    hidden: Optional[int] = None
    params: Optional[int] = None
    steps: Optional[float] = None
    seconds: Optional[float] = None
    paper: Optional[float] = None
    rank: Optional[int] = None

    @property
    def mean(self) -> Optional[float]:
        return statistics.fmean(self.values) if self.values else None

    def shown(self) -> str:
        """``mean ± std`` (the std from two seeds on), ``–`` without runs; the paper's figure after it."""
        text = mean_std(self.values) if self.values else "–"
        return text + (f" (paper {number(self.paper)})" if self.paper is not None else "")


def paper_figures(task: Task) -> Dict[str, float]:
    """The paper's value per runner cell label (``SatMZU-transition_depth=1``), from the task's experiment; also
    under the paper's own name of the cell where that is a label too (``GRU``: the experiment runs it as
    ``GRUDT(transition_depth=0, ...)`` with the paper's regularisers, a leaderboard as the plain ``GRU``)."""
    exp = task.experiment()
    if exp is None:
        return {}
    figures = {spec_label(spec): exp.paper[name] for spec, name in exp.cells.items() if exp.paper.get(name) is not None}
    for name, value in exp.paper.items():
        if value is not None and re.fullmatch(r"\w+", name):
            figures.setdefault(name, value)
    return figures


def entries(result: TaskResult, cells: Sequence[str]) -> Dict[str, Entry]:
    """Per cell spec: its entry on the task, ranked (1: best; equal means share the better rank)."""
    task, figures = result.task, paper_figures(result.task)
    found: Dict[str, Entry] = {}
    for spec in cells:
        label = cell_label(check_cell(spec))
        rows = [r for r in result.rows if r["cell"] == label]
        values = [float(r[task.metric]) * task.scale for r in rows if r.get(task.metric) not in (None, "")]
        found[spec] = Entry(values, rows[0]["hidden_size"] if rows else None, rows[0]["params"] if rows else None,
                            statistics.fmean(float(r["steps"]) for r in rows) if rows else None,
                            statistics.fmean(float(r["seconds"]) for r in rows) if rows else None,
                            figures.get(label))
    means = {spec: e.mean for spec, e in found.items() if e.mean is not None and math.isfinite(e.mean)}
    sign = 1 if task.lower_is_better else -1
    for spec, mean in means.items():
        found[spec].rank = 1 + sum(1 for other in means.values() if sign * other < sign * mean)
    return found


def mean_rank(spec: str, table: Sequence[Dict[str, Entry]]) -> Optional[float]:
    ranks = [t[spec].rank for t in table if t[spec].rank is not None]
    return statistics.fmean(ranks) if ranks else None


def plot_ranks(cells: Sequence[str], results: Sequence[TaskResult], table: Sequence[Dict[str, Entry]],
               output: Path) -> Path:
    """The ranks per task as a heatmap (rows: cells, best mean rank first; columns: tasks), each square
    annotated with its rank and the mean it ranks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ranks = np.array([[t[c].rank if t[c].rank is not None else np.nan for t in table] for c in cells], dtype=float)
    fig, ax = plt.subplots(figsize=(1.9 * len(results) + 2.6, 0.5 * len(cells) + 1.3))
    image = ax.imshow(ranks, cmap="RdYlGn_r", vmin=1, vmax=max(len(cells), 2), aspect="auto")
    for i, cell in enumerate(cells):
        for j, t in enumerate(table):
            entry = t[cell]
            text = "no run" if entry.rank is None else f"{entry.rank}  ({number(entry.mean)})"
            ax.text(j, i, text, ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(results)), [f"{r.task.name}\n{r.task.metric_label()}" for r in results], fontsize=8)
    ax.set_yticks(range(len(cells)), list(cells), fontsize=8)
    ax.set_title("Rank per task (1 = best; mean over seeds in brackets)", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02).set_label("rank", fontsize=8)
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=90)
    plt.close(fig)
    return small_png(output, output)


def small_png(source: Path, target: Path) -> Path:
    """``source`` saved as ``target`` with a 64-colour palette: the same plot at about a quarter of the bytes, so
    pages kept in a repository stay small."""
    from PIL import Image

    with Image.open(source) as image:
        palette = image.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    palette.save(target, optimize=True)
    return target


def machine() -> str:
    """This machine in words: the CPU cores this process may use, and its GPU, if any."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        import torch

        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    except Exception:  # noqa: BLE001 - a broken CUDA set-up still writes the page
        gpu = "no GPU"
    return f"{cores} CPU cores, {gpu}"


def p_versus(entry: Entry, first: Optional[Entry]) -> str:
    """Welch's p of ``entry`` against the rank-1 ``first`` (``within`` where the seeds do not separate them)."""
    if first is None or entry is first or entry.rank is None:
        return "–"
    p = welch_p(SeedResult.of(entry.values), SeedResult.of(first.values))
    if p is None:
        return "–"
    return p_value(p) + (" (within)" if p >= ALPHA else "")


def task_section(result: TaskResult, cells: Sequence[str], entry_of: Dict[str, Entry], curves: Optional[Path],
                 seeds: Sequence[int]) -> List[str]:
    """A task's settings, its per-cell sizes and numbers, and its curves."""
    task = result.task
    extra = f" with `{' '.join(map(shlex.quote, task.extra))}`" if task.extra else ""
    lines = [f"## {task.name}: {task.title}", "",
             f"Config `{task.config}`{extra}; budget `{result.budget}` per run; parameters matched to "
             f"`{result.target}`; metric `{task.metric}`{f' ×{task.scale:g}' if task.scale != 1 else ''} "
             f"({'lower' if task.lower_is_better else 'higher'} is better) of the best-validation checkpoint; runs in "
             f"`{result.folder}`.", "",
             f"| cell | hidden | params | n of {len(seeds)} | {task.metric_label()} | rank | p vs rank 1 | steps | "
             "seconds |",
             "|---|---|---|---|---|---|---|---|---|"]
    first = next((entry_of[spec] for spec in cells if entry_of[spec].rank == 1), None)
    for spec in cells:
        e = entry_of[spec]
        lines.append(f"| {spec} | {e.hidden if e.hidden is not None else '–'} | "
                     f"{f'{int(e.params):,}' if e.params is not None else '–'} | {len(e.values)} | {e.shown()} | "
                     f"{e.rank if e.rank is not None else '–'} | {p_versus(e, first)} | "
                     f"{number(e.steps) if e.steps is not None else '–'} | "
                     f"{number(e.seconds) if e.seconds is not None else '–'} |")
    lines += ["", f"p vs rank 1: Welch's t-test over seeds against the best mean; from {ALPHA:g} up the seeds do "
              "not separate the two cells (within the spread), – under 2 seeds.", ""]
    if curves is not None:
        lines += [f"![{task.name} validation curves]({curves.name})", ""]
    return lines


PAGE_TITLE = "# Cell leaderboard: "
"""How a leaderboard page begins: a page that does not is a user's file, never written over."""


def check_page(page: Path) -> None:
    """``page`` is new or a page the leaderboard wrote (it rewrites those); any other file there is the user's."""
    if not page.is_file():
        return
    with open(page, encoding="utf-8", errors="replace") as handle:
        first = handle.readline()
    if not first.startswith(PAGE_TITLE):
        raise ValueError(f"--page {str(page)!r} is a file of yours, not a leaderboard page (its first line is not "
                         f"'{PAGE_TITLE}...'); choose another --page: writing the page there would replace it.")


def write_page(page: Path, results: Sequence[TaskResult], cells: Sequence[str], seeds: Sequence[int], command: str,
               paper_command: str = "") -> Path:
    """Write the leaderboard page and its PNGs (``<stem>_ranks.png``, ``<stem>_<task>_curves.png``) beside it."""
    page.parent.mkdir(parents=True, exist_ok=True)
    table = [entries(r, cells) for r in results]
    order = sorted(cells, key=lambda c: (mean_rank(c, table) is None, mean_rank(c, table) or 0.0))
    ranks_png = plot_ranks(order, results, table, page.parent / f"{page.stem}_ranks.png")
    runs = sum(len(r.rows) for r in results)
    seconds = sum(float(row["seconds"]) for r in results for row in r.rows)
    budgets = "; ".join(f"{r.task.name} `{r.budget}`" for r in results)
    lines = [f"{PAGE_TITLE}{len(cells)} cell{'s' * (len(cells) != 1)} x {len(results)} "
             f"task{'s' * (len(results) != 1)}", "",
             f"Written by `{command}`; rerunning it resumes (finished runs are kept) and writes this page again.", "",
             f"**Budget** per run: {budgets}; seeds {', '.join(map(str, seeds))}; parameters matched per task "
             f"(sizes in each task's section). Measured on {machine()}: {runs} runs, {seconds / 60:.1f} minutes of "
             "training (validation included, tests not).", "",
             "| cell | " + " | ".join(f"{r.task.name}: {r.task.metric_label()}" for r in results) + " | mean rank |",
             "|---|" + "---|" * (len(results) + 1)]
    for spec in order:
        rank = mean_rank(spec, table)
        lines.append(f"| {spec} | " + " | ".join(t[spec].shown() for t in table) +
                     f" | {f'{rank:.2f}' if rank is not None else '–'} |")
    lines += ["", "Each entry: the mean ± sample std over seeds of the task's test metric, measured on each run's "
              "best-validation checkpoint; a cell without a finished run shows –. In brackets, the paper's figure "
              "where the paper reports one for that cell: the papers train far longer at larger sizes, so compare "
              "orderings, not values. Cells are ordered by their mean rank over the tasks. In each task's table, seconds "
              "are the wall-clock seconds of a fit (validation included) on this machine, with whatever else it ran.",
              "",
              f"![Ranks per task]({ranks_png.name})", ""]
    for result, entry_of in zip(results, table):
        curves = None
        if (result.folder / "curves_steps.png").is_file():
            curves = page.parent / f"{page.stem}_{result.task.name}_curves.png"
            small_png(result.folder / "curves_steps.png", curves)
        lines += task_section(result, order, entry_of, curves, seeds)
    if paper_command:
        lines += ["## At the papers' sizes", "", paper_command, ""]
    lines += usage_section()
    page.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return page


def usage_section() -> List[str]:
    """How to run a leaderboard: the tasks ``--tasks`` names and the options."""
    lines = ["## Tasks and options", "",
             "`--tasks` names the tasks below; each runs its config with the CPU-size arguments of the task table "
             "(`lit_rnncells/experiments/leaderboard_tasks.py`), every cell matched to the target's parameters; "
             "`--paper-sizes` runs each config unchanged. The paper's figures are read from the reproduction "
             "experiments (`python -m lit_rnncells.reproduce`).", "",
             "| task | config | metric | parameters of (CPU size) | paper figures |", "|---|---|---|---|---|"]
    for task in TASKS.values():
        exp = task.experiment()
        source = f"`{task.figure[0]}/{task.figure[1]}`: {exp.title}" if exp is not None and task.figure else "–"
        lines.append(f"| {task.name} | `{task.config}` | {task.metric_label()} | `{task.match_params}` | {source} |")
    lines += ["", "- `--cells`: registered names, `Name(key=value,...)`, or a cell of your own module by its import "
              "path, `package.module:Class` (the module importable from the current folder or `PYTHONPATH`).",
              "- `--budget` and `--match-params`: one `VALUE` for every task and `TASK:VALUE` for one task, e.g. "
              "`--budget steps=300 ptb_char:steps=100`; a budget is `epochs=N`, `steps=N` or `time=SECONDS`, a "
              "target a number or `CELL@HIDDEN`.",
              "- `--seeds N` (seeds 1..N) or `--seed-list ...`; `--out` holds the runs, one comparison per task "
              "(`runs.csv`, `summary.md`, curves), and a rerun keeps every finished run; `--page` is this page, its "
              "PNGs written beside it (a file there that is not a leaderboard page is refused, never written over).",
              ""]
    return lines
