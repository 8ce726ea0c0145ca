"""Aspect and document classifiers on synthetic batches: pooling, readouts, aux loss, embeddings, predict."""
from __future__ import annotations

import logging

import pytest
import torch
from lightning.pytorch import LightningDataModule, Trainer
from torch.nn import functional as F
from torch.utils.data import DataLoader

from lit_rnncells.data.batching import pad_batch
from lit_rnncells.data.text import Vocabulary
from lit_rnncells.tasks import AspectClassifier, DocumentClassifier

V, PAD = 20, 0


def batch_of(sentences, aspects=None, labels=None):
    tokens, lengths = pad_batch(sentences, PAD)
    batch = {"tokens": tokens, "lengths": lengths, "index": torch.arange(len(sentences))}
    if aspects is not None:
        batch["aspect"], batch["aspect_lengths"] = pad_batch(aspects, PAD)
    if labels is not None:
        batch["labels"] = torch.tensor(labels)
    return batch


def pick(batch, i):
    return {k: v[i:i + 1] for k, v in batch.items()}


SENTENCES = [[3, 4, 5], [6, 7, 8, 9, 10, 11, 12], [13]]


@pytest.mark.parametrize("cell", ["GRUDT", "LSTM"])
def test_aspect_mean_pooling_ignores_padding(cell):
    model = AspectClassifier(cell, vocab_size=V, num_classes=3, embedding_size=8, hidden_size=6).eval()
    batch = batch_of(SENTENCES, aspects=[[4], [7, 8, 9], [13]])
    with torch.no_grad():
        together, _ = model(batch)
        for i in range(3):
            alone = batch_of([SENTENCES[i]], aspects=[[4], [7, 8, 9], [13]][i:i + 1])
            torch.testing.assert_close(together[i:i + 1], model(alone)[0], rtol=1e-5, atol=1e-6)


def test_aspect_features_are_mean_pooled_birnn_and_mean_aspect_embedding():
    model = AspectClassifier("GRU", vocab_size=V, num_classes=3, embedding_size=8, hidden_size=6).eval()
    batch = batch_of([[3, 4, 5, 6]], aspects=[[4, 5, 9]])
    with torch.no_grad():
        feats, _ = model.features(batch)
        output, _ = model.rnn(model.embedding(batch["tokens"]))
        emb = model.embedding.weight
    assert feats.shape == (1, 2 * 6 + 8) and model.rnn.bidirectional
    torch.testing.assert_close(feats[0, :12], output[0].mean(0))
    torch.testing.assert_close(feats[0, 12:], (emb[4] + emb[5] + emb[9]) / 3)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_last_state_readout_equals_the_sentence_run_alone(bidirectional):
    model = DocumentClassifier("GRU", vocab_size=V, embedding_size=8, hidden_size=6, num_layers=2,
                               bidirectional=bidirectional).eval()
    batch = batch_of(SENTENCES)
    with torch.no_grad():
        feats, _ = model.features(batch)
        for i, sentence in enumerate(SENTENCES):
            _, state = model.rnn(model.embedding(torch.tensor([sentence])))
            final = torch.cat(list(state[-2:]), -1) if bidirectional else state[-1]  # top layer's final state(s)
            torch.testing.assert_close(feats[i:i + 1], final, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(model(batch)[0][i:i + 1], model(pick(batch, i))[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("readout", ["mean", "max"])
def test_pooled_readouts_ignore_padding(readout):
    model = DocumentClassifier("MGU", vocab_size=V, embedding_size=8, hidden_size=6, bidirectional=True,
                               readout=readout).eval()
    batch = batch_of(SENTENCES)
    with torch.no_grad():
        together, _ = model(batch)
        output, _ = model.rnn(model.embedding(torch.tensor([SENTENCES[1]])))
        expected = output[0].mean(0) if readout == "mean" else output[0].amax(0)
        torch.testing.assert_close(model.features(batch)[0][1], expected, rtol=1e-5, atol=1e-6)
        for i in range(3):
            torch.testing.assert_close(together[i:i + 1], model(pick(batch, i))[0], rtol=1e-5, atol=1e-6)


def test_aux_loss_of_an_mzu_cell_reaches_the_training_loss():
    cell = {"class_path": "lit_rnncells.cells.CapMZU", "init_args": {"zones": 2, "transition_depth": 1}}
    batch = batch_of(SENTENCES, aspects=[[4], [7], [13]], labels=[0, 1, 2])
    losses = {}
    for weight in (0.0, 1.0, 3.0):
        torch.manual_seed(0)
        model = AspectClassifier(cell, vocab_size=V, num_classes=3, embedding_size=8, hidden_size=8, dropout=0.0,
                                 aux_loss_weight=weight)
        assert model.rnn.has_aux_loss
        losses[weight] = model.training_step(batch, 0)
    torch.manual_seed(0)
    model = AspectClassifier(cell, vocab_size=V, num_classes=3, embedding_size=8, hidden_size=8, dropout=0.0)
    logits, aux = model(batch)
    assert aux.item() > 0
    torch.testing.assert_close(losses[0.0], F.cross_entropy(logits, batch["labels"]))
    torch.testing.assert_close(losses[1.0], losses[0.0] + aux)
    torch.testing.assert_close(losses[3.0], losses[0.0] + 3 * aux)
    losses[1.0].backward()  # the aux term's gradient reaches the cell


def test_freeze_keeps_the_embedding_out_of_training():
    model = DocumentClassifier("GRU", vocab_size=V, embedding_size=8, hidden_size=6, freeze_embeddings=True)
    before = model.embedding.weight.detach().clone()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.1)
    model.training_step(batch_of(SENTENCES, labels=[0, 1, 0]), 0).backward()
    opt.step()
    assert model.embedding.weight.grad is None
    torch.testing.assert_close(model.embedding.weight, before)
    assert model.rnn.cell().weight_hh.grad is not None


@pytest.mark.parametrize("kwargs, message", [
    ({"dropout": 1.0}, r"dropout must be a probability in \[0, 1\)"),
    ({"embedding_dropout": -0.1}, "embedding_dropout must be a probability"),
    ({"readout": "first"}, "readout must be one of last, mean, max, got 'first'"),
    ({"num_classes": 1}, "num_classes must be at least 2"),
    ({"hidden_size": 0}, "hidden_size must be a positive integer"),
    ({"pad_id": 20}, r"pad_id must be a token id in \[0, 20\)"),
    ({"aux_loss_weight": -1.0}, "aux_loss_weight must be 0 or more"),
])
def test_bad_hyperparameters_fail_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DocumentClassifier("GRU", **{"vocab_size": V, **kwargs})


# --- through a Trainer, on a tiny DataModule this test makes ---------------------------------
WORDS = ["<pad>", "<unk>"] + [f"w{i}" for i in range(V - 2)]


class TinySentiment(LightningDataModule):
    """Label = whether the text contains w3; records carry their line index."""

    label_names = ["negative", "positive"]
    vocab = Vocabulary(WORDS, "word", "<unk>")
    vocab_size, num_classes, pad_id = V, 2, PAD

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.texts = [torch.randint(2, V, (int(torch.randint(1, 9, (1,), generator=g)),), generator=g).tolist()
                      for _ in range(48)]
        self.labels = [int(self.vocab.stoi["w3"] in t) for t in self.texts]

    def _loader(self, with_labels: bool = True) -> DataLoader:
        chunks = [list(range(i, min(i + 16, len(self.texts)))) for i in range(0, len(self.texts), 16)]
        batches = []
        for idx in reversed(chunks):  # out of input order, as bucketed batches are
            b = batch_of([self.texts[i] for i in idx], labels=[self.labels[i] for i in idx] if with_labels else None)
            b["index"] = torch.tensor(idx)
            batches.append(b)
        return DataLoader(batches, batch_size=None)

    def train_dataloader(self):
        return self._loader()

    def val_dataloader(self):
        return self._loader()

    def predict_dataloader(self):
        return self._loader(with_labels=False)


def tiny_trainer(tmp_path, **kwargs) -> Trainer:
    kwargs.setdefault("max_epochs", 1)
    return Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False,
                   default_root_dir=tmp_path, **kwargs)


def test_fit_with_frozen_pretrained_vectors_then_predict_records_in_checkpoint(tmp_path, caplog):
    glove = tmp_path / "glove.txt"
    glove.write_text("".join(f"w{i} {i} {-i} 0.5 {i / 10}\n" for i in range(0, V - 2, 2)))  # even words only
    model = DocumentClassifier("GRU", vocab_size=V, embedding_size=4, hidden_size=6, pretrained_embeddings=str(glove),
                               freeze_embeddings=True)
    trainer = tiny_trainer(tmp_path)
    with caplog.at_level(logging.INFO):
        trainer.fit(model, datamodule=TinySentiment())
    assert "glove.txt covers 9 of 20 words (45.0%)" in caplog.text
    weight = model.embedding.weight.detach()
    torch.testing.assert_close(weight[WORDS.index("w4")], torch.tensor([4.0, -4.0, 0.5, 0.4]))
    assert weight[PAD].abs().sum() == 0
    assert {"val/acc", "val/f1", "val/loss", "train/loss_epoch"} <= set(trainer.callback_metrics)

    ckpt = tmp_path / "model.ckpt"
    trainer.save_checkpoint(ckpt)
    restored = DocumentClassifier.load_from_checkpoint(ckpt, weights_only=True)
    assert restored.label_names == ["negative", "positive"] and restored.embeddings_loaded
    torch.testing.assert_close(restored.embedding.weight, weight)
    glove.write_text("".join(f"w{i} 7 7 7 7\n" for i in range(V - 2)))  # resuming: the checkpoint's weights win
    resumed = DocumentClassifier("GRU", vocab_size=V, embedding_size=4, hidden_size=6, pretrained_embeddings=str(glove),
                                 freeze_embeddings=True)
    tiny_trainer(tmp_path, max_epochs=2).fit(resumed, datamodule=TinySentiment(), ckpt_path=str(ckpt))
    torch.testing.assert_close(resumed.embedding.weight, weight)
    records = [r for batch in tiny_trainer(tmp_path).predict(restored, datamodule=TinySentiment()) for r in batch]
    assert sorted(r["index"] for r in records) == list(range(48))
    label, prob = records[0]["text"].split("\t")
    assert label in ("negative", "positive") and 0.5 <= float(prob) <= 1.0
    assert records[0]["label"] == label


def test_pretrained_vectors_with_wrong_dimension_fail_before_training(tmp_path):
    glove = tmp_path / "glove.txt"
    glove.write_text("w0 1 2 3\n")
    model = DocumentClassifier("GRU", vocab_size=V, embedding_size=4, hidden_size=6, pretrained_embeddings=str(glove))
    with pytest.raises(ValueError, match=r"glove\.txt, line 1: the vectors have 3 values but embedding_size is 4"):
        tiny_trainer(tmp_path).fit(model, datamodule=TinySentiment())
    assert model.global_step == 0


def test_label_count_mismatch_with_the_data_fails_at_setup(tmp_path):
    model = DocumentClassifier("GRU", vocab_size=V, num_classes=3, embedding_size=4, hidden_size=6)
    with pytest.raises(ValueError, match=r"The data has 2 classes \['negative', 'positive'\] but the model has "
                                         "num_classes=3"):
        tiny_trainer(tmp_path).fit(model, datamodule=TinySentiment())
