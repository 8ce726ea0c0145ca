"""A task written from scratch on RecurrentTask (README, "Subclassing a task"), with a training and a validation
step and no test step: tests/test_start_checks.py fits it through the command line."""
from __future__ import annotations

from typing import Any, Dict

from torch import Tensor, nn
from torch.nn import functional as F

from lit_rnncells.tasks import RecurrentTask


class LastStateLogicTask(RecurrentTask):
    """Classifies a logic formula from the top layer's final state."""

    def __init__(self, cell: Any = "GRU", vocab_size: int = 20, hidden_size: int = 16, **kwargs: Any) -> None:
        super().__init__(cell=cell, **kwargs)
        self.embedding = nn.Embedding(vocab_size, 8)
        self.rnn = self.make_recurrent(8, hidden_size)
        self.out = nn.Linear(hidden_size, 2)

    def _loss(self, batch: Dict[str, Tensor]) -> Tensor:
        _, state, aux = self.rnn(self.embedding(batch["tokens"]), lengths=batch["lengths"], return_aux=True)
        return F.cross_entropy(self.out(state[-1]), batch["labels"]) + aux

    def training_step(self, batch: Dict[str, Tensor], batch_idx: int) -> Tensor:
        loss = self._loss(batch)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: Dict[str, Tensor], batch_idx: int) -> None:
        self.log("val/loss", self._loss(batch), prog_bar=True)
