"""Decoding steps replayed as CUDA graphs (lit_rnncells/nn/decode_graphs.py).

On CPU, ``GraphedDecoding(model, capture=False)`` runs everything but the capture: the rows fixed per batch while
sentences finish, the finished rows' places, the encoder outputs copied in only after a reorder, the cache of
steps and its cap. Greedy and beam search through it give the model's own hypotheses. The captured graphs on a
GPU: tests/test_cuda_graphs.py."""
from __future__ import annotations

import copy
import pickle

import pytest
import torch

from lit_rnncells.nn import decode_graphs
from lit_rnncells.nn.beam_search import SearchConfig, search
from lit_rnncells.nn.decode_graphs import GraphedDecoding
from lit_rnncells.nn.recurrent import eager_steps, step_cell
from lit_rnncells.nn.backend import resolve

from .test_beam_search import BOS, EOS, PAD, UNK, batch, tiny_model

LENGTHS = [7, 3, 5, 2, 6]  # sentences that stop at different lengths: the rows shrink


def _config(beam: int) -> SearchConfig:
    return SearchConfig(beam_size=beam, n_best=min(beam, 2), pad_id=PAD, unk_id=UNK, bos_id=BOS, eos_id=EOS,
                        max_length_a=1.0, max_length_b=3)


def _same_hypotheses(want, got) -> None:
    assert len(want) == len(got)
    for a_best, b_best in zip(want, got):
        assert [h.tokens for h in a_best] == [h.tokens for h in b_best]
        for a, b in zip(a_best, b_best):
            assert a.score == pytest.approx(b.score, abs=1e-9)
            torch.testing.assert_close(b.token_scores, a.token_scores, atol=1e-9, rtol=0)
            if a.attention is not None:
                torch.testing.assert_close(b.attention, a.attention, atol=1e-9, rtol=0)


@pytest.mark.parametrize("cell, attention", [("GRU", "additive"), ("LSTM", "additive"), ("SatMZU", "additive"),
                                             ("CARU", "none")])
@pytest.mark.parametrize("beam", [1, 3])
def test_fixed_rows_give_the_models_own_hypotheses(cell: str, attention: str, beam: int) -> None:
    model = tiny_model(cell=cell, attention=attention)
    graphed = GraphedDecoding(model, capture=False)
    src, lengths = batch(LENGTHS)
    with torch.no_grad():
        want = search(model, src, lengths, _config(beam))
        got = search(graphed, src, lengths, _config(beam))
    _same_hypotheses(want, got)
    assert len({len(h[0].tokens) for h in want}) > 1  # sentences did finish at different steps
    assert graphed.graph_count() == (1 if beam == 1 else 2)  # one rows count per batch (beam: first step, then k)


def test_a_reordered_encoding_is_copied_in_and_batches_reuse_their_steps(monkeypatch) -> None:
    """Beam search hands a reordered encoding once sentences finish: the step must read it (a stale one would
    attend to other sentences). A second batch of the same shapes reuses the recorded steps."""
    model = tiny_model(cell="GRU")
    graphed = GraphedDecoding(model, capture=False)
    copies = []
    original = decode_graphs._StepGraph._copy_in

    def counting(self, prev, state, enc):
        before = [r() for r in self._enc_from]
        original(self, prev, state, enc)
        copies.append(any(a is not b for a, b in zip(before, (r() for r in self._enc_from))))

    monkeypatch.setattr(decode_graphs._StepGraph, "_copy_in", counting)
    src, lengths = batch(LENGTHS)
    with torch.no_grad():
        for seed in (1, 2):
            src, lengths = batch(LENGTHS, seed=seed)
            _same_hypotheses(search(model, src, lengths, _config(3)), search(graphed, src, lengths, _config(3)))
    assert graphed.graph_count() == 2 and 0 < sum(copies) < len(copies)


def test_the_cache_of_steps_is_capped(monkeypatch) -> None:
    monkeypatch.setattr(decode_graphs, "MAX_DECODE_GRAPHS", 2)
    model = tiny_model(cell="GRU")
    graphed = GraphedDecoding(model, capture=False)
    with torch.no_grad():
        for lengths in ([4, 2], [5, 3], [6, 2]):  # three source lengths: three shapes of the encoding
            src, lens = batch(lengths)
            _same_hypotheses(search(model, src, lens, _config(1)), search(graphed, src, lens, _config(1)))
    assert graphed.graph_count() == 2


def test_the_wrapper_reads_sigterm_between_steps_and_is_copied_without_its_steps() -> None:
    model = tiny_model(cell="GRU")
    graphed = GraphedDecoding(model, capture=False)
    src, lengths = batch(LENGTHS)
    with torch.no_grad():
        search(graphed, src, lengths, _config(1))
    calls = []
    model.stop_if_terminated = lambda: calls.append(1)  # the model's own check, counted
    with torch.no_grad():
        search(graphed, src, lengths, _config(1))
    assert len(calls) >= max(LENGTHS)  # once per step at least (the recorded step no longer calls it)
    for twin in (copy.deepcopy(graphed), pickle.loads(pickle.dumps(GraphedDecoding(tiny_model(cell="GRU"), False)))):
        assert twin.graph_count() == 0 and twin.model is not model


def test_on_cpu_a_seq2seq_decodes_itself() -> None:
    """The graphs wrapper is for CUDA devices only; on CPU ``decodable`` is the model."""
    model = tiny_model(cell="GRU")
    assert model.decodable() is model


def test_inside_eager_steps_a_compiled_plan_steps_eagerly() -> None:
    """What the capture runs: the cell's eager step, whatever the plan (no compiled function inside a graph)."""
    from lit_rnncells.nn import compiled

    cell = tiny_model(cell="SatMZU").decoder_cells[0].float()
    plan = resolve(type(cell), "compiled", "cpu")
    assert plan.step == "compiled"
    x, h = cell.project_input(torch.randn(2, cell.input_size)), torch.randn(2, cell.hidden_size)
    before = compiled.compiled_calls()
    with eager_steps():
        state, _ = step_cell(cell, x, h, plan)
    assert compiled.compiled_calls() == before
    torch.testing.assert_close(state, cell.step(x, h))
