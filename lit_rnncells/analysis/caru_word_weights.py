"""CARU §2.2 (Chan, Ke & Im, ICONIP 2020): which words a trained CARU weighs least and most.

``python -m lit_rnncells.analysis caru-word-weights --ckpt_path caru.ckpt [more.ckpt ...] --output w.png``

The paper's content-adaptive gate l = σ(x') ⊙ z (eq. 4d) moves the state by the word weight σ(x'), x' = W_vn v +
b_vn (eq. 4a), times the content weight z (eq. 4c); it claims the word weight "should be close to zero if the
current word is a full stop" and relates it to parts of speech, but shows no measurement. This figure measures
it: the checkpoint's DataModule is rebuilt from its saved settings (``--data_dir`` if the data moved), the
split is read through the task's embedding and recurrent layer, and the gates of every real step come from the
cell through :func:`~lit_rnncells.nn.recording.content_adaptive_gates`. Per token they are averaged over the
hidden units and over every step that reads it. For a classifier (IMDB, SST, SemEval) the recurrent layer is
the one over the text; for a Seq2Seq model it is the encoder (the decoder's input holds the fed-back
attentional vector beside the word). In the first layer the word weight depends on the word alone.

Each checkpoint gets a row: the ``--top`` tokens of at least ``--min_count`` steps with the lowest and the
highest mean word weight, and in the title the mean σ(x'), z and l over all steps, the share of word weights
near zero (below 0.1) and the full stop's mean word weight and rank.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import torch
from torch import Tensor

from .common import checkpoint_datamodule, checkpoint_label, checkpoint_labels, figure, load_task, save_figure
from ..cells.caru import CARU
from ..cells.registry import available_cells, get_cell
from ..nn.recording import content_adaptive_gates
from ..tasks.classification import SequenceClassifier
from ..tasks.seq2seq import Seq2Seq

SPLITS = ("test", "val")
FULL_STOP = "."
NEAR_ZERO = 0.1
"""A word weight below this counts as near zero (the paper's "close to zero")."""


@dataclass
class WordWeights:
    """Per token (by id) of one checkpoint: steps reading it and the mean word weight σ(x'), content weight z and
    gate l = σ(x') ⊙ z over those steps and the hidden units; and the same means over all steps."""

    label: str
    tokens: List[str]
    counts: Tensor  # (V,) steps reading each token
    word_weight: Tensor  # (V,) NaN for tokens never read
    content_weight: Tensor
    gate: Tensor
    means: Dict[str, float] = field(default_factory=dict)  # "word_weight", "content_weight", "gate" over all steps
    near_zero: float = 0.0  # the share of all (step, hidden unit) word weights below NEAR_ZERO

    def frequent(self, min_count: int) -> Tensor:
        """Ids of the tokens read at least ``min_count`` times."""
        return torch.nonzero(self.counts >= min_count).flatten()

    def ranked(self, min_count: int) -> List[int]:
        """The frequent tokens' ids, lowest mean word weight first."""
        ids = self.frequent(min_count)
        return ids[self.word_weight[ids].argsort()].tolist()

    def rank_of(self, token: str, min_count: int) -> Optional[Tuple[int, int]]:
        """``(rank from the lowest, 1-based; number ranked)`` of ``token`` among the frequent tokens; None if it is
        not one of them."""
        ranked = self.ranked(min_count)
        shown = [self.tokens[i] for i in ranked]
        return (shown.index(token) + 1, len(ranked)) if token in shown else None


def caru_cells() -> List[str]:
    """The registered cells with CARU's gates (CARU and its subclasses)."""
    return [name for name in available_cells() if isinstance(get_cell(name), type) and issubclass(get_cell(name), CARU)]


Reader = Tuple[Any, Any, Callable[[Dict[str, Any]], Tuple[Tensor, Tensor]], Callable[[int], str]]


def check_task(model: Any) -> None:
    """One clear error for a task whose recurrent layer this figure does not read."""
    if not isinstance(model, (SequenceClassifier, Seq2Seq)):
        raise ValueError(f"caru-word-weights reads a text classifier or a Seq2Seq encoder, not a "
                         f"{type(model).__name__}; pass a checkpoint of configs/classification/*.yaml or "
                         "configs/seq2seq/*.yaml.")


def task_reader(model: Any, dm: Any) -> Reader:
    """``(embedding, recurrent layer, batch → (ids, lengths), id → token text)`` for a checkpoint's task."""
    check_task(model)
    if isinstance(model, SequenceClassifier):
        symbols = dm.vocab.symbols
        return model.embedding, model.rnn, lambda b: (b["tokens"], b["lengths"]), lambda i: symbols[i]
    tokenizer = dm.source_tokenizer  # a Seq2Seq model's encoder

    def piece(i: int) -> str:  # byte-level BPE marks a word's first piece with Ġ: shown as ▁
        raw, text = tokenizer.tokens([i])[0], tokenizer.decode([i])
        return raw if not text else "▁" + text if raw.startswith("Ġ") else text

    return model.source_embedding, model.encoder, lambda b: (b["source"], b["source_lengths"]), piece


def word_weights(model: Any, batches: Iterable[Dict[str, Any]], reader: Reader, vocab_size: int, label: str, *,
                 layer: int = 0, direction: int = 0) -> WordWeights:
    """Average the CARU gates of ``model``'s recurrent layer (cell at ``layer`` / ``direction``) per token over
    ``batches``."""
    embedding, rnn, ids_of, text_of = reader
    sums = torch.zeros(3, vocab_size, dtype=torch.float64)
    totals = torch.zeros(3, dtype=torch.float64)
    near_zero, units = 0, 0
    counts = torch.zeros(vocab_size, dtype=torch.long)
    with torch.no_grad():
        for batch in batches:
            ids, lengths = ids_of(batch)
            word, content = content_adaptive_gates(rnn, embedding(ids), lengths=lengths, layer=layer,
                                                   direction=direction)
            real = torch.arange(ids.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
            per_step = torch.stack([word.mean(-1), content.mean(-1), (word * content).mean(-1)])[:, real].double()
            for k in range(3):
                sums[k].index_add_(0, ids[real], per_step[k])
            totals += per_step.sum(1)
            near_zero += int((word[real] < NEAR_ZERO).sum())
            units += word[real].numel()
            counts += torch.bincount(ids[real], minlength=vocab_size)
    if int(counts.sum()) == 0:
        raise ValueError("The split has no tokens to read; check --split and --limit.")
    means = sums / counts.clamp(min=1)
    means[:, counts == 0] = float("nan")
    overall = totals / counts.sum()
    return WordWeights(label, [text_of(i) for i in range(vocab_size)], counts, means[0].float(), means[1].float(),
                       means[2].float(), dict(zip(("word_weight", "content_weight", "gate"), overall.tolist())),
                       near_zero / units)


def limited(batches: Iterable[Dict[str, Any]], ids_of: Callable[[Dict[str, Any]], Tuple[Tensor, Tensor]],
            limit: Optional[int]) -> Iterable[Dict[str, Any]]:
    """The first ``limit`` examples of ``batches`` (all when ``limit`` is None), cutting the last batch."""
    left = limit
    for batch in batches:
        if left is not None and left <= 0:
            return
        if left is not None and len(ids_of(batch)[1]) > left:
            batch = {k: v[:left] if isinstance(v, Tensor) and v.dim() > 0 else v for k, v in batch.items()}
        if left is not None:
            left -= len(ids_of(batch)[1])
        yield batch


def checkpoint_word_weights(path: str, *, split: str = "test", layer: int = 0, direction: int = 0,
                            limit: Optional[int] = None, data_dir: Optional[str] = None,
                            label: Optional[str] = None) -> WordWeights:
    """Load one checkpoint, rebuild its data and measure its CARU's word weights on ``split`` (``label``: its
    name in the figure and the printed line, by default :func:`~.common.checkpoint_label`)."""
    model, checkpoint = load_task(path)
    check_task(model)
    rnn = model.encoder if isinstance(model, Seq2Seq) else model.rnn
    if not 0 <= layer < rnn.num_layers:
        raise ValueError(f"--layer must lie in [0, {rnn.num_layers - 1}], got {layer}.")
    if not 0 <= direction < rnn.num_directions:
        raise ValueError(f"--direction must lie in [0, {rnn.num_directions - 1}], got {direction}.")
    if not isinstance(rnn.cell(layer, direction), CARU):
        raise ValueError(f"{path!r} has a {type(rnn.cell(layer, direction)).__name__} at layer {layer}, direction "
                         f"{direction}; caru-word-weights needs one of {', '.join(caru_cells())}.")
    dm = checkpoint_datamodule(path, checkpoint, data_dir)
    reader = task_reader(model, dm)
    dm.setup("test" if split == "test" else "validate")
    loader = dm.test_dataloader() if split == "test" else dm.val_dataloader()
    vocab_size = model.embedding.num_embeddings if isinstance(model, SequenceClassifier) else \
        model.source_embedding.num_embeddings
    return word_weights(model, limited(loader, reader[2], limit), reader, vocab_size,
                        label or checkpoint_label(path),
                        layer=layer, direction=direction)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ckpt_path", nargs="+", required=True,
                        help="CARU checkpoints of a text classifier or a Seq2Seq model (one row each)")
    parser.add_argument("--split", choices=SPLITS, default="test", help="which split to read (default test)")
    parser.add_argument("--layer", type=int, default=0, help="which recurrent layer's CARU (default 0)")
    parser.add_argument("--direction", type=int, default=0, help="which direction's CARU (default 0, forward)")
    parser.add_argument("--limit", type=int, default=None,
                        help="only the first N examples of the evaluation loader, which sorts them by length: the "
                             "N shortest (default: all)")
    parser.add_argument("--min_count", type=int, default=50,
                        help="rank only tokens read at least this many times (default 50)")
    parser.add_argument("--top", type=int, default=15, help="how many lowest and highest tokens to show (default 15)")
    parser.add_argument("--data_dir", default=None, help="data folder (default: the one saved in the checkpoint)")
    parser.add_argument("--output", required=True, help="where to write the PNG")


@figure("caru-word-weights", "CARU §2.2: the tokens with the lowest and highest mean word weight σ(x') (eq. 4d) "
        "of trained CARU checkpoints, and the full stop's rank.", add_arguments)
def run(args: argparse.Namespace) -> List[WordWeights]:
    for name in ("min_count", "top"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be a positive integer, got {getattr(args, name)}.")
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be a positive integer, got {args.limit}.")
    if args.data_dir is not None and not Path(args.data_dir).expanduser().is_dir():
        raise FileNotFoundError(f"--data_dir {args.data_dir!r} does not exist; pass the folder holding the data, or "
                                "leave it out to use the folder saved in the checkpoint.")
    results = [checkpoint_word_weights(path, split=args.split, layer=args.layer, direction=args.direction,
                                       limit=args.limit, data_dir=args.data_dir, label=label)
               for path, label in zip(args.ckpt_path, checkpoint_labels(args.ckpt_path))]
    for result in results:
        if not len(result.frequent(args.min_count)):
            raise ValueError(f"No token of {result.label} is read {args.min_count} times in the {args.split} split; "
                             "lower --min_count or raise --limit.")
        print(summary_line(result, args.min_count), flush=True)
    draw(results, args.split, args.min_count, args.top, args.output)
    return results


def summary_line(result: WordWeights, min_count: int) -> str:
    """``<label>: mean σ(x') 0.497, z 0.51, l 0.25; '.' ranks 11 of 2,000 tokens (lowest first)``."""
    rank = result.rank_of(FULL_STOP, min_count)
    stop = result.tokens.index(FULL_STOP) if rank else -1
    where = (f"'{FULL_STOP}' {float(result.word_weight[stop]):.3f}, ranked {rank[0]:,} of {rank[1]:,} tokens (lowest "
             "first)" if rank else
             f"'{FULL_STOP}' is not among its {len(result.frequent(min_count)):,} tokens read {min_count}+ times")
    m = result.means
    return (f"{result.label}: mean word weight σ(x') {m['word_weight']:.3f}, content weight z {m['content_weight']:.3f}, "
            f"gate l {m['gate']:.3f}; σ(x') < {NEAR_ZERO:g} in {100 * result.near_zero:.2f}% of steps x units; "
            f"{where}")


def draw(results: List[WordWeights], split: str, min_count: int, top: int, output: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(8.5, (0.22 * 2 * top + 1.6) * len(results)), squeeze=False)
    for ax, result in zip(axes[:, 0], results):
        ranked = result.ranked(min_count)
        low, high = ranked[:top], ranked[-top:] if len(ranked) > top else []
        high = [i for i in high if i not in low]
        shown = low + high
        values = result.word_weight[shown].numpy()
        colours = ["#4c72b0"] * len(low) + ["#dd8452"] * len(high)
        ax.barh(range(len(shown)), values, color=colours)
        ax.set_yticks(range(len(shown)), [f"{result.tokens[i]!r} ({int(result.counts[i]):,})" for i in shown],
                      fontsize=7)
        ax.invert_yaxis()
        mean = result.means["word_weight"]
        ax.axvline(mean, color="black", linewidth=0.8, linestyle="--", label=f"mean over all steps {mean:.3f}")
        spread = values.max() - values.min()
        ax.set_xlim(max(0.0, values.min() - 0.15 * spread - 1e-3), min(1.0, values.max() + 0.15 * spread + 1e-3))
        ax.set_xlabel("mean word weight σ(x') over the steps reading the token and the hidden units", fontsize=8)
        ax.legend(fontsize=7, loc="lower right")
        ax.set_title(summary_line(result, min_count).replace("; ", "\n"), fontsize=8)
    fig.suptitle(f"CARU §2.2: the {top} lowest (blue) and highest (orange) word weights among tokens read "
                 f"{min_count}+ times, {split} split", fontsize=10)
    save_figure(fig, output)
