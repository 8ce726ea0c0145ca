"""What a comparison runs: the budget, the grid, the cells, and one :class:`RunSpec` per grid point x cell x seed.

Everything here is checked before any run starts; a user mistake is a :class:`CompareError` whose message is one
sentence naming the problem and the fix."""
from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from dataclasses import asdict, dataclass, field
from itertools import product
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import yaml

from ...cells.registry import cell_options, get_cell, no_cell_option_message
from ...command.errors import SAME_COMMAND_HELP, user_message
from ...command.run_folder import duration_text as max_time  # seconds as Lightning's max_time, DD:HH:MM:SS
from ..param_match import Match, ParamCounter, cell_name

BUDGET_KINDS = ("epochs", "steps", "time")
LOWER_IS_BETTER = ("loss", "bpc", "ppl", "perplexity", "error")


class CompareError(ValueError):
    """A user mistake in the runner's input; the message is one sentence naming the problem and the fix."""


@dataclass(frozen=True)
class Budget:
    """Equal epochs (``trainer.max_epochs``), optimiser steps (``trainer.max_steps``) or wall-clock seconds
    (``trainer.max_time``) for every run."""

    kind: str
    value: int

    @classmethod
    def parse(cls, text: str) -> "Budget":
        kind, sep, value = str(text).partition("=")
        if not sep or kind.strip() not in BUDGET_KINDS or not value.strip().isdigit() or int(value) < 1:
            raise CompareError(f"--budget {text!r} is not KIND=N with KIND one of {', '.join(BUDGET_KINDS)} and N a "
                               "positive integer; use e.g. epochs=20, steps=2000 or time=600.")
        return cls(kind.strip(), int(value))

    def cli_args(self) -> List[str]:
        if self.kind == "epochs":
            return ["--trainer.max_epochs", str(self.value), "--trainer.max_steps", "-1"]
        if self.kind == "steps":
            return ["--trainer.max_steps", str(self.value), "--trainer.max_epochs", "-1"]
        return ["--trainer.max_time", max_time(self.value), "--trainer.max_epochs", "-1", "--trainer.max_steps", "-1"]

    def __str__(self) -> str:
        return f"{self.kind}={self.value}"


def parse_vary(texts: Sequence[str]) -> List[Tuple[str, List[str]]]:
    """``KEY=V1,V2`` (repeatable) into ``[(key, [values])]``; a list value keeps its brackets: ``k=[1,2],[3,4]``."""
    grid: List[Tuple[str, List[str]]] = []
    for text in texts:
        key, sep, values = str(text).partition("=")
        key = key.strip().removeprefix("--")
        if not sep or not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+", key) or not values.strip():
            raise CompareError(f"--vary {text!r} is not KEY=V1,V2 with KEY a dotted CLI key; use e.g. "
                               "data.init_args.train_size=100,300,1000.")
        if key in (k for k, _ in grid):
            raise CompareError(f"--vary names {key} twice; give all its values in one --vary.")
        items = [v.strip() for v in re.findall(r"\[[^\]]*\]|[^,]+", values) if v.strip()]
        grid.append((key, items))
    return grid


def check_cell(spec: str) -> Any:
    """A cell from the command line: a registered name, or ``Name(key=value, ...)`` for cells that need options
    (``MultiChannel(cell=GRU,block_size=3)``); returns a name or a ``{class_path, init_args}`` dict."""
    text = str(spec).strip()
    found = re.fullmatch(r"([\w.]+)\((.*)\)", text)
    name = found.group(1) if found else text
    try:
        cls = get_cell(name)
    except ValueError as error:
        raise CompareError(f"--cells: {error}") from None
    if not found:
        return name
    init_args: Dict[str, Any] = {}
    accepted = cell_options(cls)
    for item in filter(None, (p.strip() for p in found.group(2).split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise CompareError(f"--cells {text!r}: options are key=value, e.g. MultiChannel(cell=GRU,block_size=3).")
        if key.strip() not in accepted:
            raise CompareError(f"--cells {text!r}: {no_cell_option_message(cls, key.strip())}")
        init_args[key.strip()] = yaml.safe_load(value)
    return {"class_path": name, "init_args": init_args}


def cell_settings(cell: Any) -> List[str]:
    """The ``key=value`` options of a cell spec as its label writes them (a nested cell by its own label);
    none for a bare class name."""
    if not isinstance(cell, dict):
        return []
    return [f"{k}={cell_label(v) if isinstance(v, dict) and 'class_path' in v else v}"
            for k, v in (cell.get("init_args") or {}).items()]


def cell_label(cell: Any) -> str:
    """A short, file-name-safe label of a cell spec: ``GRU``, ``MultiChannel-cell=GRU-block_size=3``."""
    return "-".join([cell_name(cell), *cell_settings(cell)])


def label_parts(spec: Any, label: str) -> Tuple[str, Tuple[str, ...]]:
    """A run's cell as the parts of its ``label`` (:func:`cell_label`): its name and options, for labels that
    leave out the options every cell shares (:func:`~lit_rnncells.experiments.report.distinct_labels`). A cell
    without a spec dict (a bare name, or an older result's label alone) is its label with no options."""
    return (cell_name(spec), tuple(cell_settings(spec))) if isinstance(spec, dict) else (label, ())


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "_", text).strip("_")


def default_monitor(config: str) -> Tuple[str, str]:
    """The validation metric a task is compared on when ``--monitor`` is not given: the loss for language
    models and seq2seq (val/loss, lower is better), accuracy for logic and classification."""
    text = Path(config).read_text()
    if "LanguageModel" in text or "Seq2Seq" in text:
        return "val/loss", "min"
    return "val/acc", "max"


def mode_of(metric: str) -> str:
    return "min" if metric.rsplit("/", 1)[-1].startswith(LOWER_IS_BETTER) else "max"


@dataclass
class RunSpec:
    """Everything one run needs; written to ``<run>/spec.json`` and read by the child process."""

    run_id: str
    folder: str
    config: str
    cell: Any  # None: the config's own cell
    seed: int
    grid: Dict[str, str]
    hidden_size: Optional[int]  # None: the config's own size
    budget: Optional[str]  # None: the config's own max_epochs / max_steps
    monitor: str
    mode: str
    test_every_epoch: bool = False
    no_wandb: bool = False
    extra: List[str] = field(default_factory=list)
    match: Optional[Dict[str, Any]] = None
    keep_epoch_checkpoints: bool = False  # not a setting of the run's results: a resume may change it

    def cli_args(self) -> List[str]:
        # --run_dir: the run's checkpoints and logs stay in its folder under --out (docs/runs.md)
        args = ["--config", self.config, "--seed_everything", str(self.seed), "--run_dir", self.folder]
        if self.budget:
            args += Budget.parse(self.budget).cli_args()
        if self.cell is not None:
            args += ["--model.init_args.cell", self.cell if isinstance(self.cell, str) else json.dumps(self.cell)]
        if self.hidden_size is not None:
            args += ["--model.init_args.hidden_size", str(self.hidden_size)]
        for key, value in self.grid.items():
            args += [f"--{key}", value]
        if self.no_wandb:
            args += ["--trainer.logger", "false"]
        return args + list(self.extra)


Counters = Dict[str, ParamCounter]
"""The model of each grid point, built once per comparison (:func:`point_counter`), by :func:`point_key`."""


def point_key(point: Dict[str, str]) -> str:
    return json.dumps(point, sort_keys=True)


def point_counter(config: str, point: Dict[str, str], extra: Sequence[str],
                  counters: Optional[Counters] = None) -> ParamCounter:
    """The config's model at one grid point, built through the CLI (``counters`` keeps it for the next caller);
    a user mistake in the config or its arguments is one sentence."""
    key = point_key(point)
    if counters is not None and key in counters:
        return counters[key]
    point_args = [a for k, v in point.items() for a in (f"--{k}", v)] + list(extra)
    try:
        counter = ParamCounter(config, point_args + ["--trainer.logger", "false"])
    except Exception as error:  # noqa: BLE001 - the CLI's one-sentence message for a user mistake
        message = user_message(error)
        if message is None:
            raise
        raise CompareError(f"The config with {' '.join(point_args) or 'no extra arguments'} is refused: "
                           f"{message}") from None
    if counters is not None:
        counters[key] = counter
    return counter


def match_point(config: str, cells: Sequence[Any], point: Dict[str, str], match_params: str,
                extra: Sequence[str], log: Any, counters: Optional[Counters] = None) -> Dict[str, Match]:
    """The hidden size of each cell whose parameters come nearest ``match_params`` at one grid point, by label."""
    counter = point_counter(config, point, extra, counters)
    target = counter.target(match_params)
    matches = {cell_label(cell): counter.match(cell, target) for cell in cells}
    check_within_reach(counter, cells, matches, match_params)
    where = "".join(f"{k}={v} " for k, v in point.items())
    for match in matches.values():
        print(f"compare: {where}{match.describe()}", file=log, flush=True)
    return matches


MATCH_TOLERANCE = 0.05
"""A parameter target more than this far below a cell's smallest model is refused (too far to compare at)."""


def check_within_reach(counter: ParamCounter, cells: Sequence[Any], matches: Dict[str, Match],
                       match_params: str) -> None:
    """Refuse a target below what a cell reaches: its smallest model more than 5 % above the target (as the matcher
    refuses a target above what the largest size reaches). Coarse steps between sizes are kept, and printed."""
    floors = []
    for cell in cells:
        match = matches[cell_label(cell)]
        if match.gap > MATCH_TOLERANCE and not any(counter.count(cell, h) is not None
                                                   for h in range(1, match.hidden_size)):
            floors.append(match)
    if floors:
        first = floors[0]
        least = max(m.params for m in floors)
        raise CompareError(f"--match-params {match_params}: no hidden size of {first.cell} comes within "
                           f"{MATCH_TOLERANCE:.0%} of {first.target:,} parameters (its smallest model (hidden "
                           f"{first.hidden_size}) has {first.params:,}); give a target of at least {least:,}, e.g. "
                           "GRU@8.")


def plan(config: str, cells: Sequence[Any], seeds: Sequence[int], budget: Budget, out: Path,
         grid: List[Tuple[str, List[str]]], hidden_size: Optional[int], match_params: Optional[str],
         monitor: str, mode: str, extra: Sequence[str], test_every_epoch: bool, no_wandb: bool,
         log: Any = None, *, keep_epoch_checkpoints: bool = False,
         counters: Optional[Counters] = None) -> List[RunSpec]:
    """Every grid point x cell x seed as a :class:`RunSpec`, hidden sizes matched per grid point (reported on
    ``log``, default the current ``sys.stderr``; the models built to match them kept in ``counters``)."""
    log = sys.stderr if log is None else log
    specs: List[RunSpec] = []
    keys = [k for k, _ in grid]
    for values in product(*[v for _, v in grid]):
        point = dict(zip(keys, values))
        matches = {} if match_params is None else match_point(config, cells, point, match_params, extra, log,
                                                              counters)
        for cell in cells:
            label = cell_label(cell)
            match = matches.get(label)
            hidden = match.hidden_size if match is not None else hidden_size
            for seed in seeds:
                parts = [label] + ([f"h{hidden}"] if hidden is not None else []) + \
                        [f"{k.rsplit('.', 1)[-1]}={re.sub(r'[][ ]', '', v).replace(',', '-')}"
                         for k, v in point.items()] + [f"s{seed}"]
                run_id = slug("-".join(parts))
                specs.append(RunSpec(run_id=run_id, folder=str(out / run_id), config=config, cell=cell, seed=seed,
                                     grid=point, hidden_size=hidden, budget=str(budget), monitor=monitor, mode=mode,
                                     test_every_epoch=test_every_epoch, no_wandb=no_wandb, extra=list(extra),
                                     match=None if match is None else {**asdict(match), "gap": match.gap},
                                     keep_epoch_checkpoints=keep_epoch_checkpoints))
    check_distinct(specs)
    return specs


def check_distinct(specs: Sequence[RunSpec]) -> None:
    """No two runs share a run folder (e.g. two ``--vary`` values written alike in a run id)."""
    seen: Dict[str, RunSpec] = {}
    for spec in specs:
        if spec.run_id in seen:
            raise CompareError(f"Two runs of the plan would share the run folder {spec.run_id} (grid points "
                               f"{seen[spec.run_id].grid} and {spec.grid}); give --vary values that differ in "
                               "letters or digits.")
        seen[spec.run_id] = spec


def check_arguments(specs: Sequence[RunSpec]) -> None:
    """Parse (without building anything) the CLI arguments of the first run of each config, grid point and cell, so
    a wrong ``--vary`` key, argument after ``--`` or cell option type is one sentence before any run starts, not a
    failure per run."""
    from ...cli import main  # the CLI sits above experiments: imported when a comparison is checked

    seen = set()
    for spec in specs:
        key = json.dumps([spec.config, spec.grid, spec.cell], sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        argv, sys.argv = sys.argv, sys.argv[:1]  # LightningCLI warns when the process has arguments of its own
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                main(spec.cli_args() + ["--print_config"], run=False, parser_kwargs={"exit_on_error": False})
        except SystemExit:  # --print_config parsed everything and stops
            pass
        except Exception as error:  # noqa: BLE001 - a parse error becomes the CLI's one-sentence message
            message = user_message(error)
            if message is None:
                raise
            own_help = f"run `python -m lit_rnncells fit --config {spec.config} --help` to see the options a run takes"
            message = message.replace(SAME_COMMAND_HELP, own_help)
            raise CompareError(f"The arguments of run {spec.run_id} are refused: {message}") from None
        finally:
            sys.argv = argv


def check_models(specs: Sequence[RunSpec], counters: Optional[Counters] = None, *, local: bool = False) -> None:
    """Build each grid point's model once (or take it from ``counters``) and rebuild it, on the meta device, with
    every cell and hidden size its runs use, so a value a cell refuses (``SatMZU(zones=0)``, zones that do not
    divide the hidden size) is one sentence before any run starts, not a failure per run. A config the command
    line refuses to build (a trainer option, missing data) is refused too when the runs train here (``local``):
    they would each fail the same way. With runs on other machines (a cluster's nodes, where the data may be) it
    is left to the runs, which report it, unless it builds here without a ``--vary`` grid point's values and not
    with them (``model.init_args.hidden_size=0``)."""
    counters = {} if counters is None else counters
    checked = set()
    for spec in specs:
        if spec.cell is None and spec.hidden_size is None and not spec.grid:
            continue  # the config's own model: its build is the run's
        try:
            counter = point_counter(spec.config, spec.grid, spec.extra, counters)
        except Exception as error:  # noqa: BLE001 - not buildable here: the runs say why, each in its log
            if isinstance(error, CompareError) and (local or spec.grid and buildable(spec.config, spec.extra,
                                                                                      counters)):
                raise  # what every run here would fail on, or the grid point's own values
            return
        cell = spec.cell if spec.cell is not None else counter.model.hparams.get("cell")
        hidden = spec.hidden_size if spec.hidden_size is not None else counter.model.hparams.get("hidden_size")
        key = (point_key(spec.grid), json.dumps(cell, sort_keys=True, default=str), hidden)
        if cell is None or hidden is None or key in checked:
            continue
        checked.add(key)
        try:
            reason = counter.refusal(cell, int(hidden))
        except ValueError:  # a task without a cell or hidden size to change: nothing to check
            continue
        if reason is not None:
            raise CompareError(f"The cell of run {spec.run_id} is refused at hidden size {hidden}: {reason}")


def buildable(config: str, extra: Sequence[str], counters: Counters) -> bool:
    """Whether the config's model builds here with ``extra`` alone (no grid point's values)."""
    try:
        point_counter(config, {}, extra, counters)
    except Exception:  # noqa: BLE001 - any failure: not buildable here
        return False
    return True
