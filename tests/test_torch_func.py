"""``torch.func`` transforms over a ``Recurrent``: ``grad`` and ``jvp`` (MuFuRU's ``stepping`` block holds an
``autograd.Function`` that ``torch.func`` refuses), and ``vmap`` (torch's fused GRU / LSTM / Elman kernels have no
batching rule: under a transform the layer runs the cells' steps). Per-example gradients, ``vmap(grad(...))``,
and second-order gradients are what a researcher builds from them (differential privacy, influence, gradient
penalties); autograd's own double backward through MuFuRU's block is refused by name."""
from __future__ import annotations

import pytest
import torch
from torch.func import functional_call, grad, jvp, vmap

from lit_rnncells.nn import Recurrent

CELLS = ["GRU", "LSTM", "MuFuRU", "CapMZU"]


def _layer(cell: str) -> Recurrent:
    torch.manual_seed(0)
    return Recurrent(cell, 3, 4, batch_first=True)


def _without_stepping_blocks(layer: Recurrent) -> Recurrent:
    """The same layer with the cells' ``stepping`` blocks replaced by the contract's default (none)."""
    import copy

    from lit_rnncells.cells import RecurrentCell

    plain = copy.deepcopy(layer)
    for cell in plain.cells:
        cell.stepping = RecurrentCell.stepping.__get__(cell)
    return plain


@pytest.mark.parametrize("cell", CELLS)
def test_func_grad_equals_autograd(cell) -> None:
    layer = _layer(cell)
    x = torch.randn(2, 5, 3)
    params = dict(layer.named_parameters())
    got = grad(lambda p: functional_call(layer, p, (x,))[0].square().sum())(params)
    layer(x)[0].square().sum().backward()
    for name, p in layer.named_parameters():
        torch.testing.assert_close(got[name], p.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cell", CELLS)
def test_func_jvp_equals_the_double_backward_jvp(cell) -> None:
    layer = _layer(cell)
    x, v = torch.randn(2, 5, 3), torch.randn(2, 5, 3)
    _, got = jvp(lambda inputs: layer(inputs)[0], (x,), (v,))
    plain = _without_stepping_blocks(layer)  # a double backward: MuFuRU's block is first order only
    _, want = torch.autograd.functional.jvp(lambda inputs: plain(inputs)[0], x, v)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cell", CELLS)
def test_per_example_gradients_by_vmap_equal_one_backward_per_example(cell) -> None:
    layer = _layer(cell)
    batch = torch.randn(3, 5, 3)  # three unbatched sequences (T, input_size)
    params = {n: p.detach() for n, p in layer.named_parameters()}

    def loss(p, sequence):
        return functional_call(layer, p, (sequence,))[0][-1].square().sum()

    got = vmap(grad(loss), in_dims=(None, 0))(params, batch)
    for i, sequence in enumerate(batch):
        layer.zero_grad()
        layer(sequence)[0][-1].square().sum().backward()
        for name, p in layer.named_parameters():
            torch.testing.assert_close(got[name][i], p.grad, rtol=1e-5, atol=1e-6)


def test_mufurus_one_product_gradient_refuses_a_second_order_backward_by_name() -> None:
    """MuFuRU's ``stepping`` block computes ``weight_hs``'s gradient from detached states, first order only.
    Through ``torch.autograd.functional.jvp`` (a double backward) it gave zeros without a word, and a gradient
    penalty raised torch's ``once_differentiable`` error; both now say what to use instead."""
    layer = _layer("MuFuRU")
    x = torch.randn(2, 5, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="first-order gradients only.*take higher-order gradients with torch.func"):
        torch.autograd.functional.jvp(lambda inputs: layer(inputs)[0], x, torch.randn_like(x))
    with pytest.raises(RuntimeError, match="MuFuRU's one-product gradient of weight_hs"):
        torch.autograd.grad(layer(x)[0].square().sum(), x, create_graph=True)  # a gradient penalty's first half


@pytest.mark.parametrize("cell", CELLS)
def test_a_gradient_penalty_through_torch_func_equals_plain_double_backward(cell) -> None:
    """d/dθ ‖∂L/∂x‖² by ``torch.func`` (grad of grad) equals autograd's double backward of the layer without
    stepping blocks: exact second-order gradients for every cell, MuFuRU's included."""
    layer = _layer(cell)
    x = torch.randn(2, 5, 3)
    params = {n: p.detach() for n, p in layer.named_parameters()}

    def penalty(p, inputs):
        grad_x = grad(lambda i: functional_call(layer, p, (i,))[0].square().sum())(inputs)
        return grad_x.square().sum()

    got = grad(penalty)(params, x)
    plain = _without_stepping_blocks(layer)
    inputs = x.clone().requires_grad_()
    grad_x, = torch.autograd.grad(plain(inputs)[0].square().sum(), inputs, create_graph=True)
    grad_x.square().sum().backward()
    for name, p in plain.named_parameters():
        torch.testing.assert_close(got[name], p.grad, rtol=1e-4, atol=1e-6)
