"""The cell side of the plotting hooks: which cell a hook reads, and the per-step records in input order.

A cell appends one entry per step to the list its ``recording_*()`` context manager yields;
:mod:`lit_rnncells.nn.recording` runs the steps (:func:`~lit_rnncells.nn.recording.composition_weights`,
:func:`~lit_rnncells.nn.recording.candidate_activations`), and the helpers here put the entries in input
order, batch first, zero at padded steps.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, List, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from .base import RecurrentCell

Entry = Union[Tensor, Tuple[Tensor, ...]]
"""What a cell records per step: one ``(B, ...)`` tensor or a tuple of them."""


@contextmanager
def recording_into(cell: nn.Module, attribute: str) -> Iterator[List[Any]]:
    """Within the block, ``cell.<attribute>`` is a fresh list, yielded, that the cell's step appends its entry to;
    what the attribute held before (``None`` outside any recording) is restored after it. The cells'
    ``recording_*()`` context managers are this."""
    log: List[Any] = []
    previous = getattr(cell, attribute)
    setattr(cell, attribute, log)
    try:
        yield log
    finally:
        setattr(cell, attribute, previous)


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
