"""Parameter counts of the MZU+DT character language models in the paper's settings (Meng, Zhang, Liu & Zhou,
*Multi-Zone Unit for Recurrent Neural Networks*, AAAI 2020), beside the sizes its Table 1 (PTB) and Table 2 (text8)
give.

The counted model: the characters' embedding (256), one recurrent layer, the softmax layer (weights and bias);
4 zones, transition depth 1, capMZU with J = 2 output capsules, layer normalisation on (the paper applies it).

- PTB (Table 1): 50 characters (with the line end), hidden 800, filter 1000, the M-functions shared across depth
  ("for Penn Treebank"), so the unshared count is printed beside it.
- text8 (Table 2): 27 symbols ("only alphabets and spaces"), hidden 1,536, filter 3,072; the paper shares the
  M-functions on PTB only, so not shared here, the shared count beside it.

GRU+DT is printed for reference (the paper gives no size for it)::

    python scripts/mzu_param_counts.py
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from functools import partial
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

from lit_rnncells.cells import GRUDT, CapMZU, GcnMZU, RecurrentCell, SatMZU
from lit_rnncells.nn import Recurrent
from lit_rnncells.nn.parameters import count_parameters as count

EMBED, ZONES = 256, 4


@dataclass(frozen=True)
class Setting:
    """One of the paper's character LM settings and the sizes its table gives (in millions)."""

    name: str
    vocab: int
    hidden: int
    filter: int
    shared: bool
    """Whether the paper shares the M-functions across depth in this setting."""
    paper: Dict[str, Optional[float]]


PTB = Setting("PTB (Table 1)", vocab=50, hidden=800, filter=1000, shared=True,
              paper={"satMZU+DT": 6.5, "gcnMZU+DT": 6.4, "capMZU+DT": 7.2, "GRU+DT": None})
TEXT8 = Setting("text8 (Table 2)", vocab=27, hidden=1536, filter=3072, shared=False,
                paper={"satMZU+DT": 32.0, "gcnMZU+DT": 32.0, "capMZU+DT": 41.0, "GRU+DT": None})
SETTINGS = (PTB, TEXT8)


class CharLM(nn.Module):
    """Embedding → one Recurrent layer → softmax layer: the counted model."""

    def __init__(self, cell: Callable[[int, int], RecurrentCell], vocab: int, hidden: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, EMBED)
        self.rnn = Recurrent(cell, EMBED, hidden)
        self.decoder = nn.Linear(hidden, vocab)


def cells(shared: bool, filter_size: int) -> Dict[str, Callable[[int, int], RecurrentCell]]:
    mzu = dict(zones=ZONES, filter_size=filter_size, transition_depth=1, share_transition=shared, layer_norm=True)
    return {"satMZU+DT": partial(SatMZU, **mzu), "gcnMZU+DT": partial(GcnMZU, **mzu),
            "capMZU+DT": partial(CapMZU, capsules=2, routing_iterations=3, **mzu),
            "GRU+DT": partial(GRUDT, transition_depth=1, share_transition=shared)}


def model_size(setting: Setting, name: str, shared: bool) -> Tuple[int, int]:
    """(the model's parameters, of which the recurrent layer's) for one cell, built on the meta device."""
    with torch.device("meta"):
        lm = CharLM(cells(shared, setting.filter)[name], setting.vocab, setting.hidden)
    return count(lm), count(lm.rnn)


def rows(setting: Setting) -> List[Tuple[str, int, int, int, Optional[float]]]:
    """(model, total as the paper sets it up, of which the recurrent layer, total with the other sharing, paper)."""
    out = []
    for name, paper in setting.paper.items():
        total, cell = model_size(setting, name, setting.shared)
        other, _ = model_size(setting, name, not setting.shared)
        out.append((name, total, cell, other, paper))
    return out


def main(argv: Optional[List[str]] = None) -> None:
    argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0]).parse_args(argv)  # no options
    for setting in SETTINGS:
        sharing = "shared" if setting.shared else "not shared"
        other = "not shared" if setting.shared else "shared"
        print(f"{setting.name}: vocab {setting.vocab}, embedding {EMBED}, hidden {setting.hidden}, filter "
              f"{setting.filter}, {ZONES} zones, L = 1, layer norm, M-functions {sharing} across depth (the "
              f"paper's setting); embedding + softmax = "
              f"{setting.vocab * EMBED + setting.hidden * setting.vocab + setting.vocab:,}")
        print(f"{'model':<10} {'ours (' + sharing + ')':>20} {'of which cell':>14} {'ours ' + other:>16} "
              f"{'paper':>7} {'ours / paper':>13}")
        for name, total, cell, alternative, paper in rows(setting):
            paper_text = f"{paper:g}M" if paper else "-"
            ratio = f"{total / (paper * 1e6):.3f}" if paper else "-"
            print(f"{name:<10} {total:>20,} {cell:>14,} {alternative:>16,} {paper_text:>7} {ratio:>13}")
        print()


if __name__ == "__main__":
    main()
