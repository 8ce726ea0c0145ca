"""The child side of a run: ``python -m lit_rnncells.compare --child <run>/spec.json [--ckpt_path CKPT]`` fits one
:class:`~.planning.RunSpec` in this process, tests its best checkpoint and writes ``<run>/result.json`` last.

A launcher (:mod:`.runner`) starts this command in a fresh process per run; a launcher that runs the work itself
(e.g. a cluster job) may call :func:`run_child` directly."""
from __future__ import annotations

import json
import os
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..report import CURVES_FILE, RESULT_FILE
from .planning import RunSpec, cell_label


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


def record_epoch_tests(folder: Path, trainer: Any, model: Any, datamodule: Any, curves: Any) -> None:
    """Test each epoch's checkpoint in order into the curves, deleting each after (the numbers are kept)."""
    for path in sorted((folder / "epochs").glob("*.ckpt"), key=lambda p: int(re.search(r"epoch=(\d+)", p.name)[1])):
        found = re.search(r"epoch=(\d+)-step=(\d+)", path.name)
        metrics = trainer.test(model, datamodule=datamodule, ckpt_path=str(path), verbose=False)[0]
        curves.add_test(int(found[1]), int(found[2]), metrics)
        path.unlink()  # the numbers are kept; the weights would fill the disk


def add_callbacks(spec: RunSpec, trainer: Any) -> tuple:
    """The runner's callbacks on ``trainer``: the best-``monitor`` checkpoint, the learning curves, the in-budget
    validation and (with ``test_every_epoch``) a checkpoint per epoch; returns ``(best, curves, per_epoch)``."""
    from ...callbacks import RunnerCheckpoint
    from ..curves import LearningCurves

    folder = Path(spec.folder)
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
    return best, curves, per_epoch


def run_child(spec: RunSpec, ckpt_path: Optional[str] = None) -> Dict[str, Any]:
    """One run in this process: fit with a best-``monitor`` checkpoint and learning curves (resuming from
    ``ckpt_path`` when given), test the best checkpoint (and with ``test_every_epoch`` each epoch's), write
    ``result.json`` last. The run's checkpoint folder keeps a ``last.ckpt`` to resume from."""
    from ...cli import main  # the CLI sits above experiments: the child process builds its run through it
    from ..param_match import count_parameters

    folder = Path(spec.folder)
    cli = main(spec.cli_args() + (["--ckpt_path", ckpt_path] if ckpt_path else []), run=False)
    trainer, model = cli.trainer, cli.model
    best, curves, per_epoch = add_callbacks(spec, trainer)
    trainer.fit(model, datamodule=cli.datamodule, ckpt_path=ckpt_path)
    seconds = curves.seconds
    check_kept_a_checkpoint(spec, best, trainer)
    steps, epochs = int(trainer.global_step), int(trainer.current_epoch)
    if per_epoch is not None:
        record_epoch_tests(folder, trainer, model, cli.datamodule, curves)
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


def child_main(argv: List[str]) -> int:
    """``--child SPEC_JSON [--ckpt_path CKPT]``: run one spec; on SIGTERM / Ctrl-C (its checkpoint saved) exit with
    the interrupted status the callbacks set."""
    from ... import callbacks

    ckpt_path = argv[3] if argv[2:3] == ["--ckpt_path"] else None
    try:
        run_child(RunSpec(**json.loads(Path(argv[1]).read_text())), ckpt_path)
    except SystemExit:  # SIGTERM (Lightning's SIGTERMException) or Ctrl-C: the checkpoint is saved
        if callbacks.INTERRUPTED_EXIT_CODE is not None:
            return callbacks.INTERRUPTED_EXIT_CODE
        raise
    return 0
