"""Oracle tests: our cells against torch.nn and against their papers' equations."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from lit_rnncells.cells import CARU, GRU, LSTM, MuFuRU
from lit_rnncells.nn import Recurrent


def copy_torch_weights(ours: Recurrent, ref: nn.RNNBase) -> None:
    """torch's names load as they are (tests/test_torch_rnn_weights.py)."""
    ours.load_state_dict(ref.state_dict())


def torch_and_ours(kind: str, num_layers: int, bidirectional: bool) -> tuple[nn.RNNBase, Recurrent]:
    ref_cls, cell = (nn.GRU, GRU) if kind == "gru" else (nn.LSTM, LSTM)
    ref = ref_cls(5, 7, num_layers=num_layers, bidirectional=bidirectional, batch_first=True)
    ours = Recurrent(cell, 5, 7, num_layers=num_layers, bidirectional=bidirectional, batch_first=True)
    copy_torch_weights(ours, ref)
    return ref, ours


def assert_same(out, state, ref_out, ref_state) -> None:
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
    for a, b in zip(state if isinstance(state, tuple) else [state],
                    ref_state if isinstance(ref_state, tuple) else [ref_state]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("num_layers,bidirectional", [(1, False), (2, False), (2, True)])
def test_matches_torch_full_length(kind, num_layers, bidirectional):
    ref, ours = torch_and_ours(kind, num_layers, bidirectional)
    x = torch.randn(4, 9, 5)
    d = 2 if bidirectional else 1
    h0 = torch.randn(num_layers * d, 4, 7)
    state = h0 if kind == "gru" else (h0, torch.randn_like(h0))
    out, st = ours(x, state)
    ref_out, ref_st = ref(x, state)
    assert_same(out, st, ref_out, ref_st)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("num_layers,bidirectional", [(1, True), (2, True), (2, False)])
def test_matches_torch_packed_variable_lengths(kind, num_layers, bidirectional):
    ref, ours = torch_and_ours(kind, num_layers, bidirectional)
    lengths = torch.tensor([9, 3, 6, 1])
    x = torch.randn(4, 9, 5)
    out, st = ours(x, lengths=lengths)
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    ref_packed, ref_st = ref(packed)
    ref_out, _ = pad_packed_sequence(ref_packed, batch_first=True, total_length=9)
    assert_same(out, st, ref_out, ref_st)


def test_mufuru_keep_replace_is_a_gru_with_softmax_update_gate():
    """Weissenborn & Rocktäschel, arXiv:1606.03002, eq. 1 (GRU, reset applied before the state map) equals MuFuRU with ops (keep, replace):
    the 2-way softmax gives p_keep = σ(a_keep − a_replace), the GRU's update gate u."""
    torch.manual_seed(1)
    i, h = 4, 5
    w_r, w_u, w_v = torch.randn(h, i + h), torch.randn(h, i + h), torch.randn(h, i + h)
    b_r, b_u, b_v = torch.randn(h), torch.randn(h), torch.randn(h)
    x = torch.randn(3, 6, i)

    s = torch.zeros(3, h)
    expected = []
    for t in range(6):
        xs = torch.cat([x[:, t], s], -1)
        r, u = torch.sigmoid(xs @ w_r.T + b_r), torch.sigmoid(xs @ w_u.T + b_u)
        v = torch.tanh(torch.cat([x[:, t], r * s], -1) @ w_v.T + b_v)
        s = u * s + (1 - u) * v
        expected.append(s)

    mufuru = MuFuRU(i, h, ops=("keep", "replace"))
    zeros_i, zeros_h = torch.zeros(h, i), torch.zeros(h, h)
    # weight_ih layout: [r, v, p_keep, p_replace]; weight_hs: [r, p_keep, p_replace]
    mufuru.weight_ih.data = torch.cat([w_r[:, :i], w_v[:, :i], w_u[:, :i], zeros_i])
    mufuru.bias.data = torch.cat([b_r, b_v, b_u, torch.zeros(h)])
    mufuru.weight_hs.data = torch.cat([w_r[:, i:], w_u[:, i:], zeros_h])
    mufuru.weight_hv.data = w_v[:, i:].clone()
    out, _ = _run(mufuru, x)
    torch.testing.assert_close(out, torch.stack(expected, 1), atol=1e-6, rtol=0)


def _run(cell, x):
    layer = Recurrent(lambda i, h: cell, cell.input_size, cell.hidden_size, batch_first=True)
    return layer(x)


def test_mufuru_reset_bias_starts_at_one():
    cell = MuFuRU(3, 4)
    assert torch.all(cell.bias[:4] == 1.0)


@pytest.mark.parametrize("word_weight", [True, False])
def test_caru_matches_equations_4a_to_4e_on_hand_set_weights(word_weight: bool):
    """Hidden size 1, input size 1: every quantity of eq. 4a–4e computed by hand; ``word_weight=False`` (the
    ablation) is the same with l = z."""
    cell = CARU(1, 1, word_weight=word_weight)
    w_vn, w_vz, b_vn, b_vz = 0.5, -1.0, 0.1, 0.2
    w_hn, w_hz, b_hn, b_hz = 2.0, 0.3, -0.4, 0.05
    cell.weight_ih.data = torch.tensor([[w_vn], [w_vz]])
    cell.bias_ih.data = torch.tensor([b_vn, b_vz])
    cell.weight_hh.data = torch.tensor([[w_hn], [w_hz]])
    cell.bias_hh.data = torch.tensor([b_hn, b_hz])
    import math

    def sig(a: float) -> float:
        return 1 / (1 + math.exp(-a))

    h = 0.0
    expected = []
    for v in [1.0, -2.0, 0.5]:
        xp = w_vn * v + b_vn                         # 4a
        n = math.tanh(w_hn * h + b_hn + xp)          # 4b
        z = sig(w_hz * h + b_hz + w_vz * v + b_vz)   # 4c
        l = sig(xp) * z if word_weight else z        # 4d
        h = (1 - l) * h + l * n                      # 4e
        expected.append(h)
    out, _ = _run(cell, torch.tensor([[[1.0], [-2.0], [0.5]]]))
    torch.testing.assert_close(out.flatten(), torch.tensor(expected), atol=1e-6, rtol=0)


def test_caru_content_weight_bias_shifts_only_b_hz_and_starts_the_step_near_a_grus():
    """``content_weight_bias=2`` adds 2 to b_hz of the same draw (the default cell's weights are unchanged, so a
    seed gives what it gave before the option); at the start the mean step l = σ(x') ⊙ z is then near
    ½ · σ(2) ≈ 0.44 instead of ¼, and ``reset_parameters`` keeps the shift."""
    from lit_rnncells.nn.recording import content_adaptive_gates

    torch.manual_seed(0)
    plain = CARU(16, 64)
    torch.manual_seed(0)
    shifted = CARU(16, 64, content_weight_bias=2.0)
    torch.testing.assert_close(shifted.bias_hh[64:] - plain.bias_hh[64:], torch.full((64,), 2.0))
    for name in ("weight_ih", "weight_hh", "bias_ih"):
        torch.testing.assert_close(getattr(shifted, name), getattr(plain, name))
    torch.testing.assert_close(shifted.bias_hh[:64], plain.bias_hh[:64])
    x = torch.randn(5, 32, 16)
    steps = [(ww * z).mean().item() for ww, z in [content_adaptive_gates(c, x) for c in (plain, shifted)]]
    assert abs(steps[0] - 0.25) < 0.03 and abs(steps[1] - 0.5 / (1 + math.exp(-2.0))) < 0.03
    shifted.reset_parameters()
    assert shifted.bias_hh[64:].min() > 2.0 - 1 / 8 - 1e-6  # the ±1/sqrt(H) draw, shifted by 2
    assert "content_weight_bias=2" in repr(shifted) and "content_weight_bias" not in repr(plain)


def test_gru_update_bias_shifts_only_b_hz_starts_the_step_near_a_quarter_and_still_equals_torch():
    """``update_bias=1.1`` adds 1.1 to b_hz of the same draw (r's and n's rows untouched); the step 1 − z then
    starts near σ(−1.1) ≈ ¼, CARU's starting step, not ½; the cell still equals torch.nn.GRU with its weights (the
    fused kernel and the step loop)."""
    torch.manual_seed(0)
    plain = GRU(16, 64)
    torch.manual_seed(0)
    shifted = GRU(16, 64, update_bias=1.1)
    difference = shifted.bias_hh - plain.bias_hh
    torch.testing.assert_close(difference[64:128], torch.full((64,), 1.1))
    assert difference[:64].abs().max() == 0 and difference[128:].abs().max() == 0
    torch.testing.assert_close(shifted.weight_hh, plain.weight_hh)
    x = torch.randn(3, 8, 16)
    z = torch.sigmoid(x[0] @ shifted.weight_ih[64:128].T + shifted.bias_ih[64:128] + shifted.bias_hh[64:128])
    assert abs((1 - z).mean().item() - 1 / (1 + math.exp(1.1))) < 0.03  # the first step from a zero state
    layer = Recurrent(lambda i, h: GRU(i, h, update_bias=1.1), 16, 64, batch_first=True)
    ref = nn.GRU(16, 64, batch_first=True)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(ref, f"{name}_l0").copy_(getattr(layer.cell(0, 0), name))
    assert layer.cell(0, 0).bias_hh[64:128].mean() > 1.0
    torch.testing.assert_close(layer(x)[0], ref(x)[0], atol=1e-5, rtol=0)
    shifted.reset_parameters()
    assert shifted.bias_hh[64:128].min() > 1.1 - 1 / 8 - 1e-6 and shifted.bias_hh[:64].max() <= 1 / 8
    assert "update_bias=1.1" in repr(shifted) and "update_bias" not in repr(plain)


@pytest.mark.parametrize("name", ["LSTM", "GRU", "Elman"])
def test_fused_kernel_equals_the_step_loop(name: str):
    """LSTM, GRU and Elman run unpadded sequences through torch's fused kernel (torch.lstm / gru / rnn_tanh:
    cuDNN on a GPU); the step loop gives the same values and grads, and the fused path really ran."""
    from lit_rnncells.cells import get_cell
    from lit_rnncells.nn.recurrent import run_cell

    cell = get_cell(name)(5, 7)
    x = torch.randn(6, 3, 5)
    state = cell.initial_state(3)
    state = tuple(torch.randn_like(s) for s in state) if isinstance(state, tuple) else torch.randn_like(state)
    leaves = (lambda st: st if isinstance(st, tuple) else (st,))
    with torch.autograd.profiler.profile() as prof:
        fused_out, fused_state, _ = run_cell(cell, x, state)
    assert any(e.name == f"aten::{ {'LSTM': 'lstm', 'GRU': 'gru', 'Elman': 'rnn_tanh'}[name]}"
               for e in prof.function_events)
    fused_grads = torch.autograd.grad(fused_out.sum() + leaves(fused_state)[-1].sum(), list(cell.parameters()))
    loop_out, loop_state, _ = run_cell(cell, x, state, mask=torch.ones(6, 3, dtype=torch.bool))
    loop_grads = torch.autograd.grad(loop_out.sum() + leaves(loop_state)[-1].sum(), list(cell.parameters()))
    torch.testing.assert_close(fused_out, loop_out, atol=1e-5, rtol=0)
    for a, b in zip(leaves(fused_state) + fused_grads, leaves(loop_state) + loop_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["LSTM", "GRU", "Elman"])
def test_fused_kernel_takes_padded_batches_packed(name: str, monkeypatch):
    """Given the lengths behind a padded batch, the fused kernel runs it packed: zero outputs at padded steps,
    each final state at its last real step, gradients as the step loop's (which runs when no lengths are
    given, or when a sequence is empty). The layer does this on CUDA only; here CPU is let in to check it."""
    from lit_rnncells.cells import get_cell
    from lit_rnncells.nn import backend
    from lit_rnncells.nn.recurrent import run_cell

    monkeypatch.setattr(backend, "FUSED_PACKED_DEVICES", ("cpu", "cuda"))

    cell = get_cell(name)(5, 7)
    x = torch.randn(6, 4, 5)
    lengths = torch.tensor([3, 6, 1, 4])
    mask = torch.arange(6).unsqueeze(1) < lengths.unsqueeze(0)
    state = cell.initial_state(4)
    state = tuple(torch.randn_like(s) for s in state) if isinstance(state, tuple) else torch.randn_like(state)
    leaves = (lambda st: st if isinstance(st, tuple) else (st,))
    kernel = {"LSTM": "lstm", "GRU": "gru", "Elman": "rnn_tanh"}[name]
    results = []
    for given in (lengths, None):
        with torch.autograd.profiler.profile() as prof:
            out, final, _ = run_cell(cell, x, state, mask, lengths=given)
        assert any(e.name == f"aten::{kernel}" for e in prof.function_events) == (given is not None)
        grads = torch.autograd.grad(out.pow(2).sum() + leaves(final)[0].sum(), list(cell.parameters()))
        results.append((out, leaves(final), grads))
    (packed_out, packed_final, packed_grads), (loop_out, loop_final, loop_grads) = results
    assert torch.equal(packed_out[~mask], torch.zeros_like(packed_out[~mask]))
    torch.testing.assert_close(packed_out, loop_out, atol=1e-5, rtol=0)
    for a, b in zip(packed_final + packed_grads, loop_final + loop_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    with torch.autograd.profiler.profile() as prof:  # an empty sequence: the step loop
        run_cell(cell, x, state, torch.arange(6).unsqueeze(1) < torch.tensor([3, 0, 1, 4]).unsqueeze(0),
                 lengths=torch.tensor([3, 0, 1, 4]))
    assert not any(e.name == f"aten::{kernel}" for e in prof.function_events)


@pytest.mark.parametrize("name", ["LSTM", "GRU", "Elman"])
def test_padded_batches_take_the_step_loop_on_cpu(name: str):
    """On CPU the packed kernels are slower than the masked step loop (docs/measured.md), so a padded batch
    through the layer runs the loop; an unpadded one still runs the fused kernel."""
    from lit_rnncells.nn import Recurrent

    layer = Recurrent(name, 5, 7, batch_first=True)
    x = torch.randn(4, 6, 5)
    kernel = {"LSTM": "lstm", "GRU": "gru", "Elman": "rnn_tanh"}[name]
    for lengths, fused in ((torch.tensor([3, 6, 1, 4]), False), (None, True)):
        with torch.autograd.profiler.profile() as prof:
            layer(x, lengths=lengths)
        assert any(e.name == f"aten::{kernel}" for e in prof.function_events) == fused


@pytest.mark.parametrize("name", ["LSTM", "GRU", "Elman"])
def test_fused_kernel_under_autocast_gives_the_step_loops_precision(name: str, monkeypatch):
    """Under autocast the fused kernel computes in bf16, but its outputs and state come back in the state's
    float32, as the step loop's do, unpadded and packed alike (a later layer or loss sees one dtype)."""
    from lit_rnncells.nn import Recurrent, backend

    monkeypatch.setattr(backend, "FUSED_PACKED_DEVICES", ("cpu", "cuda"))
    layer = Recurrent(name, 5, 7, batch_first=True)
    x = torch.randn(3, 4, 5)
    kernel = {"LSTM": "lstm", "GRU": "gru", "Elman": "rnn_tanh"}[name]
    for lengths in (None, torch.tensor([4, 2, 3])):
        with torch.autocast("cpu", dtype=torch.bfloat16), torch.autograd.profiler.profile() as prof:
            out, state = layer(x, lengths=lengths)
        if not any(e.name == f"aten::{kernel}" for e in prof.function_events):
            pytest.skip(f"this CPU has no bf16 {kernel} kernel, so the step loop ran")
        assert out.dtype == torch.float32
        assert all(leaf.dtype == torch.float32 for leaf in (state if isinstance(state, tuple) else (state,)))


@pytest.mark.parametrize("name", ["LSTM", "GRU", "Elman"])
def test_a_subclass_with_its_own_step_does_not_run_the_fused_kernel(name: str):
    """A user's subclass of a fused cell that changes ``step`` gets its step, not torch's kernel."""
    from lit_rnncells.cells import get_cell
    from lit_rnncells.nn.recurrent import run_cell

    base = get_cell(name)

    class Doubled(base):
        def step(self, x_proj_t, state):
            new = super().step(x_proj_t, state)
            return tuple(2 * s for s in new) if isinstance(new, tuple) else 2 * new

    cell = Doubled(3, 4)
    x = torch.randn(5, 2, 3)
    out, _, _ = run_cell(cell, x, cell.initial_state(2))
    loop, _, _ = run_cell(cell, x, cell.initial_state(2), mask=torch.ones(5, 2, dtype=torch.bool))
    torch.testing.assert_close(out, loop)  # torch's kernel would give the undoubled states


@pytest.mark.parametrize("ops", [("keep", "replace", "max", "min", "mul", "diff", "forget"),
                                 ("max", "signed_diff"), ("forget",)])
def test_mufuru_basis_contraction_equals_calling_each_op(ops):
    """Ops with a basis decomposition are summed in one contraction: same values as Σ_j p^j op^j(s, v)."""
    from lit_rnncells.cells.mufuru import _OPS

    torch.manual_seed(0)
    cell = MuFuRU(4, 6, ops=ops).double()
    assert cell.basis is not None
    x, s = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 6, dtype=torch.float64)
    xp = cell.project_input(x)
    h = 6
    hs = s @ cell.weight_hs.T
    r = torch.sigmoid(xp[:, :h] + hs[:, :h])
    v = torch.tanh(xp[:, h: 2 * h] + (r * s) @ cell.weight_hv.T)
    p = torch.softmax((xp[:, 2 * h:] + hs[:, h:]).view(3, len(ops), h), dim=1)
    expected = sum(p[:, j] * _OPS[o](s, v) for j, o in enumerate(ops))
    torch.testing.assert_close(cell.step(xp, s), expected, atol=1e-12, rtol=0)


def test_mufuru_op_without_basis_takes_the_general_path():
    cell = MuFuRU(3, 4, ops=("keep", "sqr_diff"))
    assert cell.basis is None
    out, _ = _run(cell, torch.randn(2, 5, 3))
    assert torch.isfinite(out).all()


def _plain_mufuru_loop(layer: Recurrent, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The layer's equations as a hand-written step loop, never entering ``stepping()``: every
    weight gradient comes from autograd step by step."""
    outputs = []
    for direction in range(2):
        cell = layer.cell(0, direction)
        seq = x if direction == 0 else torch.stack([torch.cat([x[b, :n].flip(0), x[b, n:]]) for b, n in
                                                    enumerate(lengths.tolist())])
        proj, s, outs = cell.project_input(seq), cell.initial_state(x.shape[0], dtype=x.dtype), []
        for t in range(x.shape[1]):
            new = cell.step(proj[:, t], s)
            s = torch.where((lengths > t).unsqueeze(1), new, s)
            outs.append(s * (lengths > t).unsqueeze(1))
        out = torch.stack(outs, 1)
        if direction == 1:
            out = torch.stack([torch.cat([out[b, :n].flip(0), out[b, n:]]) for b, n in enumerate(lengths.tolist())])
        outputs.append(out)
    return torch.cat(outputs, -1)


def test_mufuru_state_map_gradient_after_the_loop_equals_the_step_by_step_one():
    """Inside Recurrent, weight_hs's gradient is one matmul after the loop's backward
    (_StateMapGradient); it must equal autograd's per-step gradients, padding and reversal included."""
    torch.manual_seed(0)
    layer = Recurrent(MuFuRU, 3, 5, bidirectional=True, batch_first=True).double()
    x = torch.randn(3, 6, 3, dtype=torch.float64)
    lengths = torch.tensor([6, 2, 4])
    weight = torch.randn(3, 6, 10, dtype=torch.float64)
    out, _ = layer(x, lengths=lengths)
    fast = torch.autograd.grad((out * weight).sum(), list(layer.parameters()))
    plain = _plain_mufuru_loop(layer, x, lengths)
    torch.testing.assert_close(out, plain, atol=1e-12, rtol=0)
    slow = torch.autograd.grad((plain * weight).sum(), list(layer.parameters()))
    for (name, _), a, b in zip(layer.named_parameters(), fast, slow):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10, msg=name)


def test_mufuru_stepping_reports_a_loop_that_skipped_steps():
    cell = MuFuRU(3, 4)
    x_proj = cell.project_input(torch.randn(5, 2, 3))
    with cell.stepping(x_proj) as stepped:
        s = cell.step(stepped[0], cell.initial_state(2))  # one step of five
    with pytest.raises(RuntimeError, match="saw 1 steps for 5 inputs"):
        (s.sum() + stepped.sum()).backward()
    with torch.no_grad(), cell.stepping(x_proj) as same:
        assert same is x_proj  # nothing deferred without gradients
