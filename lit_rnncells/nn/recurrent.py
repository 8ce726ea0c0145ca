"""``Recurrent``: runs any cell over time with the torch.nn.GRU / LSTM interface."""
from __future__ import annotations

import functools
import inspect
import time
from typing import List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..arguments import check_positive, check_probability
from ..cells.base import CellFactory, RecurrentCell, State
from ..cells.registry import get_cell
from .compiled import compile_mode, compiled_calls, compiled_step, report_compiled_forward, use_compiled
from .step import _as_dtype_of, _step, map_state  # map_state kept importable from here


def _reverse_index(lengths: Tensor, steps: int) -> Tensor:
    """(T, B) time index that reverses each sequence within its own length."""
    t = torch.arange(steps, device=lengths.device).unsqueeze(1)
    rev = lengths.unsqueeze(0) - 1 - t
    return torch.where(rev >= 0, rev, t)


def _gather_time(x: Tensor, index: Tensor) -> Tensor:
    """x (T, B, ...) reordered along time by index (T, B)."""
    return x.gather(0, index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x))


@functools.lru_cache(maxsize=None)
def _stepping_takes_seen(cls: type) -> bool:
    """Whether ``cls.stepping`` takes the ``seen`` list (a cell written before it existed takes ``x_proj`` only)."""
    params = list(inspect.signature(cls.stepping).parameters.values())[1:]
    return len(params) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


def _stepping(cell: RecurrentCell, x_proj: Tensor, seen: List[State]):
    return cell.stepping(x_proj, seen) if _stepping_takes_seen(type(cell)) else cell.stepping(x_proj)


def _constant_while_training(state: State) -> bool:
    """True when gradients are on but no leaf of ``state`` carries one (a zero initial state)."""
    if not torch.is_grad_enabled():
        return False
    leaves = state if isinstance(state, tuple) else (state,)
    return not any(leaf.requires_grad for leaf in leaves)


PACKED_KERNEL_DEVICES: Tuple[str, ...] = ("cuda",)
"""Device types on which padded batches of Elman, GRU and LSTM run through torch's fused kernel as packed
sequences (cuDNN's packed kernels), instead of the masked step loop. Measured with ``scripts/bench_cells.py
--padded``: on an H200 the step loop took 11x ``torch.nn.GRU``'s time on packed input; on CPU the packed kernels
took 1.6-2.2x the step loop's (docs/measured.md, "Cell speed")."""


def run_cell(cell: RecurrentCell, x: Tensor, state: State, mask: Optional[Tensor] = None,
             want_aux: bool = False, compiled: bool = False, lengths: Optional[Tensor] = None
             ) -> Tuple[Tensor, State, Optional[Tensor]]:
    """Run one cell over a time-major input ``(T, B, input_size)``.

    ``mask`` (T, B) marks real steps; a padded step leaves the state untouched. ``lengths`` (B,), when
    given, says ``mask`` is each sequence's first ``lengths`` steps, so on a device in
    :data:`PACKED_KERNEL_DEVICES` a cell's fused kernel may take the padded batch packed
    (``fused_takes_lengths``; not when a sequence is empty).
    Returns the outputs ``(T, B, H)`` (zero at padded steps), the final state,
    and the summed auxiliary loss over real steps (``None`` unless ``want_aux``
    and the cell has one). With ``compiled`` each step runs through the cell's
    compiled step (:mod:`lit_rnncells.nn.compiled`); values are the eager loop's.
    """
    use_aux = want_aux and cell.has_aux_loss
    # Under mixed precision the matmuls run in half precision, but the state stays in the precision it came
    # in (float32): a half-precision state would lose the small updates of long sequences (fp16 has 10 bits).
    keep_precision = torch.is_autocast_enabled(x.device.type)
    if not use_aux and x.shape[0] > 0:
        fused = None
        if mask is None:
            fused = cell.fused_sequence(x, state)
        elif (lengths is not None and cell.fused_takes_lengths and x.device.type in PACKED_KERNEL_DEVICES
              and bool((lengths > 0).all())):
            fused = cell.fused_sequence(x, state, lengths=lengths)
        if fused is not None:
            if not keep_precision:
                return fused[0], fused[1], None
            # As from the step loop: outputs and state in the state's precision, not the kernel's half precision.
            return _as_dtype_of(fused[0], cell.output(state)), map_state(_as_dtype_of, fused[1], state), None
    step, step_mask = _step, mask
    compiled = compiled and x.shape[0] > 0 and use_compiled(cell, x.device)
    if compiled:
        step = compiled_step(cell)
        if mask is None:  # one graph for padded and unpadded batches: an all-true mask is free once fused
            step_mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
    states: List[State] = []
    seen: List[State] = []  # the state each step was fed, for cells' ``stepping`` blocks
    aux_total: Optional[Tensor] = None
    with _stepping(cell, cell.project_input(x), seen) as x_proj:
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


class Recurrent(nn.Module):
    """A multi-layer, optionally bidirectional recurrent layer around any cell.

    Mirrors torch.nn.GRU: ``forward(x, state=None, lengths=None)`` returns
    ``(output, state)`` with output ``(B, T, D*H)`` when ``batch_first`` else
    ``(T, B, D*H)``, and state ``(L*D, B, H)`` (each leaf of a tuple state,
    e.g. LSTM's ``(h, c)``, stacked the same way). ``lengths`` (B,) marks real
    steps: padded steps leave the state untouched and give zero outputs, and the
    backward direction reverses each sequence within its own length.

    ``cell`` is a cell factory ``(input_size, hidden_size) -> RecurrentCell``
    (any cell class, or a ``functools.partial`` of one) or a registered name.
    With ``return_aux=True`` the forward also returns the auxiliary loss of the
    cells (mean over real tokens, summed over layers and directions; zero when
    no cell has one), which tasks add to their loss.

    With ``compile=True`` the time loop runs each step through ``torch.compile`` (the cell's
    pointwise ops fused, see :mod:`lit_rnncells.nn.compiled`); values and gradients are the eager
    loop's. Off by default: see docs/measured.md for when it pays.
    """

    def __init__(self, cell: Union[CellFactory, str], input_size: int, hidden_size: int,
                 num_layers: int = 1, bidirectional: bool = False, dropout: float = 0.0,
                 batch_first: bool = False, compile: bool = False) -> None:
        super().__init__()
        check_positive(input_size=input_size, hidden_size=hidden_size, num_layers=num_layers)
        check_probability(dropout=dropout)
        factory = get_cell(cell) if isinstance(cell, str) else cell
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bidirectional = bidirectional
        self.num_directions = 2 if bidirectional else 1
        self.dropout = dropout
        self.batch_first = batch_first
        self.compiled = bool(compile)  # not "compile": that is nn.Module.compile()
        if self.compiled:
            compile_mode()  # an unknown $LIT_RNNCELLS_COMPILE_MODE is refused here, before any training
        cells = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * self.num_directions
            for _ in range(self.num_directions):
                built = factory(layer_input, hidden_size)
                if not isinstance(built, RecurrentCell):
                    raise TypeError(f"The cell factory returned {type(built).__name__}, not a RecurrentCell; "
                                    "pass a cell class from lit_rnncells.cells or a factory building one.")
                cells.append(built)
        self.cells = nn.ModuleList(cells)

    @property
    def has_aux_loss(self) -> bool:
        return any(c.has_aux_loss for c in self.cells)

    @property
    def aux_loss_name(self) -> str:
        """The name tasks log the auxiliary loss under (e.g. ``zone_disagreement``)."""
        names = sorted({c.aux_loss_name for c in self.cells if c.has_aux_loss})
        return names[0] if len(names) == 1 else "aux_loss"

    def cell(self, layer: int = 0, direction: int = 0) -> RecurrentCell:
        """The cell of one layer and direction (0 forward, 1 backward)."""
        return self.cells[layer * self.num_directions + direction]  # type: ignore[return-value]

    def initial_state(self, batch_size: int, *, device=None, dtype=None) -> State:
        """The stacked zero state ``(L*D, B, ...)`` for a batch."""
        return self._stack([c.initial_state(batch_size, device=device, dtype=dtype) for c in self.cells])

    @staticmethod
    def _stack(states: Sequence[State]) -> State:
        return map_state(lambda *leaves: torch.stack(leaves), *states)

    def _unstack(self, state: State) -> List[State]:
        n = len(self.cells)

        def leaf(i: int):
            return lambda s: s[i]

        def check(s: Tensor) -> Tensor:
            if s.shape[0] != n:
                raise ValueError(f"The initial state has {s.shape[0]} entries on dim 0 but this layer needs "
                                 f"num_layers * num_directions = {n}.")
            return s

        map_state(check, state)
        return [map_state(leaf(i), state) for i in range(n)]

    def forward(self, x: Tensor, state: Optional[State] = None, lengths: Optional[Tensor] = None,
                *, return_aux: bool = False):
        if not self.compiled:
            return self._forward(x, state, lengths, return_aux)
        started, calls = time.perf_counter(), compiled_calls()
        result = self._forward(x, state, lengths, return_aux)
        report_compiled_forward(self.cells, x.device, time.perf_counter() - started, compiled_calls() > calls,
                                padded=lengths is not None)
        return result

    def _forward(self, x: Tensor, state: Optional[State], lengths: Optional[Tensor], return_aux: bool):
        if x.dim() != 3 or x.shape[-1] != self.input_size:
            raise ValueError(f"Recurrent expects input of shape ({'B, T' if self.batch_first else 'T, B'}, "
                             f"{self.input_size}), got {tuple(x.shape)}.")
        if self.batch_first:
            x = x.transpose(0, 1)
        steps, batch = x.shape[0], x.shape[1]
        mask = None
        if lengths is not None:
            lengths = torch.as_tensor(lengths, device=x.device)
            if lengths.shape != (batch,):
                raise ValueError(f"lengths must have shape ({batch},), got {tuple(lengths.shape)}.")
            if bool((lengths < 0).any()) or bool((lengths > steps).any()):
                raise ValueError(f"lengths must lie in [0, {steps}] (the padded length).")
            mask = torch.arange(steps, device=x.device).unsqueeze(1) < lengths.unsqueeze(0)
            if bool(mask.all()):
                mask = None
        if state is None:
            states = [c.initial_state(batch, device=x.device, dtype=x.dtype) for c in self.cells]
        else:
            states = self._unstack(state)
        rev_index = None
        if self.bidirectional and lengths is not None and mask is not None:
            rev_index = _reverse_index(lengths, steps)
        final: List[State] = []
        aux_total = x.new_zeros(())
        layer_input = x
        for layer in range(self.num_layers):
            outs = []
            for direction in range(self.num_directions):
                i = layer * self.num_directions + direction
                cell = self.cells[i]
                inp = layer_input
                if direction == 1:
                    inp = inp.flip(0) if rev_index is None else _gather_time(inp, rev_index)
                # reversed within each length, real steps still come first: the same mask applies
                out, st, aux = run_cell(cell, inp, states[i], mask, want_aux=return_aux, compiled=self.compiled,
                                        lengths=None if mask is None else lengths)
                if direction == 1:
                    out = out.flip(0) if rev_index is None else _gather_time(out, rev_index)
                outs.append(out)
                final.append(st)
                if aux is not None:
                    aux_total = aux_total + aux
            layer_input = outs[0] if len(outs) == 1 else torch.cat(outs, dim=-1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, training=True)
        output = layer_input.transpose(0, 1) if self.batch_first else layer_input
        stacked = self._stack(final)
        if not return_aux:
            return output, stacked
        if self.has_aux_loss:
            tokens = mask.sum() if mask is not None else torch.tensor(steps * batch, device=x.device)
            aux_total = aux_total / tokens.clamp_min(1).to(aux_total.dtype)
        return output, stacked, aux_total

    def extra_repr(self) -> str:
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
                f"bidirectional={self.bidirectional}, dropout={self.dropout}, batch_first={self.batch_first}"
                + (", compile=True" if self.compiled else ""))
