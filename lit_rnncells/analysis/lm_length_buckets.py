"""MZU Fig. 2 (Meng et al., AAAI 2020, "About Length"): BPC by sentence-length bucket, several checkpoints side by side.

``python -m lit_rnncells.analysis bpc-by-length --ckpt_path a.ckpt b.ckpt [--split test] --output f.png``

Each checkpoint's ``LanguageModelDataModule`` is rebuilt from its saved hyperparameters and its vocabulary
checked against the one saved in the checkpoint. The split is cut into sentences at its line ends (PTB char
sentences are lines): a sentence's tokens are its characters and its line end, so the sentences cover every
token of the split exactly once. Each sentence is evaluated on its own, from the zero state, reading a line
end first (the model starts "after a line end", as in :meth:`~lit_rnncells.tasks.LanguageModel.generate`),
and falls in the bucket of its length in characters (line end not counted). The paper's buckets are 30
characters wide ("9 for sequences with (90, 120] characters"); a bucket's BPC is its summed NLL in nats over
its token count, divided by ln 2, so the token-weighted mean of the buckets' BPC is the overall BPC.
"""
from __future__ import annotations

import argparse
import inspect
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import Tensor
from torch.nn import functional as F

from .common import checkpoint_label, datamodule_state, figure, load_task, save_figure
from ..data.language_model import LanguageModelDataModule, check_vocabulary
from ..data.text import Vocabulary
from ..tasks.language_model import LanguageModel

DEFAULT_EDGES = (30, 60, 90, 120, 150, 180, 210, 240)
"""Bucket edges in characters: ≤ 30, (30, 60], …, (210, 240], then > 240."""
SPLITS = ("valid", "test")


@dataclass
class Bucket:
    """Sentences of ``low < length <= high`` characters (``low`` None: from 0, ``high`` None: no bound)."""

    low: Optional[int]
    high: Optional[int]
    sentences: int
    tokens: int
    nats: float

    @property
    def label(self) -> str:
        if self.low is None:
            return f"≤ {self.high}"
        return f"({self.low}, {self.high}]" if self.high is not None else f"> {self.low}"

    @property
    def bpc(self) -> float:
        return self.nats / self.tokens / math.log(2) if self.tokens else float("nan")


@dataclass
class LengthBPC:
    """One checkpoint's buckets and its overall BPC over the whole split."""

    label: str
    buckets: List[Bucket]
    tokens: int
    nats: float

    @property
    def bpc(self) -> float:
        return self.nats / self.tokens / math.log(2)


def split_sentences(ids: Tensor, line_end: int) -> List[Tensor]:
    """Cut a split's token ids at its line ends; each sentence keeps its line end. Together the pieces are
    exactly ``ids``, so every token is in one sentence once."""
    ends = (ids == line_end).nonzero().flatten().tolist()
    starts = [0] + [e + 1 for e in ends]
    stops = [e + 1 for e in ends] + [len(ids)]
    return [ids[a:b] for a, b in zip(starts, stops) if b > a]


def sentence_nats(model: Any, sentences: Sequence[Tensor], line_end: int, batch_size: int = 128) -> Tensor:
    """The summed NLL in nats of each sentence's tokens ``(n,)``, float64, each sentence from the zero state
    after reading a line end (batched by length, padded steps masked)."""
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    out = torch.zeros(len(sentences), dtype=torch.float64)
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            lengths = torch.tensor([len(sentences[i]) for i in chunk])
            width = int(lengths.max())
            targets = torch.zeros(len(chunk), width, dtype=torch.long)
            for row, i in enumerate(chunk):
                targets[row, :lengths[row]] = sentences[i]
            inputs = torch.cat([torch.full((len(chunk), 1), line_end), targets[:, :-1]], dim=1)
            full = bool((lengths == width).all())
            logits, _, _ = model(inputs, None, None if full else lengths)
            nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1),
                                  reduction="none").view(len(chunk), width).double()
            real = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)
            out[chunk] = (nll * real).sum(1)
    return out


def bucket(lengths: Sequence[int], tokens: Sequence[int], nats: Tensor, edges: Sequence[int]) -> List[Bucket]:
    """Group sentences by length (characters): ``≤ edges[0]``, ``(edges[i], edges[i+1]]``, ``> edges[-1]``.
    Every sentence falls in exactly one bucket."""
    lows: List[Optional[int]] = [None, *edges]
    highs: List[Optional[int]] = [*edges, None]
    buckets = [Bucket(lo, hi, 0, 0, 0.0) for lo, hi in zip(lows, highs)]
    for length, count, value in zip(lengths, tokens, nats.tolist()):
        b = buckets[sum(1 for e in edges if length > e)]
        b.sentences, b.tokens, b.nats = b.sentences + 1, b.tokens + count, b.nats + value
    return buckets


def lm_datamodule(checkpoint: Dict[str, Any], data_dir: Optional[str]) -> Any:
    """The checkpoint's ``LanguageModelDataModule``, rebuilt from its hyperparameters (``data_dir`` overrides
    where the corpus is), its vocabulary checked against the one saved in the checkpoint."""
    saved = dict(checkpoint.get("datamodule_hyper_parameters") or {})
    if not str(saved.get("_class_path", "LanguageModelDataModule")).endswith("LanguageModelDataModule"):
        raise ValueError(f"The checkpoint was trained with {saved['_class_path']}, not LanguageModelDataModule; "
                         "pass a language-model checkpoint (configs/lm/*.yaml).")
    state = datamodule_state(checkpoint, "LanguageModelDataModule")
    vocab = Vocabulary.from_state_dict(state["vocab"])
    if vocab.level != "char":
        raise ValueError(f"The checkpoint's language model is {vocab.level} level; bpc-by-length needs a "
                         "character-level one (e.g. configs/lm/ptb_char_*.yaml).")
    if "\n" not in vocab.stoi:
        raise ValueError("The checkpoint's corpus has no line ends, so it has no sentences to bucket; use a "
                         "corpus of one sentence per line (ptb_char, or dataset: text).")
    if data_dir is not None:
        saved["data_dir"] = data_dir
    accepted = inspect.signature(LanguageModelDataModule.__init__).parameters
    data = LanguageModelDataModule(**{k: v for k, v in saved.items() if k in accepted and k != "self"})
    check_vocabulary(vocab, data.vocab)
    return data


def bpc_by_length(path: str, split: str = "test", edges: Sequence[int] = DEFAULT_EDGES,
                  data_dir: Optional[str] = None, batch_size: int = 128) -> LengthBPC:
    """Evaluate one LanguageModel checkpoint sentence by sentence on ``split`` and bucket the result."""
    model, checkpoint = load_task(path, LanguageModel)
    data = lm_datamodule(checkpoint, data_dir)
    line_end = data.vocab.stoi["\n"]
    sentences = split_sentences(data.splits[split], line_end)
    nats = sentence_nats(model, sentences, line_end, batch_size)
    chars = [len(s) - int(s[-1] == line_end) for s in sentences]
    tokens = [len(s) for s in sentences]
    return LengthBPC(checkpoint_label(path), bucket(chars, tokens, nats, edges), sum(tokens), float(nats.sum()))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ckpt_path", required=True, nargs="+",
                        help="one or more character-level LanguageModel checkpoints written by fit")
    parser.add_argument("--split", choices=SPLITS, default="test", help="the split to evaluate (default: test)")
    parser.add_argument("--edges", type=int, nargs="+", default=list(DEFAULT_EDGES),
                        help="bucket edges in characters, increasing (default: 30 60 … 240, giving ≤ 30, "
                             "(30, 60], …, > 240)")
    parser.add_argument("--data_dir", default=None,
                        help="where the corpus is, if not where the checkpoint's data settings say")
    parser.add_argument("--batch_size", type=int, default=128, help="sentences evaluated at once (default 128)")
    parser.add_argument("--output", required=True, help="where to write the PNG")


@figure("bpc-by-length", "MZU Fig. 2: BPC by sentence-length bucket, several LM checkpoints side by side.",
        add_arguments)
def run(args: argparse.Namespace) -> List[LengthBPC]:
    edges = list(args.edges)
    if edges[0] < 1 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"--edges must be positive and increasing, got {edges}; e.g. --edges 30 60 90 120.")
    if args.batch_size < 1:
        raise ValueError(f"--batch_size must be 1 or more, got {args.batch_size}.")
    results = [bpc_by_length(p, args.split, edges, args.data_dir, args.batch_size) for p in args.ckpt_path]
    draw(results, args.split, args.output)
    return results


def draw(results: List[LengthBPC], split: str, output: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buckets = results[0].buckets
    shown = [i for i, b in enumerate(buckets) if any(r.buckets[i].tokens for r in results)]
    width = 0.8 / len(results)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(shown) * max(1, len(results) / 2) + 2.0), 4.5))
    for k, r in enumerate(results):
        xs = [x + (k - (len(results) - 1) / 2) * width for x in range(len(shown))]
        ax.bar(xs, [r.buckets[i].bpc for i in shown], width, label=f"{r.label} (overall {r.bpc:.3f})")
    ax.set_xticks(range(len(shown)), [f"{buckets[i].label}\n{buckets[i].sentences} sent." for i in shown],
                  fontsize=8)
    ax.set_xlabel("sentence length in characters (bucket, sentences in it)")
    ax.set_ylabel(f"{split} BPC (bits per character)")
    values = [r.buckets[i].bpc for r in results for i in shown]
    low, high = min(values), max(values)
    ax.set_ylim(max(0.0, low - 0.15 * (high - low + 1e-3) - 0.05), high + 0.1 * (high - low + 1e-3) + 0.02)
    names = ", ".join(r.label for r in results)
    ax.set_title(f"MZU Fig. 2: {split} BPC by sentence length\n{names}", fontsize=10)
    ax.legend(fontsize=8, title="checkpoint", title_fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    save_figure(fig, output)
