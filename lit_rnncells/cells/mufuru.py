"""MuFuRU, the multi-function recurrent unit (Weissenborn & Rocktäschel, mufuru.md eq. 2–4)."""
from __future__ import annotations

import math
from typing import Callable, Dict, Optional, Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .base import RecurrentCell
from .registry import register_cell

CompositionOp = Callable[[Tensor, Tensor], Tensor]
"""An element-wise composition op(s, v) of the previous state s and new features v."""

_OPS: Dict[str, CompositionOp] = {}
_ZERO_OPS = {"forget"}  # ops known to return 0: skipped in the sum


def register_mufuru_op(name: str, op: Optional[CompositionOp] = None):
    """Register a composition op by name: ``register_mufuru_op("avg", lambda s, v: (s + v) / 2)``.

    Usable as a decorator too. Ops must be differentiable and element-wise.
    """

    def add(fn: CompositionOp) -> CompositionOp:
        if name in _OPS and _OPS[name] is not fn:
            raise ValueError(f"A MuFuRU op named {name!r} is already registered; pick another name.")
        _OPS[name] = fn
        return fn

    return add(op) if op is not None else add


def available_mufuru_ops() -> list[str]:
    return sorted(_OPS)


# Table 1 of the paper.
register_mufuru_op("keep", lambda s, v: s)
register_mufuru_op("replace", lambda s, v: v)
register_mufuru_op("max", torch.maximum)
register_mufuru_op("min", torch.minimum)
register_mufuru_op("mul", torch.mul)
register_mufuru_op("diff", lambda s, v: 0.5 * (s - v).abs())
register_mufuru_op("forget", lambda s, v: torch.zeros_like(s))
# Variants found in other implementations; not in the default set.
register_mufuru_op("signed_diff", lambda s, v: 0.5 * (s - v))
register_mufuru_op("sqr_diff", lambda s, v: 0.25 * (s - v) ** 2)

PAPER_OPS = ("keep", "replace", "max", "min", "mul", "diff", "forget")


@register_cell()
class MuFuRU(RecurrentCell):
    """Multi-function recurrent unit, mufuru.md equations 2–4:

        r   = σ(W_r [x, s] + b_r)                                (4)
        v   = tanh(W_v [x, r ⊙ s] + b_v)                         (4)
        p^j = softmax_j(W_p^j [x, s] + b_p^j)  per dimension     (2, 3)
        s'  = Σ_j p^j ⊙ op^j(s, v)                               (4)

    ``ops`` picks the composition ops by registered name (default: the 7 of
    Table 1); add new ones with :func:`register_mufuru_op`. As in the authors'
    code the reset-gate bias starts at 1.0. With ``ops=("keep", "replace")``
    the cell is a GRU whose update gate is a 2-way softmax.

    Parameters: ``weight_ih`` stacks the x-parts of [W_r; W_v; W_p^1..l],
    ``weight_hs`` the s-parts of [W_r; W_p^1..l] (one fused matmul per step),
    ``weight_hv`` the (r ⊙ s)-part of W_v.
    """

    recurrent_weights = ("weight_hs", "weight_hv")  # hidden-to-hidden maps, for DropConnect

    def __init__(self, input_size: int, hidden_size: int, *, ops: Sequence[str] = PAPER_OPS,
                 reset_bias: float = 1.0) -> None:
        super().__init__(input_size, hidden_size)
        ops = tuple(ops)
        if not ops:
            raise ValueError("MuFuRU needs at least one composition op, e.g. ops=['keep', 'replace'].")
        unknown = [o for o in ops if o not in _OPS]
        if unknown:
            raise ValueError(f"Unknown MuFuRU op(s) {unknown}; known: {', '.join(available_mufuru_ops())}. "
                             "Register new ones with lit_rnncells.cells.register_mufuru_op.")
        if len(set(ops)) != len(ops):
            raise ValueError(f"MuFuRU ops must be distinct, got {list(ops)}.")
        self.ops = ops
        self.reset_bias = reset_bias
        n_ops, h = len(ops), hidden_size
        self.weight_ih = nn.Parameter(torch.empty((2 + n_ops) * h, input_size))
        self.bias = nn.Parameter(torch.empty((2 + n_ops) * h))
        self.weight_hs = nn.Parameter(torch.empty((1 + n_ops) * h, h))
        self.weight_hv = nn.Parameter(torch.empty(h, h))
        self._op_fns = [_OPS[o] for o in ops]
        self._live = [i for i, o in enumerate(ops) if o not in _ZERO_OPS]
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)
        with torch.no_grad():
            self.bias[: self.hidden_size].fill_(self.reset_bias)

    def project_input(self, x: Tensor) -> Tensor:
        # layout: [r (H), v (H), p logits (l*H)]
        return F.linear(x, self.weight_ih, self.bias)

    def step(self, x_proj_t: Tensor, state: Tensor) -> Tensor:
        h = self.hidden_size
        hs = state.matmul(self.weight_hs.t())
        r = torch.sigmoid(x_proj_t[:, :h] + hs[:, :h])
        v = torch.tanh(torch.addmm(x_proj_t[:, h: 2 * h], r * state, self.weight_hv.t()))
        logits = (x_proj_t[:, 2 * h:] + hs[:, h:]).view(-1, len(self.ops), h)
        p = torch.softmax(logits, dim=1)
        new = None
        for j in self._live:
            term = p[:, j] * self._op_fns[j](state, v)
            new = term if new is None else new + term
        return new if new is not None else torch.zeros_like(state)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, ops={list(self.ops)}"
