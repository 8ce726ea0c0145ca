"""``Recurrent(compile=True)`` equals the eager layer for every cell, and compiles once per variant.

Compiling is slow on CPU (seconds per cell class), so each cell class is compiled once and shared:
the compiled step has one graph per class and variant (the padding mask is always passed, so padded
and unpadded batches, both directions and every layer reuse it). Sizes are tiny.
"""
from __future__ import annotations

import copy
from typing import Dict, List, Tuple

import pytest
import torch
from torch.nn import functional as F

from lit_rnncells.cells import available_cells, get_cell, registry
from lit_rnncells.nn import Recurrent
from lit_rnncells.nn import backend
from lit_rnncells.nn.compiled import compiled_graph_count

from .cell_cases import cell_cases
from .test_readme import python_block_after

CASES = cell_cases()
INPUT, HIDDEN = 3, 8
CPU_EAGER = [get_cell(n) for n in available_cells() if not backend.entry(get_cell(n), "cpu").compiled_pays]


def set_compiled_pays(monkeypatch, cls: type, device_type: str, value: bool) -> None:
    """Set the backend table's ``compiled_pays`` for ``cls`` on ``device_type`` for one test."""
    row = backend.entry(cls, device_type)
    monkeypatch.setitem(backend.TABLE, (cls.__name__, device_type), backend.Entry(row.auto, value))


@pytest.fixture(autouse=True)
def compile_every_cell(monkeypatch):
    """The cells left eager on CPU for speed (the backend table's ``compiled_pays`` False) compile here, so
    their compiled step is tested too."""
    for cls in CPU_EAGER:
        set_compiled_pays(monkeypatch, cls, "cpu", True)


def _leaves(state) -> Tuple[torch.Tensor, ...]:
    return state if isinstance(state, tuple) else (state,)


def _run(layer: Recurrent, x: torch.Tensor, lengths) -> Dict[str, object]:
    """Outputs, final state, aux loss and every parameter's gradient of a loss reading all three."""
    layer.zero_grad(set_to_none=True)
    out, state, aux = layer(x, lengths=lengths, return_aux=True)
    weight = torch.linspace(-1, 1, out.numel(), device=out.device).view_as(out)  # on the layer's device
    loss = (out * weight).sum() + aux + sum(leaf.float().square().sum() for leaf in _leaves(state)
                                            if leaf.is_floating_point())
    loss.backward()
    return {"out": out.detach(), "state": tuple(s.detach() for s in _leaves(state)), "aux": aux.detach(),
            "grads": {n: p.grad for n, p in layer.named_parameters()}}


def _assert_same(eager: Dict[str, object], compiled: Dict[str, object], atol: float, rtol: float,
                 gradient_atol_of_largest: float = 0.0) -> None:
    """Equal within ``atol``/``rtol``; a gradient's ``atol`` grows by ``gradient_atol_of_largest`` times its
    largest element (for half precision, where a summation order moves large elements by a few percent)."""
    torch.testing.assert_close(compiled["out"], eager["out"], atol=atol, rtol=rtol, msg="outputs")
    for i, (a, b) in enumerate(zip(compiled["state"], eager["state"])):
        torch.testing.assert_close(a, b, atol=atol, rtol=rtol, msg=f"final state leaf {i}")
    torch.testing.assert_close(compiled["aux"], eager["aux"], atol=atol, rtol=rtol, msg="aux loss")
    for name, grad in eager["grads"].items():
        other = compiled["grads"][name]
        assert (grad is None) == (other is None), name
        if grad is not None:
            grad_atol = atol + gradient_atol_of_largest * grad.abs().max().item()
            torch.testing.assert_close(other, grad, atol=grad_atol, rtol=rtol, msg=f"gradient of {name}")


def _pair(factory, bidirectional: bool, seed: int = 0) -> Tuple[Recurrent, Recurrent]:
    torch.manual_seed(seed)
    eager = Recurrent(factory, INPUT, HIDDEN, num_layers=2, bidirectional=bidirectional, batch_first=True)
    compiled = copy.deepcopy(eager)
    compiled.compiled = True
    return eager, compiled


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_equals_eager_for_every_cell(name: str) -> None:
    """Outputs, final state, aux loss and all gradients: padded and unpadded, 1 and 2 directions, 2 layers."""
    x = torch.randn(3, 5, INPUT, generator=torch.Generator().manual_seed(1))
    for bidirectional in (False, True):
        eager, compiled = _pair(CASES[name], bidirectional)
        for lengths in (None, torch.tensor([5, 2, 4])):
            _assert_same(_run(eager, x, lengths), _run(compiled, x, lengths), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["GRU", "LSTM", "MuFuRU", "SatMZU", "GcnMZU", "CapMZU"])
def test_compiled_equals_eager_under_bf16_autocast(name: str) -> None:
    """Also the MZU cells, whose compiled step writes the zone products differently (``cells/fusable.py``)."""
    eager, compiled = _pair(CASES[name], bidirectional=True)
    x = torch.randn(3, 5, INPUT, generator=torch.Generator().manual_seed(2))
    lengths = torch.tensor([5, 3, 1])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want, got = _run(eager, x, lengths), _run(compiled, x, lengths)
    assert got["state"][0].dtype == torch.float32  # the state keeps its precision, as in the eager loop
    # GcnMZU: a few gradient elements differ by 3-4 % of the tensor's largest (its relu and clamped edges in bf16)
    _assert_same(want, got, atol=3e-2, rtol=3e-2, gradient_atol_of_largest=5e-2)


def _readme_cell() -> type:
    """The README's "Adding a cell" example, run as written; the registry is restored afterwards (tests must not
    grow it)."""
    saved = dict(registry._CELLS)
    try:
        namespace: dict = {}
        exec(python_block_after("## Adding a cell"), namespace)
        return namespace["MinimalRNN"]
    finally:
        registry._CELLS.clear()
        registry._CELLS.update(saved)


_Newcomer = _readme_cell()


class _OldStyleStepping(_Newcomer):
    """A cell written against the one-argument ``stepping(x_proj)`` hook still runs (eager and compiled)."""

    entered = 0

    def stepping(self, x_proj):  # type: ignore[override]
        type(self).entered += 1
        return super().stepping(x_proj)


def test_readme_newcomer_cell_runs_compiled_unchanged() -> None:
    x = torch.randn(2, 4, INPUT, generator=torch.Generator().manual_seed(3))
    for bidirectional in (False, True):
        eager, compiled = _pair(_Newcomer, bidirectional)
        _assert_same(_run(eager, x, torch.tensor([4, 2])), _run(compiled, x, torch.tensor([4, 2])), 2e-5, 1e-4)
    eager, compiled = _pair(_OldStyleStepping, bidirectional=False)
    _assert_same(_run(eager, x, None), _run(compiled, x, None), 2e-5, 1e-4)
    assert _OldStyleStepping.entered == 4  # 2 layers x 2 runs


class _Counted(_Newcomer):
    """A class of its own, so its compiled step starts with no graph."""


def test_mixed_lengths_and_batch_sizes_compile_one_graph_per_variant() -> None:
    """Lengths never reach the compiled step (it sees one time step) and the batch dimension is dynamic
    from the first call: one training graph for all batches, one more for evaluation without gradients."""
    torch.manual_seed(0)
    layer = Recurrent(_Counted, INPUT, HIDDEN, num_layers=2, bidirectional=True, batch_first=True, compile=True)
    for batch, steps in ((4, 7), (4, 3), (3, 9), (2, 5), (5, 1), (4, 12)):
        x = torch.randn(batch, steps, INPUT)
        lengths = torch.randint(1, steps + 1, (batch,))
        lengths[0] = steps
        out, _ = layer(x, lengths=lengths if batch % 2 else None)
        out.sum().backward()
    assert compiled_graph_count(_Counted) == 1
    with torch.no_grad():
        for batch, steps in ((4, 6), (2, 3), (7, 8)):
            layer(torch.randn(batch, steps, INPUT))
    assert compiled_graph_count(_Counted) == 2


def test_mufuru_compiles_once_not_once_per_step() -> None:
    """MuFuRU's step once appended to a list (a recompilation each step); the layer now keeps the states."""
    from lit_rnncells.cells import MuFuRU

    _, compiled = _pair(CASES["MuFuRU"], bidirectional=False)
    compiled(torch.randn(2, 6, INPUT))[0].sum().backward()
    graphs = compiled_graph_count(MuFuRU)  # other tests may have compiled other variants of the class
    assert graphs >= 1
    for steps in (9, 3):
        compiled(torch.randn(3, steps, INPUT))[0].sum().backward()
    assert compiled_graph_count(MuFuRU) == graphs


def test_task_and_cli_option_reach_the_layer() -> None:
    from lit_rnncells.tasks.logic import LogicEvaluator

    assert LogicEvaluator(compile=True).rnn.compiled and not LogicEvaluator().rnn.compiled
    assert "compile=True" in repr(Recurrent("GRU", 2, 3, compile=True))


def test_cells_marked_eager_on_cpu_do_not_compile_there(monkeypatch) -> None:
    """GRU (``compiled_pays`` False on CPU) runs its eager step on CPU even with ``compile=True``."""
    from lit_rnncells.cells import GRU

    set_compiled_pays(monkeypatch, GRU, "cpu", False)
    before = compiled_graph_count(GRU)
    layer = Recurrent("GRU", INPUT, HIDDEN, batch_first=True, compile=True)
    layer(torch.randn(2, 3, INPUT), lengths=torch.tensor([3, 1]))[0].sum().backward()
    assert compiled_graph_count(GRU) == before
    assert {"Elman", "GRU", "MGU", "CARU", "MuFuRU"} == {c.__name__ for c in CPU_EAGER}


def test_each_device_follows_its_own_rule(monkeypatch) -> None:
    """The backend table's ``compiled_pays`` decides on CPU and on a CUDA device (Elman and GRU stay eager on both,
    as measured); other devices always compile. Decided from the device alone, so no GPU is needed here (this
    module's fixture lets every cell compile on CPU)."""
    from lit_rnncells.cells import CARU, Elman, SatMZU
    from lit_rnncells.nn.compiled import use_compiled

    elman, caru, satmzu = Elman(2, 3), CARU(2, 3), SatMZU(2, 4)
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert not use_compiled(elman, cuda) and use_compiled(caru, cuda) and use_compiled(satmzu, cuda)
    assert use_compiled(elman, cpu)  # the fixture's setting
    set_compiled_pays(monkeypatch, Elman, "cpu", False)
    assert not use_compiled(elman, cpu) and use_compiled(satmzu, cpu)
    assert use_compiled(elman, torch.device("mps"))
    assert [c.__name__ for c in map(get_cell, available_cells()) 
            if not backend.entry(c, "cuda").compiled_pays] == ["Elman", "GRU"]


def test_compile_mode_comes_from_the_environment_and_keys_the_graphs(monkeypatch) -> None:
    """``$LIT_RNNCELLS_COMPILE_MODE`` picks torch.compile's mode for the step; each mode has its own compiled
    function (and graphs), so switching does not reuse the other's. An unknown mode names the choices."""
    from lit_rnncells.cells import Elman
    from lit_rnncells.nn.compiled import MODE_VARIABLE, compile_mode, compiled_step

    monkeypatch.delenv(MODE_VARIABLE, raising=False)
    assert compile_mode() is None
    default_fn = compiled_step(Elman(2, 3))
    monkeypatch.setenv(MODE_VARIABLE, "reduce-overhead")
    assert compile_mode() == "reduce-overhead"
    assert compiled_step(Elman(2, 3)) is not default_fn
    assert compiled_step(Elman(2, 3)) is compiled_step(Elman(3, 5))  # one per class and mode
    monkeypatch.setenv(MODE_VARIABLE, "fast")
    with pytest.raises(ValueError, match="set it to one of default, reduce-overhead"):
        compile_mode()


def test_plot_hooks_record_through_a_compiled_layer() -> None:
    """Recording appends inside the step, so the hooks run a compiled layer eagerly: same values, no graph."""
    from lit_rnncells.cells import MuFuRU
    from lit_rnncells.nn.recording import composition_weights

    eager, compiled = _pair(CASES["MuFuRU"], bidirectional=True)
    x, lengths = torch.randn(2, 4, INPUT), torch.tensor([4, 2])
    before = compiled_graph_count(MuFuRU)
    torch.testing.assert_close(composition_weights(compiled, x, lengths=lengths, direction=1),
                               composition_weights(eager, x, lengths=lengths, direction=1))
    assert compiled.compiled and compiled_graph_count(MuFuRU) == before


@pytest.mark.parametrize("cell", ["GRU", "SatMZU"])
def test_seq2seq_compiled_trains_and_decodes_as_eager(cell: str) -> None:
    """Teacher-forced loss (aux included) and every gradient, and greedy and beam-5 translations."""
    from lit_rnncells.nn.beam_search import SearchConfig

    from .test_seq2seq import make, pairs

    eager = make(torch.float32, cell=cell, num_layers=2)
    compiled = make(torch.float32, cell=cell, num_layers=2, compile=True)
    compiled.load_state_dict(eager.state_dict())
    batch = pairs([5, 3, 7], [4, 1, 6])
    grads = []
    for model in (eager, compiled):
        logits, gold, aux = model._real_logits(batch, want_aux=True)
        (F.cross_entropy(logits, gold) + aux).backward()
        grads.append({n: p.grad for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=2e-5, rtol=1e-4, msg=name)
    for beam in (1, 5):
        cfg = SearchConfig(beam_size=beam, max_length_b=5, max_length_a=0.0)
        with torch.no_grad():
            want = eager.eval().translate(batch["source"], batch["source_lengths"], cfg)
            got = compiled.eval().translate(batch["source"], batch["source_lengths"], cfg)
        assert [[h.tokens for h in hyps] for hyps in got] == [[h.tokens for h in hyps] for hyps in want]
        for hyps_got, hyps_want in zip(got, want):
            assert [h.score for h in hyps_got] == pytest.approx([h.score for h in hyps_want], abs=1e-4)


def _logic_mufuru(root, batch: int) -> List[str]:
    from .test_resume_and_ddp import ROOT, common

    return ["--config", str(ROOT / "configs" / "logic" / "mufuru.yaml"), "--data.init_args.train_size", "96",
            "--data.init_args.val_size", "16", "--data.init_args.test_size", "16", "--data.init_args.batch_size",
            str(batch), "--trainer.limit_val_batches", "2", "--model.init_args.compile", "true"] + common(root)


@pytest.mark.slow
@pytest.mark.real_data
def test_compiled_ddp_two_processes_train_as_one_on_the_doubled_batch(data_dir, tmp_path) -> None:
    from .test_reliability import assert_ddp_matches_one_process

    assert_ddp_matches_one_process(lambda devices, batch: _logic_mufuru(tmp_path / f"run{devices}", batch), tmp_path)


@pytest.mark.slow
@pytest.mark.real_data
def test_compiled_fit_resumes_exactly_after_sigterm(data_dir, tmp_path, capsys) -> None:
    from lit_rnncells.cli import run

    from .test_reliability import losses, recorder, with_callbacks

    args = lambda root: ["fit", *_logic_mufuru(root, 8), "--trainer.max_steps", "8"]
    full, cut = tmp_path / "full.jsonl", tmp_path / "cut.jsonl"
    assert run(args(tmp_path / "a") + with_callbacks(recorder(full))) == 0
    stop = {"class_path": "tests.examples.recorders.SigtermAtStep", "init_args": {"step": 3}}
    assert run(args(tmp_path / "b") + with_callbacks(recorder(cut), stop)) == 143
    ckpt = next((tmp_path / "b").rglob("interrupted.ckpt"))
    assert run(args(tmp_path / "b") + with_callbacks(recorder(cut)) + ["--ckpt_path", str(ckpt)]) == 0
    uninterrupted, resumed = losses(full), losses(cut)
    assert sorted(resumed) == sorted(uninterrupted) == list(range(1, 9))
    for step in uninterrupted:
        assert resumed[step] == pytest.approx(uninterrupted[step], rel=1e-6), step


def test_the_compile_time_is_said_once_and_an_eager_step_is_named_not_timed(monkeypatch, capsys) -> None:
    """The first forward that runs a compiled step prints its time, once per process; a cell that keeps its eager
    step on this device is named once instead, never reported as compiled in 0.0 s."""
    from lit_rnncells.cells import GRU
    from lit_rnncells.nn import compiled

    monkeypatch.setattr(compiled, "_reported", set())
    set_compiled_pays(monkeypatch, GRU, "cpu", False)
    x = torch.randn(2, 3, INPUT)
    gru = Recurrent("GRU", INPUT, HIDDEN, batch_first=True, compile=True)
    for _ in range(2):
        gru(x, lengths=torch.tensor([3, 1]))
    out = capsys.readouterr().out
    assert out.count("GRU keeps its eager step on cpu") == 1 and "compiled the recurrent step" not in out
    layer = Recurrent(_Counted, INPUT, HIDDEN, batch_first=True, compile=True)
    for _ in range(2):
        layer(x, lengths=torch.tensor([3, 1]))
    out = capsys.readouterr().out
    assert out.count("compiled the recurrent step in") == 1 and "keeps its eager step" not in out


@pytest.mark.parametrize("mode, padded, said", [("reduce-overhead", True, True), ("reduce-overhead", False, False),
                                                ("default", True, False)])
def test_cuda_graphs_on_padded_batches_are_advised_against_once(mode, padded, said, monkeypatch, capsys) -> None:
    """CUDA graphs record per sequence length, so a padded task hears once that they suit fixed-length batches.
    Decided from the device type alone, so no GPU is needed here; the forward itself does not run."""
    from lit_rnncells.cells import SatMZU
    from lit_rnncells.nn import compiled

    monkeypatch.setattr(compiled, "_reported", {"compile time"})
    monkeypatch.setenv(compiled.MODE_VARIABLE, mode)
    for _ in range(2):
        compiled.report_compiled_forward([SatMZU(2, 4)], torch.device("cuda"), 1.0, ran_compiled=True, padded=padded)
    compiled.report_compiled_forward([SatMZU(2, 4)], torch.device("cpu"), 1.0, ran_compiled=True, padded=True)
    out = capsys.readouterr().out
    assert out.count("records CUDA graphs for each sequence length") == (1 if said else 0), out
