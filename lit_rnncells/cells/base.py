"""The cell contract every recurrent cell in the zoo follows.

A cell knows one step of a recurrence. It separates what depends only on the
input (``project_input``, run once for all time steps in one matmul) from what
depends on the state (``step``, the only code inside the time loop). The
``Recurrent`` layer in :mod:`lit_rnncells.nn.recurrent` runs any cell over time.

States are a tensor of shape ``(batch, ...)`` or a tuple of such tensors (for
example LSTM's ``(h, c)``); every leaf has the batch on its first dimension so
the layer can mask padded steps and stack layers without knowing the cell.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Callable, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..utils.arguments import check_positive, check_probability  # kept importable from here

State = Union[Tensor, Tuple[Tensor, ...]]
"""A cell's recurrent state: one tensor or a tuple of tensors, batch first."""


class RecurrentCell(nn.Module):
    """Base class of every cell: one step of a recurrence, input maps hoisted.

    Subclasses call ``super().__init__(input_size, hidden_size)`` first and
    implement :meth:`project_input` and :meth:`step`. Cells whose state is not
    a single hidden tensor override :meth:`initial_state` and :meth:`output`.

    Cells with an auxiliary loss (MZU's zone disagreement) set
    ``has_aux_loss = True`` and implement :meth:`step_with_aux`, which returns
    the per-example loss of that step; the layer averages it over real
    (non-padded) tokens and hands it to the task explicitly.
    """

    has_aux_loss: bool = False
    aux_loss_name: str = "aux_loss"

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        check_positive(input_size=input_size, hidden_size=hidden_size)
        self.input_size = input_size
        self.hidden_size = hidden_size

    def project_input(self, x: Tensor) -> Tensor:
        """Every affine map of the input alone: ``(..., T, input_size) -> (..., T, P)``."""
        raise NotImplementedError

    def step(self, x_proj_t: Tensor, state: State) -> State:
        """One step of the recurrence given the projected input ``(B, P)`` of this step."""
        raise NotImplementedError

    def step_with_aux(self, x_proj_t: Tensor, state: State) -> Tuple[State, Optional[Tensor]]:
        """Like :meth:`step`, also returning a per-example auxiliary loss ``(B,)`` or ``None``."""
        return self.step(x_proj_t, state), None

    fused_takes_lengths: bool = False
    """Whether :meth:`fused_sequence` also runs padded batches (Elman, GRU, LSTM: packed sequences). Where it
    runs is the layer's choice (``lit_rnncells.nn.backend``)."""

    def fused_sequence(self, x: Tensor, state: State, lengths: Optional[Tensor] = None
                       ) -> Optional[Tuple[Tensor, State]]:
        """Optionally run a whole sequence ``(T, B, input_size)`` in one fused kernel.

        Returns ``(outputs (T, B, H), final state)``, or ``None`` (the default) to let the layer
        loop over :meth:`step`. Only cells whose equations are exactly a fused kernel's (our
        Elman, GRU and LSTM are torch's) implement it; the layer uses it when no auxiliary loss
        is wanted and either no step is padded (``lengths`` is ``None``) or the class sets
        ``fused_takes_lengths``: then ``lengths`` (B,) holds each sequence's real steps, which
        come first, none empty; outputs at padded steps are zero and each final state is the
        one after the sequence's last real step, as the step loop gives.
        """
        return None

    @contextmanager
    def stepping(self, x_proj: Tensor, seen: Optional[List[State]] = None) -> Iterator[Tensor]:
        """The layer's time loop runs inside this block: it steps once over each ``x_proj[t]`` of
        the yielded time-major ``(T, B, P)`` tensor, in order, feeding each step the state the
        previous one returned (masked). The default yields ``x_proj`` and does nothing else.

        ``seen``, when given, is the list the caller appends each step's input state to, before
        the step (the layer does): a cell that needs the states after the loop reads them there
        instead of recording them inside :meth:`step`, which keeps the step free of side effects
        (so it compiles to one graph).

        A cell may use the guarantee to take work out of the loop (MuFuRU computes its state
        map's weight gradient for all steps in one matmul). :meth:`step` called outside such a
        block must still be exact on its own: while ``torch.compile`` traces a model around the
        layer, or under a ``torch.func`` transform, the layer opens no block.
        """
        yield x_proj

    def initial_state(self, batch_size: int, *, device: torch.device | None = None,
                      dtype: torch.dtype | None = None) -> State:
        """The zero state for a batch."""
        return torch.zeros(batch_size, self.hidden_size, device=device, dtype=dtype)

    def output(self, state: State) -> Tensor:
        """The hidden vector ``(B, hidden_size)`` the layer emits for a state."""
        return state  # type: ignore[return-value]

    def output_sequence(self, states: Sequence[State]) -> Tensor:
        """The outputs ``(T, B, hidden_size)`` of the states after each of T steps.

        The default stacks :meth:`output`. A cell whose output is a costly function of the state
        that does not feed back into the recurrence (MC-RNN's attention over channels) overrides
        this to compute it for all steps at once, out of the time loop; it must equal stacking
        :meth:`output`.
        """
        return torch.stack([self.output(s) for s in states])

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}"


class AffineCell(RecurrentCell):
    """A cell with one input map ``(G*H, I)`` and one state map ``(G*H, H)``, initialised
    like torch.nn.GRU: every weight and bias uniform in ±1/sqrt(H)."""

    gates: int = 1
    recurrent_weights = ("weight_hh",)  # hidden-to-hidden maps, for DropConnect (nn.dropout.WeightDrop)
    gate_bias_option: Optional[Tuple[str, int]] = None
    """``(option, gate)``: an initialisation option whose value is added to that gate's rows (0-based, in the
    cell's gate order) of ``bias_hh``, e.g. GRU's ``("update_bias", 1)``; see :meth:`shift_gate_bias`."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__(input_size, hidden_size)
        g = self.gates * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(g, input_size))
        self.weight_hh = nn.Parameter(torch.empty(g, hidden_size))
        self.bias_ih = nn.Parameter(torch.empty(g))
        self.bias_hh = nn.Parameter(torch.empty(g))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)
        self.shift_gate_bias()

    def project_input(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight_ih, self.bias_ih)

    def shift_gate_bias(self) -> None:
        """Add the value of the option :attr:`gate_bias_option` names to its gate's rows of ``bias_hh``, after
        the draw (so a seed's other weights are as without the option; 0 changes nothing). ``reset_parameters``
        calls it; a subclass's ``__init__`` calls it again once it has set the option, which is still unset
        while ``AffineCell.__init__`` draws."""
        if self.gate_bias_option is None:
            return
        name, gate = self.gate_bias_option
        value = getattr(self, name, 0.0)
        if value:
            with torch.no_grad():
                self.bias_hh[gate * self.hidden_size:(gate + 1) * self.hidden_size] += value


CellFactory = Callable[[int, int], RecurrentCell]
"""Builds a cell from ``(input_size, hidden_size)``; any cell class is one."""
