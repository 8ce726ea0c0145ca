"""Run a cell, or the ``Recurrent`` layer around it, while the cell records something per step: the plotting
hooks :func:`composition_weights` (MuFuRU), :func:`candidate_activations` (MZU) and
:func:`content_adaptive_gates` (CARU).

The cell appends one entry per step to the list its ``recording_*()`` context manager yields; this module runs
the steps (the layer's own loop, :func:`~lit_rnncells.nn.recurrent.run_cell`) and returns the entries in input
order, batch first, zero at padded steps (:mod:`lit_rnncells.cells.recording`).
"""
from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from typing import Callable, List, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from ..cells.base import RecurrentCell, State
from ..cells.caru import CARU
from ..cells.mufuru import MuFuRU
from ..cells.mzu import MZU
from ..cells.recording import Entry, cell_in, mask_padded, unreverse_steps
from .backend import resolve
from .recurrent import Recurrent, run_cell


def composition_weights(module: nn.Module, x: Tensor, state: Optional[State] = None,
                        lengths: Optional[Tensor] = None, *, layer: int = 0, direction: int = 0) -> Tensor:
    """The op weights p (Weissenborn & Rocktäschel, arXiv:1606.03002, eq. 3) of every step: ``(B, T, l, H)``, ops in ``cell.ops`` order.

    ``module`` is a :class:`~lit_rnncells.cells.mufuru.MuFuRU` cell (``x`` is then ``(B, T, input_size)``) or a ``Recurrent``
    layer around one (``x`` as its ``forward`` takes it; ``layer`` and ``direction`` pick the cell).
    Runs without gradients; padded steps give zeros. For plots like the paper's Figure 1b.
    """
    cell = cell_in(module, MuFuRU, "composition_weights", layer, direction)
    return record_steps(module, cell, cell.recording_op_weights, x, state, lengths, direction)


def candidate_activations(module: nn.Module, x: Tensor, state: Optional[State] = None,
                          lengths: Optional[Tensor] = None, *, layer: int = 0, direction: int = 0
                          ) -> Tuple[Tensor, Tensor]:
    """The candidate activations h~ (Meng et al., AAAI 2020, eq. 2) and hidden states of every step:
    ``(B, T, L + 1, d_h)`` (depth 0 is the MZU cell, 1 … L its transition depths) and ``(B, T, d_h)``.

    ``module`` is an :class:`~lit_rnncells.cells.mzu.MZU` cell (``x`` is then ``(B, T, input_size)``) or a ``Recurrent``
    layer around one (``x`` as its ``forward`` takes it; ``layer`` and ``direction`` pick the cell).
    Runs without gradients; padded steps give zeros. For plots like the paper's Figure 3.
    """
    cell = cell_in(module, MZU, "candidate_activations", layer, direction)
    candidates, states = record_steps(module, cell, cell.recording_candidates, x, state, lengths, direction)
    return candidates, states


def content_adaptive_gates(module: nn.Module, x: Tensor, state: Optional[State] = None,
                           lengths: Optional[Tensor] = None, *, layer: int = 0, direction: int = 0
                           ) -> Tuple[Tensor, Tensor]:
    """The word weight σ(x') and the content weight z (Chan et al., ICONIP 2020, eq. 4d's two factors, 4a and
    4c) of every step: each ``(B, T, H)``; their product is the content-adaptive gate l.

    ``module`` is a :class:`~lit_rnncells.cells.caru.CARU` cell (``x`` is then ``(B, T, input_size)``) or a
    ``Recurrent`` layer around one (``x`` as its ``forward`` takes it; ``layer`` and ``direction`` pick the cell).
    Runs without gradients; padded steps give zeros. For the paper's §2.2 claim that a word such as a full stop
    gets a word weight near 0.
    """
    cell = cell_in(module, CARU, "content_adaptive_gates", layer, direction)
    word_weight, content_weight = record_steps(module, cell, cell.recording_gates, x, state, lengths, direction)
    return word_weight, content_weight


def record_steps(module: nn.Module, cell: RecurrentCell,
                 recording: Callable[[], AbstractContextManager[List[Entry]]], x: Tensor,
                 state: Optional[State] = None, lengths: Optional[Tensor] = None, direction: int = 0
                 ) -> Union[Tensor, Tuple[Tensor, ...]]:
    """Run ``module`` (``cell`` itself, ``x`` batch first ``(B, T, input_size)``, or a ``Recurrent``
    layer holding ``cell`` at ``direction``) without gradients inside ``recording()``, and return the
    recorded entries stacked ``(B, T, ...)`` in input order (a tuple if the cell records tuples)."""
    # Recording appends inside the step, so it runs the eager loop (``backend`` loop; values are the same).
    eager = module.using("loop") if isinstance(module, Recurrent) else contextlib.nullcontext()
    with torch.no_grad(), recording() as log, eager:
        _run_recorded(module, cell, x, state, lengths)
    if not log:
        raise ValueError("The input has no steps; pass at least one token.")
    columns = list(zip(*log)) if isinstance(log[0], tuple) else [log]
    out = []
    for column in columns:
        steps_first = torch.stack(list(column))  # (T, B, ...) in processing order
        if direction == 1 and module is not cell:
            steps_first = unreverse_steps(steps_first, lengths)
        out.append(mask_padded(steps_first.transpose(0, 1), lengths))
    return tuple(out) if isinstance(log[0], tuple) else out[0]


def _run_recorded(module: nn.Module, cell: RecurrentCell, x: Tensor, state: Optional[State],
                  lengths: Optional[Tensor]) -> None:
    if module is not cell:
        module(x, state, lengths)
        return
    steps = x.shape[1]
    if state is None:
        state = cell.initial_state(x.shape[0], device=x.device, dtype=x.dtype)
    mask = None
    if lengths is not None:
        mask = torch.arange(steps, device=x.device).unsqueeze(1) < torch.as_tensor(
            lengths, device=x.device).unsqueeze(0)
    run_cell(cell, x.transpose(0, 1), state, mask, plan=resolve(type(cell), "loop", x.device.type))
