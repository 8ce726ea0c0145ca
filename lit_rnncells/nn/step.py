"""One step of ``Recurrent``'s time loop (:func:`_step`) and the walks over a state's leaves: :func:`map_state`
(leaf-wise over states of one structure), :func:`map_leaves` and :func:`tensor_leaves` (any nesting of tuples,
named tuples, lists and dicts: the deferred loop's inputs, a search's decoder state and encoder outputs).

The eager loop (:mod:`.recurrent`) and the compiled one (:mod:`.compiled`) both run :func:`_step`; it lives
here so that neither of them imports the other's module for it.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Optional, Tuple

import torch
from torch import Tensor

from ..cells.base import RecurrentCell, State


def map_state(fn, *states: State) -> State:
    """Apply ``fn`` leaf-wise over one or more states of the same structure."""
    if isinstance(states[0], tuple):
        return tuple(map_state(fn, *leaves) for leaves in zip(*states))
    return fn(*states)


def tensor_leaves(obj: Any) -> Iterator[Tensor]:
    """Every tensor of a nested structure (tuples, named tuples, lists, dicts), in order (:func:`map_leaves`'
    order too)."""
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for part in obj:
            yield from tensor_leaves(part)
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from tensor_leaves(value)


def map_leaves(fn: Callable[[Tensor], Tensor], obj: Any) -> Any:
    """``obj`` with ``fn`` applied to each tensor of a nested structure (tuples, named tuples, lists, dicts), its
    structure kept; anything else (``None``, numbers) is kept as it is."""
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(map_leaves(fn, o) for o in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(map_leaves(fn, o) for o in obj)
    if isinstance(obj, dict):
        return {k: map_leaves(fn, v) for k, v in obj.items()}
    return obj


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
