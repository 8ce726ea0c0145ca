"""``Recurrent`` takes a ``PackedSequence`` as ``torch.nn.GRU`` does (it raised "'PackedSequence' object has no
attribute 'device'"): the same outputs, state, auxiliary loss and gradients as the padded batch with its lengths,
and the output packed as ``torch.nn.GRU`` packs its own."""
from __future__ import annotations

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from lit_rnncells.cells import CARU, LSTM, SatMZU
from lit_rnncells.nn import Recurrent


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("cell", [CARU, LSTM, SatMZU])
def test_a_packed_batch_gives_what_the_padded_batch_with_its_lengths_gives(cell, enforce_sorted, batch_first):
    torch.manual_seed(0)
    layer = Recurrent(cell, 6, 8, num_layers=2, bidirectional=True, batch_first=batch_first)
    lengths = torch.tensor([5, 4, 4, 2]) if enforce_sorted else torch.tensor([4, 5, 2, 4])
    x = torch.randn(4, 5, 6) if batch_first else torch.randn(5, 4, 6)
    state = layer.initial_state(4)
    state = tuple(torch.randn_like(s) for s in state) if isinstance(state, tuple) else torch.randn_like(state)

    padded_out, padded_state, padded_aux = layer(x, state, lengths=lengths, return_aux=True)
    mask = (torch.arange(5).unsqueeze(0) < lengths.unsqueeze(1)) if batch_first else \
        (torch.arange(5).unsqueeze(1) < lengths.unsqueeze(0))
    weights = torch.randn(padded_out.shape[-1])
    padded_loss = (padded_out[mask] @ weights).sum() + padded_aux
    padded_grads = torch.autograd.grad(padded_loss, list(layer.parameters()))

    packed = pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    packed_out, packed_state, packed_aux = layer(packed, state, return_aux=True)
    unpacked, unpacked_lengths = pad_packed_sequence(packed_out, batch_first=batch_first, total_length=5)
    torch.testing.assert_close(unpacked, padded_out)
    assert torch.equal(unpacked_lengths, lengths)
    for mine, theirs in zip(packed_state if isinstance(packed_state, tuple) else [packed_state],
                            padded_state if isinstance(padded_state, tuple) else [padded_state]):
        torch.testing.assert_close(mine, theirs)  # in the batch's own order, as torch.nn.GRU returns h_n
    torch.testing.assert_close(packed_aux, padded_aux)
    packed_loss = (packed_out.data @ weights).sum() + packed_aux
    for mine, theirs in zip(torch.autograd.grad(packed_loss, list(layer.parameters())), padded_grads):
        torch.testing.assert_close(mine, theirs)

    reference, _ = torch.nn.GRU(6, 8, num_layers=2, bidirectional=True, batch_first=batch_first)(packed)
    assert torch.equal(packed_out.batch_sizes, reference.batch_sizes)
    for mine, theirs in ((packed_out.sorted_indices, reference.sorted_indices),
                         (packed_out.unsorted_indices, reference.unsorted_indices)):
        assert (mine is None and theirs is None) or torch.equal(mine, theirs)


def test_lengths_beside_a_packed_batch_are_refused():
    layer = Recurrent(CARU, 3, 4)
    packed = pack_padded_sequence(torch.randn(4, 2, 3), torch.tensor([4, 2]))
    with pytest.raises(ValueError, match="A PackedSequence carries its own lengths; pass lengths only with a padded"):
        layer(packed, lengths=torch.tensor([4, 2]))
