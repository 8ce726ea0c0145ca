"""Fair comparisons of cells on any task config: matched budgets and parameters, seeds, a grid, resumable.

    python -m lit_rnncells.compare --config configs/logic/gru.yaml --cells GRU MuFuRU --seeds 3 \\
        --budget epochs=20 --match-params GRU@8 --out runs/compare/logic -- --trainer.limit_val_batches 2

Every grid point (``--vary KEY=V1,V2``) x cell x seed is one run: a fresh process through the CLI that fits
with a ModelCheckpoint on the best ``--monitor`` value, tests that checkpoint, records its learning curves
(:mod:`lit_rnncells.experiments.curves`) and writes ``<out>/<run id>/result.json`` last. A rerun skips runs that have a
``result.json``, resumes an unfinished run from its checkpoint (``interrupted.ckpt``, else ``last.ckpt``) and
restarts a run with no usable checkpoint from scratch. ``<out>`` then holds ``runs.csv`` (one row per run),
``summary.md`` (mean ± sample std over seeds) and ``curves_steps.png`` / ``curves_seconds.png``.
See docs/compare.md. :func:`compare` is the Python API (it returns the rows of ``runs.csv``); what it writes is
:mod:`lit_rnncells.experiments.report`.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from itertools import product
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import yaml

from .. import run_folder
from ..cells.registry import cell_options, get_cell
from ..errors import no_option_message
from ..paths import check_output_folder
from .report import (CURVES_FILE, RESULT_FILE, curve_groups, log_to_wandb, plot_curves, row_of,
                             summary_markdown, write_csv)
from .param_match import Match, ParamCounter, cell_name

BUDGET_KINDS = ("epochs", "steps", "time")
LOWER_IS_BETTER = ("loss", "bpc", "ppl", "perplexity", "error")


class CompareError(ValueError):
    """A user mistake in the runner's input; the message is one sentence naming the problem and the fix."""


# --- input --------------------------------------------------------------------------------------------------
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
        days, rest = divmod(self.value, 86400)
        hours, rest = divmod(rest, 3600)
        minutes, seconds = divmod(rest, 60)
        return ["--trainer.max_time", f"{days:02d}:{hours:02d}:{minutes:02d}:{seconds:02d}",
                "--trainer.max_epochs", "-1", "--trainer.max_steps", "-1"]

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
            raise CompareError(f"--cells {text!r}: {no_option_message(cls.__name__, key.strip(), accepted)}")
        init_args[key.strip()] = yaml.safe_load(value)
    return {"class_path": name, "init_args": init_args}


def cell_label(cell: Any) -> str:
    """A short, file-name-safe label of a cell spec: ``GRU``, ``MultiChannel-cell=GRU-block_size=3``."""
    if isinstance(cell, dict):
        opts = "-".join(f"{k}={cell_label(v) if isinstance(v, dict) and 'class_path' in v else v}"
                        for k, v in (cell.get("init_args") or {}).items())
        return cell_name(cell) + (f"-{opts}" if opts else "")
    return cell_name(cell)


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


# --- one run --------------------------------------------------------------------------------------------------
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


def validate_within_budget():
    """A callback that, when ``max_steps`` ends training before the first validation (a steps budget shorter
    than an epoch, or than ``val_check_interval``), moves the validation check to the last step of the budget,
    so every run keeps a best checkpoint. It says so in the run's log."""
    from lightning.pytorch import Callback

    class ValidateWithinBudget(Callback):
        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            if trainer.max_steps is None or trainer.max_steps < 1 or trainer.val_check_batch is None:
                return
            budget = trainer.max_steps * trainer.accumulate_grad_batches  # training batches of the whole run
            first = trainer.val_check_batch * (trainer.check_val_every_n_epoch or 1)
            if first > budget and trainer.num_training_batches not in (0, float("inf")):
                trainer.val_check_batch = budget
                trainer.check_val_every_n_epoch = 1
                print(f"compare: the first validation (batch {first}) would come after the budget of "
                      f"{trainer.max_steps} steps; validating at step {trainer.max_steps} instead.", flush=True)

    return ValidateWithinBudget()


def run_child(spec: RunSpec, ckpt_path: Optional[str] = None) -> Dict[str, Any]:
    """One run in this process: fit with a best-``monitor`` checkpoint and learning curves (resuming from
    ``ckpt_path`` when given), test the best checkpoint (and with ``test_every_epoch`` each epoch's), write
    ``result.json`` last. The run's checkpoint folder keeps a ``last.ckpt`` to resume from."""
    from ..callbacks import RunnerCheckpoint
    from ..cli import main
    from .curves import LearningCurves
    from .param_match import count_parameters

    folder = Path(spec.folder)
    cli = main(spec.cli_args() + (["--ckpt_path", ckpt_path] if ckpt_path else []), run=False)
    trainer, model = cli.trainer, cli.model
    for callback in trainer.checkpoint_callbacks:  # the config's checkpoints (the default one included)
        if getattr(callback, "save_last", None) is None:
            callback.save_last = True  # a run killed outright resumes from its last checkpoint
    best = RunnerCheckpoint("best", dirpath=str(folder / "best"), filename="best", monitor=spec.monitor,
                            mode=spec.mode, save_top_k=1, auto_insert_metric_name=False)
    curves = LearningCurves(folder / CURVES_FILE)
    trainer.callbacks.extend([best, curves, validate_within_budget()])
    per_epoch = None
    if spec.test_every_epoch:
        per_epoch = RunnerCheckpoint("per-epoch", dirpath=str(folder / "epochs"),
                                     filename="epoch={epoch}-step={step}", save_top_k=-1, every_n_epochs=1,
                                     save_on_train_epoch_end=True, auto_insert_metric_name=False)
        trainer.callbacks.append(per_epoch)
    trainer.fit(model, datamodule=cli.datamodule, ckpt_path=ckpt_path)
    seconds = curves.seconds
    if not best.best_model_path and not any(k.startswith("val") for k in trainer.callback_metrics):
        budget = spec.budget or "the config's max_epochs / max_steps"
        raise RuntimeError(f"No checkpoint was kept: no validation ran within the budget ({budget}); give a budget that reaches the first validation, or "
                           "pass -- --trainer.val_check_interval N with N at most the budget's steps.")
    if not best.best_model_path:
        raise RuntimeError(f"No checkpoint was kept: the metric {spec.monitor!r} was never logged; pass --monitor "
                           "with a validation metric the model logs (e.g. val/acc or val/loss).")
    steps, epochs = int(trainer.global_step), int(trainer.current_epoch)
    if per_epoch is not None:
        for path in sorted((folder / "epochs").glob("*.ckpt"), key=lambda p: int(re.search(r"epoch=(\d+)", p.name)[1])):
            found = re.search(r"epoch=(\d+)-step=(\d+)", path.name)
            metrics = trainer.test(model, datamodule=cli.datamodule, ckpt_path=str(path), verbose=False)[0]
            curves.add_test(int(found[1]), int(found[2]), metrics)
            path.unlink()  # the numbers are kept; the weights would fill the disk
    tested = trainer.test(model, datamodule=cli.datamodule, ckpt_path=best.best_model_path, verbose=False)[0]
    own_cell = model.hparams.get("cell")
    cell = spec.cell if spec.cell is not None else own_cell if isinstance(own_cell, (str, dict)) \
        else type(model).__name__
    result = {**asdict(spec), "cell": cell_label(cell), "cell_spec": cell,
              "hidden_size": int(model.hparams.get("hidden_size", spec.hidden_size or 0)),
              "params": count_parameters(model), "steps": steps, "epochs": epochs, "seconds": seconds,
              "tokens_per_s": curves.tokens_per_second, f"best {spec.monitor}": float(best.best_model_score),
              "test": {k: float(v) for k, v in tested.items()}, "checkpoint": best.best_model_path}
    if trainer.is_global_zero:
        tmp = folder / (RESULT_FILE + ".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        os.replace(tmp, folder / RESULT_FILE)
    return result


class Interrupted(Exception):
    """The runner was stopped by SIGTERM or Ctrl-C while a run trained; ``code`` is that run's exit status."""

    def __init__(self, run_id: str, signal_name: str, code: int) -> None:
        super().__init__(f"{signal_name} while run {run_id} trained")
        self.run_id, self.signal_name, self.code = run_id, signal_name, code


@contextlib.contextmanager
def forwarding_signals(proc: subprocess.Popen) -> Iterator[List[str]]:
    """While ``proc`` runs, SIGTERM to this process goes on to ``proc`` (which saves a resumable checkpoint and
    exits) and Ctrl-C waits for it (the terminal sent ``proc`` its own SIGINT); the signals received, by name."""
    received: List[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def on_term(signum: int, frame: Any) -> None:
        received.append("SIGTERM")
        proc.send_signal(signal.SIGTERM)

    def on_int(signum: int, frame: Any) -> None:
        received.append("SIGINT")

    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, on_term),
                signal.SIGINT: signal.signal(signal.SIGINT, on_int)}
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


RESUME_FILES = ("interrupted.ckpt", "last.ckpt")
"""The checkpoints an unfinished run resumes from, in order of preference when equally new."""


def resume_checkpoint(folder: Path) -> Optional[Tuple[Path, int]]:
    """The checkpoint an unfinished run in ``folder`` resumes from: the newest of ``checkpoints/interrupted.ckpt``
    (saved on SIGTERM / Ctrl-C) and ``checkpoints/last.ckpt`` (saved at each validation; or ``last-vN.ckpt``)
    that is readable, with the optimiser steps it had trained; ``None`` when there is none."""
    from ..data.checkpoint_state import read_checkpoint

    found = [folder / run_folder.CHECKPOINTS / name for name in RESUME_FILES]
    # last-v1.ckpt ...: what Lightning wrote beside a last.ckpt it did not own, as resumed runs of before
    # RunnerCheckpoint did (callbacks.py); the newest of all is taken
    found += sorted((folder / run_folder.CHECKPOINTS).glob("last-v*.ckpt"))
    found = sorted((p for p in found if p.is_file()), key=lambda p: -p.stat().st_mtime_ns)  # stable: ties keep order
    for path in found:
        try:
            steps = int(read_checkpoint(str(path)).get("global_step", 0))
        except (OSError, ValueError):  # truncated by a kill mid-write: try the other one
            continue
        return path, steps
    return None


def spec_differences(folder: Path, spec: RunSpec) -> List[str]:
    """The settings in which ``spec`` differs from the one the run in ``folder`` was started with (its
    ``spec.json``; the folder's own path aside, so a moved ``--out`` still resumes)."""
    try:
        saved = json.loads((folder / "spec.json").read_text())
    except (OSError, ValueError):
        return ["spec.json (missing or unreadable)"]
    now = asdict(spec)
    return [key for key in now if key != "folder" and saved.get(key) != json.loads(json.dumps(now[key]))]


def refuse_other_settings(spec: RunSpec, checkpoint: Path) -> None:
    """Refuse to run ``spec`` over an unfinished run started with other settings (it would delete or mix up
    a checkpoint the user can still resume from)."""
    changed = spec_differences(Path(spec.folder), spec)
    if changed:
        raise CompareError(f"The run folder {spec.folder} holds an unfinished run, resumable from {checkpoint}, that "
                           f"was started with other settings ({', '.join(changed)}); rerun with the settings it was "
                           "started with to resume it, or move the folder away to start it again.")


def check_resumable(specs: Sequence[RunSpec]) -> Dict[str, Optional[Tuple[Path, int]]]:
    """Before any run starts: no unfinished run with a checkpoint was started with other settings. The
    checkpoint each unfinished run resumes from (:func:`resume_checkpoint`), by run folder."""
    resumes: Dict[str, Optional[Tuple[Path, int]]] = {}
    for spec in specs:
        folder = Path(spec.folder)
        found = resume_checkpoint(folder) if folder.is_dir() and not (folder / RESULT_FILE).is_file() else None
        if found is not None:
            refuse_other_settings(spec, found[0])
        resumes[spec.folder] = found
    return resumes


def prepare_folder(spec: RunSpec, found: Optional[Tuple[Path, int]]) -> Optional[Tuple[Path, int]]:
    """Make ``spec``'s folder ready for its run; ``found``, the checkpoint it resumes from and its steps (see
    :func:`check_resumable`, which refused other settings), or ``None`` for a fresh start.

    An unfinished run with a usable checkpoint resumes (its folder kept as it is) when it was started with the
    same settings; with other settings it was refused, so no resumable checkpoint is ever deleted. A folder
    with no usable checkpoint is cleared and the run starts from scratch."""
    folder = Path(spec.folder)
    holder = run_folder.lock_holder(folder) if folder.is_dir() else None
    if holder is not None:
        raise CompareError(f"The run folder {folder} is in use by another fit ({holder}), perhaps a run of an earlier "
                           "compare that was stopped; wait for it to finish or stop it, then rerun the same command.")
    if found is not None:
        return found
    if folder.exists():
        shutil.rmtree(folder)  # nothing to resume from: the run starts again from scratch
    folder.mkdir(parents=True)
    (folder / "spec.json").write_text(json.dumps(asdict(spec), indent=1))
    return None


def launch(spec: RunSpec, env: Optional[Dict[str, str]] = None,
           resume_from: Optional[Path] = None) -> Optional[Dict[str, Any]]:
    """Run ``spec`` in a fresh process (its log in ``<run>/log.txt``, appended to when it resumes from
    ``resume_from``, a checkpoint of :func:`prepare_folder`); the result, or ``None`` if it failed.

    SIGTERM to this process is forwarded to the run, which saves its checkpoint; :class:`Interrupted` then
    carries the run's exit status."""
    folder = Path(spec.folder)
    root = str(Path(__file__).resolve().parents[2])
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
                **(env or {})}
    command = [sys.executable, "-m", "lit_rnncells.compare", "--child", str(folder / "spec.json")]
    if resume_from is not None:
        command += ["--ckpt_path", str(resume_from)]
    with open(folder / "log.txt", "a" if resume_from is not None else "w") as log:
        if resume_from is not None:
            log.write(f"\ncompare: resuming from {resume_from}\n")
            log.flush()
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=full_env)
        with forwarding_signals(proc) as received:
            while True:
                try:
                    returncode = proc.wait()
                    break
                except KeyboardInterrupt:  # pragma: no cover - a Ctrl-C outside the main thread's handler
                    continue
    if received:
        raise Interrupted(spec.run_id, received[0], returncode)
    result_path = folder / RESULT_FILE
    if returncode != 0 or not result_path.is_file():
        return None
    return json.loads(result_path.read_text())


# --- the sweep -----------------------------------------------------------------------------------------------
def plan(config: str, cells: Sequence[Any], seeds: Sequence[int], budget: Budget, out: Path,
         grid: List[Tuple[str, List[str]]], hidden_size: Optional[int], match_params: Optional[str],
         monitor: str, mode: str, extra: Sequence[str], test_every_epoch: bool, no_wandb: bool,
         log: Any = None) -> List[RunSpec]:
    """Every grid point x cell x seed as a :class:`RunSpec`, hidden sizes matched per grid point (reported on
    ``log``, default the current ``sys.stderr``)."""
    log = sys.stderr if log is None else log
    specs: List[RunSpec] = []
    keys = [k for k, _ in grid]
    for values in product(*[v for _, v in grid]):
        point = dict(zip(keys, values))
        matches: Dict[str, Match] = {}
        if match_params is not None:
            point_args = [a for k, v in point.items() for a in (f"--{k}", v)] + list(extra)
            try:
                counter = ParamCounter(config, point_args + ["--trainer.logger", "false"])
            except Exception as error:  # noqa: BLE001 - the CLI's one-sentence message for a user mistake
                from ..errors import user_message

                message = user_message(error)
                if message is None:
                    raise
                raise CompareError(f"The config with {' '.join(point_args) or 'no extra arguments'} is refused: "
                                   f"{message}") from None
            target = counter.target(match_params)
            for cell in cells:
                matches[cell_label(cell)] = counter.match(cell, target)
                where = "".join(f"{k}={v} " for k, v in point.items())
                print(f"compare: {where}{matches[cell_label(cell)].describe()}", file=log, flush=True)
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
                                     match=None if match is None else {**asdict(match), "gap": match.gap}))
    return specs


def check_arguments(specs: Sequence[RunSpec]) -> None:
    """Parse (without building anything) the CLI arguments of the first run of each grid point, so a wrong
    ``--vary`` key or argument after ``--`` is one sentence before any run starts, not a failure per run."""
    import contextlib
    import io

    from ..cli import main
    from ..errors import user_message

    seen = set()
    for spec in specs:
        key = json.dumps(spec.grid, sort_keys=True)
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
            raise CompareError(f"The arguments of run {spec.run_id} are refused: {message}") from None
        finally:
            sys.argv = argv


def run_specs(specs: Sequence[RunSpec], env: Optional[Dict[str, str]] = None, log: Any = None,
              failed: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    """Run each spec in its own process, or reuse its ``result.json`` when it finished earlier, or resume it from
    its checkpoint when it was stopped (:func:`prepare_folder`); the results in order. A failed run is reported
    on ``log`` (default: the current ``sys.stderr``, looked up at the call, not at import) and its id appended to
    ``failed``. An unfinished run started with other settings is a :class:`CompareError` before any run."""
    log = sys.stderr if log is None else log
    resumes = check_resumable(specs)  # reads each resumable checkpoint once
    results: List[Dict[str, Any]] = []
    failed = [] if failed is None else failed
    for i, spec in enumerate(specs, 1):
        done = Path(spec.folder) / RESULT_FILE
        if done.is_file():
            print(f"compare: [{i}/{len(specs)}] {spec.run_id} finished earlier, kept", file=log, flush=True)
            results.append(json.loads(done.read_text()))
            continue
        resume = prepare_folder(spec, resumes[spec.folder])
        if resume is None:
            print(f"compare: [{i}/{len(specs)}] {spec.run_id} ...", file=log, flush=True)
        else:
            print(f"compare: [{i}/{len(specs)}] {spec.run_id} resumes from {resume[0]} (step {resume[1]}) ...",
                  file=log, flush=True)
        resume_from = None if resume is None else resume[0]
        start = time.perf_counter()
        result = launch(spec, env, resume_from)
        if result is None:
            failed.append(spec.run_id)
            print(f"compare: {spec.run_id} failed; its log is {Path(spec.folder) / 'log.txt'}", file=log, flush=True)
            continue
        print(f"compare: {spec.run_id} done in {time.perf_counter() - start:.0f} s: best {spec.monitor} "
              f"{result[f'best {spec.monitor}']:.4g}", file=log, flush=True)
        results.append(result)
    return results


def compare(config: str, cells: Sequence[Union[str, Dict[str, Any]]], seeds: Union[int, Sequence[int]] = 3,
            budget: Union[str, Budget] = "epochs=10", out: Union[str, Path] = "runs/compare",
            match_params: Optional[Union[int, str]] = None, hidden_size: Optional[int] = None,
            vary: Sequence[str] = (), monitor: Optional[str] = None, mode: Optional[str] = None,
            extra: Sequence[str] = (), test_every_epoch: bool = False, no_wandb: bool = False,
            env: Optional[Dict[str, str]] = None, log: Any = None,
            failed: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    """Run (or reuse the finished runs of) a comparison and write its CSV, table and plots; the CSV's rows.

    ``seeds`` is a count (seeds 1..N) or a list; ``cells`` are names or ``Name(key=value,...)`` strings or
    ``{class_path, init_args}`` dicts. Failed runs are reported on ``log``, left out of the rows and their ids
    appended to ``failed`` when given; ``log`` defaults to the current ``sys.stderr``."""
    log = sys.stderr if log is None else log
    if not Path(config).is_file():
        raise CompareError(f"The config {config!r} does not exist; pass the path of a task config, e.g. "
                           "configs/logic/gru.yaml.")
    try:
        check_output_folder(out, "--out")
    except OSError as error:
        raise CompareError(str(error)) from None
    if not cells:
        raise CompareError("--cells is empty; name at least one cell, e.g. --cells GRU MuFuRU.")
    cells = [check_cell(c) if isinstance(c, str) else c for c in cells]
    budget = budget if isinstance(budget, Budget) else Budget.parse(budget)
    grid = parse_vary(vary)
    if match_params is not None and hidden_size is not None:
        raise CompareError("--match-params and --hidden-size both set the hidden size; give one of them.")
    if match_params is not None and any(k.endswith("hidden_size") for k, _ in grid):
        raise CompareError("--match-params chooses the hidden size, --vary also varies it; drop one of them.")
    if match_params is not None and not re.fullmatch(r"\s*([^@\s]+@\d+|\d+(\.\d+)?([eE]\d+)?)\s*", str(match_params)):
        raise CompareError(f"--match-params {match_params!r} is neither a number nor CELL@HIDDEN with an integer "
                           "hidden size; use e.g. 120000 or GRU@256.")
    if match_params is not None and "@" in str(match_params):
        try:
            check_cell(str(match_params).strip().rpartition("@")[0])
        except CompareError as error:
            raise CompareError(str(error).replace("--cells", f"--match-params {match_params!r}", 1)) from None
    seed_list = list(range(1, seeds + 1)) if isinstance(seeds, int) else list(seeds)
    if not seed_list or (isinstance(seeds, int) and seeds < 1):
        raise CompareError("--seeds must be 1 or more.")
    if monitor is None:
        monitor, default_mode = default_monitor(config)
        mode = mode or default_mode
    mode = mode or mode_of(monitor)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    specs = plan(config, cells, seed_list, budget, out, grid, hidden_size,
                 None if match_params is None else str(match_params), monitor, mode, extra, test_every_epoch,
                 no_wandb, log)
    check_arguments(specs)
    results = run_specs(specs, env, log, failed)
    rows = [row_of(r) for r in results]
    grid_keys = [k for k, _ in grid]
    if rows:
        write_csv(rows, out / "runs.csv")
        (out / "summary.md").write_text(summary_markdown(rows, config, str(budget), monitor, grid_keys))
        groups = curve_groups(results, grid_keys)
        title = f"{Path(config).parent.name}/{Path(config).name}, budget {budget}: validation {monitor}"
        images = [plot_curves(groups, "step", monitor, title, out / "curves_steps.png"),
                  plot_curves(groups, "seconds", monitor, title, out / "curves_seconds.png")]
        if not no_wandb:
            log_to_wandb(out, config, rows, images)
    if failed:
        print(f"compare: {len(failed)} of {len(specs)} runs failed ({', '.join(failed)}); rerun the same command "
              "to retry them (finished runs are kept).", file=log, flush=True)
    return rows


# --- command line ---------------------------------------------------------------------------------------------
class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (``error: ...``) and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"error: {message}; see python -m lit_rnncells.compare --help.", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(allow_abbrev=False, prog="python -m lit_rnncells.compare",
                       description=__doc__.split("\n\n")[0],
                       epilog="Arguments after -- go to the CLI of every run unchanged. See docs/compare.md.")
    ap.add_argument("--config", required=True, help="the task config every run starts from")
    ap.add_argument("--cells", nargs="+", required=True,
                    help="registered cell names, or Name(key=value,...) for cells that need options")
    seeds = ap.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=int, default=3, help="run seeds 1..N (default 3)")
    seeds.add_argument("--seed-list", type=int, nargs="+", help="run exactly these seeds")
    ap.add_argument("--budget", default="epochs=10", help="epochs=N, steps=N (optimiser steps) or time=SECONDS")
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--match-params", help="target parameter count: a number or CELL@HIDDEN (e.g. GRU@256)")
    size.add_argument("--hidden-size", type=int, help="one hidden size for every cell")
    ap.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2",
                    help="grid over a CLI key (repeatable), e.g. data.init_args.train_size=100,300,1000")
    ap.add_argument("--monitor", help="validation metric of the kept checkpoint and the curves "
                                      "(default val/acc; val/loss for language models and seq2seq)")
    ap.add_argument("--mode", choices=("min", "max"), help="whether lower or higher --monitor is better "
                                                           "(default from its name)")
    ap.add_argument("--test-every-epoch", action="store_true",
                    help="also test each epoch's checkpoint (test metric per epoch, CARU Fig. 2)")
    ap.add_argument("--no-wandb", action="store_true", help="runs log nothing (--trainer.logger false)")
    ap.add_argument("--out", default="runs/compare", help="folder of the runs and the outputs")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    return ap


def error_exit(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        from .. import callbacks

        ckpt_path = argv[3] if argv[2:3] == ["--ckpt_path"] else None
        try:
            run_child(RunSpec(**json.loads(Path(argv[1]).read_text())), ckpt_path)
        except SystemExit:  # SIGTERM (Lightning's SIGTERMException) or Ctrl-C: the checkpoint is saved
            if callbacks.INTERRUPTED_EXIT_CODE is not None:
                return callbacks.INTERRUPTED_EXIT_CODE
            raise
        return 0
    extra: List[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:
        return 0 if stop.code == 0 else 2
    failed: List[str] = []
    try:
        rows = compare(args.config, args.cells, args.seed_list or args.seeds, args.budget, args.out,
                       args.match_params, args.hidden_size, args.vary, args.monitor, args.mode, extra,
                       args.test_every_epoch, args.no_wandb, failed=failed)
    except CompareError as error:
        return error_exit(str(error))
    except Interrupted as stop:
        checkpoint = Path(args.out) / stop.run_id / run_folder.CHECKPOINTS / "interrupted.ckpt"
        saved = f"it saved {checkpoint}" if checkpoint.is_file() else "it saved no checkpoint"
        print(f"compare: {stop.signal_name}: stopped run {stop.run_id} (exit {stop.code}; {saved}); rerun the same "
              "command to go on: finished runs are kept, unfinished ones resume from their checkpoints.", file=sys.stderr, flush=True)
        return stop.code
    except ValueError as error:  # the matcher's messages (a target no size reaches, ...)
        if os.environ.get("LIT_RNNCELLS_TRACEBACK"):
            raise
        return error_exit(str(error).splitlines()[0])
    out = Path(args.out)
    if rows:
        print((out / "summary.md").read_text())
        print(f"Runs: {out / 'runs.csv'}; curves: {out / 'curves_steps.png'}, {out / 'curves_seconds.png'}")
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
