""":func:`compare`, the Python API of the comparison runner: check the input, plan the runs, run them through a
launcher (:mod:`.runner`) and write ``runs.csv``, ``summary.md`` and the curves (:mod:`..report`)."""
from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ...utils.arguments import apply_deprecated_names, option_group
from ...utils.paths import check_output_folder
from ...utils.progress import plural
from ..report import (curve_groups, distinct_labels, log_to_wandb, plot_validation_curves, row_of, summary_markdown,
                      write_csv)
from ..param_match import cell_name
from .planning import (Budget, CompareError, Counters, RunSpec, check_arguments, check_cell, check_models,
                       default_monitor, label_parts, mode_of, parse_vary, plan)
from .options import DEPRECATED_NAMES, GROUPS, Launch, Matching, RunOptions, Selection
from .folders import Resume, check_resumable, finished, saved_budget
from .runner import LocalLauncher, run_specs

CellSpec = Union[str, Dict[str, Any]]


def check_match_params(match_params: Optional[Union[int, str]], hidden_size: Optional[int], grid: List) -> None:
    """``--match-params`` is a number or CELL@HIDDEN of a known cell, and nothing else sets the hidden size."""
    if match_params is None:
        return
    if hidden_size is not None:
        raise CompareError("--match-params and --hidden-size both set the hidden size; give one of them.")
    if any(k.endswith("hidden_size") for k, _ in grid):
        raise CompareError("--match-params chooses the hidden size, --vary also varies it; drop one of them.")
    if not re.fullmatch(r"\s*([^@\s]+@\d+|\d+(\.\d+)?([eE]\d+)?)\s*", str(match_params)):
        raise CompareError(f"--match-params {match_params!r} is neither a number nor CELL@HIDDEN with an integer "
                           "hidden size; use e.g. 120000 or GRU@256.")
    if "@" in str(match_params):
        try:
            check_cell(str(match_params).strip().rpartition("@")[0])
        except CompareError as error:
            raise CompareError(str(error).replace("--cells", f"--match-params {match_params!r}", 1)) from None


def option_key(token: str) -> Optional[str]:
    """The dotted key a command-line token sets (``--model.init_args.cell=GRU`` → ``model.cell``: the ``init_args``
    level is optional on the command line), or ``None`` for a value."""
    if not token.startswith("--"):
        return None
    return ".".join(part for part in token[2:].split("=", 1)[0].split(".") if part != "init_args")


def runner_keys(hidden_set: bool) -> Dict[str, Tuple[str, str]]:
    """What the runner sets for each run, by :func:`option_key`: its option and what another value for every run
    would do."""
    owned = {"seed_everything": ("--seeds / --seed-list", "the same seed"),
             "run_dir": ("--out", "the same folder"),
             "model.cell": ("--cells", "the same cell"),
             **{f"trainer.{name}": ("--budget", "a budget other than --budget's") for name in
                ("max_epochs", "max_steps", "max_time")}}
    if hidden_set:
        owned["model.hidden_size"] = ("--hidden-size / --match-params", "the same hidden size")
    return owned


def check_extra(extra: Sequence[str], hidden_set: bool, grid_keys: Sequence[str]) -> None:
    """The arguments after ``--`` reach every run after the runner's own, so one that sets what the runner sets per
    run (its seed, folder, budget, cell, hidden size, a ``--vary`` key) would silently give every run the same value:
    three seeds one seed, two cells one cell. Refused, naming the runner's option for it; so is a ``--vary`` key of
    the runner's (its values came after the runner's and won too)."""
    owned = runner_keys(hidden_set)
    for key in grid_keys:
        if option_key(f"--{key}") in owned:
            option = owned[option_key(f"--{key}")][0]
            fix = {"--cells": "name each cell in --cells",
                   "--budget": "run one compare per budget (a longer --budget goes on from the finished runs)"}.get(
                option, f"drop {option} or the --vary")
            raise CompareError(f"--vary {key} varies what compare sets for each run with {option}; {fix}.")
    owned.update({option_key(f"--{key}"): ("--vary", f"the same {key}") for key in grid_keys})
    for token in extra:
        key = option_key(str(token))
        if key in owned:
            option, effect = owned[key]
            raise CompareError(f"{str(token).split('=', 1)[0]} after -- would override what compare sets for each run "
                               f"with {option}, giving every run {effect}; drop it and use {option}.")


def check_cells(cells: Sequence[CellSpec]) -> List[Any]:
    """The cells as the runner takes them (:func:`.planning.check_cell`); at least one, none named twice (the same
    class with the same options, whatever the spelling: ``GRU gru``, options in another order)."""
    if not cells:
        raise CompareError("--cells is empty; name at least one cell, e.g. --cells GRU MuFuRU.")
    checked = [check_cell(c) if isinstance(c, str) else c for c in cells]
    seen: Dict[str, CellSpec] = {}
    for given, cell in zip(cells, checked):
        key = cell_key(cell)
        if key in seen:
            raise CompareError(f"--cells names one cell twice ({shown(seen[key])} and {shown(given)}); give each cell "
                               "once (--seeds sets how many runs each cell gets).")
        seen[key] = given
    return checked


def cell_key(cell: Any) -> str:
    """A cell spec with its name resolved to the registered class and its options in a fixed order."""
    if isinstance(cell, dict):
        options = {k: cell_key(v) if isinstance(v, (str, dict)) and k == "cell" else v
                   for k, v in (cell.get("init_args") or {}).items()}
        return json.dumps([cell_name(cell), options], sort_keys=True, default=str)
    return cell_name(cell)


def shown(cell: CellSpec) -> str:
    """A cell as the user gave it, quoted."""
    return repr(cell) if isinstance(cell, str) else repr(json.dumps(cell, sort_keys=True))


def check_seeds(seeds: Union[int, Sequence[int]]) -> List[int]:
    """Seeds 1..N for a count, else the list given; at least one."""
    seed_list = list(range(1, seeds + 1)) if isinstance(seeds, int) else list(seeds)
    if not seed_list or (isinstance(seeds, int) and seeds < 1):
        raise CompareError("--seeds must be 1 or more.")
    twice = sorted({seed for seed in seed_list if seed_list.count(seed) > 1})
    if twice:
        raise CompareError(f"--seed-list names seed {twice[0]} twice; give each seed once (a seed's run is the same "
                           "run).")
    return seed_list


def shown_labels(results: List[Dict[str, Any]]) -> Tuple[Dict[str, str], List[str]]:
    """The cells' labels for the table and the curves: ``{run's cell label: the label shown}``, each keeping
    only the options that differ between the cells (``GRUDT-transition_depth=0`` beside
    ``GRUDT-transition_depth=1-share_transition=True`` when both have ``layer_norm=True``), and the options every
    cell shares. ``runs.csv`` and the run folders keep the full labels."""
    parts = {}
    for r in results:
        spec = r.get("cell_spec") or r["cell"]
        parts[r["cell"]] = (*label_parts(spec, r["cell"]), ())
    return distinct_labels(parts)


def write_outputs(out: Path, config: str, budget: Budget, monitor: str, grid_keys: List[str],
                  results: List[Dict[str, Any]], no_wandb: bool) -> List[Dict[str, Any]]:
    """``runs.csv``, ``summary.md`` and the two curve PNGs of the results (in the plan's order); the CSV's rows."""
    rows = [row_of(r) for r in results]
    if not rows:
        return rows
    write_csv(rows, out / "runs.csv")
    labels, shared = shown_labels(results)
    (out / "summary.md").write_text(summary_markdown([{**row, "cell": labels[row["cell"]]} for row in rows], config,
                                                     str(budget), monitor, grid_keys, mode=results[0].get("mode"),
                                                     shared=shared))
    groups = curve_groups([{**r, "cell": labels[r["cell"]]} for r in results], grid_keys)
    title = f"{Path(config).parent.name}/{Path(config).name}, budget {budget}: validation {monitor}"
    title += f"; every cell: {' '.join(shared)}" if shared else ""
    images = plot_validation_curves(groups, monitor, title, out)
    if not no_wandb:
        log_to_wandb(out, config, rows, images)
    return rows


def compare(config: str, cells: Sequence[CellSpec], seeds: Union[int, Sequence[int]] = 3,
            budget: Union[str, Budget] = "epochs=10", out: Union[str, Path] = "runs/compare", *,
            vary: Sequence[str] = (), matching: Union[Matching, Mapping[str, Any], None] = None,
            selection: Union[Selection, Mapping[str, Any], None] = None,
            runs: Union[RunOptions, Mapping[str, Any], None] = None,
            launch: Union[Launch, Mapping[str, Any], None] = None, log: Any = None,
            failed: Optional[List[str]] = None, **deprecated: Any) -> List[Dict[str, Any]]:
    """Run (or reuse the finished runs of) a comparison and write its CSV, table and plots; the CSV's rows.

    ``seeds`` is a count (seeds 1..N) or a list; ``cells`` are names or ``Name(key=value,...)`` strings or
    ``{class_path, init_args}`` dicts; ``vary`` the grid (``KEY=V1,V2`` each). The option groups
    (:mod:`.options`): ``matching`` (hidden sizes), ``selection`` (the monitored metric), ``runs`` (what every run
    gets) and ``launch`` (the launcher, default a :class:`.runner.LocalLauncher` running ``launch.jobs`` at once on
    this machine); the flat names of before (``hidden_size=``, ``jobs=``, ...) still work, with one deprecation
    line each. Failed runs are reported on ``log`` (default: the current ``sys.stderr``), left out of the rows and
    their ids appended to ``failed`` when given."""
    log = sys.stderr if log is None else log
    groups = apply_deprecated_names("compare", DEPRECATED_NAMES, deprecated, {
        name: option_group(GROUPS[name], value, name)
        for name, value in (("matching", matching), ("selection", selection), ("runs", runs), ("launch", launch))})
    matching, selection, runs, launch = (groups[n] for n in ("matching", "selection", "runs", "launch"))
    check_input(config, out)
    cells = check_cells(cells)
    launcher = launch.launcher or LocalLauncher(launch.jobs, progress_every=launch.progress_every)
    budget = budget if isinstance(budget, Budget) else Budget.parse(budget)
    grid = parse_vary(vary)
    check_match_params(matching.match_params, matching.hidden_size, grid)
    seed_list = check_seeds(seeds)
    check_extra(runs.extra, matching.hidden_size is not None or matching.match_params is not None, [k for k, _ in grid])
    if runs.keep_epoch_checkpoints and not runs.test_every_epoch:
        raise CompareError("--keep-epoch-checkpoints keeps the epochs' checkpoints that --test-every-epoch writes; "
                           "add --test-every-epoch, or drop --keep-epoch-checkpoints.")
    monitor, mode = monitor_and_mode(config, selection)
    out = Path(out)
    match_params = None if matching.match_params is None else str(matching.match_params)
    counters: Counters = {}
    specs = plan(config, cells, seed_list, budget, out, grid, matching.hidden_size, match_params, monitor, mode,
                 runs.extra, runs.test_every_epoch, runs.no_wandb, log,
                 keep_epoch_checkpoints=runs.keep_epoch_checkpoints, counters=counters)
    check_arguments(specs)
    if not launch.dry_run:  # a dry run parses only: it shows the plan on a fresh clone, data or hub out of reach
        to_train = [s for s in specs if not finished(Path(s.folder))]  # a rerun over finished runs needs no data
        check_models(to_train, counters, local=isinstance(launcher, LocalLauncher))
    counters.clear()  # the models built to check the plan: not held while the runs train
    if launch.dry_run:
        say_plan(specs, check_resumable(specs), log)
        return []
    out.mkdir(parents=True, exist_ok=True)
    failed = [] if failed is None else failed
    results = run_specs(specs, runs.env, log, failed, launcher)
    rows = write_outputs(out, config, budget, monitor, [k for k, _ in grid], results, runs.no_wandb)
    if failed:
        print(f"compare: {len(failed)} of {len(specs)} runs failed ({', '.join(failed)}); rerun the same command "
              "to retry them, after fixing what an error above names (finished runs are kept).", file=log, flush=True)
    return rows


def say_plan(specs: Sequence[RunSpec], resumes: Mapping[str, Resume], log: Any) -> None:
    """A dry run's output: each run's id and the command line that trains it as a run would (without the
    runner's own additions: the time limit, the resumed checkpoint, the per-epoch tests); a run that finished
    earlier is named as kept, one that goes on from a checkpoint says which (``resumes``:
    :func:`.folders.check_resumable`, which has refused folders made with other settings)."""
    kept = 0
    for i, spec in enumerate(specs, 1):
        folder, resume = Path(spec.folder), resumes.get(spec.folder)
        if finished(folder) and resume is None:
            kept += 1
            print(f"compare: [{i}/{len(specs)}] {spec.run_id}: finished earlier, kept", file=log, flush=True)
            continue
        status = "" if resume is None else (
            f" (finished {saved_budget(folder)} earlier; goes on to {spec.budget} from {resume[0]})"
            if finished(folder) else f" (resumes from {resume[0]})")
        print(f"compare: [{i}/{len(specs)}] {spec.run_id}{status}: python -m lit_rnncells fit "
              f"{' '.join(shlex.quote(a) for a in spec.cli_args())}", file=log, flush=True)
    planned = f"{plural(len(specs), 'run')} planned" + (f" ({kept} finished earlier and kept)" if kept else "")
    print(f"compare: dry run: {planned} and their arguments parsed; nothing was run or written.", file=log,
          flush=True)


OUTPUT_FILES = ("runs.csv", "summary.md", "curves_steps.png", "curves_seconds.png")
"""What a comparison writes into ``--out`` beside its run folders (:func:`write_outputs`), rewritten by each rerun."""


def check_input(config: str, out: Union[str, Path]) -> None:
    """The config exists and the output folder can be written (one :class:`.planning.CompareError` if not): a
    folder that holds files of a comparison's names but no comparison's runs is the user's, not rewritten."""
    if not Path(config).is_file():
        raise CompareError(f"The config {config!r} does not exist; pass the path of a task config, e.g. "
                           "configs/logic/gru.yaml.")
    try:
        check_output_folder(out, "--out")
    except OSError as error:
        raise CompareError(str(error)) from None
    folder = Path(out)
    held = [name for name in OUTPUT_FILES if (folder / name).exists()]
    if held and not any(folder.glob("*/spec.json")):
        raise CompareError(f"--out {str(out)!r} holds {', '.join(held)} but no comparison's runs, so not files a "
                           "comparison wrote; choose another --out: the comparison would write over them.")


def monitor_and_mode(config: str, selection: Selection) -> Tuple[str, str]:
    """The monitored metric (default: the config's task's) and whether lower or higher is better."""
    monitor, mode = selection.monitor, selection.mode
    if monitor is None:
        monitor, default_mode = default_monitor(config)
        mode = mode or default_mode
    return monitor, mode or mode_of(monitor)
