"""Greedy and batched beam search (nn/beam_search.py) on tiny float64 models."""
from __future__ import annotations

import itertools
from typing import Any, Dict, List, Tuple

import pytest
import torch
from torch import Tensor, nn

from lit_rnncells.nn.beam_search import (SearchConfig, beam_search, greedy_search, length_penalty, search,
                                         select_batch)
from lit_rnncells.tasks import Seq2Seq

PAD, UNK, BOS, EOS = 0, 1, 2, 3


def tiny_model(vocab: int = 12, eos_bias: float = -2.0, seed: int = 0, **kw: Any) -> Seq2Seq:
    torch.manual_seed(seed)
    m = Seq2Seq(source_vocab_size=15, target_vocab_size=vocab, embedding_size=6, hidden_size=8, dropout=0.0, **kw)
    m = m.double().eval()
    with torch.no_grad():
        m.generator.bias[EOS] += eos_bias  # longer outputs than an untrained model's immediate EOS
    return m


def batch(lengths: List[int], seed: int = 1, vocab: int = 15) -> Tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.full((len(lengths), max(lengths)), PAD, dtype=torch.long)
    for i, n in enumerate(lengths):
        src[i, :n - 1] = torch.randint(4, vocab, (n - 1,), generator=g)
        src[i, n - 1] = EOS
    return src, torch.tensor(lengths)


@torch.no_grad()
def rescore(model: Seq2Seq, src: Tensor, lengths: Tensor, tokens: List[int]) -> Tensor:
    """Per-token log-probs of ``tokens + [EOS]`` by stepping the decoder (teacher forcing)."""
    enc = model.encode(src, lengths)
    state = model.initial_decoder_state(enc)
    prev, out = torch.tensor([BOS]), []
    for tok in tokens + [EOS]:
        lp, state, _ = model.decode_step(prev, state, enc)
        out.append(lp[0, tok])
        prev = torch.tensor([tok])
    return torch.stack(out)


def test_beam_one_equals_greedy_tokens_and_scores() -> None:
    model = tiny_model()
    src, lengths = batch([6, 3, 8, 5])
    for penalty in ("gnmt", "average", "none"):
        cfg = SearchConfig(beam_size=1, length_penalty=penalty, max_length_b=6)
        g, b = greedy_search(model, src, lengths, cfg), beam_search(model, src, lengths, cfg)
        assert any(len(h[0].tokens) > 1 for h in g)
        for hg, hb in zip(g, b):
            assert hg[0].tokens == hb[0].tokens
            assert hg[0].score == hb[0].score and hg[0].log_prob == hb[0].log_prob
            assert torch.equal(hg[0].token_scores, hb[0].token_scores)


@pytest.mark.parametrize("penalty", ["none", "gnmt", "average"])
def test_a_beam_as_wide_as_all_hypotheses_finds_the_exhaustive_best(penalty: str) -> None:
    model = tiny_model(vocab=6, eos_bias=-1.0)  # real tokens: unk 1, 4, 5
    src, lengths = batch([4])
    cfg = SearchConfig(beam_size=40, n_best=40, length_penalty=penalty, alpha=1.0, max_length_a=0, max_length_b=3)
    hyps = beam_search(model, src, lengths, cfg)[0]
    enumerated = []
    for n in range(4):  # every output of up to 3 tokens (the 4th is the forced EOS): 1 + 3 + 9 + 27 = 40
        for seq in itertools.product([UNK, 4, 5], repeat=n):
            logp = float(rescore(model, src, lengths, list(seq)).sum())
            lp = float(length_penalty(torch.tensor([n + 1]), penalty, 1.0)[0])
            enumerated.append((logp / lp, list(seq)))
    enumerated.sort(key=lambda x: -x[0])
    assert len(hyps) == 40
    assert hyps[0].tokens == enumerated[0][1]
    assert hyps[0].score == pytest.approx(enumerated[0][0], abs=1e-9)
    assert [h.score for h in hyps] == pytest.approx([s for s, _ in enumerated], abs=1e-9)


MCRNN = {"class_path": "lit_rnncells.cells.MultiChannel", "init_args": {"block_size": 3, "cell": "LSTM"}}


@pytest.mark.parametrize("cell", ["LSTM", MCRNN], ids=["LSTM", "MC-RNN"])
@pytest.mark.parametrize("beam", [1, 5])
def test_a_sentence_decodes_the_same_alone_and_in_any_batch(beam: int, cell: Any) -> None:
    model = tiny_model(cell=cell, num_layers=2)
    src, lengths = batch([9, 3, 6, 4, 7], seed=3)
    cfg = SearchConfig(beam_size=beam, n_best=beam, max_length_b=7)
    together = search(model, src, lengths, cfg)
    reordered = search(model, src.flip(0), lengths.flip(0), cfg)[::-1]
    for i in range(len(lengths)):
        n = int(lengths[i])
        alone = search(model, src[i:i + 1, :n], lengths[i:i + 1], cfg)[0]
        for other in (together[i], reordered[i]):
            assert [h.tokens for h in alone] == [h.tokens for h in other]
            assert [h.score for h in alone] == pytest.approx([h.score for h in other], abs=1e-10)
            assert torch.allclose(alone[0].attention, other[0].attention, atol=1e-10)


def test_finished_hypotheses_never_grow_and_their_scores_are_their_tokens() -> None:
    model = tiny_model(eos_bias=0.0)
    src, lengths = batch([5, 8, 3], seed=4)
    results = beam_search(model, src, lengths, SearchConfig(beam_size=4, n_best=4, max_length_b=6))
    for i, hyps in enumerate(results):
        n = int(lengths[i])
        assert len(hyps) == 4
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)  # n-best sorted
        assert len({tuple(h.tokens) for h in hyps}) == 4
        for h in hyps:
            assert EOS not in h.tokens and len(h.token_scores) == len(h.tokens) + 1
            expected = rescore(model, src[i:i + 1, :n], lengths[i:i + 1], h.tokens)
            assert torch.allclose(h.token_scores, expected, atol=1e-10)  # nothing appended after EOS
            assert h.log_prob == pytest.approx(float(expected.sum()), abs=1e-10)
            assert h.attention.shape == (len(h.tokens) + 1, n)
            assert torch.allclose(h.attention.sum(-1), torch.ones(len(h.tokens) + 1, dtype=torch.float64))


@pytest.mark.parametrize("beam", [1, 3])
def test_min_max_length_ngram_blocking_and_banned_tokens(beam: int) -> None:
    model = tiny_model(vocab=7, eos_bias=3.0)
    with torch.no_grad():  # make the banned tokens and a repeating token the most likely ones
        model.generator.bias[PAD] += 6
        model.generator.bias[UNK] += 6
        model.generator.bias[BOS] += 6
        model.generator.bias[4] += 4
    src, lengths = batch([5, 4, 6], seed=5)
    cfg = SearchConfig(beam_size=beam, n_best=beam, min_length=4, max_length_a=0, max_length_b=6,
                       no_repeat_ngram_size=2, ban_unk=True)
    for hyps in search(model, src, lengths, cfg):
        for h in hyps:
            assert 4 <= len(h.tokens) <= 6
            assert not {PAD, UNK, BOS, EOS} & set(h.tokens)
            bigrams = list(zip(h.tokens, h.tokens[1:]))
            assert len(bigrams) == len(set(bigrams))
    # unk is produced when allowed (the bans above are what kept it out)
    free = search(model, src, lengths, SearchConfig(beam_size=beam, min_length=4, max_length_a=0, max_length_b=6))
    assert any(UNK in h[0].tokens for h in free)
    assert all(PAD not in h[0].tokens and BOS not in h[0].tokens for h in free)


def test_max_length_is_a_times_source_plus_b() -> None:
    model = tiny_model(eos_bias=-20.0)  # would never stop on its own
    src, lengths = batch([4, 7], seed=6)
    for beam in (1, 3):
        hyps = search(model, src, lengths, SearchConfig(beam_size=beam, max_length_a=0.5, max_length_b=1))
        assert [len(h[0].tokens) for h in hyps] == [3, 4]  # floor(0.5 * 4 + 1), floor(0.5 * 7 + 1)



class CountingSteps:
    """A decodable model's wrapper counting the rows every ``decode_step`` computes."""

    def __init__(self, model: Seq2Seq) -> None:
        self.model, self.rows = model, 0

    def decode_step(self, prev: Tensor, state: Any, enc: Any) -> Any:
        self.rows += prev.numel()
        return self.model.decode_step(prev, state, enc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


@pytest.mark.parametrize("penalty", ["gnmt", "average", "none"])
@pytest.mark.parametrize("n_best", [1, 2])
def test_early_stopping_returns_the_same_n_best_in_fewer_steps(penalty: str, n_best: int) -> None:
    model = tiny_model(vocab=20, eos_bias=0.5, seed=2)
    with torch.no_grad():
        model.generator.weight.mul_(3.0)  # peaked distributions, as a trained model's
    src, lengths = batch([7, 3, 9, 5, 6, 4, 8, 5], seed=8)
    runs = {}
    for early in (False, True):
        counted = CountingSteps(model)
        cfg = SearchConfig(beam_size=5, n_best=n_best, length_penalty=penalty, max_length_b=8, early_stop=early)
        runs[early] = (beam_search(counted, src, lengths, cfg), counted.rows)
    (full, full_rows), (early, early_rows) = runs[False], runs[True]
    for a, b in zip(full, early):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == [h.score for h in b]
        assert all(torch.equal(x.token_scores, y.token_scores) for x, y in zip(a, b))
    assert early_rows <= full_rows
    if penalty != "average":  # dividing by the longest allowed length, the average's bound is loose on short outputs
        assert early_rows < full_rows  # some sentences stopped before beam_size hypotheses had finished

class DictStateToy(nn.Module):
    """The protocol with a dict decoder state and a plain tuple encoding: no Seq2Seq involved."""

    def __init__(self, vocab: int = 8) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, 5)
        self.cell = nn.GRUCell(5, 5)
        self.out = nn.Linear(10, vocab)

    def encode(self, source: Tensor, lengths: Tensor) -> Tuple[Tensor, Tensor]:
        mask = torch.arange(source.shape[1]) < lengths[:, None]
        return self.emb(source), mask

    def initial_decoder_state(self, enc: Tuple[Tensor, Tensor]) -> Dict[str, Tensor]:
        memory, mask = enc
        return {"h": (memory * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)}

    def decode_step(self, prev: Tensor, state: Dict[str, Tensor], enc: Tuple[Tensor, Tensor]):
        memory, mask = enc
        h = self.cell(self.emb(prev), state["h"])
        w = torch.softmax((memory @ h[:, :, None]).squeeze(2).masked_fill(~mask, float("-inf")), -1)
        ctx = (w[:, :, None] * memory).sum(1)
        return torch.log_softmax(self.out(torch.cat([h, ctx], -1)), -1), {"h": h}, w

    def reorder_decoder_state(self, state: Any, index: Tensor) -> Any:
        return select_batch(state, index)

    def reorder_encoder(self, enc: Any, index: Tensor) -> Any:
        return select_batch(enc, index)


def test_any_model_following_the_protocol_decodes() -> None:
    torch.manual_seed(0)
    toy = DictStateToy().double().eval()
    src, lengths = batch([5, 3], vocab=8)
    b = beam_search(toy, src, lengths, SearchConfig(beam_size=3, n_best=2, max_length_b=5))
    g = greedy_search(toy, src, lengths, SearchConfig(beam_size=1, max_length_b=5))
    assert [len(x) for x in b] == [2, 2] and [len(x) for x in g] == [1, 1]
    assert b[0][0].score >= b[0][1].score
    assert b[1][0].attention.shape[1] == 3


def test_search_options_are_checked_at_construction() -> None:
    with pytest.raises(ValueError, match="n_best=3 exceeds beam_size=2"):
        SearchConfig(beam_size=2, n_best=3)
    with pytest.raises(ValueError, match="Unknown length_penalty 'wu'"):
        SearchConfig(length_penalty="wu")
    with pytest.raises(ValueError, match="beam_size must be a positive integer"):
        SearchConfig(beam_size=0)
    with pytest.raises(ValueError, match="not both 0"):
        SearchConfig(max_length_a=0, max_length_b=0)
