"""The model zoo: every recurrent cell, and a registry to build them by name."""
from .base import CellFactory, RecurrentCell, State
from .registry import UnknownCellError, available_cells, build_cell, get_cell, register_cell
from .classic import GRU, LSTM, MGU, Elman
from .caru import CARU
from .mufuru import PAPER_OPS, MuFuRU, available_mufuru_ops, register_mufuru_op
from .mzu import GRUDT, MZU, CapMZU, GcnMZU, SatMZU
from .mcrnn import MultiChannel, channel_attention

__all__ = [
    "CellFactory", "RecurrentCell", "State",
    "UnknownCellError", "available_cells", "build_cell", "get_cell", "register_cell",
    "Elman", "GRU", "LSTM", "MGU", "CARU", "MuFuRU",
    "PAPER_OPS", "available_mufuru_ops", "register_mufuru_op",
    "MZU", "SatMZU", "GcnMZU", "CapMZU", "GRUDT",
    "MultiChannel", "channel_attention",
]
