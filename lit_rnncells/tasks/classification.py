"""Sentence and document classification over any cell: aspect sentiment (ABSA) and document sentiment.

- :class:`AspectClassifier`, the MZU paper's ABSA model (Meng et al., AAAI 2020, "Aspect Based Sentiment Analysis",
  following Tang et al. 2016): a Bi-RNN encodes the sentence, its outputs are mean-pooled over the
  real tokens, the pooled vector is concatenated with the mean embedding of the aspect term's words,
  and a linear layer + softmax predicts the polarity. Deep transition (+DT) is the cell's own option
  (``GRUDT``, ``CapMZU(transition_depth=1)``).
- :class:`DocumentClassifier`: an RNN reads the text and a linear layer classifies its last real
  (non-pad) state or a mean / max pooled state (IMDB as in Chan et al., ICONIP 2020, Fig. 2, SST as in
  Weissenborn & Rocktäschel, arXiv:1606.03002, §4.3).

Both report accuracy and macro-F1 (torchmetrics), add the cells' auxiliary loss (MZU's zone
disagreement, Meng et al., AAAI 2020, eq. 18-19) to the training loss and log it on its own, can start from pretrained
word vectors (:mod:`lit_rnncells.data.embeddings`), and return one record per input line from
``predict_step`` for the CLI's prediction writer.
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional, Tuple

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn
from torch.nn import functional as F
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

from ..utils.arguments import check_positive, check_probability
from ..data.embeddings import load_pretrained_vectors
from .base import CellSpec, RecurrentTask, cell_config
from .logic import last_real_output

READOUTS = ("last", "mean", "max")
STAGES = ("train", "val", "test")


def sequence_mask(lengths: Tensor, steps: int) -> Tensor:
    """``(B, T)`` bool: True at the real (non-pad) steps."""
    return torch.arange(steps, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)


def masked_mean(x: Tensor, lengths: Tensor) -> Tensor:
    """Mean of ``x`` ``(B, T, D)`` over each row's real steps; zero for an empty row."""
    mask = sequence_mask(lengths.to(x.device), x.shape[1]).unsqueeze(-1).to(x.dtype)
    return (x * mask).sum(1) / lengths.to(x.device).clamp_min(1).unsqueeze(-1).to(x.dtype)


def masked_max(x: Tensor, lengths: Tensor) -> Tensor:
    """Element-wise max of ``x`` ``(B, T, D)`` over each row's real steps; zero for an empty row."""
    lengths = lengths.to(x.device)
    mask = sequence_mask(lengths, x.shape[1]).unsqueeze(-1)
    out = x.masked_fill(~mask, float("-inf")).amax(1) if x.shape[1] else x.new_zeros(x.shape[0], x.shape[2])
    return torch.where((lengths > 0).unsqueeze(-1), out, torch.zeros_like(out))


class SequenceClassifier(RecurrentTask):
    """What the classifiers share: embedding, Recurrent encoder, dropout, linear output, metrics.

    Subclasses implement :meth:`features` (the vector the linear layer reads) and
    :meth:`feature_size`; ``forward`` returns ``(logits, aux)``.

    Args:
        cell: the recurrent cell (name or factory); deep transition is the cell's own option.
        vocab_size, num_classes, pad_id: from the DataModule (linked by the CLI).
        embedding_size, hidden_size, num_layers, bidirectional: encoder sizes.
        dropout: on the classifier's input features. embedding_dropout: on the embedded tokens.
        rnn_dropout: between stacked recurrent layers.
        pretrained_embeddings: a local GloVe / word2vec text file; its vectors initialise the
            embedding rows of the DataModule's vocabulary in ``setup("fit")`` (coverage logged).
        freeze_embeddings: keep the embedding fixed (typically with pretrained vectors).
        aux_loss_weight: multiplies the cells' auxiliary loss (MZU's λ lives in the cell).
    """

    def __init__(self, cell: CellSpec = "GRU", vocab_size: int = 2, num_classes: int = 2, pad_id: int = 0,
                 embedding_size: int = 128, hidden_size: int = 256, num_layers: int = 1,
                 bidirectional: bool = False, dropout: float = 0.5, embedding_dropout: float = 0.0,
                 rnn_dropout: float = 0.0, pretrained_embeddings: Optional[str] = None,
                 freeze_embeddings: bool = False, aux_loss_weight: float = 1.0,
                 optimizer: OptimizerCallable = torch.optim.Adam,
                 lr_scheduler: Optional[LRSchedulerCallable] = None, scheduler_monitor: str = "val/loss",
                 compile: bool = False, backend: Optional[str] = None) -> None:
        super().__init__(cell, optimizer, lr_scheduler, scheduler_monitor, compile=compile, backend=backend)
        check_positive(vocab_size=vocab_size, num_classes=num_classes, embedding_size=embedding_size,
                       hidden_size=hidden_size, num_layers=num_layers)
        if num_classes < 2:
            raise ValueError(f"num_classes must be at least 2, got {num_classes}; check the data's labels.")
        if isinstance(pad_id, bool) or not isinstance(pad_id, int) or not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id must be a token id in [0, {vocab_size}), got {pad_id!r}; "
                             "let the CLI link it from the data.")
        check_probability(dropout=dropout, embedding_dropout=embedding_dropout, rnn_dropout=rnn_dropout)
        if not isinstance(aux_loss_weight, (int, float)) or aux_loss_weight < 0:
            raise ValueError(f"aux_loss_weight must be 0 or more, got {aux_loss_weight!r}.")
        if rnn_dropout > 0 and num_layers == 1:  # said in the task's words, not Recurrent's
            warnings.warn(f"rnn_dropout={rnn_dropout} drops between stacked recurrent layers only, so with "
                          "num_layers=1 it does nothing; set num_layers to 2 or more, or use dropout / "
                          "embedding_dropout.", UserWarning, stacklevel=2)
        # Plain data only (the cell as a config), so checkpoints load with torch.load(weights_only=True).
        self.save_hyperparameters(ignore=["optimizer", "lr_scheduler"], logger=False)  # logged as model/...
        self.hparams["cell"] = cell_config(cell)
        self.embedding = nn.Embedding(vocab_size, embedding_size, padding_idx=pad_id)
        self.embedding.weight.requires_grad_(not freeze_embeddings)
        self.embedding_dropout = nn.Dropout(embedding_dropout)
        self.rnn = self.make_recurrent(embedding_size, hidden_size, num_layers=num_layers,
                                       bidirectional=bidirectional,
                                       dropout=rnn_dropout if num_layers > 1 else 0.0)  # warned above
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(self.feature_size(), num_classes)
        self.metrics = nn.ModuleDict()
        for stage in STAGES:
            self.metrics[f"{stage}_acc"] = MulticlassAccuracy(num_classes, average="micro")
            self.metrics[f"{stage}_f1"] = MulticlassF1Score(num_classes, average="macro")
        self.label_names: Optional[List[str]] = None
        self.embeddings_loaded = False

    # --- network ---------------------------------------------------------------------
    def feature_size(self) -> int:
        raise NotImplementedError

    def features(self, batch: Dict[str, Tensor]) -> Tuple[Tensor, Tensor]:
        """The classifier's input ``(B, feature_size)`` and the cells' auxiliary loss."""
        raise NotImplementedError

    def encode(self, tokens: Tensor, lengths: Tensor) -> Tuple[Tensor, Tensor]:
        """RNN outputs ``(B, T, D*H)`` (zero at padding) and the auxiliary loss (computed when training)."""
        x = self.embedding_dropout(self.embedding(tokens))
        if self.training and self.rnn.has_aux_loss:
            output, _, aux = self.rnn(x, lengths=lengths, return_aux=True)
        else:
            output, _ = self.rnn(x, lengths=lengths)
            aux = x.new_zeros((), dtype=torch.float32)
        return output, aux

    def forward(self, batch: Dict[str, Tensor]) -> Tuple[Tensor, Tensor]:
        """Class logits ``(B, num_classes)`` and the cells' auxiliary loss."""
        feats, aux = self.features(batch)
        return self.classifier(self.dropout(feats)), aux

    # --- training and evaluation -----------------------------------------------------
    def _shared_step(self, batch: Dict[str, Any], stage: str) -> Tensor:
        logits, aux = self(batch)
        labels = batch["labels"]
        n = labels.shape[0]
        total = F.cross_entropy(logits.float(), labels, reduction="sum")
        loss = self.mean_over_devices(total, n) if stage == "train" else total / n
        sync = stage != "train"
        self.log(f"{stage}/loss", total.detach() / n, batch_size=n, prog_bar=True, on_step=stage == "train",
                 on_epoch=True, sync_dist=sync)
        for name in ("acc", "f1"):
            metric = self.metrics[f"{stage}_{name}"]
            metric(logits.detach().float(), labels)
            self.log(f"{stage}/{name}", metric, batch_size=n, prog_bar=name == "acc", on_step=False, on_epoch=True)
        if stage == "train" and self.rnn.has_aux_loss:
            self.log_aux_loss(stage, aux, self.rnn.aux_loss_name, n)
            loss = loss + self.hparams.aux_loss_weight * aux
        return loss

    def training_step(self, batch: Dict[str, Any], batch_idx: int) -> Tensor:
        return self._shared_step(batch, "train")

    def validation_step(self, batch: Dict[str, Any], batch_idx: int) -> None:
        self._shared_step(batch, "val")

    def test_step(self, batch: Dict[str, Any], batch_idx: int) -> None:
        self._shared_step(batch, "test")

    def predict_step(self, batch: Dict[str, Any], batch_idx: int) -> List[Dict[str, Any]]:
        """One record per input line: ``{"index", "text": "<label>\\t<probability>", "label", "probability"}``."""
        logits, _ = self(batch)
        probs = torch.softmax(logits.float(), -1)
        best, classes = probs.max(-1)
        names = self.label_names or [str(i) for i in range(self.hparams.num_classes)]
        records = []
        for index, c, p in zip(batch["index"].tolist(), classes.tolist(), best.tolist()):
            records.append({"index": int(index), "text": f"{names[c]}\t{p:.4f}", "label": names[c],
                            "probability": p})
        return records

    # --- data-dependent setup: labels, pretrained vectors ------------------------------
    def setup(self, stage: str) -> None:
        dm = self._trainer.datamodule if self._trainer is not None else None
        names = getattr(dm, "label_names", None)
        if names is not None:
            names = [str(n) for n in names]
            if len(names) != self.hparams.num_classes:
                raise ValueError(f"The data has {len(names)} classes {names} but the model has num_classes="
                                 f"{self.hparams.num_classes}; let the CLI link data.num_classes or fix the config.")
            self.label_names = names
        if stage == "fit" and self.hparams.pretrained_embeddings and not self.embeddings_loaded:
            vocab = getattr(dm, "vocab", None)
            if vocab is None:
                raise ValueError("pretrained_embeddings needs the DataModule's vocabulary (a `vocab` attribute); "
                                 "use a sentiment DataModule or load the vectors with load_pretrained_embeddings().")
            self.load_pretrained_embeddings(self.hparams.pretrained_embeddings, list(vocab.symbols))
        # Lightning restores a checkpoint after setup(), so a resumed fit's weights replace these vectors.

    def load_pretrained_embeddings(self, path: str, words: List[str]) -> float:
        """Initialise the embedding rows of ``words`` (id = position) from a GloVe / word2vec text file.

        Words without a vector keep a random row with the found vectors' scale; the padding row is zero.
        Returns the coverage (fraction of words found), also logged on rank zero.
        """
        if len(words) != self.hparams.vocab_size:
            raise ValueError(f"The vocabulary has {len(words)} words but the model has vocab_size="
                             f"{self.hparams.vocab_size}; let the CLI link data.vocab_size.")
        pretrained = load_pretrained_vectors(path, words, self.hparams.embedding_size)
        weight = self.embedding.weight
        with torch.no_grad():
            if pretrained.num_found:
                std = float(pretrained.vectors[pretrained.found].std()) if pretrained.num_found > 1 else 1.0
                weight.normal_(0.0, std)
                found = pretrained.found.to(weight.device)
                weight[found] = pretrained.vectors.to(weight)[found]
            weight[self.hparams.pad_id].zero_()
        self.embeddings_loaded = True
        rank_zero_info(pretrained.describe())
        return pretrained.coverage

    def on_save_checkpoint(self, checkpoint: Dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)
        checkpoint["classifier"] = {"label_names": self.label_names, "embeddings_loaded": self.embeddings_loaded}

    def on_load_checkpoint(self, checkpoint: Dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)
        saved = checkpoint.get("classifier", {})
        if saved.get("label_names") is not None:
            self.label_names = list(saved["label_names"])
        self.embeddings_loaded = bool(saved.get("embeddings_loaded", self.embeddings_loaded))


class AspectClassifier(SequenceClassifier):
    """The MZU paper's ABSA model (Meng et al., AAAI 2020, Aspect Based Sentiment Analysis; Tang et al. 2016).

    ``[masked mean of BiRNN(sentence) ; mean embedding of the aspect term's words] → linear → softmax``.
    Batches hold ``tokens``/``lengths`` (the sentence) and ``aspect``/``aspect_lengths`` (the term's ids).
    Bidirectional by default; GRU+DT is ``cell: GRUDT``, capMZRNN+DT ``cell: CapMZU`` (transition_depth 1).
    """

    def __init__(self, cell: CellSpec = "GRUDT", vocab_size: int = 2, num_classes: int = 3, pad_id: int = 0,
                 embedding_size: int = 300, hidden_size: int = 150, num_layers: int = 1, bidirectional: bool = True,
                 dropout: float = 0.5, embedding_dropout: float = 0.0, rnn_dropout: float = 0.0,
                 pretrained_embeddings: Optional[str] = None, freeze_embeddings: bool = False,
                 aux_loss_weight: float = 1.0, optimizer: OptimizerCallable = torch.optim.Adam,
                 lr_scheduler: Optional[LRSchedulerCallable] = None, scheduler_monitor: str = "val/loss",
                 compile: bool = False, backend: Optional[str] = None) -> None:
        super().__init__(cell, vocab_size, num_classes, pad_id, embedding_size, hidden_size, num_layers,
                         bidirectional, dropout, embedding_dropout, rnn_dropout, pretrained_embeddings,
                         freeze_embeddings, aux_loss_weight, optimizer, lr_scheduler, scheduler_monitor,
                         compile=compile, backend=backend)

    def feature_size(self) -> int:
        return self.rnn.hidden_size * self.rnn.num_directions + self.embedding.embedding_dim

    def aspect_embedding(self, aspect: Tensor, aspect_lengths: Tensor) -> Tensor:
        """Mean embedding of each aspect term's words ``(B, embedding_size)`` (multi-word terms averaged)."""
        return masked_mean(self.embedding(aspect), aspect_lengths)

    def features(self, batch: Dict[str, Tensor]) -> Tuple[Tensor, Tensor]:
        output, aux = self.encode(batch["tokens"], batch["lengths"])
        sentence = masked_mean(output, batch["lengths"])
        return torch.cat([sentence, self.aspect_embedding(batch["aspect"], batch["aspect_lengths"])], -1), aux


class DocumentClassifier(SequenceClassifier):
    """RNN over the text → last real state or pooled state → linear → softmax (Chan et al., ICONIP 2020, Fig. 2;
    Weissenborn & Rocktäschel, arXiv:1606.03002, §4.3).

    Args (beyond :class:`SequenceClassifier`'s):
        readout: ``last`` reads the state at each text's last real token (bidirectional: concatenated with
            the backward direction's final state, the one at the first token); ``mean`` / ``max`` pool the
            top layer's outputs over the real tokens.
    """

    def __init__(self, cell: CellSpec = "GRU", vocab_size: int = 2, num_classes: int = 2, pad_id: int = 0,
                 embedding_size: int = 128, hidden_size: int = 256, num_layers: int = 1, bidirectional: bool = False,
                 readout: str = "last", dropout: float = 0.5, embedding_dropout: float = 0.0,
                 rnn_dropout: float = 0.0, pretrained_embeddings: Optional[str] = None,
                 freeze_embeddings: bool = False, aux_loss_weight: float = 1.0,
                 optimizer: OptimizerCallable = torch.optim.Adam,
                 lr_scheduler: Optional[LRSchedulerCallable] = None, scheduler_monitor: str = "val/loss",
                 compile: bool = False, backend: Optional[str] = None) -> None:
        if readout not in READOUTS:
            raise ValueError(f"readout must be one of {', '.join(READOUTS)}, got {readout!r}.")
        super().__init__(cell, vocab_size, num_classes, pad_id, embedding_size, hidden_size, num_layers,
                         bidirectional, dropout, embedding_dropout, rnn_dropout, pretrained_embeddings,
                         freeze_embeddings, aux_loss_weight, optimizer, lr_scheduler, scheduler_monitor,
                         compile=compile, backend=backend)

    def feature_size(self) -> int:
        return self.rnn.hidden_size * self.rnn.num_directions

    def features(self, batch: Dict[str, Tensor]) -> Tuple[Tensor, Tensor]:
        lengths = batch["lengths"]
        output, aux = self.encode(batch["tokens"], lengths)
        readout = self.hparams.readout
        if readout == "mean":
            return masked_mean(output, lengths), aux
        if readout == "max":
            return masked_max(output, lengths), aux
        if output.shape[1] == 0:
            return output.new_zeros(output.shape[0], output.shape[2]), aux
        h = self.rnn.hidden_size
        if not self.rnn.bidirectional:
            return last_real_output(output, lengths), aux
        forward = last_real_output(output[..., :h], lengths)
        backward = output[:, 0, h:]  # the backward direction ends at the first token (zero for an empty text)
        return torch.cat([forward, backward], -1), aux
