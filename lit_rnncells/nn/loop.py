"""The step loop of ``Recurrent``: the cell's ``stepping`` block around one ``step`` per time step, eager or
through the compiled step. :mod:`.recurrent` runs it, and :mod:`.graphs` captures it whole as CUDA graphs."""
from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Callable, ContextManager, List, Optional, Tuple

import torch
from torch import Tensor

from ..cells.base import RecurrentCell, State
from ..cells.deferred import deferring_weight_gradients, plain_autograd_only
from .step import _step, map_leaves, tensor_leaves

StepFn = Callable[[RecurrentCell, Tensor, State, Optional[Tensor], bool, bool], Tuple[State, Optional[Tensor]]]


@functools.lru_cache(maxsize=None)
def _stepping_takes_seen(cls: type) -> bool:
    """Whether ``cls.stepping`` takes the ``seen`` list (a cell written before it existed takes ``x_proj`` only)."""
    params = list(inspect.signature(cls.stepping).parameters.values())[1:]
    return len(params) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


def _stepping(cell: RecurrentCell, x_proj: Tensor, seen: List[State]) -> ContextManager[Tensor]:
    """The cell's ``stepping`` block; none under :func:`plain_autograd_only` (``torch.compile`` tracing a model
    around the layer, a ``torch.func`` transform): a block only takes work out of the loop, and a cell's step is
    exact without it (the cell contract)."""
    if plain_autograd_only():
        return contextlib.nullcontext(x_proj)
    return cell.stepping(x_proj, seen) if _stepping_takes_seen(type(cell)) else cell.stepping(x_proj)


def _constant_while_training(state: State) -> bool:
    """True when gradients are on but no leaf of ``state`` carries one (a zero initial state)."""
    if not torch.is_grad_enabled():
        return False
    leaves = state if isinstance(state, tuple) else (state,)
    return not any(leaf.requires_grad for leaf in leaves)


def run_loop(cell: RecurrentCell, x: Tensor, state: State, mask: Optional[Tensor], use_aux: bool,
             keep_precision: bool, compiled_step: Optional[StepFn] = None, defer: bool = False
             ) -> Tuple[Tensor, State, Optional[Tensor]]:
    """The step loop of :func:`~lit_rnncells.nn.recurrent.run_cell`: eager, or each step through
    ``compiled_step`` (:func:`~lit_rnncells.nn.compiled.compiled_step`'s function for the cell) when given.
    ``defer``: the cell's deferred products leave their weights' gradients to one product after the loop
    (:mod:`lit_rnncells.cells.deferred`; the eager loop only: a compiled step runs them plainly)."""
    step, step_mask = _step, mask
    compiled = compiled_step is not None
    if compiled:
        step = compiled_step
        if mask is None:  # one graph for padded and unpadded batches: an all-true mask is free once fused
            step_mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
    states: List[State] = []
    seen: List[State] = []  # the state each step was fed, for cells' ``stepping`` blocks
    aux_total: Optional[Tensor] = None
    x_proj = cell.project_input(x)
    weights = list(cell.parameters()) if defer and not compiled else []
    with deferring_weight_gradients(weights, (x_proj, *tensor_leaves(state))) as passed, \
            _stepping(cell, passed[0], seen) as x_proj:
        leaves = iter(passed[1:])
        state = map_leaves(lambda _: next(leaves), state)
        for t, x_t in enumerate(x_proj.unbind(0)):
            seen.append(state)
            # A constant initial state (no gradient) would need a graph of its own for one step: run it eagerly.
            fn = _step if t == 0 and compiled and _constant_while_training(state) else step
            state, aux_t = fn(cell, x_t, state, None if step_mask is None else step_mask[t], use_aux,
                              keep_precision)
            states.append(state)
            if aux_t is not None:
                aux_total = aux_t if aux_total is None else aux_total + aux_t
    if states:
        out = cell.output_sequence(states)  # the per-step outputs, computed after the loop
    else:
        out = x.new_zeros(0, x.shape[1], cell.hidden_size)
    if mask is not None and states:
        out = out * mask.unsqueeze(-1).to(out.dtype)
    return out, state, aux_total
