"""AWD-LSTM regularisers: DropConnect on our own recurrent weights, locked and embedding dropout, AR/TAR."""
from __future__ import annotations

import warnings
from typing import List

import pytest
import torch
from torch import nn

from lit_rnncells.cells import CARU, GRU, LSTM, MuFuRU
from lit_rnncells.nn import (LockedDropout, Recurrent, WeightDrop, activation_regularization, embedding_dropout,
                             recurrent_weight_names, temporal_activation_regularization)

CELLS = {"GRU": GRU, "LSTM": LSTM, "CARU": CARU, "MuFuRU": MuFuRU}


def _recording(layer: Recurrent, names: List[str]) -> List[List[torch.Tensor]]:
    """Wrap every cell's ``step`` so each call records the recurrent weights it sees."""
    seen: List[List[torch.Tensor]] = []
    for cell in layer.cells:
        step = cell.step

        def recorder(x, state, _cell=cell, _step=step):
            seen.append([getattr(_cell, n.rsplit(".", 1)[-1]).detach().clone() for n in names
                         if n.startswith(f"cells.{list(layer.cells).index(_cell)}.")])
            return _step(x, state)

        cell.step = recorder  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize("name", list(CELLS))
def test_dropconnect_mask_fixed_in_time_new_per_forward_off_in_eval(name: str) -> None:
    layer = Recurrent(CELLS[name], 6, 8, batch_first=True)
    names = recurrent_weight_names(layer)
    assert names, f"{name} declares no recurrent weights"
    wd = WeightDrop(layer, 0.5)
    raw = [dict(layer.named_parameters())[n].detach().clone() for n in names]
    seen = _recording(layer, names)
    x = torch.randn(3, 7, 6)
    lengths = torch.tensor([7, 7, 6])  # one padded step: the step loop runs (LSTM's fused kernel would not record)
    wd.train()
    out, _ = wd(x, lengths=lengths)
    first = seen[:]
    assert len(first) == 7
    for step in first[1:]:  # the same dropped weights at every time step
        for a, b in zip(step, first[0]):
            assert torch.equal(a, b)
    for dropped, w in zip(first[0], raw):
        zeros = dropped == 0
        assert zeros.any() and not torch.equal(dropped, w)  # some connections dropped
        torch.testing.assert_close(dropped[~zeros], w[~zeros] * 2.0)  # the rest scaled by 1/(1-p)
    seen.clear()
    wd(x, lengths=lengths)
    assert any(not torch.equal(a, b) for a, b in zip(seen[0], first[0]))  # a new mask on the next forward
    seen.clear()
    wd.eval()
    wd(x, lengths=lengths)
    for a, w in zip(seen[0], raw):
        assert torch.equal(a, w)  # off in eval


@pytest.mark.parametrize("name", list(CELLS))
def test_dropconnect_gradients_reach_raw_weight(name: str) -> None:
    layer = Recurrent(CELLS[name], 4, 5, batch_first=True)
    wd = WeightDrop(layer, 0.3).train()
    out, _ = wd(torch.randn(2, 6, 4))
    out.pow(2).sum().backward()
    params = dict(layer.named_parameters())
    for n in recurrent_weight_names(layer):
        assert params[n].grad is not None and params[n].grad.abs().sum() > 0
    assert all(p.grad is not None for p in layer.parameters())


def test_dropconnect_equals_module_run_with_the_same_mask() -> None:
    layer = Recurrent(LSTM, 4, 5, num_layers=2, batch_first=True)
    wd = WeightDrop(layer, 0.4).train()
    x = torch.randn(2, 6, 4)
    torch.manual_seed(3)
    out, _ = wd(x)
    torch.manual_seed(3)
    dropped = wd.dropped_weights()
    ref = Recurrent(LSTM, 4, 5, num_layers=2, batch_first=True)
    ref.load_state_dict(layer.state_dict())
    with torch.no_grad():
        for n, w in dropped.items():
            dict(ref.named_parameters())[n].copy_(w)
    torch.testing.assert_close(out, ref(x)[0])


def test_dropconnect_passes_keyword_arguments_and_aux() -> None:
    layer = Recurrent(GRU, 4, 5, batch_first=True)
    out, state, aux = WeightDrop(layer, 0.5).train()(torch.randn(2, 3, 4), return_aux=True)
    assert out.shape == (2, 3, 5) and state.shape == (1, 2, 5) and aux.shape == ()


def test_weight_drop_without_declared_weights_fails_clearly() -> None:
    with pytest.raises(ValueError, match="declares no recurrent weights"):
        WeightDrop(nn.Linear(3, 3), 0.5)
    assert WeightDrop(nn.Linear(3, 3), 0.0).names == []
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        WeightDrop(Recurrent(GRU, 3, 3), 1.0)


def test_locked_dropout_shares_mask_over_time() -> None:
    drop = LockedDropout(0.5).train()
    y = drop(torch.ones(4, 9, 6))
    assert torch.equal(y, y[:, :1].expand_as(y))
    assert set(y.unique().tolist()) <= {0.0, 2.0}
    assert torch.equal(drop.eval()(torch.ones(2, 3, 4)), torch.ones(2, 3, 4))


def test_embedding_dropout_drops_whole_word_types() -> None:
    emb = nn.Embedding(50, 4)
    tokens = torch.tensor([[1, 2, 1, 2, 3] * 4])
    out = embedding_dropout(emb, tokens, 0.5)
    for tok in (1, 2, 3):
        rows = out[tokens == tok]
        assert torch.equal(rows, rows[:1].expand_as(rows))  # a word is dropped everywhere or nowhere
        assert rows.abs().sum() == 0 or torch.allclose(rows[0], emb.weight[tok] * 2)
    assert torch.equal(embedding_dropout(emb, tokens, 0.5, training=False), emb(tokens))


def test_ar_tar() -> None:
    h = torch.tensor([[[1.0], [3.0]]])
    assert activation_regularization(h, 2.0).item() == pytest.approx(2.0 * 5.0)
    assert temporal_activation_regularization(h, 1.0).item() == pytest.approx(4.0)
    assert temporal_activation_regularization(h[:, :1], 1.0).item() == 0.0


def test_dropout_with_one_layer_warns_as_torch_gru_does_and_changes_nothing() -> None:
    torch.manual_seed(0)
    with pytest.warns(UserWarning, match=r"dropout=0\.5 drops between stacked layers only, so with num_layers=1"):
        dropped = Recurrent(GRU, 4, 5, dropout=0.5, batch_first=True)
    plain = Recurrent(GRU, 4, 5, batch_first=True)
    plain.load_state_dict(dropped.state_dict())
    x = torch.randn(2, 6, 4)
    dropped.train(), plain.train()
    torch.testing.assert_close(dropped(x)[0], plain(x)[0], rtol=0, atol=0)


def test_dropout_between_two_layers_does_not_warn_and_drops_in_training_only() -> None:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer = Recurrent(GRU, 4, 5, num_layers=2, dropout=0.5, batch_first=True)
    x = torch.randn(2, 6, 4)
    layer.eval()
    evaluated = layer(x)[0]
    layer.train()
    assert not torch.allclose(layer(x)[0], evaluated)
    layer.eval()
    torch.testing.assert_close(layer(x)[0], evaluated, rtol=0, atol=0)


def test_a_classifiers_rnn_dropout_with_one_layer_is_warned_in_its_own_words_and_kept_in_the_config() -> None:
    from lit_rnncells.tasks import DocumentClassifier

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = DocumentClassifier("GRU", vocab_size=9, embedding_size=4, hidden_size=5, rnn_dropout=0.3)
    said = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(said) == 1 and said[0].startswith("rnn_dropout=0.3 drops between stacked recurrent layers only")
    assert model.hparams["rnn_dropout"] == 0.3 and model.rnn.dropout == 0.0


def test_seq2seq_model_wide_dropout_reaches_a_one_layer_encoder_without_a_warning() -> None:
    from lit_rnncells.tasks import Seq2Seq

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        one = Seq2Seq(source_vocab_size=9, target_vocab_size=9, embedding_size=4, hidden_size=5, dropout=0.3)
    two = Seq2Seq(source_vocab_size=9, target_vocab_size=9, embedding_size=4, hidden_size=5, num_layers=2,
                  dropout=0.3)
    assert one.encoder.dropout == 0.0 and one.drop.p == 0.3 and two.encoder.dropout == 0.3
