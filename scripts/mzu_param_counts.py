"""Parameter counts of the MZU+DT character language models in the paper's PTB setting (Meng et al., AAAI 2020, Table 1).

Setting: vocabulary 50 (PTB characters incl. line end), embedding 50 × 256,
one recurrent layer of hidden 800 with filter size 1000, 4 zones, transition
depth 1 with the M-functions shared across depth (as the paper does for PTB),
capMZU with J = 2 capsules, layer normalisation on (the paper applies it),
output softmax 800 → 50 (weights and bias). The unshared count and GRU+DT are
printed beside for reference::

    python scripts/mzu_param_counts.py
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Dict, List, Tuple

from torch import nn

from lit_rnncells.cells import GRUDT, CapMZU, GcnMZU, RecurrentCell, SatMZU
from lit_rnncells.nn import Recurrent

VOCAB, EMBED, HIDDEN, FILTER, ZONES = 50, 256, 800, 1000, 4
PAPER = {"satMZU+DT": "6.5M", "gcnMZU+DT": "6.4M", "capMZU+DT": "7.2M", "GRU+DT": "-"}


class CharLM(nn.Module):
    """Embedding → one Recurrent layer → softmax layer: the counted model."""

    def __init__(self, cell: Callable[[int, int], RecurrentCell]) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, EMBED)
        self.rnn = Recurrent(cell, EMBED, HIDDEN)
        self.decoder = nn.Linear(HIDDEN, VOCAB)


def count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def cells(shared: bool) -> Dict[str, Callable[[int, int], RecurrentCell]]:
    mzu = dict(zones=ZONES, filter_size=FILTER, transition_depth=1, share_transition=shared, layer_norm=True)
    return {"satMZU+DT": partial(SatMZU, **mzu), "gcnMZU+DT": partial(GcnMZU, **mzu),
            "capMZU+DT": partial(CapMZU, capsules=2, routing_iterations=3, **mzu),
            "GRU+DT": partial(GRUDT, transition_depth=1, share_transition=shared)}


def rows() -> List[Tuple[str, int, int, int, str]]:
    """(model, shared total, of which the recurrent cell, unshared total, paper)."""
    out = []
    for (name, shared), unshared in zip(cells(True).items(), cells(False).values()):
        lm = CharLM(shared)
        out.append((name, count(lm), count(lm.rnn), count(CharLM(unshared)), PAPER[name]))
    return out


def main() -> None:
    print(f"PTB char LM: vocab {VOCAB}, embedding {EMBED}, hidden {HIDDEN}, filter {FILTER}, {ZONES} zones, "
          f"L = 1, layer norm; embedding + softmax = {VOCAB * EMBED + HIDDEN * VOCAB + VOCAB:,}")
    print(f"{'model':<10} {'ours (shared, paper setting)':>29} {'of which cell':>14} {'ours unshared':>14} "
          f"{'paper':>6}")
    for name, total, cell, unshared, paper in rows():
        print(f"{name:<10} {total:>29,} {cell:>14,} {unshared:>14,} {paper:>6}")


if __name__ == "__main__":
    main()
