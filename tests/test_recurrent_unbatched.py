"""``Recurrent`` takes what ``torch.nn.GRU`` takes besides a batch: one unbatched sequence ``(T, input_size)`` with
a state of ``(num_layers * num_directions, hidden_size)``, and the initial state by torch's keyword ``hx``."""
from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

from lit_rnncells.cells import MultiChannel
from lit_rnncells.nn import Recurrent

from .test_oracles import copy_torch_weights


@pytest.mark.parametrize("batch_first", [False, True])
def test_an_unbatched_sequence_gives_torchs_output_and_state(batch_first):
    torch.manual_seed(0)
    ref = nn.GRU(4, 6, num_layers=2, bidirectional=True, batch_first=batch_first)
    ours = Recurrent("GRU", 4, 6, num_layers=2, bidirectional=True, batch_first=batch_first)
    copy_torch_weights(ours, ref)
    x, h0 = torch.randn(7, 4), torch.randn(4, 6)
    for args in ((x,), (x, h0)):
        want_out, want_state = ref(*args)
        out, state = ours(*args)
        assert out.shape == want_out.shape == (7, 12) and state.shape == want_state.shape == (4, 6)
        torch.testing.assert_close(out, want_out, atol=1e-5, rtol=0)
        torch.testing.assert_close(state, want_state, atol=1e-5, rtol=0)


def test_an_unbatched_lstm_state_is_a_pair_without_the_batch_and_the_aux_loss_comes_third():
    torch.manual_seed(0)
    ref, ours = nn.LSTM(3, 5), Recurrent("LSTM", 3, 5)
    copy_torch_weights(ours, ref)
    x, h0, c0 = torch.randn(6, 3), torch.randn(1, 5), torch.randn(1, 5)
    (want, (want_h, want_c)), (out, (h, c), aux) = ref(x, (h0, c0)), ours(x, (h0, c0), return_aux=True)
    torch.testing.assert_close(out, want, atol=1e-5, rtol=0)
    torch.testing.assert_close((h, c), (want_h, want_c), atol=1e-5, rtol=0)
    assert aux.shape == ()
    mzu = Recurrent("SatMZU", 3, 8)  # a cell with an auxiliary loss: the same as a batch of one
    x = torch.randn(6, 3)
    single, batch = mzu(x, return_aux=True), mzu(x.unsqueeze(1), return_aux=True)
    torch.testing.assert_close(single[0], batch[0].squeeze(1))
    torch.testing.assert_close(single[2], batch[2])


def test_hx_is_the_state_by_torchs_name():
    torch.manual_seed(0)
    layer = Recurrent("GRU", 4, 6)
    x, h0 = torch.randn(5, 2, 4), torch.randn(1, 2, 6)
    torch.testing.assert_close(layer(x, hx=h0)[0], layer(x, h0)[0])
    with pytest.raises(ValueError, match=r"^Pass the initial state once: as state or as hx"):
        layer(x, h0, hx=h0)


def test_unbatched_mistakes_are_one_sentence_each():
    layer = Recurrent("GRU", 4, 6)
    with pytest.raises(ValueError, match=r"^An unbatched input \(T, input_size\) is one sequence of its full length"):
        layer(torch.randn(5, 4), lengths=torch.tensor([3]))
    with pytest.raises(ValueError, match=r"the initial state has no batch dimension: shape \(1, 6\), got "
                                         r"\(1, 1, 6\)\.$"):
        layer(torch.randn(5, 4), torch.zeros(1, 1, 6))  # a batched state of one
    lstm = Recurrent("LSTM", 4, 6, num_layers=2)
    with pytest.raises(ValueError, match=r"shape \(2, 6\), got \(2, 5\)\.$"):  # each leaf of a tuple state
        lstm(torch.randn(5, 4), (torch.zeros(2, 6), torch.zeros(2, 5)))


def test_an_unbatched_multi_channel_state_round_trips():
    """A cell whose state leaves have more than (batch, hidden): the state it returns for one sequence is the one
    it takes back (MC-RNN's state holds its channels' blocks)."""
    torch.manual_seed(0)
    layer = Recurrent(functools.partial(MultiChannel, cell="GRU", block_size=3), 4, 6)
    x = torch.randn(9, 4)
    out, state = layer(x)
    whole, _ = layer(torch.cat([x, x]))
    again, _ = layer(x, state)
    torch.testing.assert_close(again, whole[9:])
    batched = layer(x.unsqueeze(1))[1]
    for leaf, batched_leaf in zip(state if isinstance(state, tuple) else (state,),
                                  batched if isinstance(batched, tuple) else (batched,)):
        assert leaf.shape == batched_leaf.squeeze(1).shape
