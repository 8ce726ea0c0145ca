"""Attention over encoder outputs for the seq2seq decoder, masked on source padding.

Scores (query ``q`` (B, Q) is the decoder's top-layer output, keys/values ``k_j`` (B, S, K) the
encoder outputs):

* ``additive`` (Bahdanau, Cho & Bengio 2015, eq. 6 / App. A.1.2): ``e_j = vᵀ tanh(W_q q + W_k k_j)``;
* ``dot`` (Luong, Pham & Manning 2015, §3.1): ``e_j = qᵀ k_j`` (needs Q == K);
* ``general`` (Luong §3.1): ``e_j = qᵀ W k_j``.

``α = softmax_j(e)`` over real source positions only; the context is ``Σ_j α_j k_j``. Everything
that depends on the keys alone (``W_k k`` for additive, ``W k`` for general) is computed once per
source by :meth:`Attention.precompute`, so a decoding step does one matmul for the query (additive)
or none (dot / general) plus the scoring.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..utils.arguments import check_positive

ATTENTION_KINDS = ("additive", "dot", "general")


class Attention(nn.Module):
    """Additive (default), dot or general attention; returns the context and the weights.

    Args:
        query_size: size Q of the decoder query. key_size: size K of the encoder outputs.
        kind: ``"additive"``, ``"dot"`` or ``"general"``.
        hidden_size: width of the additive score layer (default ``query_size``).
    """

    def __init__(self, query_size: int, key_size: int, kind: str = "additive",
                 hidden_size: Optional[int] = None) -> None:
        super().__init__()
        check_positive(query_size=query_size, key_size=key_size)
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"Unknown attention {kind!r}; use one of {', '.join(ATTENTION_KINDS)}.")
        if kind == "dot" and query_size != key_size:
            raise ValueError(f"dot attention needs the query size ({query_size}) to equal the key size "
                             f"({key_size}); use attention='general' or 'additive' for different sizes.")
        hidden_size = query_size if hidden_size is None else hidden_size
        check_positive(attention_size=hidden_size)
        self.kind, self.query_size, self.key_size, self.hidden_size = kind, query_size, key_size, hidden_size
        if kind == "additive":
            self.key_proj = nn.Linear(key_size, hidden_size, bias=True)
            self.query_proj = nn.Linear(query_size, hidden_size, bias=False)
            self.score = nn.Parameter(torch.empty(hidden_size).uniform_(-1 / math.sqrt(hidden_size),
                                                                          1 / math.sqrt(hidden_size)))
        elif kind == "general":
            self.key_proj = nn.Linear(key_size, query_size, bias=False)

    def precompute(self, keys: Tensor) -> Tensor:
        """The key-only part of the score for all source positions, ``(B, S, ·)``: once per source."""
        return keys if self.kind == "dot" else self.key_proj(keys)

    def forward(self, query: Tensor, proj_keys: Tensor, values: Tensor, mask: Optional[Tensor]
                ) -> Tuple[Tensor, Tensor]:
        """``query`` (B, Q), ``proj_keys`` from :meth:`precompute`, ``values`` (B, S, K), ``mask`` (B, S)
        True at real positions. Returns the context (B, K) and the weights α (B, S), zero on padding."""
        if self.kind == "additive":
            features = torch.tanh(proj_keys + self.query_proj(query).unsqueeze(1))  # (B, S, A)
            energy = features.matmul(self.score.to(features.dtype))  # (B, S)
        else:
            energy = torch.bmm(proj_keys, query.unsqueeze(2)).squeeze(2)  # (B, S)
        if mask is not None:
            energy = energy.masked_fill(~mask, float("-inf"))
        weights = F.softmax(energy, dim=-1)
        context = torch.bmm(weights.unsqueeze(1), values).squeeze(1)
        return context, weights

    def extra_repr(self) -> str:
        return f"{self.kind}, query_size={self.query_size}, key_size={self.key_size}, hidden_size={self.hidden_size}"
