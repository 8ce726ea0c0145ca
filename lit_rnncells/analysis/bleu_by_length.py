"""MC-RNN Fig. 4 (Xu et al., AAAI 2019 §5.5): corpus BLEU by source-sentence length, checkpoints side by side.

``python -m lit_rnncells.analysis bleu-by-length --ckpt_path base.ckpt mcrnn.ckpt --split test
--buckets 10,20,30,40 [--beam_size 5] [--limit N] [--data_dir DIR] --output b.png``

Each checkpoint decodes the split's sources with its own tokenizers through the task's predict path
(:meth:`~lit_rnncells.tasks.Seq2Seq.predict_step`, the decoder of ``test`` / ``predict``); the sentences
are put in buckets by their source length in whitespace-separated words (edges ``a,b,c`` give the
buckets ≤a, a+1…b, b+1…c, >c, so every sentence is in exactly one), and each bucket is scored with corpus
sacreBLEU (:func:`lit_rnncells.metrics.sacrebleu_corpus`) against the detokenised references. The data
come from the DataModule hyperparameters saved in the checkpoint (``--data_dir`` / ``--limit`` override
them); every checkpoint must be evaluated on the same sentences.
"""
from __future__ import annotations

import argparse
import bisect
import math
from pathlib import Path
from typing import Any, Dict, List, Sequence

import torch

from .. import metrics
from .common import checkpoint_datamodule, checkpoint_labels, figure, load_task, save_figure
from ..data.translation import TranslationDataModule
from ..tasks.seq2seq import Seq2Seq

SPLITS = ("valid", "test")


def parse_edges(text: str) -> List[int]:
    """Bucket edges ``"10,20,30"`` → ``[10, 20, 30]``: positive, strictly increasing integers."""
    try:
        edges = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--buckets must be comma-separated integers such as 10,20,30,40, got {text!r}.") from None
    if not edges or edges[0] < 1 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"--buckets must be positive, strictly increasing word counts such as 10,20,30,40, "
                         f"got {text!r}.")
    return edges


def bucket_labels(edges: Sequence[int]) -> List[str]:
    """Names of the ``len(edges) + 1`` buckets: ``≤a``, ``a+1–b``, …, ``>last``."""
    labels = [f"≤{edges[0]}"]
    labels += [f"{a + 1}–{b}" for a, b in zip(edges, edges[1:])]
    return labels + [f">{edges[-1]}"]


def assign_buckets(lengths: Sequence[int], edges: Sequence[int]) -> List[int]:
    """The bucket of each length: 0 for ≤ edges[0], i for edges[i-1] < n ≤ edges[i], len(edges) beyond."""
    return [bisect.bisect_left(edges, n) for n in lengths]


def _datamodule(path: str, checkpoint: Dict[str, Any], data_dir: str | None, limit: int | None) -> Any:
    if not checkpoint.get("datamodule_hyper_parameters") or checkpoint.get("TranslationDataModule") is None:
        raise ValueError(f"{path!r} holds no TranslationDataModule settings; pass a Seq2Seq checkpoint that fit wrote "
                         "with lit_rnncells.data.TranslationDataModule.")
    return checkpoint_datamodule(path, checkpoint, data_dir, expected=TranslationDataModule, predict_file=None,
                                 **({"limit": limit} if limit is not None else {}))


def decode_split(model: Any, dm: Any, split: str, batch_size: int) -> List[str]:
    """The detokenised best hypothesis of every source of ``split``, in corpus order (``predict_step``)."""
    data = dm.split(split)
    order = sorted(range(len(data["source"])), key=lambda i: len(data["source"][i]))
    texts: Dict[int, str] = {}
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            batch = dm.collate(data, order[start:start + batch_size], False)
            texts.update({r["index"]: r["text"] for r in model.predict_step(batch, 0)})
    return [texts[i] for i in range(len(order))]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ckpt_path", nargs="+", required=True, help="Seq2Seq checkpoints to compare (two or more)")
    parser.add_argument("--split", choices=SPLITS, default="test", help="which split to decode (default test)")
    parser.add_argument("--buckets", default="10,20,30,40", help="bucket edges in source words (default 10,20,30,40)")
    parser.add_argument("--beam_size", type=int, default=5, help="beam size (1: greedy; default 5)")
    parser.add_argument("--limit", type=int, default=None,
                        help="only the first N sentences (default: the checkpoint's data limit, if any)")
    parser.add_argument("--data_dir", default=None, help="corpus folder (default: the one saved in the checkpoint)")
    parser.add_argument("--batch_size", type=int, default=64, help="sentences decoded at once (default 64)")
    parser.add_argument("--output", required=True, help="where to write the PNG")


@figure("bleu-by-length", "MC-RNN Fig. 4: corpus BLEU by source-length bucket, checkpoints side by side.",
        add_arguments)
def run(args: argparse.Namespace) -> Dict[str, Any]:
    """Decode, bucket and score; returns the bucket ``labels``, per-sentence ``lengths`` and ``buckets``, the
    ``counts`` per bucket, and per checkpoint label its ``bleu`` per bucket (NaN when empty) and ``overall``."""
    edges = parse_edges(args.buckets)
    if args.beam_size < 1 or args.batch_size < 1 or (args.limit is not None and args.limit < 1):
        raise ValueError("--beam_size, --batch_size and --limit must be positive integers.")
    if args.data_dir is not None and not Path(args.data_dir).expanduser().is_dir():
        raise FileNotFoundError(f"--data_dir {args.data_dir!r} does not exist; pass the folder holding the corpus "
                                "files, or leave it out to use the folder saved in the checkpoint.")
    labels = bucket_labels(edges)
    corpus = None
    result: Dict[str, Any] = {"labels": labels, "bleu": {}, "overall": {}}
    for path, label in zip(args.ckpt_path, checkpoint_labels(args.ckpt_path)):
        model, checkpoint = load_task(path, Seq2Seq)
        dm = _datamodule(path, checkpoint, args.data_dir, args.limit)
        model.set_tokenizers(dm.source_tokenizer, dm.target_tokenizer)
        model.configure_decoding(beam_size=args.beam_size, n_best=1)
        data = dm.split(args.split)
        sentences = (list(data["source_text"]), list(data["target_text"]))
        if corpus is None:
            corpus = sentences
            lengths = [len(s.split()) for s in corpus[0]]
            buckets = assign_buckets(lengths, edges)
            refs = [dm.target_tokenizer.detokenize(t) for t in corpus[1]]
            members = [[i for i, b in enumerate(buckets) if b == k] for k in range(len(labels))]
            result.update(lengths=lengths, buckets=buckets, counts=[len(m) for m in members])
        elif sentences != corpus:
            raise ValueError(f"{path!r} evaluates other {args.split} sentences than {args.ckpt_path[0]!r}; compare "
                             "checkpoints of the same corpus and direction (or set --data_dir / --limit).")
        hyps = decode_split(model, dm, args.split, args.batch_size)
        name = label  # two runs with the same folder/file name are told apart by the folders above
        while name in result["bleu"]:  # the same checkpoint given twice
            name += "'"
        result["bleu"][name] = [metrics.sacrebleu_corpus([hyps[i] for i in m], [refs[i] for i in m])[0] if m
                                else math.nan for m in members]
        result["overall"][name] = metrics.sacrebleu_corpus(hyps, refs)[0]
        print(summary_line(result, name), flush=True)
    draw(result, args.split, args.beam_size, args.output)
    result["output"] = args.output
    return result


def summary_line(result: Dict[str, Any], name: str) -> str:
    """``<label>: BLEU ≤10 2.43 (n 1,963), 11–20 2.10 (n 2,527), ...; all 1.82``: one checkpoint's numbers."""
    buckets = ", ".join(f"{label} {'–' if math.isnan(bleu) else f'{bleu:.2f}'} (n {n:,})"
                        for label, bleu, n in zip(result["labels"], result["bleu"][name], result["counts"]))
    return f"{name}: BLEU {buckets}; all {result['overall'][name]:.2f}"


TITLE_NAMES = 110
"""Up to this many characters the title names the checkpoints too; longer, the legend alone names them."""


def draw(result: Dict[str, Any], split: str, beam_size: int, output: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    labels, runs = result["labels"], list(result["bleu"])
    width = 0.8 / len(runs)
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(labels) + 2.0), 4.5))
    for j, name in enumerate(runs):
        values = np.array(result["bleu"][name], dtype=float)
        bars = ax.bar(x - 0.4 + width * (j + 0.5), np.nan_to_num(values), width,
                      label=f"{name} (all: {result['overall'][name]:.2f})")
        ax.bar_label(bars, labels=["–" if math.isnan(v) else f"{v:.1f}" if v >= 10 else f"{v:.2f}"
                                           for v in values], fontsize=7, padding=1)
    ax.set_xticks(x, [f"{label}\nn={n}" for label, n in zip(labels, result["counts"])])
    ax.set_xlabel("source length (words); n = sentences in the bucket")
    ax.set_ylabel("corpus sacreBLEU")
    ax.margins(y=0.15)
    decoder = "greedy" if beam_size == 1 else f"beam {beam_size}"
    names = " vs ".join(runs)
    ax.set_title(f"BLEU by source length (MC-RNN Fig. 4), {split} split, {decoder}"
                 + (f"\n{names}" if len(names) <= TITLE_NAMES else ""), fontsize=10)
    ax.legend(fontsize=8, title="checkpoint (overall BLEU)", title_fontsize=8)
    save_figure(fig, output)
