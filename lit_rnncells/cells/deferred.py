"""Weight gradients of a step's matrix products, computed once after the time loop.

In a step loop, autograd's backward of ``a_t @ W`` runs two products per step: ``g_t Wᵀ`` (the gradient
flowing back through time) and ``a_tᵀ g_t`` (the weight's gradient). The second reads B rows and writes a
whole ``K × N`` gradient, which is then added to the last step's: T memory-bound products per weight. The
weight's gradient is ``Σ_t a_tᵀ g_t``, one product over all T·B rows; cuDNN's RNN kernels compute it so.

A cell asks for that with :func:`deferred_matmul` (``a @ weight``) or :func:`deferred_linear`
(``F.linear(a, weight)``) in its ``step``. Inside the layer's time loop (:func:`deferring_weight_gradients`,
which ``Recurrent`` opens when gradients are on and the step is not compiled) the product's backward only
passes the gradient on to ``a`` and keeps ``g_t``; once the loop's backward is done, one node computes every
deferred weight's gradient from the kept ``a_t`` and ``g_t`` and hands it to autograd like any other
gradient (so DDP's hooks, gradient clipping and ``torch.autograd.grad`` see it as usual). Anywhere else
(outside the loop, without gradients, in a compiled step) both functions are the plain product.

Values are the plain loop's; gradients equal it up to float summation order (tested for every cell that
uses it). The cost: ``g_t`` of every deferred product is kept until the loop's backward ends (``T·B``
rows of the product's output width; ``a_t`` autograd keeps anyway), and a Python-level autograd node per
product and step, so it pays for large weights and small batches (docs/measured.md, "Deferred weight
gradients").
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable


class _Products:
    """The ``a_t`` and ``g_t`` of every deferred product of one time loop, per weight."""

    def __init__(self, weights: Sequence[Tensor]) -> None:
        self.index = {id(w): i for i, w in enumerate(weights)}
        self.inputs: Dict[int, List[Tensor]] = {}
        self.grads: Dict[int, List[Optional[Tensor]]] = {}
        self.transposed: Dict[int, bool] = {}

    def accepts(self, weight: Tensor) -> bool:
        return id(weight) in self.index and weight.requires_grad

    def add_input(self, weight: Tensor, a: Tensor, transposed: bool) -> int:
        i = self.index[id(weight)]
        self.transposed[i] = transposed
        self.inputs.setdefault(i, []).append(a)
        slots = self.grads.setdefault(i, [])
        slots.append(None)
        return len(slots) - 1

    def weight_gradient(self, i: int, weight: Tensor) -> Optional[Tensor]:
        """``Σ_t a_tᵀ g_t`` over the products whose gradient arrived (a step the loss does not reach has none)."""
        pairs = [(a, g) for a, g in zip(self.inputs.get(i, []), self.grads.get(i, [])) if g is not None]
        if not pairs:
            return None
        dtype = pairs[0][1].dtype
        rows_a = torch.cat([a.to(dtype) for a, _ in pairs], dim=-2)  # (..., ΣR, K)
        rows_g = torch.cat([g for _, g in pairs], dim=-2)  # (..., ΣR, N)
        if self.transposed[i]:  # weight (N, K), used as a @ weightᵀ
            grad = torch.matmul(rows_g.transpose(-1, -2), rows_a)
        else:
            grad = torch.matmul(rows_a.transpose(-1, -2), rows_g)
        return grad.to(weight.dtype)


_active: Optional[_Products] = None
enabled = True
"""Off, the layer runs every product as the plain loop does (scripts/bench_deferred_gradients.py times both)."""


class _DeferredProduct(torch.autograd.Function):
    """``a @ w`` (``w = weightᵀ`` when ``transposed``) whose backward gives ``a`` its gradient and keeps
    ``g_t`` for :class:`_AfterLoop` instead of computing the weight's gradient."""

    @staticmethod
    def forward(ctx, a: Tensor, weight: Tensor, transposed: bool,  # type: ignore[override]
                products: _Products) -> Tensor:
        ctx.save_for_backward(weight)
        ctx.transposed, ctx.products = transposed, products
        ctx.slot = products.add_input(weight, a.detach(), transposed)
        ctx.weight_index = products.index[id(weight)]
        return torch.matmul(a, weight.t() if transposed else weight)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        (weight,) = ctx.saved_tensors
        ctx.products.grads[ctx.weight_index][ctx.slot] = grad
        grad_a = None
        if ctx.needs_input_grad[0]:
            w = weight if ctx.transposed else weight.transpose(-1, -2)
            grad_a = torch.matmul(grad, w.to(grad.dtype))
        return grad_a, None, None, None


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
    @once_differentiable
    def backward(ctx, *grads: Tensor):  # type: ignore[override]
        weight_grads = [
            ctx.products.weight_gradient(i, w) if ctx.needs_input_grad[2 + ctx.count + i] else None
            for i, w in enumerate(ctx.weights)]
        ctx.products = None  # the kept a_t and g_t go with it
        return (None, None, *grads, *weight_grads)


def _product(a: Tensor, weight: Tensor, transposed: bool) -> Tensor:
    products = _active
    if products is None or torch.compiler.is_compiling() or not products.accepts(weight):
        return torch.matmul(a, weight.t() if transposed else weight)
    return _DeferredProduct.apply(a, weight, transposed, products)


def deferred_matmul(a: Tensor, weight: Tensor) -> Tensor:
    """``a @ weight`` with ``weight`` ``(K, N)`` and ``a`` ``(R, K)``, or batched: ``weight`` ``(M, K, N)``
    and ``a`` ``(M, R, K)``. Inside the layer's time loop, ``weight``'s gradient is computed after the loop."""
    return _product(a, weight, False)


def deferred_linear(a: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``F.linear(a, weight, bias)`` for ``a`` ``(R, K)``, ``weight`` ``(N, K)``, with ``weight``'s gradient
    computed after the time loop (see :func:`deferred_matmul`)."""
    out = _product(a, weight, True)
    return out if bias is None else out + bias


@contextmanager
def deferring_weight_gradients(weights: Sequence[Tensor], tensors: Tuple[Tensor, ...]
                               ) -> Iterator[Tuple[Tensor, ...]]:
    """Within the block, :func:`deferred_matmul` and :func:`deferred_linear` over any of ``weights`` leave
    the weight's gradient to one product after the loop's backward. ``tensors`` are what every step's
    inputs derive from (the projected inputs and the initial state's leaves): the block yields them
    passed through the node that computes those gradients, and the loop must use the yielded ones."""
    global _active
    weights = [w for w in weights if w.requires_grad]
    if not weights or not torch.is_grad_enabled() or not enabled:
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
