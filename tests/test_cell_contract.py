"""The contract every registered cell must pass, run through the Recurrent layer. The checks themselves live in
the package (:mod:`lit_rnncells.nn.contract`), so a user's own cell runs the same ones: ``check_cell(MyCell)``."""
from __future__ import annotations

import pytest
import torch

from lit_rnncells.nn import contract

from .cell_cases import cell_cases, uncovered_cells

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
