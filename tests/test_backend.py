"""The one place that chooses how the recurrence runs (``lit_rnncells.nn.backend``): the table and ``auto``'s
choices per device (device types are resolved without a device, so CUDA's choices are checked here too), the
printed choice, the environment's default against a config, the deprecated ``compile``, and start errors."""
from __future__ import annotations

import pytest
import torch

from lit_rnncells.cells import available_cells, get_cell
from lit_rnncells.nn import Recurrent, backend
from lit_rnncells.nn.backend import BACKENDS, VARIABLE, check_backend, resolve

from .test_compiled import INPUT, HIDDEN, _Newcomer, _assert_same, _run


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """Each test hears every line anew and starts without ``$LIT_RNNCELLS_BACKEND``."""
    monkeypatch.setattr(backend, "_said", set())
    monkeypatch.delenv(VARIABLE, raising=False)


@pytest.mark.parametrize("device, want", [
    ("cpu", {"Elman": "fused", "GRU": "fused", "LSTM": "fused", "MGU": "loop", "CARU": "loop", "MuFuRU": "loop",
             "SatMZU": "loop", "GcnMZU": "loop", "CapMZU": "loop", "GRUDT": "loop", "MultiChannel": "loop"}),
    ("cuda", {"Elman": "fused", "GRU": "fused", "LSTM": "fused", "MGU": "loop", "MuFuRU": "loop",
              "CARU": "compiled", "SatMZU": "compiled", "GcnMZU": "compiled", "CapMZU": "compiled",
              "GRUDT": "compiled", "MultiChannel": "compiled"}),
])
def test_auto_picks_what_was_measured_fastest_per_device(device: str, want) -> None:
    """Every registered cell has a row on CPU and CUDA; the rows are docs/measured.md's results."""
    assert set(want) == set(available_cells())
    got = {name: resolve(get_cell(name), "auto", device).backend for name in available_cells()}
    assert got == want
    assert all((name, device) in backend.TABLE for name in available_cells())


def test_fused_plans_take_padded_batches_packed_on_cuda_only() -> None:
    gru = get_cell("GRU")
    assert resolve(gru, "auto", "cuda").packed and not resolve(gru, "auto", "cpu").packed
    assert resolve(gru, "auto", "cpu").fused and resolve(gru, "fused", "cpu").fused
    loop = resolve(gru, "loop", "cuda")
    assert not loop.fused and loop.step == "loop"


def test_a_compiled_request_compiles_where_the_table_says_it_pays() -> None:
    """``compiled`` keeps the fused kernel first for the cells auto runs fused, and the loop where the compiled
    step measured slower, saying why."""
    satmzu = resolve(get_cell("SatMZU"), "compiled", "cpu")
    assert satmzu.step == "compiled" and satmzu.backend == "compiled"
    gru = resolve(get_cell("GRU"), "compiled", "cpu")
    assert gru.step == "loop" and gru.fused and "measured slower" in gru.note
    lstm = resolve(get_cell("LSTM"), "compiled", "cuda")
    assert lstm.step == "compiled" and lstm.fused and lstm.packed


def test_a_users_cell_gets_the_default_rows_and_every_backend_that_applies() -> None:
    """The README's cell: nothing measured, so the loop; compiled when asked; no fused kernel, so ``fused`` is
    refused in one sentence. A subclass keeping GRU's step is GRU's row; one with its own step is a new cell."""
    assert resolve(_Newcomer, "auto", "cpu").backend == "loop"
    assert resolve(_Newcomer, "auto", "cuda").backend == "loop"
    assert resolve(_Newcomer, "compiled", "cuda").step == "compiled"
    with pytest.raises(ValueError, match="backend='fused' needs a cell with a fused kernel.*MinimalRNN"):
        Recurrent(_Newcomer, INPUT, HIDDEN, backend="fused")

    class Kept(get_cell("GRU")):
        pass

    class Own(get_cell("GRU")):
        def step(self, x_proj_t, state):
            return super().step(x_proj_t, state)

    assert resolve(Kept, "auto", "cuda").backend == "fused"
    assert resolve(Own, "auto", "cuda").backend == "loop"


@pytest.mark.parametrize("name", ["GRU", "LSTM", "SatMZU"])
def test_every_cpu_backend_gives_the_loops_values(name: str) -> None:
    """loop, fused (where the cell has a kernel), compiled and auto: outputs, state, aux and gradients."""
    x = torch.randn(3, 5, INPUT, generator=torch.Generator().manual_seed(4))
    torch.manual_seed(0)
    reference = Recurrent(name, INPUT, HIDDEN, num_layers=2, bidirectional=True, batch_first=True, backend="loop")
    names = ["auto", "compiled"] + (["fused"] if name != "SatMZU" else [])
    for lengths in (None, torch.tensor([5, 2, 4])):
        want = _run(reference, x, lengths)
        for other in names:
            layer = Recurrent(name, INPUT, HIDDEN, num_layers=2, bidirectional=True, batch_first=True,
                              backend=other)
            layer.load_state_dict(reference.state_dict())
            _assert_same(want, _run(layer, x, lengths), atol=2e-5, rtol=1e-4)


def test_the_choice_is_printed_once_on_standard_error(capsys) -> None:
    layer = Recurrent("SatMZU", INPUT, HIDDEN, num_layers=2, batch_first=True)
    for _ in range(3):
        layer(torch.randn(2, 4, INPUT))
    Recurrent("SatMZU", INPUT, HIDDEN, batch_first=True)(torch.randn(2, 4, INPUT))
    out = capsys.readouterr().err
    assert out.count("recurrence: SatMZU on cpu: loop") == 1, out
    Recurrent("GRU", INPUT, HIDDEN, batch_first=True)(torch.randn(2, 4, INPUT))
    assert capsys.readouterr().err.count("recurrence: GRU on cpu: fused") == 1


def test_the_environment_gives_the_default_and_never_overrides_a_config(monkeypatch) -> None:
    monkeypatch.setenv(VARIABLE, "loop")
    assert check_backend(None) == "loop" and check_backend("auto") == "auto" and check_backend("fused") == "fused"
    assert Recurrent("GRU", 2, 3).backend == "loop" and Recurrent("GRU", 2, 3, backend="auto").backend == "auto"
    from lit_rnncells.tasks.logic import LogicEvaluator

    assert LogicEvaluator().rnn.backend == "loop" and LogicEvaluator(backend="fused").rnn.backend == "fused"
    monkeypatch.setenv(VARIABLE, "fastest")
    with pytest.raises(ValueError, match=f"{VARIABLE}='fastest' is not a recurrence backend"):
        check_backend(None)


def test_compile_true_is_backend_compiled_with_one_deprecation_line(capsys) -> None:
    from lit_rnncells.tasks.logic import LogicEvaluator

    assert Recurrent("GRU", 2, 3, compile=True).backend == "compiled"
    assert LogicEvaluator(compile=True).rnn.backend == "compiled"
    lines = [line for line in capsys.readouterr().err.splitlines() if "deprecated" in line]
    assert lines == ["lit_rnncells: `compile: true` is deprecated and goes in the next release; use "
                     "`backend: compiled` (--model.init_args.backend compiled)"]
    with pytest.raises(ValueError, match="compile=True and backend='loop' disagree"):
        Recurrent("GRU", 2, 3, compile=True, backend="loop")


def test_unknown_backend_names_the_choices() -> None:
    with pytest.raises(ValueError, match="backend='cudnn' is not a recurrence backend; use one of "
                                         + ", ".join(BACKENDS)):
        Recurrent("GRU", 2, 3, backend="cudnn")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_graphs_without_cuda_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="backend='graphs' .* needs a CUDA device"):
        Recurrent("SatMZU", 2, 4, backend="graphs")
    with pytest.raises(ValueError, match="backend='graphs' needs a CUDA device; this layer runs on cpu"):
        resolve(get_cell("SatMZU"), "graphs", "cpu")
    assert resolve(get_cell("SatMZU"), "graphs", "cuda").step == "graphs"  # decided without a device


@pytest.mark.parametrize("backend_name, line", [
    ("graphs", "error: backend='graphs' captures the time loop as CUDA graphs and needs a CUDA device"),
    ("fused", "error: backend='fused' needs a cell with a fused kernel (Elman, GRU, LSTM); SatMZU has none"),
])
def test_the_command_line_refuses_a_backend_the_run_cannot_use_in_one_line(backend_name, line, tmp_path,
                                                                            capsys, monkeypatch) -> None:
    if backend_name == "graphs" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA: graphs are allowed")
    from lit_rnncells.cli import run

    from .test_start_checks import LOGIC, TINY, error_lines

    monkeypatch.chdir(tmp_path)
    code = run(["fit", "--config", LOGIC, *TINY, "--model.init_args.cell", "SatMZU", "--model.init_args.backend",
                backend_name])
    err = capsys.readouterr().err
    lines = error_lines(err)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(line), err[-2000:]
    assert not list(tmp_path.rglob("*"))  # refused before anything is written


def test_the_layer_steps_one_cell_as_its_backend_runs_steps() -> None:
    """``Recurrent.cell_step`` (the decoder's call) equals the cell's own step, eager and compiled."""
    x_proj = torch.randn(2, 3 * HIDDEN)
    for name in ("loop", "compiled"):
        layer = Recurrent("GRU", INPUT, HIDDEN, backend=name)
        cell = layer.cell()
        state = torch.randn(2, HIDDEN)
        got, aux = layer.cell_step(x_proj, state)
        torch.testing.assert_close(got, cell.step(x_proj, state))
        assert aux is None
    layer = Recurrent("SatMZU", INPUT, HIDDEN)
    cell = layer.cell()
    xp = cell.project_input(torch.randn(2, INPUT))
    state = cell.initial_state(2)
    got, aux = layer.cell_step(xp, state, want_aux=True)
    want, want_aux = cell.step_with_aux(xp, state)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(aux, want_aux)


SHARED_TRANSITION = {"GRUDT(L=2,shared)": dict(transition_depth=2, share_transition=True),
                     "SatMZU(L=1,shared)": dict(transition_depth=1, share_transition=True)}


def _graph_case(name: str):
    cls = get_cell(name.split("(")[0])
    return cls(INPUT, HIDDEN, **SHARED_TRANSITION.get(name, {}))


@pytest.mark.parametrize("defer", [False, True])
@pytest.mark.parametrize("name", ["SatMZU", "LSTM", "MuFuRU", *SHARED_TRANSITION])
def test_the_body_the_graphs_backend_captures_is_the_loop(name: str, defer: bool) -> None:
    """What ``backend: graphs`` captures (``nn.graphs._WholeLoop``: the projection, then the loop, every step masked,
    the aux loss always a tensor; with ``defer``, the recurrent weight gradients as one product after the loop)
    gives the step loop's values and gradients; checked here on CPU, where no capture runs
    (tests/test_cuda_graphs.py checks the captured graphs on a GPU)."""
    from lit_rnncells.nn.graphs import _WholeLoop
    from lit_rnncells.nn.recurrent import run_cell

    torch.manual_seed(0)
    cell = _graph_case(name)
    x = torch.randn(5, 3, INPUT)
    mask = torch.arange(5).unsqueeze(1) < torch.tensor([5, 2, 4]).unsqueeze(0)
    state = cell.initial_state(3)
    leaves = state if isinstance(state, tuple) else (state,)
    want_out, want_state, want_aux = run_cell(cell, x, state, mask, want_aux=True,
                                              plan=resolve(type(cell), "loop", "cpu"))
    body = _WholeLoop(cell, isinstance(state, tuple), cell.has_aux_loss, False, defer)
    out, aux, *final = body(x, mask, *leaves)
    torch.testing.assert_close(out, want_out)
    for a, b in zip(final, want_state if isinstance(want_state, tuple) else (want_state,)):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(aux, want_aux if want_aux is not None else torch.zeros(()))
    want_grads = torch.autograd.grad(want_out.square().sum(), list(cell.parameters()), allow_unused=True)
    grads = torch.autograd.grad(out.square().sum(), list(cell.parameters()), allow_unused=True)
    for a, b in zip(grads, want_grads):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b)


def test_graphs_capture_the_compiled_step_only_where_the_table_says(monkeypatch) -> None:
    """Every row captures the eager step today (the capture checked exact on a GPU); a row with
    ``capture_compiled`` captures the compiled one, where a compiled step pays, never deferred, and says so."""
    for name in available_cells():
        assert resolve(get_cell(name), "graphs", "cuda").captured == "loop"
    monkeypatch.setattr(backend, "TABLE", dict(backend.TABLE))  # the let_* calls below change this copy only
    satmzu = get_cell("SatMZU")
    backend.let_defer(satmzu, "cuda")
    backend.let_capture(satmzu, "cuda")
    plan = resolve(satmzu, "graphs", "cuda")
    assert plan.captured == "compiled" and not plan.defer
    assert "the compiled step inside the capture" in backend.describe(plan)
    assert resolve(satmzu, "compiled", "cuda").step == "compiled"  # other backends as before
    mgu = get_cell("MGU")
    backend.TABLE[("MGU", "cuda")] = backend.Entry("loop", compiled_pays=False, capture_compiled=True)
    assert resolve(mgu, "graphs", "cuda").captured == "loop"


class _CapturedNewcomer(_Newcomer):
    """A class of its own, so its compiled step is built by this test."""


@pytest.mark.parametrize("cls", [_CapturedNewcomer, get_cell("GRUDT")])
def test_the_compiled_body_the_graphs_backend_captures_is_the_loop(cls, monkeypatch) -> None:
    """With the table's ``capture_compiled``, the captured body runs the compiled step, compiled in torch's
    default mode even where ``$LIT_RNNCELLS_COMPILE_MODE`` asks for CUDA graphs of its own (they cannot record
    inside the whole loop's capture), and gives the loop's values and gradients (CPU here: the capture itself is
    tests/test_cuda_graphs.py's)."""
    from lit_rnncells.nn import compiled as compiled_module
    from lit_rnncells.nn.graphs import _WholeLoop
    from lit_rnncells.nn.recurrent import run_cell

    monkeypatch.setenv(compiled_module.MODE_VARIABLE, "reduce-overhead")
    torch.manual_seed(0)
    cell = cls(INPUT, HIDDEN)
    x = torch.randn(5, 3, INPUT)
    mask = torch.arange(5).unsqueeze(1) < torch.tensor([5, 2, 4]).unsqueeze(0)
    state = cell.initial_state(3)
    want_out, want_state, _ = run_cell(cell, x, state, mask, plan=resolve(cls, "loop", "cpu"))
    calls = compiled_module.compiled_calls()
    body = _WholeLoop(cell, False, False, False, defer=False, compiled=True)
    out, aux, final = body(x, mask, state)
    assert compiled_module.compiled_calls() - calls == 4  # steps 2-5: the first, from a constant state, is eager
    assert (cls, None) in compiled_module._COMPILED and (cls, "reduce-overhead") not in compiled_module._COMPILED
    torch.testing.assert_close(out, want_out, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(final, want_state, atol=2e-5, rtol=1e-4)
    want_grads = torch.autograd.grad(want_out.square().sum(), list(cell.parameters()))
    grads = torch.autograd.grad(out.square().sum(), list(cell.parameters()))
    for a, b in zip(grads, want_grads):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)


def _parameters_reached(tensor: torch.Tensor) -> set:
    """The leaves ``tensor``'s autograd graph reaches (ids of the tensors its AccumulateGrad nodes hold)."""
    seen, found, todo = set(), set(), [tensor.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):
            found.add(id(node.variable))
        todo.extend(next_node for next_node, _ in node.next_functions)
    return found


@pytest.mark.parametrize("name", ["SatMZU", "CARU", *SHARED_TRANSITION])
def test_the_graphs_backend_uses_no_parameter_outside_the_capture(name: str) -> None:
    """Every parameter is used inside the captured graph only: what ``run_graphed`` hands the capture is the
    layer's input, the mask and the state, none computed from a parameter. A parameter used on both sides (a
    shared deep transition's bias, in the projection and in the step) got gradients on the default stream and
    the capture's, which torch refused on an H200 (docs/measured.md)."""
    from lit_rnncells.nn.graphs import graph_inputs

    cell = _graph_case(name)
    embedding = torch.nn.Embedding(10, INPUT)
    x = embedding(torch.randint(0, 10, (5, 3)))  # an input with a gradient of its own
    params = {id(p) for p in cell.parameters()}
    for mask in (None, torch.ones(5, 3, dtype=torch.bool)):
        args = graph_inputs(x, cell.initial_state(3), mask)
        assert args[0] is x
        reached = set().union(*(_parameters_reached(a) for a in args if a.grad_fn is not None))
        assert not reached & params and id(embedding.weight) in reached


class _ReplayedGradient(torch.autograd.Function):
    """What a replayed ``make_graphed_callables`` backward does: write the gradients into the graph's static
    buffers and hand them on detached (a CPU stand-in: the same autograd path, without the capture)."""

    buffers: dict = {}

    @staticmethod
    def forward(ctx, x, weight):  # type: ignore[override]
        ctx.save_for_backward(x, weight)
        return x * weight

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        x, weight = ctx.saved_tensors
        handed = []
        for name, value in (("x", grad * weight), ("weight", (grad * x).sum(0))):
            buffer = _ReplayedGradient.buffers.setdefault(name, torch.zeros_like(value))
            buffer.copy_(value)
            handed.append(buffer.detach())
        return tuple(handed)


def _replayed(x, weight, copying: bool):
    from lit_rnncells.nn import graphs

    out = _ReplayedGradient.apply(x, weight)
    if copying:
        graphs.copy_gradients_out([out])
    return out


@pytest.mark.parametrize("copying", [True, False])
def test_gradients_of_a_replayed_graph_are_copies(copying: bool):
    """``make_graphed_callables`` hands the parameters and inputs their gradients in static buffers that the next
    replay overwrites (pytorch/pytorch#181723). Autograd kept the buffer itself as ``.grad``, so two backward passes
    before an optimiser step (gradient accumulation) gave twice the second's gradient; and a second replay in the
    same backward pass overwrote an input's gradient before the layer below read it. ``backend: graphs`` copies
    them as they leave the replayed node (``copying=False`` shows what that prevents)."""
    _ReplayedGradient.buffers.clear()
    weight = torch.nn.Parameter(torch.tensor([1.0, 2.0, 3.0]))
    first, second = torch.tensor([1.0, 10.0, 100.0]), torch.tensor([2.0, 20.0, 200.0])
    for scale in (first, second):  # two backward passes before the gradient is read
        (_replayed(torch.ones(2, 3), weight, copying) * scale).sum().backward()
    assert torch.equal(weight.grad, 2 * (first + second)) == copying

    below_second, below_first = torch.nn.Parameter(torch.ones(2, 3)), torch.nn.Parameter(torch.ones(2, 3))
    x_second = below_second * 1.0  # made first: autograd reaches its layer after both replays
    x_first = below_first * 1.0
    loss = (_replayed(x_first, weight, copying) * first).sum() + (_replayed(x_second, weight, copying) * second).sum()
    loss.backward()
    both_right = torch.equal(below_second.grad, (second * weight.detach()).expand(2, 3)) and \
        torch.equal(below_first.grad, (first * weight.detach()).expand(2, 3))
    assert both_right == copying
