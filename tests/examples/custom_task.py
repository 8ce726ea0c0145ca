"""A user's own task, defined outside the package by subclassing one of ours (used by test_cli.py).

Same as the README example: mean-pool the recurrent outputs instead of taking the last state.
"""
from __future__ import annotations

import torch
from torch import Tensor

from lit_rnncells.tasks import LogicEvaluator


class MeanPoolLogicEvaluator(LogicEvaluator):
    """Classifies from the mean of the real (non-padded) outputs."""

    def forward(self, tokens: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        output, _, aux = self.rnn(self.embedding(tokens), lengths=lengths, return_aux=True)
        mask = (torch.arange(tokens.shape[1], device=tokens.device) < lengths.unsqueeze(1)).unsqueeze(-1)
        pooled = (output * mask).sum(1) / lengths.clamp_min(1).unsqueeze(1)
        return self.classifier(pooled), aux
