"""The contract every registered cell must pass, run through the Recurrent layer. The checks themselves live in
the package (:mod:`lit_rnncells.nn.contract`), so a user's own cell runs the same ones: ``check_cell(MyCell)``."""
from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch

from lit_rnncells.cells import RecurrentCell
from lit_rnncells.nn import contract

from .cell_cases import cell_cases, uncovered_cells
from .examples.leaderboard_cell import GainRNN

CASES = cell_cases()
IDS = list(CASES)


def test_every_registered_cell_is_covered():
    assert uncovered_cells() == []


@pytest.mark.parametrize("case", IDS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_shapes(case, bidirectional):
    contract.check_shapes(CASES[case], bidirectional=bidirectional)


@pytest.mark.parametrize("case", IDS)
def test_length_one_and_zero_length(case):
    contract.check_length_one_and_zero(CASES[case])


@pytest.mark.parametrize("case", IDS)
def test_state_carries_across_calls(case):
    contract.check_state_carries(CASES[case])


@pytest.mark.parametrize("case", IDS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_padding_invariance(case, bidirectional):
    """Each sequence gives the same outputs and final state alone as inside a padded batch."""
    contract.check_padding_invariance(CASES[case], bidirectional=bidirectional)


@pytest.mark.parametrize("case", IDS)
def test_gradients_reach_every_parameter(case):
    contract.check_gradients_reach_every_parameter(CASES[case])


@pytest.mark.parametrize("case", IDS)
def test_float64_gradcheck(case):
    contract.check_float64_gradcheck(CASES[case])


@pytest.mark.parametrize("case", IDS)
def test_bf16_autocast_forward_is_finite(case):
    contract.check_bf16_autocast(CASES[case])


@pytest.mark.parametrize("case", IDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("padded", [False, True])
def test_mixed_precision_keeps_the_state_in_float32_and_close_to_full_precision(case, dtype, padded):
    """The state precision logic of ``16-mixed`` (a GPU path) and ``bf16-mixed``, checked with CPU autocast:
    matmuls run in half precision, every state leaf stays float32, outputs stay near the float32 run."""
    contract.check_mixed_precision(CASES[case], dtype=dtype, padded=padded)


def test_the_tests_here_run_every_check_of_the_public_contract():
    """check_cell (what a user runs) and this file run the same checks."""
    used = {contract.check_shapes, contract.check_length_one_and_zero, contract.check_state_carries,
            contract.check_padding_invariance, contract.check_gradients_reach_every_parameter,
            contract.check_float64_gradcheck, contract.check_bf16_autocast, contract.check_mixed_precision}
    assert {check for check, _ in contract.CHECKS.values()} == used


@pytest.mark.parametrize("case", IDS)
def test_a_layer_of_every_registered_cell_pickles_whole(case):
    """``torch.save(model)``, ``copy.deepcopy`` and Lightning's ``ddp_spawn`` pickle the whole module: MuFuRU held
    its composition ops, lambdas pickle cannot name, and failed (a PicklingError from ``ddp_spawn``)."""
    import copy
    import io

    layer = contract._layer(CASES[case]).eval()
    x = torch.randn(2, 4, contract.INPUT)
    expected = layer(x)[0]
    buffer = io.BytesIO()
    torch.save(layer, buffer)
    buffer.seek(0)
    for loaded in (torch.load(buffer, weights_only=False), copy.deepcopy(layer)):
        torch.testing.assert_close(loaded(x)[0], expected, rtol=0, atol=0)


class _SteppingBlockCell(GainRNN):
    """A user's cell (unregistered) with a ``stepping`` block that keeps the states after the loop, as MuFuRU's does."""

    @contextmanager
    def stepping(self, x_proj, seen=None):
        kept = []
        try:
            yield x_proj
            kept.extend(s.detach() for s in seen or ())
        finally:
            self.kept = kept


STEPPING_BLOCK_CASES = {name: factory for name, factory in CASES.items()
                        if type(factory(3, 4)).stepping is not RecurrentCell.stepping}
STEPPING_BLOCK_CASES["user cell with a stepping block"] = _SteppingBlockCell


def test_the_cells_with_a_stepping_block_include_mufuru():
    assert {"MuFuRU", "MuFuRU(keep,replace)"} <= set(STEPPING_BLOCK_CASES)


@pytest.mark.parametrize("case", list(STEPPING_BLOCK_CASES))
def test_torch_compile_of_a_model_around_the_layer_equals_the_eager_layer(case):
    """``torch.compile`` of a user's model holding a ``Recurrent`` traces our time loop: MuFuRU's ``stepping`` block
    stopped Dynamo with an internal ``AssertionError`` (``expected len(self.block_stack) == 1``). Traced, the layer
    runs no block (a step is exact without one); outputs, state, auxiliary loss and every gradient equal the eager
    layer's. Dynamo's ``eager`` backend: the tracing is what failed, and it compiles in a second."""
    import copy

    torch.manual_seed(0)
    layer = contract._layer(STEPPING_BLOCK_CASES[case], bidirectional=True).train()
    twin = copy.deepcopy(layer)
    x, lengths = torch.randn(3, 5, contract.INPUT), torch.tensor([5, 2, 1])
    torch._dynamo.reset()
    got = torch.compile(twin, backend="eager")(x, lengths=lengths, return_aux=True)
    want = layer(x, lengths=lengths, return_aux=True)
    for result, module in ((got, twin), (want, layer)):
        output, state, aux = result
        (output.square().sum() + sum(s.square().sum() for s in contract.leaves(state)) + aux).backward()
    for g, w in zip(got, want):
        for a, b in zip(contract.leaves(g), contract.leaves(w)):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    for (name, p), q in zip(twin.named_parameters(), layer.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-6, atol=1e-7, msg=lambda m, n=name: f"{n}: {m}")
