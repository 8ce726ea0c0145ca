"""MuFuRU, the multi-function recurrent unit (Weissenborn & Rocktäschel, arXiv:1606.03002 eq. 2–4)."""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Callable, ContextManager, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .base import RecurrentCell, State
from .deferred import first_order_only
from .fusable import small_matmul
from .recording import recording_into
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
    """Multi-function recurrent unit, Weissenborn & Rocktäschel, arXiv:1606.03002, equations 2–4:

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

    Inside the layer's time loop (:meth:`stepping`) the gradient of ``weight_hs`` is
    computed once for all steps (see :class:`_StateMapGradient`); values and gradients
    are those of the plain step loop.

    The op weights p (eq. 3) of every step can be read for plots (the paper's Figure 1b)
    with :func:`~lit_rnncells.nn.recording.composition_weights`, which records them only inside its own call.
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
        self._deferring = False  # inside stepping(): weight_hs's gradient is left to _StateMapGradient
        self._loop_states: Optional[List[Tensor]] = None  # the states the steps saw, if step records them
        self._op_weight_log: Optional[List[Tensor]] = None  # p of each step, inside recording_op_weights()
        if all(o in _BASIS_COEFFICIENTS for o in ops):
            coefficients = torch.tensor([_BASIS_COEFFICIENTS[o] for o in ops])  # (l, 4)
            self._terms = [k for k in range(len(BASIS)) if coefficients[:, k].any()]
            self.register_buffer("basis", coefficients[:, self._terms].contiguous(), persistent=False)
        else:
            self._terms, self.basis = [], None
        self.reset_parameters()

    def __getstate__(self) -> Dict[str, Any]:
        """Pickled (``torch.save(model)``, ``ddp_spawn``, ``copy.deepcopy``) without the op functions, which may be
        lambdas pickle cannot name: they are looked up again by name when unpickled."""
        state = dict(super().__getstate__())
        state.pop("_op_fns", None)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        super().__setstate__(state)
        unknown = [o for o in self.ops if o not in _OPS]
        if unknown:
            raise ValueError(f"This MuFuRU uses the op(s) {unknown}, which no module imported here registered; import "
                             "the module that calls register_mufuru_op for them before loading it.")
        self._op_fns = [_OPS[o] for o in self.ops]

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)
        with torch.no_grad():
            self.bias[: self.hidden_size].fill_(self.reset_bias)

    def project_input(self, x: Tensor) -> Tensor:
        # layout: [r (H), v (H), p logits (l*H)]
        return F.linear(x, self.weight_ih, self.bias)

    @contextmanager
    def stepping(self, x_proj: Tensor, seen: Optional[List[State]] = None) -> Iterator[Tensor]:
        """While training, the steps inside leave ``weight_hs``'s gradient to one matmul after
        the loop's backward (:class:`_StateMapGradient`), from the states the steps were fed:
        ``seen`` when the layer keeps them, else the steps record them themselves."""
        if not (torch.is_grad_enabled() and self.weight_hs.requires_grad):
            yield x_proj
            return
        own = seen is None
        states: List[Tensor] = [] if own else seen  # type: ignore[assignment]
        # The backward node keeps its own list, filled after the loop with the states detached: the states
        # themselves hold the graph that holds the node, and a node keeping them was a reference cycle through
        # autograd's C++ graph, which Python's collector cannot see, so every step's states leaked.
        kept: List[Tensor] = []
        previous = self._loop_states, self._deferring
        self._loop_states, self._deferring = (states if own else None), True
        try:
            yield _StateMapGradient.apply(x_proj, self.weight_hs, kept, self.hidden_size)
            kept.extend(s.detach() for s in states)
        finally:
            self._loop_states, self._deferring = previous

    def step(self, x_proj_t: Tensor, state: Tensor) -> Tensor:
        h = self.hidden_size
        if self._deferring:  # inside stepping(): weight_hs's gradient comes after the loop
            if self._loop_states is not None:  # only when the caller of stepping() keeps no states
                self._loop_states.append(state)
            hs = state.matmul(self.weight_hs.detach().t())
        else:
            hs = state.matmul(self.weight_hs.t())
        # split, not slices: its backward is one concatenation, not a zero-filled gradient per slice
        x_r, x_v, x_p = x_proj_t.split([h, h, len(self.ops) * h], dim=1)
        hs_r, hs_p = hs.split([h, len(self.ops) * h], dim=1)
        r = torch.sigmoid(x_r + hs_r)
        v = torch.tanh(torch.addmm(x_v, r * state, self.weight_hv.t()))
        logits = (x_p + hs_p).view(-1, len(self.ops), h)
        p = torch.softmax(logits, dim=1)
        if self._op_weight_log is not None:
            self._op_weight_log.append(p.detach())
        if self.basis is None:
            return sum(p[:, j] * fn(state, v) for j, fn in enumerate(self._op_fns))
        if not self._terms:
            return torch.zeros_like(state)
        # Σ_j p^j op^j(s, v) = Σ_k (Σ_j p^j B_jk) term_k(s, v): one contraction, at most 4 terms.
        weights = small_matmul(self.basis.t().to(p.dtype), p)  # (k, l) @ (B, l, H): 5x faster than einsum
        terms = [self._basis_term(k, state, v) for k in self._terms]
        return (weights * torch.stack(terms, dim=1)).sum(1)

    @staticmethod
    def _basis_term(k: int, s: Tensor, v: Tensor) -> Tensor:
        if k == 0:
            return s
        if k == 1:
            return v
        return (s - v).abs() if k == 2 else s * v

    def recording_op_weights(self) -> ContextManager[List[Tensor]]:
        """Within the block, every step appends its detached op weights p ``(B, l, H)`` (ops in the
        order of ``self.ops``, eq. 3) to the yielded list. Prefer :func:`~lit_rnncells.nn.recording.composition_weights`."""
        return recording_into(self, "_op_weight_log")

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, ops={list(self.ops)}"


class _StateMapGradient(torch.autograd.Function):
    """Identity on MuFuRU's time-major projected inputs ``(T, B, P)`` whose backward also gives
    the gradient of the state map ``weight_hs`` for all T steps in one matmul.

    In the step, ``W_hs s_{t−1}`` = [r part; p parts] is added to the r and p columns of
    ``x_proj_t`` and used nowhere else, so the gradient of that product is the gradient of those
    columns of ``x_proj_t``, which reaches this node as one ``(T, B, P)`` tensor once the loop's
    backward is done. With the states the steps saw (appended in the forward, in order),
    dL/dW_hs = Σ_t g_tᵀ s_{t−1} is then one matmul over T·B rows, where autograd would run T
    matmuls over B rows, each writing (and adding) a full (l + 1)H × H gradient: at H = 512 those
    ran at a quarter of the matmul rate and took 40% of the training step.

    ``states`` must hold the states detached (:meth:`MuFuRU.stepping` fills it after the loop): the
    context keeps it, and a state with its graph would make a cycle (state → graph → this node → state)
    that nothing frees.
    """

    @staticmethod
    def forward(ctx, x_proj: Tensor, weight_hs: Tensor, states: List[Tensor],  # type: ignore[override]
                hidden_size: int) -> Tensor:
        ctx.states, ctx.hidden_size, ctx.weight_dtype = states, hidden_size, weight_hs.dtype
        return x_proj.view_as(x_proj)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        first_order_only("MuFuRU's one-product gradient of weight_hs (its stepping block)")
        grad_weight = None
        if ctx.needs_input_grad[1]:
            h, steps = ctx.hidden_size, grad.shape[0]
            if len(ctx.states) != steps:
                raise RuntimeError(f"MuFuRU.stepping saw {len(ctx.states)} steps for {steps} inputs; "
                                   "step exactly once over each x_proj[t] inside the block.")
            states = torch.stack([s.to(grad.dtype) for s in ctx.states]).reshape(-1, h)
            rows = grad.reshape(-1, grad.shape[-1])
            grad_weight = grad.new_empty(rows.shape[-1] - h, h)
            torch.mm(rows[:, :h].t(), states, out=grad_weight[:h])  # reset gate r
            torch.mm(rows[:, 2 * h:].t(), states, out=grad_weight[h:])  # op weights p^1 … p^l
            grad_weight = grad_weight.to(ctx.weight_dtype)
        return grad, grad_weight, None, None
