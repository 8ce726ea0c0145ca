"""Deferred weight gradients (lit_rnncells/cells/deferred.py): the recurrent maps' weight gradients as one
product after the time loop give the step loop's values and gradients, for every cell that defers and a user's
cell that does not; the backend table decides where they run, and the printed choice says so.

The CUDA side (the same inside a captured graph) is in tests/test_cuda_graphs.py."""
from __future__ import annotations

from functools import partial
from typing import Dict, List

import pytest
import torch

from lit_rnncells.cells import deferred, get_cell
from lit_rnncells.nn import Recurrent, backend

from .test_compiled import INPUT, HIDDEN, _Newcomer, _assert_same, _run

# Cells whose step writes its recurrent maps with the deferred products, and how many each step makes.
DEFERRING: Dict[str, object] = {
    "Elman": get_cell("Elman"),
    "GRU": get_cell("GRU"),
    "LSTM": get_cell("LSTM"),
    "CARU": get_cell("CARU"),
    "GRUDT": get_cell("GRUDT"),
    "GRUDT(L=2,shared,LN)": partial(get_cell("GRUDT"), transition_depth=2, share_transition=True, layer_norm=True),
    "SatMZU": get_cell("SatMZU"),
    "GcnMZU": get_cell("GcnMZU"),
    "CapMZU": get_cell("CapMZU"),
    "CapMZU(paper: LN, dropout 0.5, shared)": partial(get_cell("CapMZU"), layer_norm=True, candidate_dropout=0.5,
                                                      share_transition=True),
}
# GRUDT's default transition GRU is unshared: its stacked weight's slice runs plainly, so only depth 0 defers.
PRODUCTS_PER_STEP = {"Elman": 1, "GRU": 1, "LSTM": 1, "CARU": 1, "GRUDT": 1, "GRUDT(L=2,shared,LN)": 3,
                     "SatMZU": 4, "CapMZU": 4}


@pytest.fixture
def deferring(monkeypatch):
    """``defer`` on for a cell class on CPU in the backend table, for one test."""
    def turn_on(cls: type) -> None:
        row = backend.entry(cls, "cpu")
        monkeypatch.setitem(backend.TABLE, (backend._row_name(cls), "cpu"), backend.Entry(row.auto, row.compiled_pays,
                                                                                           True))
    return turn_on


def _pair(factory, deferring, bidirectional: bool = True, num_layers: int = 2):
    torch.manual_seed(0)
    plain = Recurrent(factory, INPUT, HIDDEN, num_layers=num_layers, bidirectional=bidirectional, batch_first=True,
                      backend="loop")
    plain.plans("cpu")  # resolved now: this layer keeps the plain plan
    deferring(type(plain.cell()))
    twin = Recurrent(factory, INPUT, HIDDEN, num_layers=num_layers, bidirectional=bidirectional, batch_first=True,
                     backend="loop")
    twin.load_state_dict(plain.state_dict())
    assert all(p.defer for p in twin.plans("cpu")) and not any(p.defer for p in plain.plans("cpu"))
    return plain, twin


def _seeded(layer: Recurrent, x: torch.Tensor, lengths, seed: int = 7):
    torch.manual_seed(seed)  # the same dropout masks in both runs
    return _run(layer, x, lengths)


@pytest.mark.parametrize("name", list(DEFERRING))
def test_deferred_weight_gradients_equal_the_loop(name: str, deferring) -> None:
    """Two layers, both directions, padded and not: outputs, state and aux equal exactly (the same ops run);
    every parameter's gradient equal up to summation order."""
    plain, twin = _pair(DEFERRING[name], deferring)
    for lengths in (None, torch.tensor([5, 2, 4])):
        x = torch.randn(3, 5, INPUT, generator=torch.Generator().manual_seed(1))
        expected, got = _seeded(plain, x, lengths), _seeded(twin, x, lengths)
        assert torch.equal(got["out"], expected["out"]) and torch.equal(got["aux"], expected["aux"])
        _assert_same(expected, got, atol=1e-6, rtol=1e-5)


def _backward_nodes(root) -> List[str]:
    """The names of every node in the autograd graph below ``root``."""
    seen, stack, names = set(), [root], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(type(node).__name__)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


@pytest.mark.parametrize("name", list(PRODUCTS_PER_STEP))
def test_each_step_defers_its_recurrent_maps_and_one_node_gathers_them(name: str, deferring) -> None:
    """The graph holds one deferred product per recurrent map and step and one node after the loop, so the
    weights' gradients do come from the one product (the equality test alone would pass with no deferral)."""
    _, twin = _pair(DEFERRING[name], deferring, bidirectional=False, num_layers=1)
    out, _ = twin(torch.randn(2, 6, INPUT))
    names = _backward_nodes(out.grad_fn)
    assert names.count("_AfterLoopBackward") == 1
    assert names.count("_DeferredProductBackward") == 6 * PRODUCTS_PER_STEP[name]


def test_without_gradients_or_outside_the_loop_the_products_are_the_plain_calls(deferring) -> None:
    _, twin = _pair(get_cell("SatMZU"), deferring)
    with torch.no_grad():
        out, _ = twin(torch.randn(2, 4, INPUT))
    assert out.grad_fn is None
    a, w, base = torch.randn(3, 4, requires_grad=True), torch.randn(5, 4, requires_grad=True), torch.randn(5)
    assert "Deferred" not in type(deferred.deferred_linear(a, w, base).grad_fn).__name__
    assert torch.equal(deferred.deferred_addmm(base, a, w), torch.addmm(base, a, w.t()))


def test_a_users_cell_runs_unchanged_where_deferral_is_on(deferring) -> None:
    """A cell that writes its maps with plain torch calls (the README's) gets no deferred product and the loop's
    exact values and gradients."""
    plain, twin = _pair(_Newcomer, deferring)
    x = torch.randn(3, 5, INPUT)
    expected, got = _run(plain, x, None), _run(twin, x, None)
    _assert_same(expected, got, atol=0.0, rtol=0.0)


@pytest.mark.parametrize("name", ["GRUDT", "SatMZU", "CARU"])
def test_deferred_gradients_under_bf16_autocast_equal_the_loop_within_bf16(name: str, deferring) -> None:
    plain, twin = _pair(DEFERRING[name], deferring, bidirectional=False, num_layers=1)
    x = torch.randn(4, 6, INPUT)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected, got = _seeded(plain, x, None), _seeded(twin, x, None)
    assert torch.equal(got["out"], expected["out"])
    _assert_same(expected, got, atol=2e-2, rtol=2e-2, gradient_atol_of_largest=2e-2)


def test_the_table_defers_nowhere_by_default_and_the_printed_choice_says_where_it_does(deferring, capsys) -> None:
    from lit_rnncells.cells.registry import available_cells

    for name in available_cells():
        for device in ("cpu", "cuda"):
            for choice in ("auto", "loop", "compiled"):
                assert not backend.resolve(get_cell(name), choice, device).defer, (name, device, choice)
    deferring(get_cell("GRUDT"))
    plan = backend.resolve(get_cell("GRUDT"), "loop", "cpu")
    assert plan.defer and "one product after the loop" in backend.describe(plan)
    assert not backend.resolve(get_cell("GRUDT"), "compiled", "cpu").defer  # a compiled step runs them plainly
    backend.let_defer(get_cell("SatMZU"), "cuda", True)
    try:
        assert backend.resolve(get_cell("SatMZU"), "graphs", "cuda").defer
    finally:
        backend.let_defer(get_cell("SatMZU"), "cuda", False)
