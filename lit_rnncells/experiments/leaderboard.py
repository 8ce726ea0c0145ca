"""A leaderboard of recurrent cells: every chosen cell on every chosen task, at matched parameters, with seeds.

    python -m lit_rnncells.leaderboard --cells GRU CARU MuFuRU "SatMZU(transition_depth=1)" mycells.minimal:MyCell \\
        --tasks logic ptb_char --seeds 2 --budget steps=300 --out runs/leaderboard --page docs/leaderboard.md

Each task is one comparison through the comparison runner (:func:`lit_rnncells.experiments.compare.compare`,
in ``<out>/<task>``): the same runs, resumable the same way (a rerun keeps finished runs), the same
``runs.csv`` and curves. The page (:mod:`lit_rnncells.experiments.leaderboard_page`) is then written from the
runs: a cells x tasks table of mean ± std with the paper's figure where a paper reports one, the ranks per task as
a heatmap, and each task's learning curves. Tasks are named from :data:`leaderboard_tasks.TASKS`; a cell is a
registered name, ``Name(key=value,...)``, or the import path of a user's own cell (``package.module.Class`` or
``package.module:Class``). Everything given is checked, every task's arguments parsed and its parameters matched,
before the first run starts. See docs/leaderboard.md.
"""
from __future__ import annotations

import argparse
import io
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ..utils.paths import check_output_file, check_writable_folder
from . import compare as runner
from .compare import Budget, CompareError, Launch, Matching, RunOptions, check_cell, compare
from ..utils.arguments import OneLineParser
from .compare.launchers import check_local_launcher, slurm_launcher
from .compare.slurm_settings import add_slurm_options
from .leaderboard_page import TaskResult, check_page, write_page
from .leaderboard_tasks import TASKS, Task

DEFAULT_CELLS = ("GRU", "CARU", "MuFuRU", "SatMZU(transition_depth=1)")
DEFAULT_TASKS = ("logic", "ptb_char")


@dataclass
class Plan:
    """What a leaderboard runs: the tasks (each with its budget and parameter target), the cells and the seeds."""

    tasks: List[Task]
    cells: List[str]
    seeds: List[int]
    budgets: Dict[str, Budget]
    targets: Dict[str, str]
    out: Path
    jobs: int = 1
    """Runs at once on this machine, within each task (the runner's ``--jobs``)."""
    launcher_for: Optional[Callable[[Path], Any]] = None
    """The runner's launcher of a task's runs, given the task's folder (``None``: the local one, ``jobs`` at once)."""


def resolve_tasks(names: Sequence[Union[str, Task]]) -> List[Task]:
    """Tasks by name from :data:`TASKS` (or given as :class:`Task`); an unknown name is a :class:`CompareError`."""
    tasks: List[Task] = []
    for item in names:
        if isinstance(item, Task):
            tasks.append(item)
        elif item in TASKS:
            tasks.append(TASKS[item])
        else:
            raise CompareError(f"--tasks: unknown task {item!r}; use one of {', '.join(TASKS)}.")
    if not tasks:
        raise CompareError(f"--tasks is empty; name at least one of {', '.join(TASKS)}.")
    if len({t.name for t in tasks}) != len(tasks):
        raise CompareError("--tasks names a task twice; give each task once.")
    return tasks


def resolve_cells(specs: Sequence[str]) -> List[str]:
    """Cell specs as the runner takes them: an import path ``package.module:Class`` becomes
    ``package.module.Class`` (the form a config's ``class_path`` takes); each is checked by the runner's
    :func:`check_cell`, which imports a user's module."""
    if not specs:
        raise CompareError(f"--cells is empty; name at least one cell, e.g. --cells {' '.join(DEFAULT_CELLS[:2])}.")
    cells = [str(s).strip().replace(":", ".") if "(" not in str(s) else str(s).strip() for s in specs]
    for cell in cells:
        check_cell(cell)
    if len(set(cells)) != len(cells):
        raise CompareError("--cells names a cell twice; give each cell once.")
    return cells


def per_task(values: Sequence[str], tasks: Sequence[Task], option: str, default: Dict[str, str]) -> Dict[str, str]:
    """A value per task: ``default``, replaced by a plain ``VALUE`` (every task) and by ``TASK:VALUE`` (that task)."""
    names = [t.name for t in tasks]
    prefixed = [(head, rest) for head, sep, rest in (str(v).partition(":") for v in values)
                if sep and re.fullmatch(r"[A-Za-z_]\w*", head)]
    everywhere = [str(v) for v in values if not (":" in str(v) and re.fullmatch(r"[A-Za-z_]\w*", str(v).split(":")[0]))]
    if len(everywhere) > 1:
        raise CompareError(f"{option} gives {' and '.join(everywhere)} for every task; give one, and the others as "
                           f"TASK:VALUE (e.g. {names[0]}:{everywhere[1]}).")
    chosen = {name: everywhere[0] for name in names} if everywhere else dict(default)
    for head, rest in prefixed:
        if head not in names:
            known = f"a task --tasks chooses ({', '.join(names)})"
            raise CompareError(f"{option} {head}:{rest}: {head!r} is not {known}; write TASK:VALUE, and a cell's "
                               "import path as package.module.Class here.")
        chosen[head] = rest
    return chosen


def make_plan(cells: Sequence[str], tasks: Sequence[Union[str, Task]], seeds: Union[int, Sequence[int]],
              budget: Sequence[str], match_params: Sequence[str], out: Union[str, Path], paper_sizes: bool = False,
              jobs: int = 1, launcher_for: Optional[Callable[[Path], Any]] = None) -> Plan:
    """Check every input (no run starts) and return the :class:`Plan`; a mistake is a :class:`CompareError`."""
    chosen = resolve_tasks(tasks)
    if paper_sizes:
        chosen = [t.paper_sized() for t in chosen]
    cell_specs = resolve_cells(cells)
    seed_list = list(range(1, seeds + 1)) if isinstance(seeds, int) else list(seeds)
    if not seed_list or (isinstance(seeds, int) and seeds < 1):
        raise CompareError("--seeds must be 1 or more.")
    if int(jobs) < 1:
        raise CompareError(f"--jobs {jobs}: give 1 or more runs at once.")
    default_budget = {t.name: t.paper_budget() if paper_sizes else "steps=300" for t in chosen}
    budgets = {name: Budget.parse(text) for name, text in
               per_task(budget, chosen, "--budget", default_budget).items()}
    targets = {name: target.strip().replace(":", ".") for name, target in
               per_task(match_params, chosen, "--match-params", {t.name: t.match_params for t in chosen}).items()}
    try:
        check_writable_folder(out, "--out")
    except OSError as error:
        raise CompareError(str(error)) from None
    for task in chosen:
        if not task.config_path.is_file():
            raise CompareError(f"Task {task.name}: its config {task.config} does not exist.")
    return Plan(chosen, cell_specs, seed_list, budgets, targets, Path(out), int(jobs), launcher_for)


def check_tasks(plan: Plan) -> None:
    """Before any run: each task's runs are planned (parameters matched, which builds the task's data) and their
    CLI arguments parsed, by the runner's own :func:`plan` and :func:`check_arguments`."""
    for task in plan.tasks:
        config = str(task.config_path)
        monitor, mode = runner.default_monitor(config)
        try:
            specs = runner.plan(config, [check_cell(c) for c in plan.cells], plan.seeds, plan.budgets[task.name], plan.out / task.name, [],
                                None, plan.targets[task.name], monitor, mode, list(task.extra), False, True,
                                io.StringIO())
            runner.check_arguments(specs)
        except CompareError as error:
            raise CompareError(f"Task {task.name}: {error}") from None
        except ValueError as error:  # the matcher's one-sentence messages (a target no size reaches, ...)
            raise CompareError(f"Task {task.name}: {str(error).splitlines()[0]}") from None


def run_plan(plan: Plan, env: Optional[Dict[str, str]] = None, log: Any = None,
             failed: Optional[List[str]] = None) -> List[TaskResult]:
    """Every task's comparison through :func:`compare` (finished runs kept); the rows of each task's runs.csv."""
    log = sys.stderr if log is None else log
    results: List[TaskResult] = []
    launchers = {t.name: None if plan.launcher_for is None else plan.launcher_for(plan.out / t.name)
                 for t in plan.tasks}  # every task's launcher checked before the first run
    for i, task in enumerate(plan.tasks, 1):
        print(f"leaderboard: task {i}/{len(plan.tasks)} {task.name} ({len(plan.cells)} cells x {len(plan.seeds)} "
              f"seeds, budget {plan.budgets[task.name]}, parameters of {plan.targets[task.name]})", file=log,
              flush=True)
        task_failed: List[str] = []
        rows = compare(str(task.config_path), plan.cells, seeds=plan.seeds, budget=plan.budgets[task.name],
                       out=plan.out / task.name, matching=Matching(match_params=plan.targets[task.name]),
                       runs=RunOptions(extra=list(task.extra), no_wandb=True, env=env),
                       launch=Launch(launcher=launchers[task.name], jobs=plan.jobs), log=log, failed=task_failed)
        if failed is not None:
            failed += [f"{task.name}/{run_id}" for run_id in task_failed]
        results.append(TaskResult(task, rows, plan.out / task.name, str(plan.budgets[task.name]),
                                  plan.targets[task.name]))
    return results


def leaderboard(cells: Sequence[str] = DEFAULT_CELLS, tasks: Sequence[Union[str, Task]] = DEFAULT_TASKS,
                seeds: Union[int, Sequence[int]] = 3, budget: Sequence[str] = (), match_params: Sequence[str] = (),
                out: Union[str, Path] = "runs/leaderboard", page: Union[str, Path, None] = None,
                paper_sizes: bool = False, jobs: int = 1, launcher_for: Optional[Callable[[Path], Any]] = None,
                env: Optional[Dict[str, str]] = None, log: Any = None, failed: Optional[List[str]] = None,
                command: str = "") -> Path:
    """Check everything, run (or reuse) every task's comparison, write the page; returns the page's path.

    ``budget`` and ``match_params`` hold ``VALUE`` (every task) and ``TASK:VALUE`` entries; by default each task
    gets ``steps=300`` and its own CPU-size parameter target (with ``paper_sizes``: its config's ``max_epochs``
    and the config's own cell and hidden size). ``jobs`` runs of a task run at once (the runner's ``--jobs``);
    ``launcher_for(task_folder)``, when given, is the runner's launcher of that task's runs."""
    plan = make_plan(cells, tasks, seeds, budget, match_params, out, paper_sizes, jobs, launcher_for)
    page_path = Path(page) if page is not None else plan.out / "leaderboard.md"
    try:
        check_output_file(page_path, "--page")
        check_page(page_path)
    except (OSError, ValueError) as error:
        raise CompareError(str(error)) from None
    check_tasks(plan)
    results = run_plan(plan, env, log, failed)
    write_page(page_path, results, plan.cells, plan.seeds, command or default_command(plan, page_path),
               "" if paper_sizes else paper_size_text(plan))
    return page_path


def default_command(plan: Plan, page: Path) -> str:
    """The command line that writes this page (for a page written through the Python API)."""
    parts = ["python -m lit_rnncells.leaderboard", "--cells", *map(shlex.quote, plan.cells),
             "--tasks", *(t.name for t in plan.tasks), "--seed-list", *map(str, plan.seeds),
             "--budget", *(f"{n}:{b}" for n, b in plan.budgets.items()),
             *(["--jobs", str(plan.jobs)] if plan.jobs != 1 else []), "--out", str(plan.out),
             "--page", str(page)]
    return " ".join(parts)


def paper_size_text(plan: Plan) -> str:
    """The page's paragraph on running the same leaderboard at the papers' sizes, with its command."""
    sizes = "; ".join(f"{t.name} `{t.paper_budget()}` matched to `{t.paper_sized().match_params}`"
                      for t in plan.tasks)
    command = " ".join(["python -m lit_rnncells.leaderboard --paper-sizes", "--cells", *map(shlex.quote, plan.cells),
                        "--tasks", *(t.name for t in plan.tasks), "--seeds 3", "--jobs 8",
                        "--out runs/leaderboard-paper --page leaderboard-paper.md"])
    return ("`--paper-sizes` runs every task config as it is (the papers' sizes), each cell matched to the "
            f"parameters of the config's own model and trained for the config's own epochs ({sizes}). That needs "
            "GPUs; on a machine with 8 GPUs (`--jobs 8`: 8 runs at once, each on its own GPU):\n\n```\n" + command +
            "\n```")


# --- command line ---------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(allow_abbrev=False, prog="python -m lit_rnncells.leaderboard",
                              description=__doc__.split("\n\n")[0],
                              epilog="Tasks: " + ", ".join(TASKS) + ". See docs/leaderboard.md.")
    ap.add_argument("--cells", nargs="+", default=list(DEFAULT_CELLS),
                    help="registered names, Name(key=value,...), or a cell's import path package.module:Class "
                         f"(default {' '.join(DEFAULT_CELLS)})")
    ap.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS),
                    help=f"task names, of {', '.join(TASKS)} (default {' '.join(DEFAULT_TASKS)})")
    seeds = ap.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=int, default=3, help="run seeds 1..N (default 3)")
    seeds.add_argument("--seed-list", type=int, nargs="+", help="run exactly these seeds")
    ap.add_argument("--budget", nargs="+", default=[], metavar="[TASK:]KIND=N",
                    help="epochs=N, steps=N or time=SECONDS for every task, TASK:KIND=N for one (default steps=300; "
                         "with --paper-sizes each config's max_epochs)")
    ap.add_argument("--match-params", nargs="+", default=[], metavar="[TASK:]TARGET",
                    help="parameter target: a number or CELL@HIDDEN for every task, TASK:TARGET for one (default: "
                         "each task's own, e.g. logic GRU@8, ptb_char GRU@256)")
    ap.add_argument("--paper-sizes", action="store_true",
                    help="the task configs as they are (the papers' sizes): for GPUs, see docs/leaderboard.md")
    ap.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="runs at once within each task, each its own GPU or its share of the CPU threads (the "
                         "comparison runner's --jobs; default 1)")
    ap.add_argument("--out", default="runs/leaderboard", help="folder of the runs, one subfolder per task")
    ap.add_argument("--page", help="the markdown page to write, its PNGs beside it (default <out>/leaderboard.md)")
    add_slurm_options(ap)
    return ap


def launcher_factory(args: argparse.Namespace) -> Optional[Callable[[Path], Any]]:
    """The runner's launcher of each task's runs, from the launcher options (``None``: the local launcher;
    ``--launcher slurm``: each task folder's runs as Slurm jobs, as ``compare --launcher slurm``)."""
    if args.launcher == "slurm":
        return lambda folder: slurm_launcher(args, folder)
    check_local_launcher(args)
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:
        return 0 if stop.code == 0 else 2
    failed: List[str] = []
    command = " ".join(["python -m lit_rnncells.leaderboard", *map(shlex.quote, argv)])
    try:
        page = leaderboard(args.cells, args.tasks, args.seed_list or args.seeds, args.budget, args.match_params,
                           args.out, args.page, args.paper_sizes, args.jobs, launcher_factory(args), failed=failed,
                           command=command)
    except CompareError as error:
        return runner.error_exit(str(error))
    except runner.Interrupted as stop:
        print(f"leaderboard: {stop.signal_name} stopped run {stop.run_id}; rerun the same command to go on "
              "(finished runs are kept, unfinished ones resume from their checkpoints).", file=sys.stderr)
        return stop.code
    print(f"leaderboard: wrote {page}" + (f"; {len(failed)} runs failed ({', '.join(failed)}): rerun the same "
                                          "command to retry them" if failed else ""), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
