"""MC-RNN (Xu et al., AAAI 2019, eq. 1–6): the fast MultiChannel cell against the literal reference, and its wiring."""
from __future__ import annotations

from functools import partial
from typing import Callable, List, Tuple

import pytest
import torch
from torch import Tensor
from torch.utils.flop_counter import FlopCounterMode

from lit_rnncells.cells import (GRU, LSTM, MultiChannel, RecurrentCell, available_cells, channel_attention,
                                get_cell)
from lit_rnncells.cells.mcrnn_reference import in_degree, reference_forward
from lit_rnncells.nn import Recurrent

from .cell_cases import _needs_options

DOUBLE = torch.float64


def mc_layer(inner: Callable, n: int, input_size: int = 3, hidden: int = 5, **kw) -> Recurrent:
    return Recurrent(partial(MultiChannel, cell=inner, block_size=n), input_size, hidden, batch_first=True, **kw)


def perturb(mc: MultiChannel, scale: float = 0.3) -> None:
    """Move W_j away from I so every W_j is distinguishable in the comparisons."""
    with torch.no_grad():
        mc.mix_weight.add_(scale * torch.randn_like(mc.mix_weight))


def leaves(state) -> List[Tensor]:
    return list(state) if isinstance(state, tuple) else [state]


def test_in_degree_is_eq_1_and_gives_figure_2():
    # n = 4: channel 1 at t = 1 … 7 has in-degrees 3, 1, 2, 3, 1, 2, 3 (blocks 1–4, 4–7 share node 4).
    assert [in_degree(t, 1, 4) for t in range(1, 8)] == [3, 1, 2, 3, 1, 2, 3]
    assert [in_degree(t, 2, 4) for t in range(1, 8)] == [2, 3, 1, 2, 3, 1, 2]
    # Figure 2 (n = 4): at t − 1 channels 1, 2, 3 see 3-, 2-, 4-word patterns (m = 2, 1, 3), at t 4-, 3-, 2-word.
    assert [in_degree(3, k, 4) for k in (1, 2, 3)] == [2, 1, 3]
    assert [in_degree(4, k, 4) for k in (1, 2, 3)] == [3, 2, 1]
    for n in (2, 3, 4, 5):
        for k in range(1, n):
            # Under eq. 1 channel k's blocks end (full in-degree n − 1) at t ≡ k mod (n − 1) and the next
            # node starts a new block (in-degree 1). (The paper's prose lists the first block of channel
            # k as h_{2−k} … h_{n+1−k}: the same partitions with labels k ↔ 2 − k mod (n − 1); we follow
            # eq. 1.)
            assert in_degree(k + n - 1, k, n) == n - 1
            assert in_degree(k + n, k, n) == 1
        for t in range(1, 9):  # at every step the channels' in-degrees are a permutation of 1 … n − 1
            assert sorted(in_degree(t, k, n) for k in range(1, n)) == list(range(1, n))


@pytest.mark.parametrize("inner", [GRU, LSTM], ids=["GRU", "LSTM"])
@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_matches_the_literal_reference(inner, n):
    """Outputs, α and gradients (all parameters and the input) of the fast cell through Recurrent
    equal the one-channel-at-a-time reference."""
    layer = mc_layer(inner, n).to(DOUBLE)
    mc: MultiChannel = layer.cell(0)  # type: ignore[assignment]
    perturb(mc)
    x = torch.randn(3, 11, 3, dtype=DOUBLE, requires_grad=True)
    weight = torch.randn(3, 11, 5, dtype=DOUBLE)
    params = [x, *mc.parameters()]

    fast, _ = layer(x)
    fast_grads = torch.autograd.grad((fast * weight).sum(), params)
    ref, ref_alpha = reference_forward(mc, x)
    ref_grads = torch.autograd.grad((ref * weight).sum(), params)

    torch.testing.assert_close(fast, ref, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(channel_attention(layer, x), ref_alpha, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(channel_attention(mc, x), ref_alpha, atol=1e-12, rtol=1e-10)
    for got, want in zip(fast_grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-11, rtol=1e-9)


@pytest.mark.parametrize("inner", ["Elman", "GRU", "LSTM", "MGU", "CARU"])
def test_block_size_two_is_exactly_the_wrapped_cell(inner):
    """n = 2: one channel, m = 1, W_1 = I and α = 1, so MC-RNN is the wrapped cell bit for bit."""
    layer = mc_layer(inner, 2, hidden=6)
    mc: MultiChannel = layer.cell(0)  # type: ignore[assignment]
    plain = Recurrent(get_cell(inner), 3, 6, batch_first=True)
    plain.cell(0).load_state_dict(mc.cell.state_dict())
    x = torch.randn(4, 9, 3)
    lengths = torch.tensor([9, 4, 1, 7])
    out, state = layer(x, lengths=lengths)
    want, want_state = plain(x, lengths=lengths)
    assert torch.equal(out, want)
    want_leaves = leaves(want_state)
    h = want_leaves.pop(mc._mixed_leaf)
    assert torch.equal(mc.output(tuple(leaf[0] for leaf in state)), h[0])  # the mixed h_t
    assert torch.equal(state[2][:, :, 0], h)  # the single channel's latest h
    for got, want_leaf in zip(state[3:], want_leaves):  # carried leaves (LSTM's c)
        assert torch.equal(got[:, :, 0], want_leaf)


@pytest.mark.parametrize("inner", [GRU, LSTM], ids=["GRU", "LSTM"])
@pytest.mark.parametrize("n", [3, 4, 5])
@pytest.mark.parametrize("split", [1, 2, 5])
def test_two_halves_equal_the_whole(inner, n, split):
    """The carried state (history, carried leaves, step phase) makes windows (TBPTT) equal one pass."""
    layer = mc_layer(inner, n).to(DOUBLE).eval()
    perturb(layer.cell(0))  # type: ignore[arg-type]
    x = torch.randn(2, 9, 3, dtype=DOUBLE)
    whole, whole_state = layer(x)
    first, mid = layer(x[:, :split])
    second, end = layer(x[:, split:], mid)
    torch.testing.assert_close(torch.cat([first, second], 1), whole, atol=1e-12, rtol=1e-10)
    for got, want in zip(leaves(end), leaves(whole_state)):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10)
    assert torch.equal(mid[1], torch.full((1, 2), split % (n - 1)))  # the phase: steps done mod n − 1


@pytest.mark.parametrize("inner", [GRU, LSTM], ids=["GRU", "LSTM"])
def test_padded_steps_do_not_advance_the_phase(inner):
    """A window whose sequences end early, then a second window, equals each sequence run alone."""
    n = 4
    layer = mc_layer(inner, n).to(DOUBLE).eval()
    perturb(layer.cell(0))  # type: ignore[arg-type]
    x1, x2 = torch.randn(3, 6, 3, dtype=DOUBLE), torch.randn(3, 4, 3, dtype=DOUBLE)
    lengths = torch.tensor([6, 4, 5])
    _, mid = layer(x1, lengths=lengths)
    assert torch.equal(mid[1][0], lengths % (n - 1))
    out2, _ = layer(x2, mid)
    for b, length in enumerate(lengths.tolist()):
        alone, _ = layer(torch.cat([x1[b: b + 1, :length], x2[b: b + 1]], 1))
        torch.testing.assert_close(out2[b], alone[0, length:], atol=1e-12, rtol=1e-10)


SIMPLE_CELLS = [name for name in available_cells()
                if name != "MultiChannel" and not _needs_options(get_cell(name))]


@pytest.mark.parametrize("inner", SIMPLE_CELLS)
def test_wraps_every_registered_cell(inner):
    layer = mc_layer(inner, 3, hidden=8, num_layers=2).eval()
    x = torch.randn(3, 7, 3)
    out, state, aux = layer(x, lengths=torch.tensor([7, 5, 2]), return_aux=True)
    assert out.shape == (3, 7, 8) and torch.isfinite(out).all() and torch.isfinite(aux)
    whole, _ = layer(x)
    first, mid = layer(x[:, :4])
    second, _ = layer(x[:, 4:], mid)
    torch.testing.assert_close(torch.cat([first, second], 1), whole)


class _AuxGRU(GRU):
    """A GRU with a made-up auxiliary loss (deliberately not registered)."""

    has_aux_loss = True

    def step_with_aux(self, x_proj_t: Tensor, state: Tensor) -> Tuple[Tensor, Tensor]:
        new = self.step(x_proj_t, state)
        return new, new.pow(2).mean(1)


def test_auxiliary_loss_passes_through_averaged_over_channels():
    layer = mc_layer(_AuxGRU, 4)
    mc: MultiChannel = layer.cell(0)  # type: ignore[assignment]
    assert mc.has_aux_loss and layer.has_aux_loss
    x = torch.randn(2, 5, 3)
    _, _, aux = layer(x, return_aux=True)
    state, total = mc.initial_state(2), torch.zeros(())
    proj = mc.project_input(x)
    for t in range(5):
        state, aux_t = mc.step_with_aux(proj[:, t], state)
        total = total + state[2].pow(2).mean(-1).mean(-1).sum()  # mean over the channels' new h
        assert aux_t.shape == (2,)
    torch.testing.assert_close(aux, total / 10)


def test_channel_attention_of_a_bidirectional_padded_layer():
    layer = mc_layer(GRU, 4, num_layers=2, bidirectional=True).to(DOUBLE).eval()
    x = torch.randn(3, 7, 3, dtype=DOUBLE)
    lengths = torch.tensor([7, 3, 5])
    for lay in (0, 1):
        for direction in (0, 1):
            alpha = channel_attention(layer, x, lengths=lengths, layer=lay, direction=direction)
            assert alpha.shape == (3, 7, 3)
            for b, length in enumerate(lengths.tolist()):
                torch.testing.assert_close(alpha[b, :length].sum(-1), torch.ones(length, dtype=DOUBLE))
                assert torch.all(alpha[b, length:] == 0)
    for direction in (0, 1):
        cell: MultiChannel = layer.cell(0, direction)  # type: ignore[assignment]
        alpha = channel_attention(layer, x, lengths=lengths, direction=direction)
        for b, length in enumerate(lengths.tolist()):
            seq = x[b: b + 1, :length]
            if direction == 1:
                alone = channel_attention(cell, seq.flip(1)).flip(1)
            else:
                alone = reference_forward(cell, seq)[1]
            torch.testing.assert_close(alpha[b, :length], alone[0])
        assert cell._attention_log is None  # nothing keeps recording after the call
    with pytest.raises(TypeError, match="not a MultiChannel"):
        channel_attention(Recurrent(GRU, 3, 5), x)


@pytest.mark.parametrize("inner,gates", [(GRU, 3), (LSTM, 4)], ids=["GRU", "LSTM"])
@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_step_cost_in_multiply_accumulates(inner, gates, n):
    """Per example and step: the wrapped cell's h-matmuls on n − 1 channels and eq. 2 on only the
    needed (n − 1) n / 2 H×H products in the step; V_h on n − 1 channels and the α-mix in the output
    (out of the time loop); V_x x is hoisted out of both. (FlopCounterMode does not count the
    matrix-vector rᵀ tanh(·).)"""
    batch, hidden, c = 4, 16, n - 1
    mc = MultiChannel(8, hidden, cell=inner, block_size=n)
    state, x_proj = mc.initial_state(batch), mc.project_input(torch.randn(batch, 8))
    with FlopCounterMode(display=False) as in_step:
        new = mc.step(x_proj, state)
    with FlopCounterMode(display=False) as in_output:
        mc.output(new)
    assert in_step.get_total_flops() // 2 == batch * (gates * c + c * (c + 1) // 2) * hidden * hidden
    assert in_output.get_total_flops() // 2 == batch * c * hidden * hidden


def test_output_sequence_equals_stacking_output():
    """The after-the-loop attention gives what per-step ``output`` gives, α included."""
    mc = MultiChannel(3, 5, cell=GRU, block_size=4).double()
    x = torch.randn(2, 7, 3, dtype=DOUBLE)
    proj, state, states = mc.project_input(x), mc.initial_state(2, dtype=DOUBLE), []
    for t in range(7):
        state = mc.step(proj[:, t], state)
        states.append(state)
    with mc.recording_attention() as batched:
        together = mc.output_sequence(states)
    with mc.recording_attention() as one_by_one:
        apart = torch.stack([mc.output(s) for s in states])
    torch.testing.assert_close(together, apart)
    torch.testing.assert_close(torch.stack(batched), torch.stack(one_by_one))
    torch.testing.assert_close(together.transpose(0, 1), reference_forward(mc, x)[0])


def test_jsonargparse_builds_the_nested_config():
    """The form tasks use: a parameter typed Callable[[int, int], RecurrentCell] filled from YAML."""
    jsonargparse = pytest.importorskip("jsonargparse")
    parser = jsonargparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("--cell", type=Callable[[int, int], RecurrentCell])
    for inner, want in (("{class_path: lit_rnncells.cells.LSTM}", LSTM), ("gru", GRU)):
        cfg = parser.parse_string("cell:\n  class_path: lit_rnncells.cells.MultiChannel\n"
                                  f"  init_args: {{block_size: 3, cell: {inner}}}\n")
        instantiate = getattr(parser, "instantiate", None) or parser.instantiate_classes
        factory = instantiate(cfg).cell
        cell = factory(6, 8)
        assert isinstance(cell, MultiChannel) and type(cell.cell) is want
        assert (cell.input_size, cell.hidden_size, cell.channels) == (6, 8, 2)
        out, _ = Recurrent(factory, 6, 8)(torch.randn(4, 2, 6))
        assert out.shape == (4, 2, 8)


def test_construction_and_errors():
    mc = MultiChannel(3, 5, cell="GRU", block_size=4)
    assert get_cell("multi_channel") is MultiChannel and type(mc.cell) is GRU
    assert torch.equal(mc.mix_weight, torch.eye(5).expand(3, 5, 5))  # W_j = I for every j
    state = mc.initial_state(2)
    assert [tuple(s.shape) for s in state] == [(2, 5), (2,), (2, 3, 5), (2, 3, 5), (2, 3, 5)]
    with pytest.raises(ValueError, match="block_size"):
        MultiChannel(3, 5, cell=GRU, block_size=1)
    with pytest.raises((KeyError, ValueError), match="Unknown cell"):
        MultiChannel(3, 5, cell="GRUU", block_size=3)

    class Computed(GRU):
        def output(self, state: Tensor) -> Tensor:
            return 2 * state

    with pytest.raises(TypeError, match="cannot be wrapped"):
        MultiChannel(3, 5, cell=Computed, block_size=3)
