"""The contract every registered cell must pass, run through the Recurrent layer."""
from __future__ import annotations

import pytest
import torch
from torch.func import functional_call

from lit_rnncells.nn import Recurrent

from .cell_cases import cell_cases, uncovered_cells

CASES = cell_cases()
IDS = list(CASES)
INPUT, HIDDEN = 6, 8


def make_layer(case: str, **kw) -> Recurrent:
    return Recurrent(CASES[case], INPUT, HIDDEN, batch_first=True, **kw)


def leaves(state):
    return list(state) if isinstance(state, tuple) else [state]


def test_every_registered_cell_is_covered():
    assert uncovered_cells() == []


@pytest.mark.parametrize("case", IDS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_shapes(case, bidirectional):
    layer = make_layer(case, num_layers=2, bidirectional=bidirectional)
    x = torch.randn(3, 5, INPUT)
    out, state = layer(x)
    d = 2 if bidirectional else 1
    assert out.shape == (3, 5, d * HIDDEN)
    for leaf in leaves(state):
        assert leaf.shape[:2] == (2 * d, 3)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("case", IDS)
def test_length_one_and_zero_length(case):
    layer = make_layer(case)
    out, state = layer(torch.randn(2, 1, INPUT))
    assert out.shape == (2, 1, HIDDEN)
    out0, state0 = layer(torch.randn(2, 0, INPUT))
    assert out0.shape == (2, 0, HIDDEN)
    init = layer.initial_state(2)
    for a, b in zip(leaves(state0), leaves(init)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("case", IDS)
def test_state_carries_across_calls(case):
    layer = make_layer(case).eval()
    x = torch.randn(2, 6, INPUT)
    full, full_state = layer(x)
    first, mid = layer(x[:, :3])
    second, end = layer(x[:, 3:], mid)
    torch.testing.assert_close(torch.cat([first, second], 1), full)
    for a, b in zip(leaves(end), leaves(full_state)):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("case", IDS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_padding_invariance(case, bidirectional):
    """Each sequence gives the same outputs and final state alone as inside a padded batch."""
    layer = make_layer(case, num_layers=2, bidirectional=bidirectional).eval()
    lengths = torch.tensor([5, 2, 3])
    x = torch.randn(3, 7, INPUT)  # two extra padding steps beyond the longest
    out, state = layer(x, lengths=lengths)
    for b, n in enumerate(lengths.tolist()):
        alone, alone_state = layer(x[b: b + 1, :n])
        torch.testing.assert_close(out[b, :n], alone[0], atol=1e-5, rtol=1e-4)
        assert torch.all(out[b, n:] == 0)
        for got, want in zip(leaves(state), leaves(alone_state)):
            torch.testing.assert_close(got[:, b], want[:, 0], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("case", IDS)
def test_gradients_reach_every_parameter(case):
    layer = make_layer(case, num_layers=2, bidirectional=True)
    out, state, aux = layer(torch.randn(3, 4, INPUT), lengths=torch.tensor([4, 3, 1]), return_aux=True)
    loss = out.pow(2).sum() + sum(l.float().pow(2).sum() for l in leaves(state) if l.is_floating_point()) + aux
    loss.backward()
    missing = [n for n, p in layer.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()
               or p.grad.abs().sum() == 0]
    assert missing == []


@pytest.mark.parametrize("case", IDS)
def test_float64_gradcheck(case):
    layer = Recurrent(CASES[case], 3, 4, batch_first=True).double()
    names = [n for n, _ in layer.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in layer.parameters())
    x = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([3, 2])

    def run(x, *ps):
        out, state = functional_call(layer, dict(zip(names, ps)), (x,), {"lengths": lengths})
        return out

    assert torch.autograd.gradcheck(run, (x, *params), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("case", IDS)
def test_bf16_autocast_forward_is_finite(case):
    layer = make_layer(case, num_layers=2)
    x = torch.randn(2, 5, INPUT)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, state, aux = layer(x, lengths=torch.tensor([5, 3]), return_aux=True)
        loss = out.float().sum() + aux.float()
    assert torch.isfinite(out.float()).all()
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in layer.parameters() if p.grad is not None)


@pytest.mark.parametrize("case", IDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("padded", [False, True])
def test_mixed_precision_keeps_the_state_in_float32_and_close_to_full_precision(case, dtype, padded):
    """The state precision logic of ``16-mixed`` (a GPU path) and ``bf16-mixed``, checked with CPU autocast:
    matmuls run in half precision, every state leaf stays float32, outputs stay near the float32 run."""
    layer = make_layer(case, num_layers=2)
    x = torch.randn(3, 12, INPUT)
    lengths = torch.tensor([12, 7, 4]) if padded else None
    full, _ = layer(x, lengths=lengths)
    with torch.autocast("cpu", dtype=dtype):
        out, state = layer(x, lengths=lengths)
    assert all(leaf.dtype == torch.float32 for leaf in leaves(state) if leaf.is_floating_point())
    assert torch.isfinite(out.float()).all()
    torch.testing.assert_close(out.float(), full, atol=0.05, rtol=0.05)
