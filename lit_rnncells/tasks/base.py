"""Wiring every task shares: the cell factory, optimiser and scheduler, auxiliary-loss logging."""
from __future__ import annotations

from typing import Any, Optional, Union

import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from ..cells.base import CellFactory
from ..cells.registry import get_cell
from ..nn.recurrent import Recurrent

CellSpec = Union[CellFactory, str]
"""A cell factory (a cell class or ``class_path`` config) or a registered cell name."""


def resolve_cell(cell: CellSpec) -> CellFactory:
    """Turn a cell name or factory into a factory; unknown names fail with the list of known cells."""
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
    """

    def __init__(self, cell: CellSpec = "GRU", optimizer: OptimizerCallable = torch.optim.Adam,
                 lr_scheduler: Optional[LRSchedulerCallable] = None, scheduler_monitor: str = "val/loss") -> None:
        super().__init__()
        self.cell_factory = resolve_cell(cell)
        self.optimizer_factory = optimizer
        self.lr_scheduler_factory = lr_scheduler
        self.scheduler_monitor = scheduler_monitor

    def make_recurrent(self, input_size: int, hidden_size: int, **options: Any) -> Recurrent:
        """A ``Recurrent`` layer (batch first) of this task's cell."""
        options.setdefault("batch_first", True)
        return Recurrent(self.cell_factory, input_size, hidden_size, **options)

    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer_factory(self.parameters())
        if self.lr_scheduler_factory is None:
            return optimizer
        scheduler = self.lr_scheduler_factory(optimizer)
        return {"optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "monitor": self.scheduler_monitor}}

    def log_aux_loss(self, stage: str, aux: Tensor, name: str, batch_size: int) -> None:
        """Log a cell's auxiliary loss on its own, e.g. ``train/zone_disagreement``."""
        self.log(f"{stage}/{name}", aux.detach(), batch_size=batch_size, sync_dist=stage != "train")
