"""The table of cells the contract test runs: every registered cell must appear.

Cells constructible as ``Cell(input_size, hidden_size)`` are covered by their
registered name automatically; cells that need options (wrappers, variants)
add an entry to ``EXTRA_CASES`` mapping a readable id to a cell factory.
"""
from __future__ import annotations

import inspect
from functools import partial
from typing import Callable, Dict

from lit_rnncells.cells import RecurrentCell, available_cells, get_cell

EXTRA_CASES: Dict[str, Callable[[int, int], RecurrentCell]] = {
    "MuFuRU(keep,replace)": partial(get_cell("MuFuRU"), ops=("keep", "replace")),
    "MultiChannel(GRU,n=3)": partial(get_cell("MultiChannel"), cell=get_cell("GRU"), block_size=3),
    "MultiChannel(LSTM,n=4)": partial(get_cell("MultiChannel"), cell="lstm", block_size=4),
    "SatMZU(L=2,shared,LN,regular_gate)": partial(get_cell("SatMZU"), transition_depth=2, share_transition=True,
                                                  layer_norm=True, regular_gate=True),
    "GcnMZU(L=0,regular_trans,lambda=0)": partial(get_cell("GcnMZU"), transition_depth=0, regular_trans=True,
                                                  disagreement_weight=0.0),
    "CapMZU(zones=2,J=4,T=1,LN)": partial(get_cell("CapMZU"), zones=2, capsules=4, routing_iterations=1,
                                          layer_norm=True),
    "GRUDT(L=2,shared)": partial(get_cell("GRUDT"), transition_depth=2, share_transition=True),
    "GRUDT(L=1,LN)": partial(get_cell("GRUDT"), transition_depth=1, layer_norm=True),
}


def _needs_options(cls: type) -> bool:
    params = list(inspect.signature(cls.__init__).parameters.values())[3:]
    return any(p.default is inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD for p in params)


def cell_cases() -> Dict[str, Callable[[int, int], RecurrentCell]]:
    cases: Dict[str, Callable[[int, int], RecurrentCell]] = {}
    for name in available_cells():
        cls = get_cell(name)
        if not _needs_options(cls):
            cases[name] = cls
    cases.update(EXTRA_CASES)
    return cases


def uncovered_cells() -> list[str]:
    """Registered cells that no case builds (must be empty)."""
    built = set()
    for factory in cell_cases().values():
        built.add(type(factory(3, 4)).__name__)
    return [n for n in available_cells() if n not in built]
