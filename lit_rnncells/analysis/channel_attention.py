"""MC-RNN Fig. 3 (Xu et al., AAAI 2019 §5.4): the attention α over channels for every token of a sentence.

``python -m lit_rnncells.analysis channel-attention --ckpt_path run.ckpt --text "the stock market ..."
[--layer 0] [--direction 0] --output c.png`` reads α^k_t (eq. 5: softmax over the channels k = 1 … n − 1
at step t) from a :class:`~lit_rnncells.cells.MultiChannel` layer through the cell's public
:func:`~lit_rnncells.cells.mcrnn.channel_attention`, and draws channels × tokens, darker = larger, as
the paper's figure does. Two kinds of checkpoint:

* a :class:`~lit_rnncells.tasks.LanguageModel` (e.g. ``configs/lm/ptb_word_mcrnn3.yaml``): the text is
  split into the LM vocabulary's tokens (unknown words read as ``<unk>``); ``--layer`` picks the layer,
  whose input is the layers below run in eval mode;
* a :class:`~lit_rnncells.tasks.Seq2Seq` whose encoder cell is MultiChannel (``configs/seq2seq/*mcrnn3*``):
  the text is the source sentence, through the checkpoint's source subword tokenizer (``<eos>`` appended,
  as the model reads it); ``--layer`` / ``--direction`` (0 forward, 1 backward) pick the encoder cell.

Each column of α sums to 1 over the channels.
"""
from __future__ import annotations

import argparse
from typing import Any, Dict, List, Tuple

import torch
from torch import Tensor

from ..cells.mcrnn import MultiChannel, channel_attention
from ..data.checkpoint_state import read_checkpoint
from .alignment import source_ids, subword_labels, translation_tokenizers
from .common import checkpoint_label, figure, load_task, save_figure, task_class
from ..tasks.language_model import LanguageModel
from ..tasks.seq2seq import Seq2Seq


def _not_mc(what: str, cell: Any) -> ValueError:
    return ValueError(f"{what} is a {type(cell).__name__}, not a MultiChannel (MC-RNN) cell; pass a checkpoint "
                      "trained with cell lit_rnncells.cells.MultiChannel, e.g. configs/lm/ptb_word_mcrnn3.yaml or "
                      "configs/seq2seq/iwslt14_de_en_mcrnn3.yaml.")


def _check_layer(layer: int, layers: int, what: str) -> None:
    if not 0 <= layer < layers:
        raise ValueError(f"--layer {layer} does not exist: the {what} has {layers} layer(s), numbered 0 to "
                         f"{layers - 1}.")


def lm_attention(model: Any, text: str, layer: int) -> Tuple[List[str], Tensor]:
    """Tokens of ``text`` in the LM vocabulary and α ``(T, channels)`` of LM layer ``layer``."""
    if model.vocab is None:
        raise ValueError("The language-model checkpoint holds no vocabulary; pass a checkpoint that fit wrote.")
    _check_layer(layer, len(model.rnns), "language model")
    recurrent = model.rnns[layer].module
    cell = recurrent.cell(0, 0)
    if not isinstance(cell, MultiChannel):
        raise _not_mc(f"Layer {layer} of this language model's cell", cell)
    tokens = model.vocab.tokenize(text)
    if not tokens:
        raise ValueError("The text is empty; pass the sentence to analyse, e.g. --text \"the stock market fell\".")
    ids = model.vocab.encode(tokens).unsqueeze(0)
    with torch.no_grad():
        x = model.embedding(ids)  # eval mode: every dropout is off
        for rnn in model.rnns[:layer]:
            x = rnn(x)[0]
        alpha = channel_attention(recurrent, x)[0]
    unk = model.vocab.unk
    shown = [t if t in model.vocab.stoi or unk is None else f"{t} ({unk})" for t in tokens]
    return shown, alpha


def seq2seq_attention(model: Any, checkpoint: Dict[str, Any], text: str, layer: int, direction: int
                      ) -> Tuple[List[str], Tensor]:
    """Source subwords of ``text`` (``<eos>`` included) and α ``(S, channels)`` of one encoder cell."""
    _check_layer(layer, model.encoder.num_layers, "encoder")
    cell = model.encoder.cell(layer, direction)
    if not isinstance(cell, MultiChannel):
        raise _not_mc(f"The encoder cell (layer {layer}, direction {direction})", cell)
    src_tok, _ = translation_tokenizers(checkpoint)
    ids = source_ids(src_tok, text)
    with torch.no_grad():
        x = model.source_embedding(torch.tensor([ids]))
        alpha = channel_attention(model.encoder, x, layer=layer, direction=direction)[0]
    return subword_labels(src_tok, ids), alpha


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ckpt_path", required=True,
                        help="an MC-RNN checkpoint: a LanguageModel or a Seq2Seq with a MultiChannel encoder")
    parser.add_argument("--text", "--source", dest="text", required=True,
                        help="the sentence (LM: words of its vocabulary; Seq2Seq: the source sentence)")
    parser.add_argument("--layer", type=int, default=0, help="which recurrent layer (default 0, the first)")
    parser.add_argument("--direction", type=int, choices=(0, 1), default=0,
                        help="Seq2Seq encoder direction: 0 forward (default), 1 backward")
    parser.add_argument("--output", required=True, help="where to write the PNG")


@figure("channel-attention", "MC-RNN Fig. 3: attention over channels (α, eq. 5) for every token of a sentence.",
        add_arguments)
def run(args: argparse.Namespace) -> Dict[str, Any]:
    """Draw α for ``args.text``; returns the token labels and ``alpha`` ``(tokens, channels)``."""
    cls = task_class(read_checkpoint(args.ckpt_path), args.ckpt_path)
    if not issubclass(cls, (LanguageModel, Seq2Seq)):
        raise ValueError(f"{args.ckpt_path!r} holds a {cls.__name__}; this figure needs a LanguageModel or Seq2Seq "
                         "checkpoint with a MultiChannel (MC-RNN) cell.")
    model, checkpoint = load_task(args.ckpt_path)
    if isinstance(model, LanguageModel):
        if args.direction != 0:
            raise ValueError("A language model runs forward only; drop --direction or pass 0.")
        tokens, alpha = lm_attention(model, args.text, args.layer)
        where = f"LM layer {args.layer}"
    else:
        tokens, alpha = seq2seq_attention(model, checkpoint, args.text, args.layer, args.direction)
        where = f"encoder layer {args.layer}, {'backward' if args.direction else 'forward'}"
    result = {"tokens": tokens, "alpha": alpha.float().numpy(), "where": where}
    draw(result, checkpoint_label(args.ckpt_path), args.output)
    result["output"] = args.output
    return result


def draw(result: Dict[str, Any], label: str, output: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    alpha, tokens = result["alpha"].T, result["tokens"]  # (channels, tokens)
    channels = alpha.shape[0]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.5 * len(tokens) + 2.5), 1.0 + 0.55 * channels + 1.6))
    image = ax.imshow(alpha, cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
    if len(tokens) <= 40:  # the values themselves, as the figure is read cell by cell
        for k in range(channels):
            for t in range(len(tokens)):
                ax.text(t, k, f"{alpha[k, t]:.2f}", ha="center", va="center", fontsize=6,
                        color="white" if alpha[k, t] > 0.5 else "black")
    ax.set_xticks(range(len(tokens)), tokens, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(channels), [f"channel {k + 1}" for k in range(channels)], fontsize=8)
    ax.set_xlabel("token")
    ax.set_ylabel("MC-RNN channel")
    ax.set_title(f"Attention over channels α (MC-RNN Fig. 3), {result['where']}\n{label}", fontsize=10)
    fig.colorbar(image, ax=ax, label="α (sums to 1 over channels)")
    save_figure(fig, output)
