"""``backend: graphs`` on a CUDA device: the whole time loop replayed as one CUDA graph equals the step loop.

For every registered cell and a user's cell (the README's), two layers, one and two directions, padded and
unpadded batches, forward and backward: outputs, final state, auxiliary loss and every parameter's gradient,
on the first call (capture) and on later calls of the same shape with other values (replay); with the recurrent
weight gradients deferred to one product after the loop too; with the compiled step's kernels inside the
capture too; without gradients too; under bf16 autocast within bf16's tolerance; two backward passes before the
gradients are read add up as the loop's; and the cache of graphs stays within its cap. Decoding steps replayed
as graphs give the loop's hypotheses.

Marked ``cuda``; skipped, with the reason, where torch sees no CUDA device (``-m cuda`` selects them).
"""
from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from lit_rnncells.nn import Recurrent
from lit_rnncells.nn import graphs

from .cell_cases import cell_cases
from .test_compiled import INPUT, HIDDEN, _Newcomer, _assert_same, _run

CASES = dict(cell_cases(), MinimalRNN=_Newcomer)
NO_GPU = "needs a CUDA device; torch.cuda.is_available() is False on this machine"
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU)]


@pytest.fixture(autouse=True)
def full_precision(monkeypatch):
    """float32 against float32: no TF32 in cuDNN or matmuls while comparing."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    graphs.clear_graphs()
    yield
    graphs.clear_graphs()


def _pair(name: str, bidirectional: bool):
    torch.manual_seed(0)
    loop = Recurrent(CASES[name], INPUT, HIDDEN, num_layers=2, bidirectional=bidirectional, batch_first=True,
                     backend="loop").cuda()
    graphed = copy.deepcopy(loop)
    graphed.backend = "graphs"
    return loop, graphed


@pytest.mark.parametrize("name", list(CASES))
def test_graphs_equal_the_loop_for_every_cell(name: str) -> None:
    for bidirectional in (False, True):
        loop, graphed = _pair(name, bidirectional)
        for lengths in (None, torch.tensor([5, 2, 4], device="cuda")):
            for seed in (1, 2):  # the first call captures, the second replays with other values
                x = torch.randn(3, 5, INPUT, generator=torch.Generator().manual_seed(seed)).cuda()
                _assert_same(_run(loop, x, lengths), _run(graphed, x, lengths), atol=1e-4, rtol=1e-3)
    # cells whose fused kernel takes padded batches too (GRU, LSTM, Elman) keep it: nothing is captured for them
    assert graphs.graph_stats()["graphs"] >= 1 or all(p.fused and p.packed for p in graphed.plans("cuda"))


@pytest.mark.parametrize("name", list(CASES))
def test_graphs_with_deferred_weight_gradients_equal_the_loop(name: str, monkeypatch) -> None:
    """Inside the capture, the recurrent maps' weight gradients as one product after the loop
    (lit_rnncells/cells/deferred.py): the loop's outputs and every gradient, on capture and on replay."""
    from lit_rnncells.nn import backend

    loop, graphed = _pair(name, bidirectional=True)
    loop.plans("cuda")  # the plain loop's plan, resolved before the table changes
    cls = type(graphed.cell())
    row = backend.entry(cls, "cuda")
    monkeypatch.setitem(backend.TABLE, (backend._row_name(cls), "cuda"), backend.Entry(row.auto, row.compiled_pays,
                                                                                        True))
    assert all(p.defer for p in graphed.plans("cuda")) and not any(p.defer for p in loop.plans("cuda"))
    for lengths in (None, torch.tensor([5, 2, 4], device="cuda")):
        for seed in (1, 2):
            x = torch.randn(3, 5, INPUT, generator=torch.Generator().manual_seed(seed)).cuda()
            _assert_same(_run(loop, x, lengths), _run(graphed, x, lengths), atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("name", ["SatMZU(L=2,shared,LN,regular_gate)", "CapMZU", "GcnMZU", "GRUDT(L=1,LN)", "CARU",
                                  "MuFuRU", "MultiChannel(LSTM,n=4)", "MinimalRNN"])
def test_graphs_of_the_compiled_step_equal_the_loop(name: str, monkeypatch, capsys) -> None:
    """Inside the capture, the compiled step's fused kernels (the table's ``capture_compiled``, compiled in torch's
    default mode during the capture's warm-up): the loop's outputs and every gradient within float rounding, on
    capture and on replay, padded and not."""
    from lit_rnncells.nn import backend

    loop, graphed = _pair(name, bidirectional=False)
    loop.plans("cuda")
    cls = type(graphed.cell())
    monkeypatch.setitem(backend.TABLE, (backend._row_name(cls), "cuda"),
                        dataclasses.replace(backend.entry(cls, "cuda"), capture_compiled=True))
    assert all(p.captured == "compiled" for p in graphed.plans("cuda"))
    for lengths in (None, torch.tensor([5, 2, 4], device="cuda")):
        for seed in (1, 2):
            x = torch.randn(3, 5, INPUT, generator=torch.Generator().manual_seed(seed)).cuda()
            _assert_same(_run(loop, x, lengths), _run(graphed, x, lengths), atol=1e-4, rtol=1e-3)
    assert f"captured {cls.__name__} (compiled step)" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["SatMZU", "CARU", "MinimalRNN"])
def test_two_backward_passes_before_the_gradients_are_read_add_up_as_the_loops(name: str) -> None:
    """Gradient accumulation: the replayed backward's static gradient buffers are copied as they leave it
    (``graphs.copy_gradients_out``), so the second replay does not overwrite the first's ``.grad``."""
    loop, graphed = _pair(name, bidirectional=False)
    for model in (loop, graphed):
        for seed in (1, 2):
            x = torch.randn(3, 5, INPUT, generator=torch.Generator().manual_seed(seed)).cuda()
            model(x)[0].square().sum().backward()
    for want, got in zip(loop.parameters(), graphed.parameters()):
        torch.testing.assert_close(got.grad, want.grad, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("name", ["SatMZU", "CARU", "MuFuRU", "MultiChannel(LSTM,n=4)", "MinimalRNN"])
def test_graphs_without_gradients_equal_the_loop(name: str) -> None:
    loop, graphed = _pair(name, bidirectional=True)
    for seed in (1, 2, 3):
        x = torch.randn(4, 6, INPUT, generator=torch.Generator().manual_seed(seed)).cuda()
        lengths = torch.tensor([6, 1, 4, 5], device="cuda")
        with torch.no_grad():
            want, want_state = loop(x, lengths=lengths)
            got, got_state = graphed(x, lengths=lengths)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
        for a, b in zip(got_state if isinstance(got_state, tuple) else (got_state,),
                        want_state if isinstance(want_state, tuple) else (want_state,)):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["GRUDT", "SatMZU", "GcnMZU", "CapMZU", "MuFuRU"])
def test_graphs_under_bf16_autocast_equal_the_loop_within_bf16(name: str) -> None:
    loop, graphed = _pair(name, bidirectional=True)
    x = torch.randn(3, 5, INPUT, generator=torch.Generator().manual_seed(2)).cuda()
    lengths = torch.tensor([5, 3, 1], device="cuda")
    for _ in range(2):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            want, got = _run(loop, x, lengths), _run(graphed, x, lengths)
        assert got["state"][0].dtype == torch.float32
        _assert_same(want, got, atol=3e-2, rtol=3e-2, gradient_atol_of_largest=5e-2)


def test_the_cache_of_graphs_is_capped_and_counted(monkeypatch, capsys) -> None:
    monkeypatch.setattr(graphs, "MAX_GRAPHS", 2)
    _, graphed = _pair("SatMZU", bidirectional=False)
    for steps in (3, 4, 5, 6):
        graphed(torch.randn(2, steps, INPUT, device="cuda"))[0].sum().backward()
    stats = graphs.graph_stats()
    assert stats["graphs"] == 2 and stats["bytes"] >= 0
    out = capsys.readouterr().err
    assert out.count("recurrence graphs: captured SatMZU") == 8  # two layers x four lengths
    assert "held (at most 2)" in out and "MiB" in out


def test_the_choice_is_printed_with_the_whole_sequence(capsys) -> None:
    from lit_rnncells.nn import backend

    backend._said.discard("plan SatMZU cuda graphs")
    Recurrent("SatMZU", INPUT, HIDDEN, backend="graphs").cuda()(torch.randn(4, 2, INPUT, device="cuda"))
    assert "recurrence: SatMZU on cuda: graphs (whole sequence" in capsys.readouterr().err


@pytest.mark.parametrize("cell, attention", [("GRU", "additive"), ("SatMZU", "additive"), ("CARU", "additive"),
                                             ("MuFuRU", "additive"), ("CARU", "none")])
def test_decoding_steps_replayed_as_graphs_give_the_loops_hypotheses(cell: str, attention: str) -> None:
    """A Seq2Seq under ``backend: graphs`` decodes (greedy and beam 3) through captured decoding steps
    (nn/decode_graphs.py), with the same hypotheses and scores as its twin under ``backend: loop``; without
    attention too (its fed-back vector is zero-wide)."""
    from lit_rnncells.nn.decode_graphs import GraphedDecoding

    from .test_beam_search import tiny_model
    from .test_decode_graphs import LENGTHS, _config, _same_hypotheses
    from .test_beam_search import batch

    loop = tiny_model(cell=cell, attention=attention, backend="loop").cuda()
    graphed = tiny_model(cell=cell, attention=attention, backend="graphs").cuda()
    graphed.load_state_dict(loop.state_dict())
    assert isinstance(graphed.decodable(), GraphedDecoding) and loop.decodable() is loop
    for seed in (1, 2):  # the first batch captures, the second replays
        src, lengths = (t.cuda() for t in batch(LENGTHS, seed=seed))
        for beam in (1, 3):
            _same_hypotheses(loop.translate(src, lengths, _config(beam)), graphed.translate(src, lengths, _config(beam)))
    assert graphed.decodable().graph_count() == 2  # the batch's rows (greedy, beam's first step), then 3x them


def test_a_pruned_cell_under_graphs_is_refused_before_any_capture() -> None:
    """A pruned weight is a new tensor each call; a captured graph would replay the one it was captured with."""
    from torch.nn.utils import prune

    layer = Recurrent("CARU", INPUT, HIDDEN, batch_first=True, backend="graphs").cuda()
    prune.l1_unstructured(layer.cell(), "weight_hh", amount=0.5)
    with pytest.raises(ValueError, match="which a captured CUDA graph cannot follow"):
        layer(torch.randn(2, 5, INPUT, device="cuda"))
    assert graphs.graph_stats()["graphs"] == 0
