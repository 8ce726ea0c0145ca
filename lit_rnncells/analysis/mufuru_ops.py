"""MuFuRU Fig. 1b (Weissenborn & Rocktäschel, arXiv:1606.03002, §4.1): the average weight of each composition op for each input symbol.

``python -m lit_rnncells.analysis mufuru-ops --ckpt_path logic.ckpt [--split test] --output ops.png``
regenerates the split's formulas from the checkpoint's ``LogicDataModule`` hyperparameters (same seed, same
formulas), runs the ``LogicEvaluator`` over them and reads the op weights p (eq. 3, a softmax over ops per
hidden dimension) of every step through :func:`~lit_rnncells.nn.recording.composition_weights`. A symbol's
row is the mean of p over the hidden dimensions and over every step that reads that symbol, so each row
sums to 1 over the ops.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Dict, List

import torch
from torch import Tensor

from .common import checkpoint_datamodule, checkpoint_label, figure, load_task, save_figure
from ..data.logic import LogicDataModule, PAD, TOKEN_ID, VOCAB, collate
from ..cells.mufuru import MuFuRU
from ..nn.recording import composition_weights
from ..tasks.logic import LogicEvaluator

SPLITS = ("train", "val", "test")


@dataclass
class OpWeights:
    """Rows: input symbols, columns: ops; ``weights[s, j]`` the mean p^j over steps reading symbol s."""

    symbols: List[str]
    ops: List[str]
    weights: Tensor  # (symbols, ops), rows sum to 1
    counts: Tensor  # (symbols,) how many steps read each symbol
    formulas: int


def logic_datamodule(path: str, checkpoint: Dict[str, Any]) -> Any:
    """The ``LogicDataModule`` the checkpoint was trained with, rebuilt from its saved hyperparameters."""
    return checkpoint_datamodule(path, checkpoint, expected=LogicDataModule,
                                 fix="pass a checkpoint of the logic task (configs/logic/*.yaml).")


def symbol_op_weights(model: Any, formulas: List[Any], *, layer: int = 0, batch_size: int = 256) -> OpWeights:
    """Mean op weights per input symbol over ``formulas`` (token-id tensors) of a MuFuRU ``LogicEvaluator``."""
    cell = model.rnn.cell(layer, 0)
    if not isinstance(cell, MuFuRU):
        raise ValueError(f"The checkpoint's layer {layer} cell is a {type(cell).__name__}; mufuru-ops needs a "
                         "MuFuRU checkpoint (configs/logic/mufuru.yaml).")
    n_ops = len(cell.ops)
    sums = torch.zeros(len(VOCAB), n_ops, dtype=torch.float64)
    counts = torch.zeros(len(VOCAB), dtype=torch.long)
    with torch.no_grad():
        for start in range(0, len(formulas), batch_size):
            batch = collate([(f, 0) for f in formulas[start:start + batch_size]])
            tokens, lengths = batch["tokens"], batch["lengths"]
            p = composition_weights(model.rnn, model.embedding(tokens), lengths=lengths, layer=layer)
            per_step = p.mean(-1).double()  # (B, T, ops): mean over hidden dimensions
            real = torch.arange(tokens.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
            ids = tokens[real]
            sums.index_add_(0, ids, per_step[real])
            counts += torch.bincount(ids, minlength=len(VOCAB))
    keep = [i for i, s in enumerate(VOCAB) if s != PAD and counts[i] > 0]
    weights = (sums[keep] / counts[keep].unsqueeze(1)).float()
    return OpWeights([VOCAB[i] for i in keep], list(cell.ops), weights, counts[keep], len(formulas))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ckpt_path", required=True, help="a LogicEvaluator checkpoint of a MuFuRU, written by fit")
    parser.add_argument("--split", choices=SPLITS, default="test",
                        help="the formulas to average over, regenerated from the checkpoint's data settings "
                             "(default: test)")
    parser.add_argument("--layer", type=int, default=0, help="which recurrent layer's MuFuRU (default 0)")
    parser.add_argument("--output", required=True, help="where to write the PNG")


@figure("mufuru-ops", "MuFuRU Fig. 1b: average weight of each composition op per input symbol (logic task).",
        add_arguments)
def run(args: argparse.Namespace) -> OpWeights:
    model, checkpoint = load_task(args.ckpt_path, LogicEvaluator)
    if not 0 <= args.layer < model.rnn.num_layers:
        raise ValueError(f"--layer must lie in [0, {model.rnn.num_layers - 1}], got {args.layer}.")
    data = logic_datamodule(args.ckpt_path, checkpoint)
    formulas = [torch.tensor([TOKEN_ID[t] for t in f]) for f in data.splits[args.split]]
    result = symbol_op_weights(model, formulas, layer=args.layer)
    draw(result, checkpoint_label(args.ckpt_path), args.split, args.output)
    return result


def draw(result: OpWeights, label: str, split: str, output: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    weights = result.weights.numpy()
    fig, ax = plt.subplots(figsize=(1.0 * len(result.ops) + 3.0, 0.45 * len(result.symbols) + 2.0))
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=max(float(weights.max()), 1e-6), aspect="auto")
    ax.set_xticks(range(len(result.ops)), result.ops)
    ax.set_yticks(range(len(result.symbols)),
                  [f"{s} ({int(n)})" for s, n in zip(result.symbols, result.counts)], fontsize=8)
    ax.set_xlabel("composition op")
    ax.set_ylabel("input symbol (steps reading it)")
    threshold = 0.6 * float(weights.max())
    for i in range(weights.shape[0]):
        for j in range(weights.shape[1]):
            ax.text(j, i, f"{weights[i, j]:.2f}", ha="center", va="center", fontsize=7,
                    color="black" if weights[i, j] > threshold else "white")
    ax.set_title(f"MuFuRU Fig. 1b: average op weight per input symbol\n{label}, {split} split "
                 f"({result.formulas} formulas)", fontsize=10)
    fig.colorbar(image, ax=ax, label="mean op weight p (each row sums to 1)")
    save_figure(fig, output)
