"""Callbacks the command line adds: predictions in input order, a divergence guard, a checkpoint on interrupt, and
the comparison runner's checkpoints; and one a user adds to find where a loss spike starts
(:class:`GradientNormLog`)."""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import BasePredictionWriter, Callback, Checkpoint, ModelCheckpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException

from ..utils.paths import check_output_file
from ..utils.progress import plural
from ..utils.quiet import install_patterns, installed_patterns


class PredictionWriter(BasePredictionWriter):
    """Writes what ``predict`` produced, one line per input line, in input order.

    A task's ``predict_step`` returns a list of records ``{"index": int, "text": str, ...}``
    (``index`` is the input line number). Records from every batch and every rank are gathered,
    sorted by index and their texts written to ``output`` (a file path; then ``predict: wrote N lines to
    <output>`` is printed) or standard output. Every task returns such records.
    """

    def __init__(self, output: Optional[str] = None) -> None:
        super().__init__(write_interval="batch")
        if output:
            check_output_file(output, "--predict_output")
        self.output = output
        self._records: List[Dict[str, Any]] = []

    def on_predict_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._records = []

    def on_predict_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int,
                               dataloader_idx: int = 0) -> None:
        """SIGTERM (Lightning's handler only sets a flag, which its predict loop never reads) stops decoding
        between batches: exit code 143, nothing half-written."""
        global INTERRUPTED_EXIT_CODE
        if getattr(trainer, "received_sigterm", False):
            INTERRUPTED_EXIT_CODE = 143
            if trainer.global_rank == 0:
                total = trainer.num_predict_batches[dataloader_idx] if trainer.num_predict_batches else "?"
                print(f"\nSIGTERM during predict: stopped before batch {batch_idx + 1} of {total}; no predictions "
                      "were written (run predict again).", file=sys.stderr, flush=True)
            raise SIGTERMException()

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        """SIGTERM inside a batch (a long decoding stops between its steps): exit 143, nothing written."""
        global INTERRUPTED_EXIT_CODE
        if isinstance(exception, SIGTERMException) and INTERRUPTED_EXIT_CODE is None:
            INTERRUPTED_EXIT_CODE = 143
            if trainer.global_rank == 0:
                print("\nSIGTERM during predict: stopped; no predictions were written (run predict again).",
                      file=sys.stderr, flush=True)

    def write_on_batch_end(self, trainer: Trainer, pl_module: LightningModule, prediction: Any,
                           batch_indices: Any, batch: Any, batch_idx: int, dataloader_idx: int) -> None:
        if isinstance(prediction, list):
            self._records.extend(r for r in prediction if isinstance(r, dict) and "index" in r and "text" in r)

    def on_predict_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        records = self._records
        if dist.is_available() and dist.is_initialized() and trainer.world_size > 1:
            gathered: List[Any] = [None] * trainer.world_size
            dist.all_gather_object(gathered, records)
            records = [r for part in gathered for r in part]
        if trainer.global_rank != 0:
            return
        by_index = {int(r["index"]): str(r["text"]) for r in records}
        lines = "".join(by_index[i] + "\n" for i in sorted(by_index))
        if self.output:
            path = Path(self.output).expanduser()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(lines, encoding="utf-8")
            print(f"predict: wrote {len(by_index)} lines to {path}", flush=True)
        else:
            sys.stdout.write(lines)
            sys.stdout.flush()


class TrainingDiverged(ArithmeticError):
    """The training loss or gradients became non-finite (the run stops; no non-finite checkpoint is written)."""


def _all_finite(tensors: Any) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors if isinstance(t, torch.Tensor) and t.is_floating_point())


DIVERGENCE_THRESHOLD = 10.0
"""Default ``--divergence_threshold``: a finite training loss above this many times its running minimum."""
DIVERGENCE_PATIENCE = 10
"""Consecutive training steps the loss must stay exploded before the run stops."""


class FiniteGuard(Callback):
    """Stops a diverging run: at the first non-finite loss or gradient, before the optimiser applies it, and
    when a finite loss explodes.

    The loss is checked before each backward pass and the gradients before each optimiser step (skipped
    when a gradient scaler handles overflow, as under ``16-mixed``); under DDP the ranks agree, so all stop
    together. A checkpoint whose weights are not finite is never written. The error names the step, the
    last finite loss and the usual causes.

    A finite loss has exploded when it is above ``threshold`` times its running minimum and above the first
    loss of the run (so a task whose loss nears 0 is not stopped by ordinary noise) for ``patience``
    consecutive steps; ``threshold`` 0 turns this check off. While the loss is exploded no checkpoint is
    written, so the diverged model never becomes the best or the last one: a checkpoint due then is skipped
    with one line, and the run goes on (a spike that recovers costs one save, not the run). Lightning runs
    checkpoint callbacks after every other callback, so the guard's ``on_train_batch_end``,
    ``on_validation_end`` and ``on_train_epoch_end`` mark the step as saved for each ``ModelCheckpoint``
    before it looks; any other save while the loss is exploded stops the run rather than write the model.
    """

    def __init__(self, threshold: float = DIVERGENCE_THRESHOLD, patience: int = DIVERGENCE_PATIENCE) -> None:
        super().__init__()
        if threshold < 0 or (0 < threshold <= 1):
            raise ValueError(f"divergence_threshold must be 0 (off) or above 1, got {threshold}; the default is "
                             f"{DIVERGENCE_THRESHOLD:g}.")
        self.threshold = threshold
        self.patience = patience
        self.last_finite: Optional[Tuple[int, float]] = None
        self.first: Optional[float] = None
        self.minimum: Optional[float] = None
        self.exploded_steps = 0

    def _stop(self, trainer: Trainer, pl_module: LightningModule, what: str) -> None:
        last = ("no finite loss was seen yet" if self.last_finite is None
                else f"the last finite loss was {self.last_finite[1]:.4g} at step {self.last_finite[0]}")
        lr = ", ".join(f"{group['lr']:.3g}" for opt in trainer.optimizers for group in opt.param_groups)
        clip = trainer.gradient_clip_val
        raise TrainingDiverged(
            f"The training {what} became non-finite at step {trainer.global_step} (epoch {trainer.current_epoch}); "
            f"{last}; likely causes: a learning rate too high (lr {lr}), no gradient clipping (gradient_clip_val "
            f"{clip}), or dropout of 1.0; lower the learning rate or set --trainer.gradient_clip_val, then resume "
            "from the last checkpoint or start again.")

    def _agree(self, trainer: Trainer, finite: bool) -> bool:
        return bool(trainer.strategy.reduce_boolean_decision(finite, all=True))

    def on_before_backward(self, trainer: Trainer, pl_module: LightningModule, loss: torch.Tensor) -> None:
        finite = bool(torch.isfinite(loss.detach()).all())
        if not self._agree(trainer, finite):
            self._stop(trainer, pl_module, "loss")
        value = float(loss.detach())
        self.last_finite = (trainer.global_step, value)
        if self.threshold > 0:
            self._check_explosion(trainer, value)

    def _check_explosion(self, trainer: Trainer, value: float) -> None:
        if self.first is None:
            # a run resumed from a checkpoint written before the guard kept its state: its first loss is unknown, and
            # the first one after the resume (a trained model's) made its ordinary noise look exploded
            resumed_without_state = bool(getattr(trainer, "ckpt_path", None))
            self.first, self.minimum = (math.inf if resumed_without_state else value), value
            return
        exploded = value > self.threshold * self.minimum and value > self.first
        exploded = bool(trainer.strategy.reduce_boolean_decision(exploded, all=False))  # any rank: all stop together
        self.exploded_steps = self.exploded_steps + 1 if exploded else 0
        self.minimum = min(self.minimum, value)
        if self.exploded_steps >= self.patience:
            raise self._exploded(trainer, value, f"for {self.exploded_steps} consecutive steps",
                                 "and kept no checkpoint of the diverged model")

    def _exploded(self, trainer: Trainer, value: float, when: str, outcome: str) -> TrainingDiverged:
        """The error of an exploded loss ``value``: ``when`` it was found, the run's ``outcome``, and the fix."""
        lr = ", ".join(f"{group['lr']:.3g}" for opt in trainer.optimizers for group in opt.param_groups)
        return TrainingDiverged(
            f"The training loss exploded: {value:.4g} at step {trainer.global_step} (epoch {trainer.current_epoch}), "
            f"above {self.threshold:g}x its running minimum {self.minimum:.4g} and above the first loss "
            f"{self.first:.4g} {when}; the run stopped {outcome}; lower the learning rate (lr {lr}) or set "
            "--trainer.gradient_clip_val, then start again (--divergence_threshold 0 turns this check off).")

    def state_dict(self) -> Dict[str, Any]:
        """The run's first loss, running minimum and last finite loss, so that a resumed run judges its loss
        against its own beginning, not against the first loss after the resume."""
        return {"first": self.first, "minimum": self.minimum, "last_finite": self.last_finite}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        self.first, self.minimum = state_dict.get("first"), state_dict.get("minimum")
        last = state_dict.get("last_finite")
        self.last_finite = tuple(last) if last is not None else None

    def on_before_optimizer_step(self, trainer: Trainer, pl_module: LightningModule, optimizer: Any) -> None:
        if getattr(trainer.precision_plugin, "scaler", None) is not None:
            return  # the scaler skips steps with overflowing gradients itself
        grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
        if not self._agree(trainer, _all_finite(grads)):
            self._stop(trainer, pl_module, "gradient")

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self._skip_checkpoints_while_exploded(trainer)  # every_n_train_steps saves here

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._skip_checkpoints_while_exploded(trainer)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._skip_checkpoints_while_exploded(trainer)

    def _skip_checkpoints_while_exploded(self, trainer: Trainer) -> None:
        """While the loss is exploded (short of ``patience``), a ``ModelCheckpoint`` due at this step skips it:
        Lightning's own rule skips a step already saved, so the step is marked so (it runs after this hook)."""
        if self.exploded_steps == 0 or trainer.sanity_checking or trainer.state.fn != "fit":
            return
        due = [c for c in trainer.checkpoint_callbacks
               if isinstance(c, ModelCheckpoint) and c._last_global_step_saved != trainer.global_step]
        if not due:
            return
        for callback in due:
            callback._last_global_step_saved = trainer.global_step
        if trainer.global_rank == 0:
            print(f"\nstep {trainer.global_step}: the training loss {self.last_finite[1]:.4g} is above "
                  f"{self.threshold:g}x its running minimum {self.minimum:.4g}; skipped the checkpoint due now "
                  f"(the run goes on, and stops if the loss stays so for {self.patience} steps).",
                  file=sys.stderr, flush=True)

    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: Dict[str, Any]) -> None:
        if not _all_finite(checkpoint.get("state_dict", {}).values()):
            self._stop(trainer, pl_module, "weights")
        if self.exploded_steps > 0 and trainer.state.fn == "fit":
            raise self._exploded(trainer, self.last_finite[1], "when a checkpoint was due",
                                 "without saving the diverged model")


def gradient_norms(module: torch.nn.Module) -> Tuple[float, List[Tuple[str, float]]]:
    """The 2-norm of all of ``module``'s gradients together, and each parameter's (by name, largest first), as
    Lightning's ``grad_norm`` computes them."""
    from lightning.pytorch.utilities import grad_norm

    separator = "\0"  # not in a parameter's name: grad_norm's keys are "grad_2.0_norm" + separator + name
    norms = grad_norm(module, 2, group_separator=separator)
    total = float(norms.pop("grad_2.0_norm_total", 0.0))
    named = [(key.split(separator, 1)[1], float(norm)) for key, norm in norms.items()]
    return total, sorted(named, key=lambda item: -item[1])


class GradientNormLog(Callback):
    """Prints the gradients' norm before clipping every ``every_n_steps`` optimiser steps (from step ``from_step``),
    with the ``top`` parameters that hold most of it, on rank 0:
    ``gradient norm, step 6330: 192.1; largest: rnns.0.module.cells.0.blocks.0.weight_hh 81.82, ...``.

    Add it to a fit with ``--trainer.callbacks+=lit_rnncells.command.callbacks.GradientNormLog`` (and e.g.
    ``--trainer.callbacks.every_n_steps 10``). It reads the gradients after any mixed-precision unscaling, before
    Lightning clips them, so a norm far above ``gradient_clip_val`` is one that clipping cut."""

    def __init__(self, every_n_steps: int = 1, top: int = 3, from_step: int = 0) -> None:
        if every_n_steps < 1 or top < 0 or from_step < 0:
            raise ValueError(f"GradientNormLog(every_n_steps={every_n_steps}, top={top}, from_step={from_step}): "
                             "use every_n_steps of at least 1 and top and from_step of at least 0.")
        self.every_n_steps, self.top, self.from_step = every_n_steps, top, from_step

    def on_before_optimizer_step(self, trainer: Trainer, pl_module: LightningModule, optimizer: Any) -> None:
        step = trainer.global_step
        if step < self.from_step or (step - self.from_step) % self.every_n_steps or not trainer.is_global_zero:
            return
        total, norms = gradient_norms(pl_module)
        largest = ", ".join(f"{name} {norm:.4g}" for name, norm in norms[:self.top])
        print(f"gradient norm, step {step}: {total:.4g}" + (f"; largest: {largest}" if largest else ""),
              file=sys.stderr, flush=True)


def epoch_cut_short(trainer: Trainer) -> bool:
    """Whether the epoch whose end Lightning is at now was cut short (``max_steps`` or a time limit stopped it
    before its last batch): Lightning still ends it, calls its epoch-end hooks and counts it as done."""
    return not trainer.fit_loop.epoch_loop.batch_progress.is_last_batch


INTERRUPTED_EXIT_CODE: Optional[int] = None
"""Set when a fit was stopped by SIGTERM (143) or SIGINT (130); the command line exits with it."""


def _say_evaluation_stopped(trainer: Trainer) -> None:
    """``SIGTERM during test: stopped after 1 of 4 batches; no test metrics were reported.`` (rank 0)."""
    stage = str(getattr(trainer.state.fn, "value", trainer.state.fn))
    loop = {"test": trainer.test_loop, "validate": trainer.validate_loop}.get(stage)
    if trainer.global_rank != 0 or loop is None:
        return
    done = loop.batch_progress.current.completed
    totals = trainer.num_test_batches if stage == "test" else trainer.num_val_batches
    known = bool(totals) and all(isinstance(t, int) for t in totals)
    after = f"{done:,} of {plural(sum(totals), 'batch', 'batches')}" if known else plural(done, "batch", "batches")
    print(f"\nSIGTERM during {stage}: stopped after {after}; no {stage} metrics were reported.", file=sys.stderr,
          flush=True)


class QuietInSpawnedProcesses(Callback):
    """Carries the command line's warning and log filters (:mod:`lit_rnncells.utils.quiet`) into the processes
    Lightning's ``ddp_spawn`` starts, which import the package afresh without them: the trainer and its
    callbacks are pickled into each, and unpickling this one installs the parent's filters there, before the
    run starts. Every rank printed Lightning's and torch's noise that the parent drops."""

    def __getstate__(self) -> Dict[str, Any]:
        return {"patterns": installed_patterns()}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        install_patterns(state["patterns"])


class InterruptCheckpoint(Callback):
    """On SIGTERM or Ctrl-C during fit, saves a resumable checkpoint and says how to resume; SIGTERM during a
    validation or test (in fit, after it with ``--test_after_fit``, or in ``test`` / ``validate``) stops it
    before its next batch.

    Lightning turns SIGTERM into ``SIGTERMException`` at the next step boundary and Ctrl-C into
    ``KeyboardInterrupt``; both reach ``on_exception`` on every rank. The checkpoint holds the model,
    optimiser, loop progress and the DataModule's position, so ``fit --ckpt_path <it>`` continues with the
    next batch. The command line then exits with 143 (SIGTERM) or 130 (SIGINT). SLURM: with Lightning's
    ``SLURMEnvironment(auto_requeue=True)`` the job is requeued on its signal and resumes from this file.
    """

    def __init__(self, filename: str = "interrupted.ckpt") -> None:
        super().__init__()
        self.filename = filename
        self.saved_to: Optional[Path] = None

    def _stop_on_sigterm(self, trainer: Trainer) -> None:
        """Lightning's SIGTERM handler only sets a flag, which its training loop reads between training batches
        (and, from Lightning 2.5 or so, its evaluation loops after each batch); read it before each evaluation
        batch too. A long decoding batch reads it between steps (:meth:`RecurrentTask.stop_if_terminated`)."""
        if getattr(trainer, "received_sigterm", False):
            raise SIGTERMException()

    def on_validation_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int,
                                  dataloader_idx: int = 0) -> None:
        self._stop_on_sigterm(trainer)

    def on_test_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int,
                            dataloader_idx: int = 0) -> None:
        self._stop_on_sigterm(trainer)

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        global INTERRUPTED_EXIT_CODE
        if not isinstance(exception, (SIGTERMException, KeyboardInterrupt)):
            return
        if trainer.state.fn != "fit":  # test / validate (also the test after fit): nothing to save
            if isinstance(exception, SIGTERMException) and INTERRUPTED_EXIT_CODE is None:
                INTERRUPTED_EXIT_CODE = 143
                _say_evaluation_stopped(trainer)
            return
        INTERRUPTED_EXIT_CODE = 143 if isinstance(exception, SIGTERMException) else 130
        own = run_checkpoint(trainer)
        folder = Path(own.dirpath) if getattr(own, "dirpath", None) else Path(trainer.default_root_dir) / "checkpoints"
        self.saved_to = folder / self.filename
        trainer.save_checkpoint(self.saved_to)
        if trainer.global_rank == 0:
            signal_name = "SIGTERM" if INTERRUPTED_EXIT_CODE == 143 else "SIGINT"
            print(f"\n{signal_name} at step {trainer.global_step}: saved a resumable checkpoint to {self.saved_to}; "
                  f"resume with the same command plus --ckpt_path {self.saved_to}", file=sys.stderr, flush=True)


class LastCheckpointKeptCurrent(Checkpoint):
    """Keeps the run's ``last.ckpt`` at its newest validation and at each epoch's end, so a run resumed from it,
    after a kill or to a longer budget, goes on from where it stopped.

    Lightning (2.6) writes ``last.ckpt`` only when its checkpoint saved a top-k one at that moment: with
    ``save_top_k=1`` on a validation metric (most shipped configs), only when the metric improved, so a resume
    went back to the best validation and trained the rest again. Where validation runs every N steps and N does
    not divide the epoch, an epoch (and so a run of ``max_epochs``) ends after its last validation: without the
    save at the epoch's end, a finished run taken on to more epochs trained that epoch's tail again. A
    ``Checkpoint`` itself, so Lightning runs it after every other callback and checkpoint: the file holds their
    states after this validation."""

    def __init__(self, own: ModelCheckpoint) -> None:
        super().__init__()
        self.own = own

    def _save_last_where_skipped(self, trainer: Trainer, at_epoch_end: bool) -> None:
        own = self.own
        if not own.save_last or (not at_epoch_end and own._should_save_on_train_epoch_end(trainer)):
            return  # at a validation, where ``own`` saves at the epoch's end instead
        if at_epoch_end and epoch_cut_short(trainer):
            return  # a max_steps stop before the epoch's end: Lightning's own save at the end of training resumes it
        candidates = own._monitor_candidates(trainer)
        if own._should_skip_saving_checkpoint(trainer) or getattr(own, "_defer_save_until_validation", False) \
                or (own.monitor and own.monitor not in candidates):
            return  # it saved at this step (at the epoch's end: a validation on the last batch), or waits for one
        own._save_last_checkpoint(trainer, candidates)

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._save_last_where_skipped(trainer, at_epoch_end=False)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._save_last_where_skipped(trainer, at_epoch_end=True)


class RunnerCheckpoint(ModelCheckpoint):
    """A checkpoint the comparison runner adds to a run: ``role="best"`` (``<run>/best/best.ckpt``, the best
    ``monitor`` value) or ``role="per-epoch"`` (``--test-every-epoch``). Takes ``ModelCheckpoint``'s options.

    Its state has a key of its own in the checkpoint (the role is part of it). As a plain ``ModelCheckpoint``
    the best one shared its key (class, monitor, mode, intervals) with a config's own checkpoint on the same
    metric (``val/loss``, ``min`` in most shipped configs), and the per-epoch one with Lightning's default
    checkpoint: a checkpoint kept one state for the two, and on resume the config's checkpoint lost its
    ``last_model_path``, so Lightning wrote ``last-v1.ckpt`` beside a ``last.ckpt`` left at the resumed step.

    The per-epoch one saves only at an epoch's real end: Lightning also ends an epoch that ``max_steps`` or a time
    limit cut short, and a checkpoint there, tested as that epoch's, put a point of a part-trained epoch on the
    per-epoch curve (and beside the epoch's real end once the run went on).
    """

    monitor_owner = "the comparison runner's best checkpoint"
    monitor_option = "compare's --monitor"
    """How :mod:`.monitor_check` names this checkpoint and the option that sets its monitor."""

    def __init__(self, role: str, **options: Any) -> None:
        super().__init__(**options)
        self.role = role

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.role == "per-epoch" and epoch_cut_short(trainer):
            return  # the epoch was cut short: it has no end to test
        super().on_train_epoch_end(trainer, pl_module)

    @property
    def state_key(self) -> str:
        return self._generate_state_key(role=self.role, monitor=self.monitor, mode=self.mode,
                                        every_n_train_steps=self._every_n_train_steps,
                                        every_n_epochs=self._every_n_epochs,
                                        train_time_interval=self._train_time_interval)

    @property
    def _legacy_state_key(self) -> str:  # type: ignore[override]
        """The shared key: a checkpoint written before this class holds this callback's state under it."""
        return ModelCheckpoint.state_key.fget(self).replace(type(self).__qualname__, ModelCheckpoint.__qualname__, 1)

    def on_load_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: Dict[str, Any]) -> None:
        """A resumed run whose folder has moved since (renamed, copied off a cluster) reads the paths every
        checkpoint callback saved under its old folder as under this one. Lightning runs this before any
        callback takes its state. Without it Lightning drops a checkpoint's best score when its folder differs:
        the next validation became the best even where worse, and ``last.ckpt`` got a ``last-v1.ckpt`` beside it."""
        states = checkpoint.get("callbacks", {})
        mine = states.get(self.state_key) or states.get(self._legacy_state_key) or {}
        saved = mine.get("dirpath")
        if saved and self.dirpath and os.path.normpath(saved) != os.path.normpath(self.dirpath):
            checkpoint["callbacks"] = moved_paths(states, os.path.dirname(saved), os.path.dirname(self.dirpath))


def moved_paths(state: Any, old: str, new: str) -> Any:
    """``state`` with every path string under folder ``old`` (dictionary keys included) put under ``new``."""
    if isinstance(state, str):
        return new + state[len(old):] if state == old or state.startswith((old + "/", old + "\\")) else state
    if isinstance(state, dict):
        return {moved_paths(key, old, new): moved_paths(value, old, new) for key, value in state.items()}
    return state


def run_checkpoint(trainer: Trainer) -> Optional[ModelCheckpoint]:
    """The run's own checkpoint callback (the config's, or Lightning's default), whose folder holds ``last.ckpt``
    and ``interrupted.ckpt``: the first that the comparison runner did not add. Its best checkpoint
    (:class:`RunnerCheckpoint`) comes before it, so ``trainer.checkpoint_callback`` (the first of all) is not it."""
    own = [c for c in trainer.checkpoint_callbacks
           if isinstance(c, ModelCheckpoint) and not isinstance(c, RunnerCheckpoint)]
    return own[0] if own else trainer.checkpoint_callback
