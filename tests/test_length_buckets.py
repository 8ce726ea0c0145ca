"""Length buckets (``data.batching.LengthBuckets``): a few padded lengths from the training lengths' quantiles,
and padding up to them changes no result: every cell's outputs, final state, auxiliary loss and gradients, the
seq2seq loss, equal those of the batch padded to its longest sequence (classification reads the same layer and lengths)."""
from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from lit_rnncells.data.batching import LengthBuckets, LengthBucketsMixin, pad_batch
from lit_rnncells.nn import Recurrent

from .cell_cases import cell_cases
from .test_compiled import _assert_same, _leaves

CASES = cell_cases()
INPUT, HIDDEN = 3, 8


def test_buckets_are_the_quantiles_of_the_training_lengths() -> None:
    buckets = LengthBuckets(list(range(1, 101)), 4)
    assert buckets.lengths == (25, 50, 75, 100) and len(buckets) == 4
    assert [buckets.length_for(n) for n in (1, 25, 26, 99, 100)] == [25, 25, 50, 100, 100]
    assert buckets.length_for(130) == 130  # longer than any training example: its own length
    assert LengthBuckets([7] * 50 + [9], 8).lengths == (7, 9)  # never more buckets than distinct quantiles
    assert repr(buckets) == "4 length buckets (25, 50, 75, 100)"
    with pytest.raises(ValueError, match="length_buckets"):
        LengthBuckets([3, 4], 0)


def test_pad_batch_pads_up_to_the_bucket() -> None:
    buckets = LengthBuckets([2, 4, 6, 8], 2)
    padded, lengths = pad_batch([[5, 6, 7], [8]], 0, buckets)
    assert padded.tolist() == [[5, 6, 7, 0], [8, 0, 0, 0]] and lengths.tolist() == [3, 1]
    assert pad_batch([[5, 6, 7], [8]], 0)[0].shape == (2, 3)


def test_the_mixin_builds_each_fields_buckets_once_and_says_how_many(capsys) -> None:
    class Data(LengthBucketsMixin):
        length_buckets = 3

    data, calls = Data(), []
    lengths = lambda: calls.append(1) or list(range(1, 31))
    assert data.buckets("source", lengths).lengths == (10, 20, 30)
    assert data.buckets("source", lengths) is data.buckets("source", lengths) and len(calls) == 1
    assert capsys.readouterr().err == "lit_rnncells: source: 3 length buckets (10, 20, 30)\n"
    off = Data()
    off.length_buckets = 0
    assert off.buckets("source", lengths) is None


def _run(layer: Recurrent, x: torch.Tensor, lengths: torch.Tensor, steps: int):
    """As ``test_compiled._run``, the loss reading the first ``steps`` outputs only (the same weights for both)."""
    layer.zero_grad(set_to_none=True)
    out, state, aux = layer(x, lengths=lengths, return_aux=True)
    real = out[:, :steps]
    weight = torch.linspace(-1, 1, real.numel()).view_as(real)
    loss = (real * weight).sum() + aux + sum(leaf.float().square().sum() for leaf in _leaves(state))
    loss.backward()
    return {"out": out.detach(), "state": tuple(s.detach() for s in _leaves(state)), "aux": aux.detach(),
            "grads": {n: p.grad for n, p in layer.named_parameters()}}


def _padded(x: torch.Tensor, steps: int) -> torch.Tensor:
    """``x`` (B, T, I) with random values (not zeros) after T, up to ``steps``: masks must ignore them."""
    extra = torch.randn(x.shape[0], steps - x.shape[1], x.shape[2], generator=torch.Generator().manual_seed(9))
    return torch.cat([x, extra], dim=1)


@pytest.mark.parametrize("name", list(CASES))
def test_every_cell_gives_the_same_results_padded_up_to_a_bucket(name: str) -> None:
    """Two layers, one and two directions: outputs (the bucket's extra steps zero), final state, aux, grads."""
    x = torch.randn(3, 5, INPUT, generator=torch.Generator().manual_seed(1))
    lengths = torch.tensor([5, 2, 4])
    for bidirectional in (False, True):
        torch.manual_seed(0)
        layer = Recurrent(CASES[name], INPUT, HIDDEN, num_layers=2, bidirectional=bidirectional, batch_first=True)
        want = _run(layer, x, lengths, 5)
        got = _run(layer, _padded(x, 8), lengths, 5)
        assert torch.equal(got["out"][:, 5:], torch.zeros_like(got["out"][:, 5:]))
        got["out"] = got["out"][:, :5]
        _assert_same(want, got, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("cell", ["GRU", "SatMZU"])
def test_seq2seq_loss_and_gradients_are_the_same_padded_up_to_buckets(cell: str) -> None:
    """Encoder and decoder: the source and the target padded further (with the pad id) change nothing."""
    from .test_seq2seq import make, pairs

    model = make(torch.float64, cell=cell)
    batch = pairs([5, 3, 7], [4, 1, 6])
    wider = dict(batch, source=F.pad(batch["source"], (0, 4)), target=F.pad(batch["target"], (0, 3)))
    results = []
    for b in (batch, wider):
        model.zero_grad(set_to_none=True)
        logits, gold, aux = model._real_logits(b, want_aux=True)
        loss = F.cross_entropy(logits, gold) + aux
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    torch.testing.assert_close(results[1][0], results[0][0])
    assert results[0][1].keys() == results[1][1].keys()
    for name in results[0][1]:
        torch.testing.assert_close(results[1][1][name], results[0][1][name], msg=name)


def test_the_translation_datamodule_pads_sources_and_targets_to_a_few_lengths(tmp_path, capsys) -> None:
    """With ``length_buckets: 3`` every batch's source and target widths are among the buckets (from the training
    lengths), the real tokens are those of the unbucketed batches, and the bucket lengths are printed once."""
    from .test_translation_data import module, write_parallel

    lines = [" ".join(["wort"] * n) for n in range(1, 41)]
    folder = write_parallel(tmp_path / "b", {"train": (lines, lines), "valid": (lines[:9], lines[:9]),
                                            "test": (lines[:5], lines[:5])})
    plain = module(folder, batch_size=4, chunk_batches=10, subword_vocab_size=300)
    bucketed = module(folder, batch_size=4, chunk_batches=10, subword_vocab_size=300, length_buckets=3)
    widths = set()
    for want, got in zip(plain.train_dataloader(), bucketed.train_dataloader()):
        assert torch.equal(got["index"], want["index"])
        for field in ("source", "target"):
            assert torch.equal(got[f"{field}_lengths"], want[f"{field}_lengths"])
            extra = got[field].shape[1] - want[field].shape[1]
            assert extra >= 0 and torch.equal(got[field][:, :want[field].shape[1]], want[field])
            assert not got[field][:, want[field].shape[1]:].any()  # only padding added
            widths.add((field, got[field].shape[1]))
    buckets = bucketed._length_buckets
    assert len(buckets["source"]) == len(buckets["target"]) == 3
    assert {w for f, w in widths if f == "source"} <= set(buckets["source"].lengths)
    assert {w for f, w in widths if f == "target"} <= set(buckets["target"].lengths)
    list(bucketed.val_dataloader())
    out = capsys.readouterr().err
    assert out.count("lit_rnncells: source: 3 length buckets") == 1 and out.count("target: 3 length buckets") == 1


def test_a_negative_bucket_count_is_refused(tmp_path) -> None:
    from .test_translation_data import module, write_parallel

    with pytest.raises(ValueError, match="length_buckets"):
        module(write_parallel(tmp_path / "c"), length_buckets=-1)
