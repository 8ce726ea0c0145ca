"""Seq2Seq (tasks/seq2seq.py): shared step, any cell on either side, aux losses, evaluation, predict."""
from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest
import torch
from lightning.pytorch import LightningDataModule, Trainer
from torch import Tensor
from torch.utils.data import DataLoader
from torch.nn import functional as F

from lit_rnncells.tasks import Seq2Seq

PAD, UNK, BOS, EOS = 0, 1, 2, 3
MCRNN_LSTM = {"class_path": "lit_rnncells.cells.MultiChannel", "init_args": {"block_size": 3, "cell": "LSTM"}}
CELLS = [dict(cell="GRU"), dict(cell="LSTM"), dict(cell=MCRNN_LSTM), dict(cell="CARU"),
         dict(cell="GRU", attention="dot", encoder_hidden_size=4), dict(cell="MGU", attention="general"),
         dict(encoder_cell="GRU", decoder_cell="LSTM"), dict(encoder_cell=MCRNN_LSTM, decoder_cell="MGU"),
         dict(cell="GRU", attentional_layer=False), dict(cell="LSTM", attentional_layer=False, attention="general"),
         dict(cell="GRU", attentional_layer=False, attention_query="before"),
         dict(cell=MCRNN_LSTM, attention_query="before"), dict(cell="CARU", attention="none"),
         dict(cell="GRU", attention="none", attentional_layer=False), dict(cell=MCRNN_LSTM, attention="none")]


def make(dtype=torch.float64, **kw: Any) -> Seq2Seq:
    torch.manual_seed(0)
    opts = dict(source_vocab_size=17, target_vocab_size=13, embedding_size=6, hidden_size=8, dropout=0.0)
    opts.update(kw)
    return Seq2Seq(**opts).to(dtype)


def pairs(src_lengths: List[int], tgt_lengths: List[int], seed: int = 0) -> Dict[str, Tensor]:
    """A padded batch: sources end in EOS, targets are <bos> y <eos>."""
    g = torch.Generator().manual_seed(seed)
    b = len(src_lengths)
    src = torch.zeros(b, max(src_lengths), dtype=torch.long)
    tgt = torch.zeros(b, max(tgt_lengths) + 2, dtype=torch.long)
    for i, (n, m) in enumerate(zip(src_lengths, tgt_lengths)):
        src[i, :n - 1] = torch.randint(4, 17, (n - 1,), generator=g)
        src[i, n - 1] = EOS
        tgt[i, 0] = BOS
        tgt[i, 1:m + 1] = torch.randint(4, 13, (m,), generator=g)
        tgt[i, m + 1] = EOS
    return {"source": src, "source_lengths": torch.tensor(src_lengths), "target": tgt,
            "target_lengths": torch.tensor([m + 2 for m in tgt_lengths]), "index": torch.arange(b)}


@pytest.mark.parametrize("cells", CELLS, ids=lambda c: "-".join(str(v)[:12] for v in c.values()))
def test_teacher_forced_loss_is_the_sum_of_decoding_log_probs(cells: Dict[str, Any]) -> None:
    model = make(num_layers=2, **cells).eval()
    batch = pairs([5, 3, 7], [4, 1, 6])
    with torch.no_grad():
        logits, _ = model(batch["source"], batch["source_lengths"], batch["target"])
        gold = batch["target"][:, 1:]
        loss_sum = F.cross_entropy(logits.flatten(0, 1), gold.flatten(), ignore_index=PAD, reduction="sum")
        total = torch.zeros((), dtype=torch.float64)
        for i in range(3):  # each sentence alone, through the decoding path
            n, m = int(batch["source_lengths"][i]), int(batch["target_lengths"][i])
            enc = model.encode(batch["source"][i:i + 1, :n], batch["source_lengths"][i:i + 1])
            state = model.initial_decoder_state(enc)
            for t in range(m - 1):
                lp, state, _ = model.decode_step(batch["target"][i, t:t + 1], state, enc)
                total = total + lp[0, batch["target"][i, t + 1]]
    assert torch.allclose(loss_sum, -total, rtol=0, atol=1e-10)


@pytest.mark.parametrize("cell", ["LSTM", MCRNN_LSTM], ids=["LSTM", "MC-RNN"])
def test_bidirectional_encoder_with_padding_encodes_a_sentence_as_alone(cell: Any) -> None:
    model = make(cell=cell, num_layers=2).eval()
    batch = pairs([4, 9, 6], [1, 1, 1])
    with torch.no_grad():
        together = model.encode(batch["source"], batch["source_lengths"])
        state = model.initial_decoder_state(together)
        for i, n in enumerate([4, 9, 6]):
            alone = model.encode(batch["source"][i:i + 1, :n], batch["source_lengths"][i:i + 1])
            assert torch.allclose(alone.memory[0], together.memory[i, :n], atol=1e-12)
            assert torch.allclose(alone.summary[0], together.summary[i], atol=1e-12)
            alone_state = model.initial_decoder_state(alone)
            for a, b in zip(_flat(alone_state), _flat(state)):
                assert torch.allclose(a[0].double(), b[i].double(), atol=1e-12)


def _flat(state: Any) -> List[Tensor]:
    if isinstance(state, tuple):
        return [leaf for s in state for leaf in _flat(s)]
    return [state]


def test_bridge_sets_every_leaf_of_a_tuple_state_from_the_source() -> None:
    model = make(cell="LSTM").eval()
    batch = pairs([5, 6], [1, 1])
    with torch.no_grad():
        (h, c) = model.initial_decoder_state(model.encode(batch["source"], batch["source_lengths"]))[0][0]
        assert h.abs().sum() > 0 and c.abs().sum() > 0 and not torch.allclose(h, c)
        zero = make(cell="LSTM", bridge=False).eval()
        (h0, c0) = zero.initial_decoder_state(zero.encode(batch["source"], batch["source_lengths"]))[0][0]
        assert h0.abs().sum() == 0 and c0.abs().sum() == 0


@pytest.mark.parametrize("side", ["encoder_cell", "decoder_cell"])
def test_auxiliary_loss_of_an_mzu_cell_reaches_the_loss(side: str) -> None:
    other = "decoder_cell" if side == "encoder_cell" else "encoder_cell"
    batch = pairs([5, 3], [4, 2])
    losses = {}
    for weight in (0.0, 1.0):
        model = make(dtype=torch.float32, **{side: "SatMZU", other: "GRU"}, aux_loss_weight=weight)
        assert model.has_aux_loss
        losses[weight] = model.training_step(batch, 0)
    _, aux = make(dtype=torch.float32, **{side: "SatMZU", other: "GRU"})(
        batch["source"], batch["source_lengths"], batch["target"], want_aux=True)
    assert float(aux.detach()) != 0.0
    assert float((losses[1.0] - losses[0.0]).detach()) == pytest.approx(float(aux.detach()), abs=1e-5)
    losses[1.0].backward()  # the aux term is differentiable


def test_label_smoothing_and_tied_embeddings() -> None:
    batch = pairs([5, 3], [4, 2])
    smooth = make(label_smoothing=0.1)
    logits, _ = smooth(batch["source"], batch["source_lengths"], batch["target"])
    logp, gold = logits.log_softmax(-1), batch["target"][:, 1:]
    real = gold != PAD
    nll = -logp.gather(-1, gold.unsqueeze(-1)).squeeze(-1)[real]
    uniform = -logp.mean(-1)[real]
    expected = (0.9 * nll + 0.1 * uniform).mean()  # Szegedy et al. 2016 eq. for ε = 0.1, over non-pad tokens
    assert float(smooth.training_step(batch, 0)) == pytest.approx(float(expected), abs=1e-10)
    tied = make(output_size=6, tie_embeddings=True)
    assert tied.generator.weight is tied.target_embedding.weight


def test_a_few_steps_on_a_copy_task_lower_the_loss() -> None:
    torch.manual_seed(0)
    model = make(dtype=torch.float32, cell="LSTM", target_vocab_size=17, dropout=0.1)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    batch = pairs([5, 4, 6, 3], [4, 3, 5, 2])
    batch["target"][:, 1:] = 0
    for i, n in enumerate(batch["source_lengths"].tolist()):  # target = source
        batch["target"][i, 1:n + 1] = batch["source"][i, :n]
    first = None
    for _ in range(30):
        loss = model.training_step(batch, 0)
        first = float(loss) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss) < 0.5 * first


class FakeTokenizer:
    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def decode(self, ids: List[int]) -> str:
        return " ".join(f"w{i}" for i in ids if i > 3)

    def detokenize(self, text: str) -> str:
        return text.replace(" ", "")


class TinyData(LightningDataModule):
    def __init__(self) -> None:
        super().__init__()
        self.source_tokenizer, self.target_tokenizer = FakeTokenizer(17), FakeTokenizer(13)

    def _batches(self, refs: bool) -> DataLoader:
        out = []
        for k in range(2):
            b: Dict[str, Any] = pairs([5, 3, 6], [4, 2, 3], seed=k)
            b["index"] = torch.arange(3) + 3 * k
            if refs:
                b["references"] = [self.target_tokenizer.decode(t.tolist()) for t in b["target"]]
            out.append(b)
        return DataLoader(out, batch_size=None)

    def train_dataloader(self):
        return self._batches(False)

    def val_dataloader(self):
        return self._batches(True)

    def test_dataloader(self):
        return self._batches(True)

    def predict_dataloader(self):
        return DataLoader([{k: v for k, v in b.items() if k in ("source", "source_lengths", "index")}
                           for b in self._batches(False)], batch_size=None)


def test_fit_validate_test_predict_and_checkpoint(tmp_path) -> None:
    model = make(dtype=torch.float32, eval_metrics=["sacrebleu", "tok_bleu", "rouge"], beam_size=3, n_best=2)
    trainer = Trainer(max_epochs=1, logger=False, enable_progress_bar=False, enable_model_summary=False,
                      default_root_dir=tmp_path, accelerator="cpu", devices=1)
    trainer.fit(model, datamodule=TinyData())
    metrics = trainer.callback_metrics
    for name in ("val/loss", "val/ppl", "val/sacrebleu", "val/tok_bleu", "val/rouge1", "val/rouge2", "val/rougeL"):
        assert name in metrics
    assert model.target_tokenizer is not None
    result = trainer.test(model, datamodule=TinyData(), verbose=False)[0]
    assert {"test/loss", "test/sacrebleu"} <= set(result)
    records = [r for part in trainer.predict(model, datamodule=TinyData()) for r in part]
    assert sorted(r["index"] for r in records) == list(range(6))
    for r in records:
        assert len(r["nbest"]) == 2 and r["nbest"][0][1] >= r["nbest"][1][1]
        assert r["text"].count("\n") == 1 and r["text"].split("\n")[0].split("\t")[1] == r["nbest"][0][0]
    path = tmp_path / "m.ckpt"
    trainer.save_checkpoint(path)
    ckpt = torch.load(path, weights_only=True)
    json.dumps(dict(ckpt["hyper_parameters"]))
    assert "beam_size" not in ckpt["hyper_parameters"]  # decoding options are set at test / predict time
    loaded = Seq2Seq.load_from_checkpoint(path, weights_only=True, beam_size=4)
    assert loaded.test_search.beam_size == 4 and torch.equal(loaded.generator.weight, model.generator.weight)
    loaded.configure_decoding(n_best=3, length_penalty="none")
    assert (loaded.test_search.n_best, loaded.test_search.length_penalty, loaded.val_search.beam_size) == (3, "none", 1)
    with pytest.raises(ValueError, match="n_best=5 exceeds beam_size=4"):
        loaded.configure_decoding(n_best=5)
    with pytest.raises(ValueError, match="Unknown decoding options \\['beam'\\]"):
        loaded.configure_decoding(beam=3)


def test_scoring_dedupes_records_and_uses_the_right_text_forms() -> None:
    model = make(eval_metrics=["sacrebleu", "tok_bleu"])
    model._records = [(1, "a b", "ab", "a b", "ab"), (0, "c d", "cd", "c e", "ce"), (1, "a b", "ab", "a b", "ab")]
    records = model._gather_records()
    assert [r[0] for r in records] == [0, 1]
    scores = model.score_records(records)
    assert set(scores) == {"sacrebleu", "tok_bleu"}


def test_several_references_per_example_are_all_scored_and_signed() -> None:
    from lit_rnncells import metrics

    model = make(eval_metrics=["sacrebleu", "tok_bleu", "rouge"])
    hyps_corpus, hyps_text = ["the cat sat on the mat", "dogs run in the park ."], ["The cat sat", "Dogs run."]
    refs_corpus = [("the cat sat on a mat", "a cat is sitting"), ("dogs run .", "the dogs are running in a park")]
    refs_text = [("The cat sat on a mat", "A cat is sitting"), ("Dogs run.", "The dogs are running in a park")]
    records = [(i, hyps_corpus[i], hyps_text[i], refs_corpus[i], refs_text[i]) for i in range(2)]
    scores = model.score_records(records)
    assert scores["sacrebleu"] == pytest.approx(metrics.sacrebleu_corpus(hyps_text, refs_text)[0])
    assert scores["tok_bleu"] == pytest.approx(metrics.tokenized_bleu(hyps_corpus, refs_corpus))
    rouge, signature = metrics.rouge_corpus(hyps_corpus, refs_corpus, multiref="pooled")  # several: ROUGE-1.5.5 -f A
    assert {k: scores[k] for k in rouge} == pytest.approx(rouge) and "rouge2_recall" in scores
    assert set(model.metric_signatures) == {"sacrebleu", "tok_bleu", "rouge"}
    assert all("nrefs:2" in sig for sig in model.metric_signatures.values())
    assert model.metric_signatures["rouge"] == signature and "trunc:none" in signature
    # ROUGE truncation: the data's standard (DUC-2004: 75 bytes) unless the model's rouge_max_bytes says otherwise
    model.data_rouge_max_bytes = 10
    assert model.rouge_truncation == 10
    assert model.score_records(records)["rouge1"] == pytest.approx(
        metrics.rouge_corpus(hyps_corpus, refs_corpus, max_bytes=10, multiref="pooled")[0]["rouge1"])
    assert "trunc:10bytes" in model.metric_signatures["rouge"]
    model.configure_decoding(rouge_max_bytes=0)
    assert model.rouge_truncation is None
    model.configure_decoding(rouge_max_bytes=20)
    assert model.rouge_truncation == 20
    with pytest.raises(ValueError, match="rouge_max_bytes must be a number of bytes"):
        model.configure_decoding(rouge_max_bytes=-1)


def test_several_references_are_pooled_unless_the_best_reference_is_asked_for() -> None:
    from lit_rnncells import metrics

    model = make(eval_metrics=["rouge"])
    hyps = ["the cat sat on the mat", "dogs run in the park"]
    refs = [("the cat sat on a mat", "a cat is sitting"), ("dogs run", "the dogs are running in a park")]
    records = [(i, hyps[i], hyps[i], refs[i], refs[i]) for i in range(2)]
    pooled = metrics.rouge_corpus(hyps, refs, multiref="pooled")[0]
    best = metrics.rouge_corpus(hyps, refs, multiref="best")[0]
    assert best["rouge1_recall"] > pooled["rouge1_recall"] + 5  # the two protocols differ a lot here
    assert model.score_records(records)["rouge1_recall"] == pytest.approx(pooled["rouge1_recall"])
    assert "multiref:pooled(rouge-1.5.5 -f A)" in model.metric_signatures["rouge"]
    single = [(i, hyps[i], hyps[i], (refs[i][0],), (refs[i][0],)) for i in range(2)]  # one reference: rouge-score
    assert model.score_records(single)["rouge1"] == pytest.approx(
        metrics.rouge_corpus(hyps, [r[0] for r in refs])[0]["rouge1"])
    assert "multiref:best-f1-per-metric" in model.metric_signatures["rouge"]
    model.data_rouge_multiref = "pooled"  # the data's standard (DUC-2004) applies even to one reference
    model.score_records(single)
    assert "multiref:pooled" in model.metric_signatures["rouge"]
    model.configure_decoding(rouge_multiref="best")  # the option overrides both
    assert model.score_records(records)["rouge1_recall"] == pytest.approx(best["rouge1_recall"])
    assert "multiref:best-f1-per-metric" in model.metric_signatures["rouge"]
    with pytest.raises(ValueError, match="rouge_multiref must be 'pooled'"):
        model.configure_decoding(rouge_multiref="average")


def test_bad_arguments_fail_at_construction() -> None:
    with pytest.raises(ValueError, match="tie_embeddings needs output_size"):
        make(tie_embeddings=True)
    with pytest.raises(ValueError, match="dropout must be a probability in"):
        make(dropout=1.0)
    with pytest.raises(ValueError, match="label_smoothing must be a probability in"):
        make(label_smoothing=-0.1)
    with pytest.raises(ValueError, match="Unknown attention"):
        make(attention="bilinear")
    with pytest.raises(ValueError, match="dot attention needs hidden_size"):
        make(attention="dot")
    with pytest.raises(ValueError, match="Unknown eval_metrics"):
        make(eval_metrics=["bleu"])
    with pytest.raises(ValueError, match="hidden_size must be a positive integer"):
        make(hidden_size=0)
    with pytest.raises(ValueError, match="eos_id=20 is not a token"):
        make(eos_id=20)
    with pytest.raises(ValueError, match="n_best=6 exceeds beam_size=5"):
        make(n_best=6)
    with pytest.raises(ValueError, match="val_beam_size must be a positive integer"):
        make(val_beam_size=0)
    with pytest.raises(ValueError, match="Unknown length_penalty"):
        make(length_penalty="wu")
    with pytest.raises(ValueError, match="The target tokenizer has 9 tokens"):
        make().set_tokenizers(FakeTokenizer(17), FakeTokenizer(9))
    batch = pairs([5, 3], [4, 2])
    with pytest.raises(ValueError, match="accepts at most max_source_length=4"):
        make(max_source_length=4).encode(batch["source"], batch["source_lengths"])


DDP_SCRIPT = r'''
import json, sys, torch
sys.path.insert(0, {repo!r})
from torch.utils.data import DataLoader
from lightning.pytorch import Trainer
from tests.test_seq2seq import TinyData, make


class RankData(TinyData):
    """Each rank validates on its own share of the batches (as BucketedBatches does)."""

    def val_dataloader(self):
        rank, world = self.trainer.global_rank, self.trainer.world_size
        batches = list(super().val_dataloader())
        return DataLoader(batches[rank::world], batch_size=None)


if __name__ == "__main__":
    model = make(dtype=torch.float32, cell="LSTM", eval_metrics=["sacrebleu", "tok_bleu", "rouge"])
    trainer = Trainer(max_epochs=1, logger=False, enable_progress_bar=False, enable_model_summary=False,
                      enable_checkpointing=False, strategy="ddp", accelerator="cpu", devices=2,
                      num_sanity_val_steps=0, use_distributed_sampler=False)
    trainer.fit(model, datamodule=RankData())
    if trainer.global_rank == 0:
        torch.save(model.state_dict(), {weights!r})
        json.dump({{k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}},
                  open({metrics!r}, "w"))
'''


@pytest.mark.slow
def test_ddp_gathers_hypotheses_before_scoring(tmp_path) -> None:
    """Under 2-process DDP each rank decodes half of the validation set; the corpus scores equal a
    1-process validation of the same weights on all of it (not a mean of per-rank scores)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = str(Path(__file__).resolve().parents[1])
    weights, metrics_file = tmp_path / "w.pt", tmp_path / "m.json"
    script = tmp_path / "ddp_fit.py"
    script.write_text(DDP_SCRIPT.format(repo=repo, weights=str(weights), metrics=str(metrics_file)))
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": repo, "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    ddp = json.loads(metrics_file.read_text())
    model = make(dtype=torch.float32, cell="LSTM", eval_metrics=["sacrebleu", "tok_bleu", "rouge"])
    model.load_state_dict(torch.load(weights, weights_only=True))
    single = Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                     devices=1).validate(model, datamodule=TinyData(), verbose=False)[0]
    assert set(ddp) == set(single)
    for name in single:
        assert ddp[name] == pytest.approx(single[name], rel=1e-5, abs=1e-6), name


def test_without_the_attentional_layer_the_softmax_reads_state_context_and_embedding() -> None:
    model = make(attentional_layer=False, encoder_hidden_size=5).eval()
    assert model.combine_state is None and model.generator.in_features == 8 + 10 + 6
    assert model.decoder_cells[0].input_size == 6 + 10  # the embedding and the fed-back context
    batch = pairs([4, 6], [3, 2])
    enc = model.encode(batch["source"], batch["source_lengths"])
    out, (layers, feed), weights, _ = model._decoder_step(*model._embed_target(batch["target"][:, 0]),
                                                          model.initial_decoder_state(enc), enc)
    context = torch.einsum("bs,bsh->bh", weights, enc.memory)
    torch.testing.assert_close(feed, context)
    torch.testing.assert_close(out[:, 8:18], context)
    with pytest.raises(ValueError, match="tie_embeddings needs the attentional layer"):
        make(attentional_layer=False, tie_embeddings=True)


def test_dropout_placement_options() -> None:
    model = make(dropout=0.5, output_dropout=0.0, encoder_output_dropout=0.0)
    assert (model.drop.p, model.output_drop.p, model.memory_drop.p) == (0.5, 0.0, 0.0)
    assert make(dropout=0.4).output_drop.p == 0.4 == make(dropout=0.4).memory_drop.p
    with pytest.raises(ValueError, match="output_dropout must be a probability"):
        make(output_dropout=1.0)


def test_bahdanau_query_attends_with_the_state_before_the_step() -> None:
    model = make(attention_query="before", attentional_layer=False, encoder_hidden_size=5).eval()
    batch = pairs([4, 6], [3, 2])
    enc = model.encode(batch["source"], batch["source_lengths"])
    state = model.initial_decoder_state(enc)
    s_prev = model.decoder_cells[-1].output(state[0][-1])
    expected, _ = model.attention(s_prev, enc.proj_keys, enc.memory, enc.mask)
    out, (layers, feed), weights, _ = model._decoder_step(*model._embed_target(batch["target"][:, 0]), state, enc)
    torch.testing.assert_close(feed, expected)
    torch.testing.assert_close(out[:, 8:18], expected)
    with pytest.raises(ValueError, match="Unknown attention_query"):
        make(attention_query="during")


def test_without_attention_the_source_reaches_the_decoder_through_the_bridge_alone() -> None:
    """attention none (the CARU paper's plain Seq2Seq): the first decoder cell reads the embedding alone, the softmax
    [s_t; E y_{t-1}]; without the bridge the target's scores do not depend on the source at all."""
    model = make(attention="none", attentional_layer=False, cell="CARU").eval()
    assert model.attention is None and model.decoder_cells[0].input_size == 6
    assert model.generator.in_features == 8 + 6
    batch, other = pairs([4, 6], [3, 2]), pairs([7, 2], [3, 2], seed=1)
    other["target"] = batch["target"]
    with torch.no_grad():
        logits, _ = model(batch["source"], batch["source_lengths"], batch["target"])
        moved, _ = model(other["source"], other["source_lengths"], other["target"])
    assert (logits - moved).abs().max() > 1e-3  # the bridge carries the source
    unbridged = make(attention="none", bridge=False).eval()
    with torch.no_grad():
        logits, _ = unbridged(batch["source"], batch["source_lengths"], batch["target"])
        moved, _ = unbridged(other["source"], other["source_lengths"], other["target"])
    torch.testing.assert_close(logits, moved)
    # the output layer reads the state and the previous target embedding, and nothing is fed back
    enc = model.encode(batch["source"], batch["source_lengths"])
    state = model.initial_decoder_state(enc)
    embedded, embedded_out = model._embed_target(batch["target"][:, 0])
    out, (layers, feed), weights, _ = model._decoder_step(embedded, embedded_out, state, enc)
    assert feed.shape == (2, 0) and weights.shape == enc.memory.shape[:2] and not weights.any()
    torch.testing.assert_close(out, torch.cat([model.decoder_cells[0].output(layers[0]), embedded], -1))
    hypotheses = model.translate(batch["source"], batch["source_lengths"])
    assert all(h[0].attention is not None and not h[0].attention.any() for h in hypotheses)


def test_without_attention_the_attention_query_is_refused() -> None:
    with pytest.raises(ValueError, match="attention_query has no effect without attention"):
        make(attention="none", attention_query="before")
    with pytest.raises(ValueError, match="Unknown attention 'bahdanau'.*or none"):
        make(attention="bahdanau")
