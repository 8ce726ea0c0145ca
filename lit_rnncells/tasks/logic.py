"""Propositional-logic evaluation (Weissenborn & Rocktäschel, arXiv:1606.03002, §4.1): read a formula, predict its truth value."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor, nn
from torch.nn import functional as F
from torchmetrics.classification import MulticlassAccuracy

from ..utils.arguments import check_positive
from .base import CellSpec, RecurrentTask, cell_config


def last_real_output(output: Tensor, lengths: Tensor) -> Tensor:
    """The output at each sequence's last real step: ``(B, T, H) -> (B, H)``."""
    index = (lengths - 1).clamp_min(0).to(output.device)
    return output[torch.arange(output.shape[0], device=output.device), index]


class LogicEvaluator(RecurrentTask):
    """Token embedding → Recurrent(cell) → linear classifier on the final state.

    Args:
        vocab_size, num_classes, pad_id: from the data module (linked by the CLI).
        embedding_size: token embedding width.
        hidden_size: the cell's hidden size (paper: 8 upward).
        num_layers: stacked recurrent layers.
    """

    def __init__(self, cell: CellSpec = "GRU", vocab_size: int = 13, num_classes: int = 2, pad_id: int = 0,
                 embedding_size: int = 32, hidden_size: int = 8, num_layers: int = 1,
                 optimizer: OptimizerCallable = torch.optim.Adam,
                 lr_scheduler: Optional[LRSchedulerCallable] = None, compile: bool = False, backend: Optional[str] = None) -> None:
        super().__init__(cell, optimizer, lr_scheduler, compile=compile, backend=backend)
        check_positive(vocab_size=vocab_size, num_classes=num_classes, embedding_size=embedding_size,
                       hidden_size=hidden_size, num_layers=num_layers)
        self.save_hyperparameters(ignore=["optimizer", "lr_scheduler"], logger=False)  # weights_only
        self.hparams["cell"] = cell_config(cell)
        self.embedding = nn.Embedding(vocab_size, embedding_size, padding_idx=pad_id)
        self.rnn = self.make_recurrent(embedding_size, hidden_size, num_layers=num_layers)
        self.classifier = nn.Linear(hidden_size, num_classes)
        self.metrics = nn.ModuleDict({f"{s}_acc": MulticlassAccuracy(num_classes, average="micro")
                                      for s in ("train", "val", "test")})

    def forward(self, tokens: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Class logits ``(B, num_classes)`` and the cells' auxiliary loss."""
        output, _, aux = self.rnn(self.embedding(tokens), lengths=lengths, return_aux=True)
        return self.classifier(last_real_output(output, lengths)), aux

    def _shared_step(self, batch: Dict[str, Tensor], stage: str) -> Tensor:
        logits, aux = self(batch["tokens"], batch["lengths"])
        n = batch["labels"].shape[0]
        total = F.cross_entropy(logits, batch["labels"], reduction="sum")
        loss = self.mean_over_devices(total, n) if stage == "train" else total / n
        metric = self.metrics[f"{stage}_acc"]
        metric(logits, batch["labels"])
        self.log(f"{stage}/loss", total.detach() / n, batch_size=n, prog_bar=True, sync_dist=stage != "train")
        self.log(f"{stage}/acc", metric, batch_size=n, prog_bar=True, on_step=False, on_epoch=True)
        if self.rnn.has_aux_loss:
            self.log_aux_loss(stage, aux, self.rnn.aux_loss_name, n)
        return loss + aux

    def training_step(self, batch: Dict[str, Tensor], batch_idx: int) -> Tensor:
        return self._shared_step(batch, "train")

    def validation_step(self, batch: Dict[str, Tensor], batch_idx: int) -> None:
        self._shared_step(batch, "val")

    def test_step(self, batch: Dict[str, Tensor], batch_idx: int) -> None:
        self._shared_step(batch, "test")

    def predict_step(self, batch: Dict[str, Tensor], batch_idx: int) -> List[Dict[str, Any]]:
        """One record per formula: ``{"index", "text"}`` with the predicted truth value (``0`` or ``1``)."""
        logits, _ = self(batch["tokens"], batch["lengths"])
        predicted = logits.argmax(-1).tolist()
        indices = batch["index"].tolist() if "index" in batch else range(len(predicted))
        return [{"index": int(i), "text": str(p), "label": int(p)} for i, p in zip(indices, predicted)]
