"""MuFuRU, the multi-function recurrent unit (Weissenborn & Rocktäschel, mufuru.md eq. 2–4)."""
from __future__ import annotations

import math
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .base import RecurrentCell
from .registry import register_cell

CompositionOp = Callable[[Tensor, Tensor], Tensor]
"""An element-wise composition op(s, v) of the previous state s and new features v."""

_OPS: Dict[str, CompositionOp] = {}
BASIS = ("s", "v", "|s-v|", "s*v")
"""Terms many ops are linear combinations of: max(s, v) = (s + v + |s − v|) / 2, etc."""
_BASIS_COEFFICIENTS: Dict[str, Tuple[float, float, float, float]] = {}


def register_mufuru_op(name: str, op: Optional[CompositionOp] = None, *,
                       basis: Optional[Sequence[float]] = None):
    """Register a composition op by name: ``register_mufuru_op("avg", lambda s, v: (s + v) / 2)``.

    Usable as a decorator too. Ops must be differentiable and element-wise. ``basis``
    optionally gives the op as coefficients of ``BASIS`` (``avg``: ``(0.5, 0.5, 0, 0)``);
    when every op of a cell has one, the cell sums them in one contraction instead of
    calling each op (same values; a faster step).
    """

    def add(fn: CompositionOp) -> CompositionOp:
        if name in _OPS and _OPS[name] is not fn:
            raise ValueError(f"A MuFuRU op named {name!r} is already registered; pick another name.")
        _OPS[name] = fn
        if basis is not None:
            if len(basis) != len(BASIS):
                raise ValueError(f"basis must give {len(BASIS)} coefficients for {BASIS}, got {list(basis)}.")
            _BASIS_COEFFICIENTS[name] = tuple(float(b) for b in basis)  # type: ignore[assignment]
        return fn

    return add(op) if op is not None else add


def available_mufuru_ops() -> list[str]:
    return sorted(_OPS)


# Table 1 of the paper.
register_mufuru_op("keep", lambda s, v: s, basis=(1, 0, 0, 0))
register_mufuru_op("replace", lambda s, v: v, basis=(0, 1, 0, 0))
register_mufuru_op("max", torch.maximum, basis=(0.5, 0.5, 0.5, 0))
register_mufuru_op("min", torch.minimum, basis=(0.5, 0.5, -0.5, 0))
register_mufuru_op("mul", torch.mul, basis=(0, 0, 0, 1))
register_mufuru_op("diff", lambda s, v: 0.5 * (s - v).abs(), basis=(0, 0, 0.5, 0))
register_mufuru_op("forget", lambda s, v: torch.zeros_like(s), basis=(0, 0, 0, 0))
# Variants found in other implementations; not in the default set.
register_mufuru_op("signed_diff", lambda s, v: 0.5 * (s - v), basis=(0.5, -0.5, 0, 0))
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
        if all(o in _BASIS_COEFFICIENTS for o in ops):
            coefficients = torch.tensor([_BASIS_COEFFICIENTS[o] for o in ops])  # (l, 4)
            self._terms = [k for k in range(len(BASIS)) if coefficients[:, k].any()]
            self.register_buffer("basis", coefficients[:, self._terms].contiguous(), persistent=False)
        else:
            self._terms, self.basis = [], None
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
        if self.basis is None:
            return sum(p[:, j] * fn(state, v) for j, fn in enumerate(self._op_fns))
        if not self._terms:
            return torch.zeros_like(state)
        # Σ_j p^j op^j(s, v) = Σ_k (Σ_j p^j B_jk) term_k(s, v): one contraction, at most 4 terms.
        weights = torch.einsum("blh,lk->bkh", p, self.basis.to(p.dtype))
        terms = [self._basis_term(k, state, v) for k in self._terms]
        return (weights * torch.stack(terms, dim=1)).sum(1)

    @staticmethod
    def _basis_term(k: int, s: Tensor, v: Tensor) -> Tensor:
        if k == 0:
            return s
        if k == 1:
            return v
        return (s - v).abs() if k == 2 else s * v

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, ops={list(self.ops)}"
