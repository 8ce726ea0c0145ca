"""torch.nn.RNN / GRU / LSTM weights in a ``Recurrent`` layer: which cell runs torch's equations, and the
names torch gives each layer's and direction's weights (``weight_ih_l1_reverse`` is ``cells.3.weight_ih`` of a
bidirectional layer). :class:`~lit_rnncells.nn.recurrent.Recurrent` renames them when it loads a state dict, and
builds itself from a torch module in :meth:`~lit_rnncells.nn.recurrent.Recurrent.from_torch`."""
from __future__ import annotations

import re
from typing import Dict, MutableMapping, Optional, Sequence, Tuple

from torch import Tensor, nn

from ..cells.base import RecurrentCell
from ..cells.classic import GRU, LSTM, Elman

CELL_OF_MODE: Dict[str, type] = {"RNN_TANH": Elman, "GRU": GRU, "LSTM": LSTM}
"""torch.nn.RNNBase's ``mode`` -> the cell with its equations, gate order and parameter names."""

_TORCH_NAME = re.compile(r"^(weight_ih|weight_hh|bias_ih|bias_hh)_l(\d+)(_reverse)?$")


def cell_for(module: nn.Module) -> type:
    """The cell that runs ``module``'s equations (a torch.nn.RNN, GRU or LSTM), or a ``ValueError`` naming what
    it has that no cell here runs."""
    name = type(module).__name__
    if not isinstance(module, nn.RNNBase):
        raise TypeError(f"Recurrent.from_torch takes a torch.nn.RNN, GRU or LSTM, got {name}.")
    if module.mode == "RNN_RELU":
        raise ValueError("torch.nn.RNN(nonlinearity='relu') has no cell here (Elman is the tanh RNN); "
                         "use nonlinearity='tanh' or write a ReLU cell (README, Adding a cell).")
    if module.mode not in CELL_OF_MODE:
        raise ValueError(f"{name} runs mode {module.mode!r}, which no cell here runs; pass a torch.nn.RNN, GRU "
                         "or LSTM.")
    if getattr(module, "proj_size", 0):
        raise ValueError(f"The LSTM has proj_size={module.proj_size}; LSTM here has no projection, so load one "
                         "built with proj_size=0.")
    if not module.bias:
        raise ValueError(f"The {name} has bias=False; every cell here has biases, so load one built with "
                         "bias=True (or set its biases to zero and keep them from training yourself).")
    return CELL_OF_MODE[module.mode]


def torch_name(key: str) -> Optional[Tuple[str, int, int]]:
    """``(parameter, layer, direction)`` of a torch.nn.RNNBase parameter name, e.g. ``weight_hh_l1_reverse`` ->
    ``('weight_hh', 1, 1)``; ``None`` for any other name."""
    match = _TORCH_NAME.match(key)
    if match is None:
        return None
    return match.group(1), int(match.group(2)), 1 if match.group(3) else 0


def rename_torch_keys(state_dict: MutableMapping[str, Tensor], prefix: str, cells: Sequence[RecurrentCell],
                      num_directions: int) -> None:
    """Rename, in place, torch.nn.RNN / GRU / LSTM names under ``prefix`` to the layer's own
    (``cells.<layer * num_directions + direction>.<parameter>``), for the cells that run torch's equations
    (:data:`CELL_OF_MODE`). A name of a layer or direction the layer lacks is left as it is, so that
    ``load_state_dict`` reports it as unexpected."""
    for key in [k for k in state_dict if k.startswith(prefix)]:
        parsed = torch_name(key[len(prefix):])
        if parsed is None:
            continue
        parameter, layer, direction = parsed
        index = layer * num_directions + direction
        if direction >= num_directions or index >= len(cells):
            continue
        if not isinstance(cells[index], tuple(CELL_OF_MODE.values())):
            continue
        state_dict[f"{prefix}cells.{index}.{parameter}"] = state_dict.pop(key)
