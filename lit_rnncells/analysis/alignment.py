"""Seq2seq attention alignment (Bahdanau et al. 2015, Fig. 3): which source subwords each output subword reads.

``python -m lit_rnncells.analysis alignment --ckpt_path s2s.ckpt --source "ein mann ..." [--beam_size 1]
--output a.png`` decodes the sentence with the checkpoint's own tokenizers (greedy, or beam search) and
draws the attention weights of every generated subword (rows, the final ``<eos>`` included) over the
source subwords (columns, the source's ``<eos>`` included). The weights come from the decoder through
:meth:`~lit_rnncells.tasks.Seq2Seq.translate`, whose hypotheses carry the attention of every step
(:class:`~lit_rnncells.nn.beam_search.Hypothesis`); each row sums to 1 over the source.
"""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Dict, List, Sequence

import torch

from ..data.subword import EOS_ID, SPECIALS, SubwordTokenizer
from .common import checkpoint_label, datamodule_state, figure, load_task, save_figure
from ..tasks.seq2seq import Seq2Seq


def subword_labels(tokenizer: SubwordTokenizer, ids: Sequence[int]) -> List[str]:
    """Readable tick labels of subword ids: each subword's own text (bytes decoded), a leading space shown
    as ``▁`` (a word start), special tokens by name."""
    labels = []
    for i in ids:
        i = int(i)
        if i < len(SPECIALS):
            labels.append(SPECIALS[i])
            continue
        text = tokenizer.tokenizer.decode([i], skip_special_tokens=False)
        if not text or not text.isprintable() or "\ufffd" in text:  # a control byte or part of a character
            labels.append(tokenizer.tokens([i])[0])  # the byte-level symbol, always printable
        else:
            labels.append("▁" + text[1:] if text.startswith(" ") else text)
    return labels


def source_ids(tokenizer: SubwordTokenizer, text: str) -> List[int]:
    """The source as the model reads it: subword ids then ``<eos>``; one clear error for an empty sentence."""
    ids = tokenizer.encode(" ".join(text.split()))
    if not ids:
        raise ValueError("The source sentence is empty; pass the sentence to analyse, e.g. --source \"ein mann ...\".")
    return ids + [EOS_ID]


def translation_tokenizers(checkpoint: Dict[str, Any]) -> tuple[SubwordTokenizer, SubwordTokenizer]:
    """The (source, target) subword tokenizers a TranslationDataModule saved in the checkpoint."""
    state = datamodule_state(checkpoint, "TranslationDataModule")
    return (SubwordTokenizer.from_json(state["source_tokenizer"]),
            SubwordTokenizer.from_json(state["target_tokenizer"]))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ckpt_path", required=True, help="a Seq2Seq checkpoint written by fit")
    parser.add_argument("--source", required=True, help="the source sentence, in the corpus's form")
    parser.add_argument("--beam_size", type=int, default=1, help="1: greedy decoding (default); more: beam search")
    parser.add_argument("--output", required=True, help="where to write the PNG")


@figure("alignment", "Seq2seq attention alignment heatmap (target × source subwords) for one sentence.",
        add_arguments)
def run(args: argparse.Namespace) -> Dict[str, Any]:
    """Decode ``args.source`` and draw its attention; returns the hypothesis, the labels and the weights
    ``(target subwords + <eos>, source subwords + <eos>)``."""
    if args.beam_size < 1:
        raise ValueError(f"--beam_size must be 1 (greedy) or more, got {args.beam_size}.")
    model, checkpoint = load_task(args.ckpt_path, Seq2Seq)
    if model.attention is None:
        raise ValueError(f"{args.ckpt_path} is a Seq2Seq without attention (attention: none), so it has no "
                         "alignment to draw; pass a checkpoint of an attentional model.")
    src_tok, tgt_tok = translation_tokenizers(checkpoint)
    model.set_tokenizers(src_tok, tgt_tok)
    ids = source_ids(src_tok, args.source)
    cfg = dataclasses.replace(model.test_search, beam_size=args.beam_size, n_best=1, return_attention=True)
    source = torch.tensor([ids])
    best = model.translate(source, torch.tensor([len(ids)]), cfg)[0][0]
    weights = best.attention.float()  # (generated tokens incl. <eos>, source length)
    result = {"hypothesis": tgt_tok.detokenize(tgt_tok.decode(best.tokens)),
              "source_tokens": subword_labels(src_tok, ids),
              "target_tokens": subword_labels(tgt_tok, [*best.tokens, EOS_ID]),
              "weights": weights.numpy()}
    draw(result, checkpoint_label(args.ckpt_path), args.beam_size, args.output)
    result["output"] = args.output
    return result


def draw(result: Dict[str, Any], label: str, beam_size: int, output: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    weights, src, tgt = result["weights"], result["source_tokens"], result["target_tokens"]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.42 * len(src) + 2.5), max(3.5, 0.34 * len(tgt) + 2.0)))
    # black = the largest weight of the figure, so diffuse attention stays visible; the colorbar gives the values
    image = ax.imshow(weights, cmap="Greys", vmin=0.0, vmax=max(float(weights.max()), 1e-6), aspect="auto")
    ax.set_xticks(range(len(src)), src, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(tgt)), tgt, fontsize=8)
    ax.set_xlabel("source subword")
    ax.set_ylabel("generated target subword")
    decoder = "greedy" if beam_size == 1 else f"beam {beam_size}"
    ax.set_title(f"Attention alignment (Bahdanau et al. 2015, Fig. 3 style), {decoder}\n{label}", fontsize=10)
    fig.colorbar(image, ax=ax, label="attention weight (row sums to 1)")
    save_figure(fig, output)
