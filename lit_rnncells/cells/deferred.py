"""Weight gradients of a step's recurrent maps, computed once after the time loop.

In a step loop, autograd's backward of ``h_{t−1} W_hhᵀ`` runs two products per step: ``g_t W_hh`` (the
gradient flowing back through time) and ``g_tᵀ h_{t−1}`` (the weight's gradient). The second reads B rows
and writes a whole ``N × K`` gradient, which is then added to the last step's: T memory-bound products per
weight. The weight's gradient is ``Σ_t g_tᵀ h_{t−1}``, one product over all T·B rows, which is how cuDNN's
RNN kernels compute it.

A cell writes its recurrent maps with :func:`deferred_addmm` (``torch.addmm(base, a, weightᵀ)``),
:func:`deferred_linear` (``F.linear``) or :func:`deferred_baddbmm` (``torch.baddbmm``). Outside
:func:`deferring_weight_gradients` each is exactly the torch call it names (same op, same values). Inside
it (the layer opens it where its plan says ``defer``: :mod:`lit_rnncells.nn.backend`), the product's
backward passes the gradient on to ``a`` and ``base`` and keeps ``g_t``; once the loop's backward is done,
one node computes every deferred weight's gradient from the kept ``a_t`` and ``g_t`` and hands it to
autograd like any other gradient (DDP's hooks, clipping and ``torch.autograd.grad`` see it as usual).

Forward values are the plain loop's exactly; gradients equal it up to float summation order. The cost is a
Python autograd node per product and step, and ``g_t`` kept until the loop's backward ends. Eagerly on CPU
that node cost what the one product saved (commit 130bf2d: 0.97-1.07 of the plain loop's time, docs/measured.md,
"Compiled recurrence"); inside a captured CUDA graph (``backend: graphs``) the Python runs once, at capture,
which is the one place the backend table may turn it on. A weight used through an index or a copy (a
stacked per-depth weight's slice, DropConnect's dropped copy) is not one of the layer's parameters, so its
product runs plainly.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch.nn import functional as F

ADDMM, LINEAR, BADDBMM = "addmm", "linear", "baddbmm"


def plain_autograd_only() -> bool:
    """Whether ``torch.compile`` is tracing or a ``torch.func`` transform (``grad``, ``jvp``, ``vmap``, ...) is
    running: the layer then opens no cell's ``stepping`` block and defers no weight gradient, since Dynamo failed
    on MuFuRU's block and ``torch.func`` refuses the ``autograd.Function`` s both use (values and gradients are
    the same without them)."""
    return torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active()


def first_order_only(what: str) -> None:
    """Refuse a backward run to build a graph for higher-order gradients (``create_graph=True``: a gradient
    penalty, ``torch.autograd.functional``'s ``jvp`` / ``hvp`` / ``hessian``). ``what`` computes a weight's gradient
    after the loop from values it keeps detached, so its own backward is not differentiable: under
    ``torch.func`` (whose ``grad`` of ``grad``, ``jvp`` and ``hessian`` give exact higher-order gradients) the
    layer runs without it (:func:`plain_autograd_only`). torch's ``once_differentiable``
    raised for some of these uses and, through ``torch.autograd.functional.jvp``, silently gave zeros."""
    if torch.is_grad_enabled():
        raise RuntimeError(f"{what} gives first-order gradients only, and this backward would build a graph for "
                           "higher-order ones (create_graph=True); take higher-order gradients with torch.func "
                           "(grad of grad, jvp, hessian), under which the layer runs without it.")


def _plain(op: str, base: Optional[Tensor], a: Tensor, weight: Tensor) -> Tensor:
    """The torch call a deferred product stands for."""
    if op == ADDMM:
        return torch.addmm(base, a, weight.t())
    if op == LINEAR:
        return F.linear(a, weight, base)
    return torch.baddbmm(base, a, weight)


class _Products:
    """The ``a_t`` and ``g_t`` of every deferred product of one time loop, per weight."""

    def __init__(self, weights: Sequence[Tensor]) -> None:
        self.index = {id(w): i for i, w in enumerate(weights)}
        self.op: Dict[int, str] = {}
        self.inputs: Dict[int, List[Tensor]] = {}
        self.grads: Dict[int, List[Optional[Tensor]]] = {}

    def accepts(self, weight: Tensor) -> bool:
        return id(weight) in self.index and weight.requires_grad

    def add_input(self, op: str, weight: Tensor, a: Tensor) -> Tuple[int, int]:
        """Keep ``a``; returns the weight's index and the slot its ``g_t`` goes in."""
        i = self.index[id(weight)]
        if self.op.setdefault(i, op) != op:
            raise RuntimeError(f"one weight used by two kinds of deferred product ({self.op[i]} and {op}) in one "
                               "step; use one kind per weight")
        self.inputs.setdefault(i, []).append(a)
        slots = self.grads.setdefault(i, [])
        slots.append(None)
        return i, len(slots) - 1

    def weight_gradient(self, i: int, weight: Tensor) -> Optional[Tensor]:
        """``Σ_t g_tᵀ a_t`` (``Σ_t a_tᵀ g_t`` for baddbmm's ``(M, K, N)`` weight) over the products whose
        gradient arrived: a step the loss does not reach has none."""
        pairs = [(a, g) for a, g in zip(self.inputs.get(i, []), self.grads.get(i, [])) if g is not None]
        if not pairs:
            return None
        dtype = pairs[0][1].dtype
        rows_a = torch.cat([a.to(dtype) for a, _ in pairs], dim=-2)  # (..., ΣR, K)
        rows_g = torch.cat([g for _, g in pairs], dim=-2)  # (..., ΣR, N)
        if self.op[i] == BADDBMM:
            grad = torch.matmul(rows_a.transpose(-1, -2), rows_g)
        else:
            grad = torch.matmul(rows_g.transpose(-1, -2), rows_a)
        return grad.to(weight.dtype)


_active: Optional[_Products] = None


class _DeferredProduct(torch.autograd.Function):
    """One of the three products; its backward gives ``a`` and ``base`` their gradients and keeps ``g_t`` for
    :class:`_AfterLoop` instead of computing the weight's gradient."""

    @staticmethod
    def forward(ctx, op: str, base: Optional[Tensor], a: Tensor, weight: Tensor,  # type: ignore[override]
                products: _Products) -> Tensor:
        out = _plain(op, base, a, weight)
        ctx.save_for_backward(weight)
        ctx.op, ctx.products = op, products
        ctx.a_dtype = a.dtype
        ctx.base_shape = None if base is None else base.shape
        ctx.base_dtype = None if base is None else base.dtype
        ctx.weight_index, ctx.slot = products.add_input(op, weight, a.detach())
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        first_order_only("A deferred weight-gradient product (lit_rnncells.cells.deferred)")
        (weight,) = ctx.saved_tensors
        ctx.products.grads[ctx.weight_index][ctx.slot] = grad
        grad_base = grad_a = None
        if ctx.needs_input_grad[1]:
            grad_base = grad.sum_to_size(ctx.base_shape).to(ctx.base_dtype)
        if ctx.needs_input_grad[2]:
            w = weight.transpose(-1, -2) if ctx.op == BADDBMM else weight
            grad_a = torch.matmul(grad, w.to(grad.dtype)).to(ctx.a_dtype)
        return None, grad_base, grad_a, None, None


class _AfterLoop(torch.autograd.Function):
    """Identity on the loop's projected inputs and initial state; its backward, which autograd runs after
    every step's (every step's gradient flows into one of its outputs), computes the deferred weights'
    gradients."""

    @staticmethod
    def forward(ctx, products: _Products, count: int, *tensors: Tensor):  # type: ignore[override]
        ctx.products, ctx.count = products, count
        ctx.weights = tensors[count:]
        return tuple(t.view_as(t) for t in tensors[:count])

    @staticmethod
    def backward(ctx, *grads: Tensor):  # type: ignore[override]
        first_order_only("A deferred weight-gradient product (lit_rnncells.cells.deferred)")
        weight_grads = [
            ctx.products.weight_gradient(i, w) if ctx.needs_input_grad[2 + ctx.count + i] else None
            for i, w in enumerate(ctx.weights)]
        ctx.products = None  # the kept a_t and g_t go with it
        return (None, None, *grads, *weight_grads)


def _product(op: str, base: Optional[Tensor], a: Tensor, weight: Tensor) -> Tensor:
    products = _active
    if products is None or not torch.is_grad_enabled() or plain_autograd_only() or not products.accepts(weight):
        return _plain(op, base, a, weight)
    return _DeferredProduct.apply(op, base, a, weight, products)


def deferred_addmm(base: Tensor, a: Tensor, weight: Tensor) -> Tensor:
    """``torch.addmm(base, a, weight.t())``: ``a`` ``(R, K)``, ``weight`` ``(N, K)`` as a Linear's. Inside the
    layer's deferring time loop, ``weight``'s gradient is computed after the loop."""
    return _product(ADDMM, base, a, weight)


def deferred_linear(a: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``F.linear(a, weight, bias)`` with ``weight``'s gradient computed after the loop (see
    :func:`deferred_addmm`)."""
    return _product(LINEAR, bias, a, weight)


def deferred_baddbmm(base: Tensor, a: Tensor, weight: Tensor) -> Tensor:
    """``torch.baddbmm(base, a, weight)``: ``a`` ``(M, R, K)``, ``weight`` ``(M, K, N)`` (M maps at once, e.g.
    MZU's M-functions), with ``weight``'s gradient computed after the loop."""
    return _product(BADDBMM, base, a, weight)


@contextmanager
def deferring_weight_gradients(weights: Sequence[Tensor], tensors: Tuple[Tensor, ...]
                               ) -> Iterator[Tuple[Tensor, ...]]:
    """Within the block, the deferred products over any of ``weights`` leave the weight's gradient to one
    product after the loop's backward. ``tensors`` are what every step's inputs derive from (the projected
    inputs and the initial state's leaves): the block yields them passed through the node that computes those
    gradients, and the loop must use the yielded ones. Without gradients it yields ``tensors`` unchanged."""
    global _active
    weights = [w for w in weights if w.requires_grad]
    if not weights or not torch.is_grad_enabled() or plain_autograd_only():
        yield tensors
        return
    products = _Products(weights)
    floating = [i for i, t in enumerate(tensors) if t.is_floating_point()]  # not, e.g., MC-RNN's integer phase
    passed = list(tensors)
    for i, t in zip(floating, _AfterLoop.apply(products, len(floating), *(tensors[i] for i in floating), *weights)):
        passed[i] = t
    previous, _active = _active, products
    try:
        yield tuple(passed)
    finally:
        _active = previous
