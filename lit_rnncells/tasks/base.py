"""Wiring every task shares: the cell factory, optimiser and scheduler, auxiliary-loss logging."""
from __future__ import annotations

import functools
import os
from typing import IO, Any, Dict, Optional, Union

import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from lightning.pytorch.trainer.states import TrainerFn
from torch import Tensor

from ..cells.base import CellFactory
from ..cells.registry import UnknownCellError, get_cell
from ..data.checkpoint_state import read_checkpoint, reopen_cut_epoch
from ..utils.loggers import log_grouped_hyperparameters
from ..nn.backend import check_backend
from ..nn.recurrent import Recurrent
from ..utils.imports import import_object, unimportable_class

CellSpec = Union[CellFactory, str]
"""A cell factory (a cell class or ``class_path`` config) or a registered cell name."""

_RestrictedClassmethod = type(LightningModule.__dict__["load_from_checkpoint"])  # Lightning's: refuses instance calls


def _import_cell(class_path: str) -> type:
    """A cell class from a registered name or a dotted import path (a registered cell's path from an older release
    finds it by its name); a path that is neither says why it does not import."""
    found = import_object(class_path) if "." in class_path else None
    if found is not None:
        return found
    try:
        return get_cell(class_path.rsplit(".", 1)[-1])
    except UnknownCellError:
        if "." not in class_path:
            raise
        return get_cell(class_path)  # not registered under its name either: the import path's own error


def cell_config(cell: Any) -> Any:
    """A JSON-able description of a cell spec (registered name, or ``{class_path, init_args}``) for hparams."""
    if isinstance(cell, (str, dict)):
        return cell
    if isinstance(cell, type):
        try:  # a cell the package ships: its registered name
            if cell.__module__.startswith("lit_rnncells.") and get_cell(cell.__name__) is cell:
                return cell.__name__
        except ValueError:
            pass
        if "<" not in cell.__qualname__:  # a cell of a user's module, registered or not: its import path, so a
            return f"{cell.__module__}.{cell.__qualname__}"  # checkpoint stays plain data (weights_only loads) and
        return cell  # a fresh process finds the cell (a registered name alone needs its module imported first)
    if isinstance(cell, functools.partial):  # functools.partial(cls, ...) or jsonargparse's partial(…, cls, ...)
        cls = cell.func if isinstance(cell.func, type) else next((a for a in cell.args if isinstance(a, type)), None)
        if cls is not None:
            return {"class_path": cell_config(cls),
                    "init_args": {k: cell_config(v) if callable(v) else v for k, v in cell.keywords.items()}}
    return cell


def cell_from_config(spec: Any) -> Any:
    """Inverse of :func:`cell_config`: a ``{class_path, init_args}`` dict becomes a factory."""
    if isinstance(spec, dict) and "class_path" in spec:
        cls = _import_cell(spec["class_path"])
        return functools.partial(cls, **{k: cell_from_config(v) for k, v in spec.get("init_args", {}).items()})
    return spec


def resolve_cell(cell: CellSpec) -> CellFactory:
    """Turn a cell name, ``{class_path, init_args}`` dict or factory into a factory.

    Unknown names fail with the list of known cells."""
    cell = cell_from_config(cell)
    if isinstance(cell, str):
        return get_cell(cell)
    if not callable(cell):
        raise TypeError(f"cell must be a cell name or a cell factory, got {type(cell).__name__}.")
    return cell


class RecurrentTask(LightningModule):
    """Base of every task: holds the cell factory and the optimiser / scheduler choice.

    Args:
        cell: the recurrent cell, as a registered name (``"MuFuRU"``) or a
            factory (in YAML a ``class_path`` with ``init_args``).
        optimizer: builds the optimiser from the parameters (default Adam, lr 1e-3).
        lr_scheduler: optional; builds a scheduler from the optimiser.
        scheduler_monitor: metric a ``ReduceLROnPlateau`` scheduler watches.
        compile: deprecated (one release): ``backend: compiled``.
        backend: how the recurrent layers run their time loop (``auto``, ``loop``, ``compiled``, ``graphs``,
            ``fused``; ``lit_rnncells.nn.backend``, same values under each). ``None``: ``$LIT_RNNCELLS_BACKEND``,
            else ``auto``. On the command line: ``--model.init_args.backend compiled``.
    """

    def __init__(self, cell: CellSpec = "GRU", optimizer: OptimizerCallable = torch.optim.Adam,
                 lr_scheduler: Optional[LRSchedulerCallable] = None, scheduler_monitor: str = "val/loss",
                 compile: bool = False, backend: Optional[str] = None) -> None:
        super().__init__()
        self.cell_factory = resolve_cell(cell)
        self.optimizer_factory = optimizer
        self.lr_scheduler_factory = lr_scheduler
        self.scheduler_monitor = scheduler_monitor
        self.backend = check_backend(backend, compile)  # each Recurrent layer checks its cell against it

    @_RestrictedClassmethod
    def load_from_checkpoint(cls, checkpoint_path: Union[str, os.PathLike, IO], *args: Any, **kwargs: Any) -> Any:
        """Lightning's ``load_from_checkpoint``; where it fails because the checkpoint names a class of a user's
        module (a cell, an optimiser) that does not import here, one ``ValueError`` naming the class, why and the
        fix (the usual cause: a module not on Python's path, the script run from another folder) in place of
        jsonargparse's report. The package's own classes are left to Lightning (an older release's path finds its
        cell by name)."""
        try:
            return super().load_from_checkpoint(checkpoint_path, *args, **kwargs)
        except Exception:
            if not isinstance(checkpoint_path, (str, os.PathLike)) or not os.path.isfile(checkpoint_path):
                raise
            try:
                hyper_parameters = read_checkpoint(os.fspath(checkpoint_path)).get("hyper_parameters")
            except Exception:  # noqa: BLE001 - unreadable: Lightning's own error above says so
                hyper_parameters = None
            found = unimportable_class(hyper_parameters, skip=("lit_rnncells.",))
            if found is None:
                raise
        path, problem = found
        raise ValueError(f"{os.fspath(checkpoint_path)!r} was trained with {path}, which cannot be imported here: "
                         f"{problem}.")

    def stop_if_terminated(self) -> None:
        """Raise Lightning's ``SIGTERMException`` once the process got SIGTERM. Lightning's handler only sets a
        flag that its loops read between batches; a decoding batch of a large model can take minutes, so the
        decoders read it between their steps too (the command line then exits 143)."""
        trainer = self._trainer
        if trainer is not None and getattr(trainer, "received_sigterm", False):
            from lightning.pytorch.utilities.exceptions import SIGTERMException

            raise SIGTERMException()

    def make_recurrent(self, input_size: int, hidden_size: int, **options: Any) -> Recurrent:
        """A ``Recurrent`` layer (batch first, run by the task's ``backend``) of this task's cell."""
        options.setdefault("batch_first", True)
        options.setdefault("backend", self.backend)
        return Recurrent(self.cell_factory, input_size, hidden_size, **options)

    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer_factory(self.parameters())
        if self.lr_scheduler_factory is None:
            return optimizer
        scheduler = self.lr_scheduler_factory(optimizer)
        return {"optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "monitor": self.scheduler_monitor}}

    # Hyperparameters: every task saves its own with ``save_hyperparameters(..., logger=False)`` and every
    # DataModule likewise; they are logged here, grouped as model/... and data/... (see utils/loggers.py), at the
    # start of each run, where Lightning would log them merged. Subclasses overriding these hooks call super().
    def _log_hyperparameters(self) -> None:
        if self._trainer is not None:
            log_grouped_hyperparameters(self.trainer, self)

    def on_fit_start(self) -> None:
        self._log_hyperparameters()

    def on_validation_start(self) -> None:
        if self._trainer is not None and self.trainer.state.fn == TrainerFn.VALIDATING:  # not fit's validations
            self._log_hyperparameters()

    def on_test_start(self) -> None:
        self._log_hyperparameters()

    def on_predict_start(self) -> None:
        self._log_hyperparameters()

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Record which task wrote the checkpoint, so the command line can tell a checkpoint of another task
        from a damaged one, and every rank's random-number state, so a resumed fit draws the dropout masks
        the uninterrupted one would have. Subclasses that override this call ``super().on_save_checkpoint``
        (and ``super().on_load_checkpoint``)."""
        checkpoint["lit_rnncells_task"] = f"{type(self).__module__}.{type(self).__qualname__}"
        checkpoint["lit_rnncells_rng"] = self._gathered_rng_state()
        reopen_cut_epoch(checkpoint)  # a max_steps stop mid-epoch resumes that epoch at its next batch

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Resuming a fit on as many devices as wrote the checkpoint: each rank takes back its random state."""
        reopen_cut_epoch(checkpoint)  # checkpoints written before the fix resume exactly too
        saved = checkpoint.get("lit_rnncells_rng")
        trainer = self._trainer
        if saved is None or trainer is None or trainer.state.fn != "fit":
            return
        if saved["torch"].shape[0] != trainer.world_size:
            return  # another device count: the data order restarts too (the DataModule says so)
        torch.set_rng_state(saved["torch"][trainer.global_rank].clone())
        if "cuda" in saved and self.device.type == "cuda":
            torch.cuda.set_rng_state(saved["cuda"][trainer.global_rank].clone(), self.device)

    def _gathered_rng_state(self) -> Dict[str, Tensor]:
        """The CPU (and this device's CUDA) generator state of every rank, ``(world_size, N)`` uint8; runs on
        every rank, as Lightning calls this hook."""
        states = {"torch": torch.get_rng_state()}
        if self.device.type == "cuda":
            states["cuda"] = torch.cuda.get_rng_state(self.device)
        trainer = self._trainer
        if trainer is not None and trainer.world_size > 1:
            return {k: self.all_gather(v.to(self.device)).cpu() for k, v in states.items()}
        return {k: v.unsqueeze(0) for k, v in states.items()}

    def mean_over_devices(self, total: Tensor, count: int) -> Tensor:
        """``total / count`` for the backward pass, as the mean over the whole global batch.

        DDP averages the devices' gradients, so per-device means weight every device alike even when
        they hold different numbers of examples or target tokens. Scaling by ``world_size / global count``
        makes the averaged gradient that of the global mean: ``W`` devices train exactly as one device
        with their batches together (tested). One scalar all-gather per step; a plain mean on one device."""
        trainer = self._trainer
        if trainer is None or trainer.world_size == 1 or not self.training:
            return total / max(count, 1)
        counts = self.all_gather(torch.tensor(float(count), device=total.device))
        return total * trainer.world_size / counts.sum().clamp_min(1.0)

    def log_aux_loss(self, stage: str, aux: Tensor, name: str, batch_size: int) -> None:
        """Log a cell's auxiliary loss on its own, e.g. ``train/zone_disagreement``."""
        self.log(f"{stage}/{name}", aux.detach(), batch_size=batch_size, sync_dist=stage != "train")
