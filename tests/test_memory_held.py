"""Memory held after a training step must not grow with the steps, for every registered cell.

A step that leaves something alive (a reference cycle through autograd's graph, which Python's collector
cannot see, or a list that keeps growing) shows as more live tensors after each step. MuFuRU's state-map
gradient node once kept the step states, whose graph held the node: every step's states leaked, and a
PTB char fit at hidden 256 ran out of memory within about a hundred steps (docs/reliability.md).
No timing here: the test counts tensors.
"""
from __future__ import annotations

import gc
import warnings

import pytest
import torch

from lit_rnncells.nn import Recurrent

from .cell_cases import cell_cases

CASES = cell_cases()
INPUT, HIDDEN, BATCH, STEPS = 5, 8, 3, 6
WARMUP, WINDOW = 2, 5


@pytest.fixture(autouse=True)
def objects_before_frozen():
    """Objects alive before the test are set aside (``gc.freeze``): each count then scans only those made
    since, which keeps a count cheap in a large test process. One thread: on these tiny tensors a second
    one only spins (on a loaded 2-core machine it took 10x the CPU time)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        torch.set_num_threads(threads)


def live_tensors() -> int:
    """Tensors made during the test and alive after a full collection (parameters, gradients and optimiser
    state included)."""
    gc.collect()
    with warnings.catch_warnings():  # isinstance on some torch module objects warns of deprecations
        warnings.simplefilter("ignore")
        return sum(1 for o in gc.get_objects() if isinstance(o, torch.Tensor))


def train_step(layer: Recurrent, optimiser: torch.optim.Optimizer, x: torch.Tensor, lengths: torch.Tensor) -> None:
    """One step as a task runs it: padded batch, auxiliary loss, backward, optimiser step."""
    optimiser.zero_grad()
    out, state, aux = layer(x, lengths=lengths, return_aux=True)
    leaves = state if isinstance(state, tuple) else (state,)
    loss = out.pow(2).mean() + sum(s.float().pow(2).mean() for s in leaves if s.is_floating_point()) + aux
    loss.backward()
    optimiser.step()


def tensors_before_and_after(layer: Recurrent) -> tuple:
    """Live tensors after the warm-up steps and after :data:`WINDOW` more training steps of ``layer``."""
    optimiser = torch.optim.Adam(layer.parameters(), lr=1e-3)
    x = torch.randn(BATCH, STEPS, INPUT)
    lengths = torch.tensor([STEPS, STEPS - 2, 1])
    for _ in range(WARMUP):  # optimiser state and any lazily built buffers come into being here
        train_step(layer, optimiser, x, lengths)
    before = live_tensors()
    for _ in range(WINDOW):
        train_step(layer, optimiser, x, lengths)
    return before, live_tensors()


@pytest.mark.parametrize("case", list(CASES))
def test_memory_held_after_a_step_does_not_grow(case):
    torch.manual_seed(0)
    layer = Recurrent(CASES[case], INPUT, HIDDEN, bidirectional=True, batch_first=True).train()
    before, after = tensors_before_and_after(layer)
    assert after <= before, (f"{case}: {after - before} more tensors alive after {WINDOW} more training steps "
                             f"({before} -> {after}); something keeps each step's tensors (a cycle through the "
                             "autograd graph, or a growing list)")


@pytest.mark.parametrize("case", ["SatMZU", "GRUDT(L=2,shared)", "CARU", "LSTM"])
def test_deferred_weight_gradients_hold_nothing_after_a_step(case, monkeypatch):
    """With the backend table's ``defer`` on (lit_rnncells/cells/deferred.py), the kept ``a_t`` and ``g_t`` go
    with the step: nothing grows either."""
    from lit_rnncells.nn import backend

    torch.manual_seed(0)
    layer = Recurrent(CASES[case], INPUT, HIDDEN, bidirectional=True, batch_first=True, backend="loop").train()
    cls = type(layer.cell())
    row = backend.entry(cls, "cpu")
    monkeypatch.setitem(backend.TABLE, (backend._row_name(cls), "cpu"), backend.Entry(row.auto, row.compiled_pays,
                                                                                       True))
    assert all(p.defer for p in layer.plans("cpu"))
    before, after = tensors_before_and_after(layer)
    assert after <= before, f"{case}: {before} -> {after} live tensors with deferred weight gradients"


def test_the_count_sees_a_cycle_through_the_graph():
    """The check itself: a custom autograd node that keeps a tensor derived from its own output is a cycle
    Python cannot collect, and the count grows with it."""

    class KeepsOutput(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.kept = []
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            return grad

    w = torch.randn(4, requires_grad=True)

    def step():
        y = KeepsOutput.apply(w)
        z = y * 2
        y.grad_fn.kept.append(z)  # z's graph holds the node, the node holds z
        z.sum().backward()

    step()
    before = live_tensors()
    for _ in range(5):
        step()
    assert live_tensors() - before == 5


def test_mufuru_stepping_without_the_layers_list_holds_nothing_after_a_step():
    """MuFuRU's ``stepping`` called without the layer's ``seen`` list (the steps then record their states
    themselves) leaks nothing either."""
    torch.manual_seed(0)
    cell = CASES["MuFuRU"](INPUT, HIDDEN)
    x = torch.randn(STEPS, BATCH, INPUT)

    def step():
        state = cell.initial_state(BATCH)
        with cell.stepping(cell.project_input(x)) as x_proj:
            for x_t in x_proj.unbind(0):
                state = cell.step(x_t, state)
        state.pow(2).sum().backward()

    for _ in range(WARMUP):
        step()
    before = live_tensors()
    for _ in range(WINDOW):
        step()
    assert live_tensors() <= before
