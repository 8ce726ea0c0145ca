"""One step of ``Recurrent``'s time loop (:func:`_step`) and the walk over a state's leaves (:func:`map_state`).

The eager loop (:mod:`.recurrent`) and the compiled one (:mod:`.compiled`) both run :func:`_step`; it lives
here so that neither of them imports the other's module for it.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..cells.base import RecurrentCell, State


def map_state(fn, *states: State) -> State:
    """Apply ``fn`` leaf-wise over one or more states of the same structure."""
    if isinstance(states[0], tuple):
        return tuple(map_state(fn, *leaves) for leaves in zip(*states))
    return fn(*states)


def state_leaves(state: State) -> Tuple[Tensor, ...]:
    """The tensors of a state (a tensor or nested tuples of them), in order."""
    if isinstance(state, tuple):
        return tuple(leaf for part in state for leaf in state_leaves(part))
    return (state,)


def with_leaves(state: State, leaves: Sequence[Tensor]) -> State:
    """``state``'s structure filled with ``leaves`` (in :func:`state_leaves`' order)."""
    it = iter(leaves)

    def rebuild(part: State) -> State:
        return tuple(rebuild(p) for p in part) if isinstance(part, tuple) else next(it)

    return rebuild(state)


def _where_state(mask: Tensor, new: State, old: State) -> State:
    """Keep ``old`` where ``mask`` (B,) is False; leaves have the batch first."""

    def pick(n: Tensor, o: Tensor) -> Tensor:
        return torch.where(mask.view(-1, *([1] * (n.dim() - 1))), n, o)

    return map_state(pick, new, old)


def _as_dtype_of(new: Tensor, old: Tensor) -> Tensor:
    return new if new.dtype == old.dtype else new.to(old.dtype)


def _step(cell: RecurrentCell, x_t: Tensor, state: State, mask_t: Optional[Tensor], use_aux: bool,
          keep_precision: bool) -> Tuple[State, Optional[Tensor]]:
    """One step of the time loop: the cell's step, the state kept in its precision, padded rows kept,
    and the step's summed auxiliary loss (``None`` without). The eager and the compiled loop both run it."""
    if use_aux:
        new_state, aux_t = cell.step_with_aux(x_t, state)
    else:
        new_state, aux_t = cell.step(x_t, state), None
    if keep_precision:
        new_state = map_state(_as_dtype_of, new_state, state)
    if mask_t is not None:
        new_state = _where_state(mask_t, new_state, state)
        if aux_t is not None:
            aux_t = aux_t * mask_t.to(aux_t.dtype)
    return new_state, None if aux_t is None else aux_t.sum()
