"""Run a cell, or the ``Recurrent`` layer around it, while the cell records something per step.

Shared by the cells' plotting hooks (:func:`~.mufuru.composition_weights`,
:func:`~.mzu.candidate_activations`): the cell appends one entry per step to the list its
``recording_*()`` context manager yields; this module runs the steps and returns the entries in
input order, batch first, zero at padded steps.
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Callable, List, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from .base import RecurrentCell, State

Entry = Union[Tensor, Tuple[Tensor, ...]]
"""What a cell records per step: one ``(B, ...)`` tensor or a tuple of them."""


def cell_in(module: nn.Module, kind: type, hook: str, layer: int = 0, direction: int = 0) -> RecurrentCell:
    """The ``kind`` cell a plotting hook named ``hook`` reads: ``module`` itself, or the cell a ``Recurrent``
    layer holds at ``layer`` / ``direction``; one clear error otherwise."""
    if isinstance(module, kind):
        return module
    if not callable(getattr(module, "cell", None)):
        raise TypeError(f"{hook} takes a {kind.__name__} cell or a Recurrent layer, got {type(module).__name__}.")
    cell = module.cell(layer, direction)
    if not isinstance(cell, kind):
        raise TypeError(f"Layer {layer}, direction {direction} holds a {type(cell).__name__}, not a {kind.__name__}.")
    return cell


def record_steps(module: nn.Module, cell: RecurrentCell,
                 recording: Callable[[], AbstractContextManager[List[Entry]]], x: Tensor,
                 state: Optional[State] = None, lengths: Optional[Tensor] = None, direction: int = 0
                 ) -> Union[Tensor, Tuple[Tensor, ...]]:
    """Run ``module`` (``cell`` itself, ``x`` batch first ``(B, T, input_size)``, or a ``Recurrent``
    layer holding ``cell`` at ``direction``) without gradients inside ``recording()``, and return the
    recorded entries stacked ``(B, T, ...)`` in input order (a tuple if the cell records tuples)."""
    compiled = getattr(module, "compiled", False)
    with torch.no_grad(), recording() as log:
        if compiled:  # recording appends inside the step: run it eagerly (values are the same)
            module.compiled = False
        try:
            _run_recorded(module, cell, x, state, lengths)
        finally:
            if compiled:
                module.compiled = True
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
    from ..nn.recurrent import run_cell  # the layer imports the cells: import it only when used

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
    run_cell(cell, x.transpose(0, 1), state, mask)


def mask_padded(values: Tensor, lengths: Optional[Tensor]) -> Tensor:
    """Zero ``values`` ``(B, T, ...)`` at padded steps."""
    if lengths is None:
        return values
    lengths = torch.as_tensor(lengths, device=values.device)
    real = torch.arange(values.shape[1], device=values.device).unsqueeze(0) < lengths.unsqueeze(1)
    return values * real.view(*real.shape, *([1] * (values.dim() - 2))).to(values.dtype)


def unreverse_steps(values: Tensor, lengths: Optional[Tensor]) -> Tensor:
    """Undo the backward direction's reversal (within each length) of ``values`` ``(T, B, ...)``."""
    if lengths is None:
        return values.flip(0)
    lengths = torch.as_tensor(lengths, device=values.device)
    t = torch.arange(values.shape[0], device=values.device).unsqueeze(1)
    rev = lengths.unsqueeze(0) - 1 - t
    index = torch.where(rev >= 0, rev, t)
    index = index.view(*index.shape, *([1] * (values.dim() - 2))).expand_as(values)
    return values.gather(0, index)
