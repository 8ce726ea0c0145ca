"""MZU Fig. 3 (Meng et al., AAAI 2020, "Visualization Analysis"): the relevance map between the characters of a sentence.

``python -m lit_rnncells.analysis relevance-map --ckpt_path mzu.ckpt --text "the cat sat" --output r.png``

The relevance of an earlier character j to character t (j < t) is the cosine between the candidate
activation h~_t (eq. 2, the transformation at step t) and the hidden state h_j after reading character j;
per zone it is the cosine between the zone's parts of both vectors (:meth:`~lit_rnncells.cells.MZU.zone_slices`,
the paper's Fig. 3c). Both come from the cell through
:meth:`~lit_rnncells.cells.MZU.recording_candidates` while the LanguageModel reads the text from the zero
state. With deep transition, ``--depth 0`` (default) is the MZU cell's own candidate, which reads x_t;
``1 … L`` are the transition depths'. One panel overall, one per zone; upper triangle (j ≥ t) left blank.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, List, Optional

import torch
from torch import Tensor
from torch.nn import functional as F

from .common import checkpoint_label, figure, load_task, save_figure
from ..cells.mzu import MZU
from ..cells.registry import available_cells, get_cell
from ..tasks.language_model import LanguageModel


@dataclass
class Relevance:
    """``maps[0]`` overall, ``maps[1 + z]`` zone z: ``(T, T)`` cosines, NaN where j ≥ t."""

    characters: List[str]
    maps: Tensor  # (1 + zones, T, T)
    zones: List[slice]
    depth: int


def candidate_cells() -> List[str]:
    """The registered cells that record a candidate activation (the MZU family)."""
    return [name for name in available_cells() if isinstance(get_cell(name), type) and issubclass(get_cell(name), MZU)]


def relevance(candidates: Tensor, states: Tensor, zones: List[slice]) -> Tensor:
    """Cosines ``(1 + zones, T, T)``: ``[0, t, j] = cos(h~_t, h_j)`` and per zone on its slice, NaN for j ≥ t.

    ``candidates`` and ``states`` are ``(T, d_h)``."""
    steps = candidates.shape[0]
    parts = [slice(None)] + list(zones)
    maps = torch.stack([F.cosine_similarity(candidates[:, None, part], states[None, :, part], dim=-1, eps=1e-12)
                        for part in parts])
    earlier = torch.ones(steps, steps, dtype=torch.bool).tril(-1)
    return maps.masked_fill(~earlier, float("nan"))


def text_ids(model: Any, text: str) -> tuple[List[str], Tensor]:
    """The text's tokens in the model's vocabulary and their ids; one clear error for unknown symbols."""
    vocab = model.vocab
    if vocab is None:
        raise ValueError("The checkpoint holds no vocabulary; pass a LanguageModel checkpoint that fit wrote.")
    if vocab.level != "char":
        raise ValueError(f"The checkpoint's language model is {vocab.level} level; relevance-map needs a "
                         "character-level one (e.g. configs/lm/ptb_char_capmzu_dt.yaml).")
    tokens = vocab.tokenize(text)
    if len(tokens) < 2:
        raise ValueError("--text needs at least 2 characters to relate, e.g. --text \"the cat sat\".")
    unknown = sorted({t for t in tokens if t not in vocab.stoi or t == vocab.unk})
    if unknown:
        known = "".join(sorted(s for s in vocab.symbols if len(s) == 1 and s.isprintable()))
        raise ValueError(f"--text has symbols the model's vocabulary lacks: {unknown}; use only these: {known!r}.")
    return tokens, vocab.encode(tokens)


def relevance_map(model: Any, text: str, *, layer: int = 0, depth: int = 0) -> Relevance:
    """Read ``text`` with a LanguageModel whose ``layer`` holds an MZU and relate its characters."""
    if not 0 <= layer < len(model.rnns):
        raise ValueError(f"--layer must lie in [0, {len(model.rnns) - 1}], got {layer}.")
    cell = model.rnns[layer].module.cell(0, 0)
    if not isinstance(cell, MZU):
        raise ValueError(f"The checkpoint's cell is a {type(cell).__name__}, which records no candidate "
                         f"activation; relevance-map needs one of {', '.join(candidate_cells())}.")
    if not 0 <= depth <= cell.transition_depth:
        raise ValueError(f"--depth must lie in [0, {cell.transition_depth}] (the cell's transition depth), "
                         f"got {depth}.")
    tokens, ids = text_ids(model, text)
    with torch.no_grad(), cell.recording_candidates() as log:
        model(ids.unsqueeze(0))
    candidates = torch.stack([c[0, depth] for c, _ in log]).float()  # (T, d_h)
    states = torch.stack([h[0] for _, h in log]).float()
    shown = [model.vocab.detokenize([t]) if t != model.vocab.space else "_" for t in tokens]
    shown = ["\\n" if s == "\n" else "_" if s == " " else s for s in shown]
    return Relevance(shown, relevance(candidates, states, cell.zone_slices()), cell.zone_slices(), depth)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ckpt_path", required=True, help="a character-level LanguageModel checkpoint of an MZU cell")
    parser.add_argument("--text", required=True, help="the sentence to read, in the corpus's characters")
    parser.add_argument("--layer", type=int, default=0, help="which recurrent layer (default 0)")
    parser.add_argument("--depth", type=int, default=0,
                        help="whose candidate activation: 0 the MZU cell (default), 1 … L its transition depths")
    parser.add_argument("--last", type=int, default=None,
                        help="show only the last N characters as rows (the paper shows 5); default: all")
    parser.add_argument("--output", required=True, help="where to write the PNG")


@figure("relevance-map", "MZU Fig. 3: relevance (cosine of candidate activation and earlier hidden states) "
        "between the characters of a sentence, overall and per zone.", add_arguments)
def run(args: argparse.Namespace) -> Relevance:
    if args.last is not None and args.last < 1:
        raise ValueError(f"--last must be 1 or more, got {args.last}.")
    model, _ = load_task(args.ckpt_path, LanguageModel)
    result = relevance_map(model, args.text, layer=args.layer, depth=args.depth)
    draw(result, checkpoint_label(args.ckpt_path), args.last, args.output)
    return result


def draw(result: Relevance, label: str, last: Optional[int], output: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chars, steps = result.characters, len(result.characters)
    rows = list(range(1 if last is None else max(1, steps - last), steps))  # character 0 has no earlier one
    cols = list(range(rows[-1]))  # every character some shown row can relate to
    panels = result.maps.shape[0]
    ncols = min(panels, 3)
    nrows = -(-panels // ncols)
    cell_w, cell_h = 0.28 * len(cols) + 1.8, 0.28 * len(rows) + 1.4
    fig, axes = plt.subplots(nrows, ncols, figsize=(ncols * cell_w + 1.2, nrows * cell_h + 1.0), squeeze=False)
    shown = result.maps[:, rows][:, :, cols]
    finite = shown[~shown.isnan()]
    low, high = float(finite.min()), float(finite.max())  # one grey scale for all panels, as tight as the data
    if high - low < 1e-6:
        low, high = low - 1e-3, high + 1e-3
    cmap = matplotlib.colormaps["gray"].with_extremes(bad="#dce6f0")  # j ≥ t: no relevance, light blue
    for k, ax in enumerate(axes.flat):
        if k >= panels:
            ax.axis("off")
            continue
        image = ax.imshow(shown[k].numpy(), cmap=cmap, vmin=low, vmax=high, aspect="auto")
        ax.set_xticks(range(len(cols)), [chars[j] for j in cols], fontsize=7)
        ax.set_yticks(range(len(rows)), [chars[t] for t in rows], fontsize=7)
        ax.set_xlabel("earlier character j (hidden state h_j)", fontsize=8)
        ax.set_ylabel("character t (candidate h~_t)", fontsize=8)
        if k == 0:
            ax.set_title("overall", fontsize=9)
        else:
            part = result.zones[k - 1]
            ax.set_title(f"zone {k} (dims {part.start}-{part.stop - 1})", fontsize=9)
        fig.colorbar(image, ax=ax, label="cosine (white: most relevant)")
    fig.suptitle(f"MZU Fig. 3: relevance cos(h~_t, h_j), j < t (depth {result.depth} candidate; blue: j ≥ t)"
                 f"\n{label}", fontsize=10)
    save_figure(fig, output)
