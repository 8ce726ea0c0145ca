"""The child side of a run: ``python -m lit_rnncells.compare --child <run>/spec.json [--ckpt_path CKPT]`` fits one
:class:`~.planning.RunSpec` in this process, tests its best checkpoint and writes ``<run>/result.json`` last.

A launcher (:mod:`.runner`) starts this command in a fresh process per run; a launcher that runs the work itself
(e.g. a cluster job) may call :func:`run_child` directly."""
from __future__ import annotations

import json
import os
import re
import sys
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..report import CURVES_FILE, RESULT_FILE
from .planning import Budget, RunSpec, cell_label, max_time

TIME_LIMIT_CHECKPOINT = "interrupted.ckpt"
"""What a run stopped by its time limit saves to resume from (the name SIGTERM's checkpoint has, :mod:`.folders`)."""


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


def trained_seconds(ckpt_path: Optional[str]) -> float:
    """The training seconds Lightning's ``Timer`` had counted in the checkpoint a run resumes from (0 without one)."""
    if not ckpt_path:
        return 0.0
    from ...command.run_folder import trained_seconds as counted
    from ...data.checkpoint_state import read_checkpoint

    return counted(read_checkpoint(ckpt_path))


def time_limit_args(spec: RunSpec, ckpt_path: Optional[str], time_limit: Optional[float]) -> tuple:
    """``--trainer.max_time`` for a run allowed ``time_limit`` more seconds of training in this process: Lightning's
    ``Timer`` counts the seconds of a resumed run from its checkpoint on, so the limit is those plus ``time_limit``
    (at most a ``time=`` budget's total). Returns the arguments and whether reaching the limit leaves the run
    unfinished (its budget not reached)."""
    if time_limit is None:
        return [], False
    total = trained_seconds(ckpt_path) + float(time_limit)
    budget = Budget.parse(spec.budget) if spec.budget else None
    if budget is not None and budget.kind == "time" and budget.value <= total:
        return [], False  # the budget's own max_time comes first: reaching it finishes the run
    return ["--trainer.max_time", max_time(int(total + 0.999))], True


def time_limit_checkpoint():
    """A callback that saves a resumable checkpoint (``checkpoints/interrupted.ckpt``, at the step boundary, as
    SIGTERM does) when Lightning's ``Timer`` stops the fit at ``max_time``; ``saved`` says it did.

    After the stop Lightning still validates and ends the epoch it cut short, counting that epoch as done: the
    ``last.ckpt`` it writes then resumes at the next epoch, skipping the rest of this one (on an H200, 130 of an
    epoch's 131 batches). So at the end of training the file is written again: the loops' position, the model
    and the optimiser from the stop, the callbacks' states (the best score, the last validation) from after
    that validation. It is the newest checkpoint, so the same command resumes from it, mid-epoch."""
    from lightning.pytorch.callbacks import Checkpoint, Timer

    from ...command.callbacks import run_checkpoint

    class TimeLimitCheckpoint(Checkpoint):  # a Checkpoint: Lightning runs it after the run's own checkpoints
        at_stop: Optional[Dict[str, Any]] = None
        path: Optional[Path] = None  # where the stop's checkpoint went: set once the time limit stopped the fit

        @property
        def saved(self) -> bool:
            return self.path is not None

        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            timers = [c for c in trainer.callbacks if isinstance(c, Timer)]
            if self.saved or not trainer.should_stop or not timers or timers[0].time_remaining() > 0:
                return
            own = getattr(run_checkpoint(trainer), "dirpath", None)
            folder = Path(own) if own else Path(trainer.default_root_dir) / "checkpoints"
            self.path = folder / TIME_LIMIT_CHECKPOINT
            self.at_stop = trainer._checkpoint_connector.dump_checkpoint(weights_only=False)
            self._write(trainer, self.at_stop)
            print(f"compare: the time limit stopped the run at step {trainer.global_step}; saved "
                  f"{self.path}, which the same command resumes from.", flush=True)

        def on_train_end(self, trainer: Any, *args: Any) -> None:
            if self.at_stop is None:
                return
            after = trainer._checkpoint_connector.dump_checkpoint(weights_only=False)
            self._write(trainer, {**self.at_stop, "callbacks": after["callbacks"]})
            self.at_stop = None  # no training ran since the stop: its tensors are the model's and optimiser's

        def _write(self, trainer: Any, checkpoint: Dict[str, Any]) -> None:
            trainer.strategy.save_checkpoint(checkpoint, self.path)
            trainer.strategy.barrier("TimeLimitCheckpoint")

    return TimeLimitCheckpoint()


def full_epochs(trainer: Any) -> int:
    """The epochs trained to their end: Lightning counts an epoch its time limit or ``max_steps`` cut short as
    done (``current_epoch``), so that one is taken off."""
    from ...command.callbacks import epoch_cut_short

    return max(int(trainer.current_epoch) - int(epoch_cut_short(trainer)), 0)


def check_kept_a_checkpoint(spec: RunSpec, best: Any, trainer: Any) -> None:
    """A fit that kept no best checkpoint is an error naming why: no validation ran, or the metric was never logged."""
    if not best.best_model_path and not any(k.startswith("val") for k in trainer.callback_metrics):
        budget = spec.budget or "the config's max_epochs / max_steps"
        raise RuntimeError(f"No checkpoint was kept: no validation ran within the budget ({budget}); give a budget "
                           "that reaches the first validation, or pass -- --trainer.val_check_interval N with N at "
                           "most the budget's steps.")
    if not best.best_model_path:
        raise RuntimeError(f"No checkpoint was kept: the metric {spec.monitor!r} was never logged; pass --monitor "
                           "with a validation metric the model logs (e.g. val/acc or val/loss).")


def record_epoch_tests(folder: Path, trainer: Any, model: Any, datamodule: Any, curves: Any, keep: bool = False) -> None:
    """Test each epoch's checkpoint in order into the curves, deleting each after (the numbers are kept) unless
    ``keep``."""
    def position(path: Path) -> Tuple[int, int]:
        return tuple(map(int, re.search(r"epoch=(\d+)-step=(\d+)", path.name).groups()))  # type: ignore[return-value]

    for path in sorted((folder / "epochs").glob("*.ckpt"), key=position):  # of two of one epoch, the later counts
        epoch, step = position(path)
        metrics = trainer.test(model, datamodule=datamodule, ckpt_path=str(path), verbose=False)[0]
        curves.add_test(epoch, step, metrics)
        if not keep:
            path.unlink()  # the numbers are kept; the weights would fill the disk


def add_callbacks(spec: RunSpec, trainer: Any) -> tuple:
    """The runner's callbacks on ``trainer``: the best-``monitor`` checkpoint, the learning curves, the in-budget
    validation and (with ``test_every_epoch``) a checkpoint per epoch; returns ``(best, curves, per_epoch)``."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    from ...command.callbacks import RunnerCheckpoint
    from ..curves import LearningCurves

    folder = Path(spec.folder)
    for callback in trainer.checkpoint_callbacks:  # the config's checkpoints (the default one included)
        if isinstance(callback, ModelCheckpoint) and callback.save_last is None:
            callback.save_last = True  # a run killed outright resumes from its last checkpoint
    best = RunnerCheckpoint("best", dirpath=str(folder / "best"), filename="best", monitor=spec.monitor,
                            mode=spec.mode, save_top_k=1, auto_insert_metric_name=False)
    curves = LearningCurves(folder / CURVES_FILE)
    # Before the config's checkpoints, which Lightning runs after every other callback in the order given: at
    # each validation `best` takes in the new score first, so the last.ckpt written next holds that state. Behind
    # them, last.ckpt held the best state of the validation before; a run resumed from it saved its next
    # validation as a new best (best-v1.ckpt) even where the earlier best was better, and tested that.
    first_checkpoint = next((i for i, c in enumerate(trainer.callbacks) if c in trainer.checkpoint_callbacks),
                            len(trainer.callbacks))
    trainer.callbacks.insert(first_checkpoint, best)
    trainer.callbacks.extend([curves, validate_within_budget()])
    per_epoch = None
    if spec.test_every_epoch:
        per_epoch = RunnerCheckpoint("per-epoch", dirpath=str(folder / "epochs"),
                                     filename="epoch={epoch}-step={step}", save_top_k=-1, every_n_epochs=1,
                                     save_on_train_epoch_end=True, auto_insert_metric_name=False)
        trainer.callbacks.append(per_epoch)
    return best, curves, per_epoch


def run_child(spec: RunSpec, ckpt_path: Optional[str] = None, time_limit: Optional[float] = None) -> Dict[str, Any]:
    """One run in this process: fit with a best-``monitor`` checkpoint and learning curves (resuming from
    ``ckpt_path`` when given), test the best checkpoint (and with ``test_every_epoch`` each epoch's), write
    ``result.json`` last. The run's checkpoint folder keeps a ``last.ckpt`` to resume from.

    ``time_limit``: seconds of training this process may spend (Lightning's ``max_time``, :func:`time_limit_args`).
    A run it stops before its budget saves ``checkpoints/interrupted.ckpt`` and its result says ``"partial": true``:
    the runner reports it and resumes it the next time (:func:`.folders.finished`)."""
    from ...cli import main  # the CLI sits above experiments: the child process builds its run through it
    from ..param_match import count_parameters

    folder = Path(spec.folder)
    limit_args, may_stop_early = time_limit_args(spec, ckpt_path, time_limit)
    cli = main(spec.cli_args() + limit_args + (["--ckpt_path", ckpt_path] if ckpt_path else []), run=False)
    trainer, model = cli.trainer, cli.model
    best, curves, per_epoch = add_callbacks(spec, trainer)
    stopped = time_limit_checkpoint() if may_stop_early else None
    trainer.callbacks.extend([stopped] if stopped is not None else [])
    trainer.fit(model, datamodule=cli.datamodule, ckpt_path=ckpt_path)
    seconds = curves.seconds
    check_kept_a_checkpoint(spec, best, trainer)
    steps, epochs = int(trainer.global_step), full_epochs(trainer)
    if per_epoch is not None:
        record_epoch_tests(folder, trainer, model, cli.datamodule, curves, keep=spec.keep_epoch_checkpoints)
    tested = trainer.test(model, datamodule=cli.datamodule, ckpt_path=best.best_model_path, verbose=False)[0]
    own_cell = model.hparams.get("cell")
    cell = spec.cell if spec.cell is not None else own_cell if isinstance(own_cell, (str, dict)) \
        else type(model).__name__
    result = {**asdict(spec), "cell": cell_label(cell), "cell_spec": cell,
              "hidden_size": int(model.hparams.get("hidden_size", spec.hidden_size or 0)),
              "params": count_parameters(model), "steps": steps, "epochs": epochs, "seconds": seconds,
              "tokens_per_s": curves.tokens_per_second, f"best {spec.monitor}": float(best.best_model_score),
              "test": {k: float(v) for k, v in tested.items()}, "checkpoint": best.best_model_path,
              "partial": bool(stopped is not None and stopped.saved), "time_limit": time_limit}
    if trainer.is_global_zero:
        tmp = folder / (RESULT_FILE + ".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        os.replace(tmp, folder / RESULT_FILE)
    return result


def child_main(argv: List[str]) -> int:
    """``--child SPEC_JSON [--ckpt_path CKPT] [--time_limit SECONDS]``: run one spec; on SIGTERM / Ctrl-C (its
    checkpoint saved) exit with the interrupted status the callbacks set."""
    from ...command import callbacks

    options = dict(zip(argv[2::2], argv[3::2]))  # --ckpt_path CKPT, --time_limit SECONDS
    time_limit = float(options["--time_limit"]) if "--time_limit" in options else None
    try:
        run_child(RunSpec(**json.loads(Path(argv[1]).read_text())), options.get("--ckpt_path"), time_limit)
    except SystemExit:  # SIGTERM (Lightning's SIGTERMException) or Ctrl-C: the checkpoint is saved
        if callbacks.INTERRUPTED_EXIT_CODE is not None:
            return callbacks.INTERRUPTED_EXIT_CODE
        raise
    except Exception as error:  # noqa: BLE001 - the traceback stays in the log; a refusal also ends it in a line
        from ...command.errors import user_message

        message = user_message(error)
        if message is None:
            raise
        traceback.print_exc()
        print(f"error: {message}", file=sys.stderr, flush=True)  # what the runner relays (runner.refusal)
        return 2
    return 0
