"""MC-RNN: the multi-channel, multi-block wrapper around any cell (Xu et al., mc-rnn.md eq. 1–6).

``MultiChannel(input_size, hidden_size, *, cell, block_size)`` is itself a
:class:`RecurrentCell`, so it drops into ``Recurrent`` and every task by config::

    cell:
      class_path: lit_rnncells.cells.MultiChannel
      init_args: {block_size: 4, cell: {class_path: lit_rnncells.cells.LSTM}}

How the fast step works (all channels at once, eq. 1–6 unchanged):

* Slots instead of channel labels. At every step the n − 1 channels have the
  in-degrees m = 1 … n − 1 in some order (eq. 1: m^k_t runs over all residues as
  k does). Nothing in eq. 2–6 depends on the label k — W_j, f, V and r are shared
  by all channels and the softmax is symmetric — so the state keeps channels in
  *slots ordered by the in-degree of their next step*: slot i (0-based) holds the
  channel whose next node has m = i + 1. The layout is then the same for every
  example and every step, and after a step the slots rotate by one (in-degree
  m becomes m + 1, and the block end m = n − 1 starts the next block with m = 1).
  The per-example step phase ``t mod (n − 1)`` maps slots back to channel labels
  (``k = ((phase − m) mod (n − 1)) + 1``), which only the attention read-out needs.
* Eq. 2 costs the minimum: the depth-j term W_j h_{t−j} is needed only by the
  slots with m ≥ j, so step j is one matmul on n − j slots, and over all j the
  step does (n − 1) n / 2 H×H products per example instead of (n − 1)².
* Eq. 3: channels fold into the batch — one call of the wrapped cell's ``step``
  on a ``(B (n − 1), ...)`` batch; its ``project_input`` runs once on x and is
  shared (expanded) across channels.
* Eq. 6 splits V = [V_h V_x]; V_x x_t depends on the input only and is hoisted
  into :meth:`MultiChannel.project_input`.

Choices (not fixed by the paper):

* Channel labels follow eq. 1 (channel k's blocks end at t ≡ k mod (n − 1), as
  in Figure 2). The paper's prose lists channel k's first block as
  h_{2−k} … h_{n+1−k}, which is the same set of partitions with the labels
  k ↔ 2 − k mod (n − 1); only the labels of α differ, never h_t.

* W_j = I for every j at initialisation: s starts as the plain mean of the
  in-block predecessors, and block size 2 (one channel, m = 1) is exactly the
  wrapped cell. W_j are full H × H matrices shared by all channels (eq. 2).
* Cells whose state is a tuple (LSTM's ``(h, c)``): the leaf the cell outputs
  (h) is mixed by eq. 2; every other leaf (c) is carried from the immediate
  predecessor in the same channel, c^k_{t−1}.
* h^k_t for t ≤ 0 is the wrapped cell's initial state (zero for every cell in
  the zoo, as eq. 2 assumes).
* Wrapped cells with an auxiliary loss (MZU) pass it through, averaged over
  channels.
* The attention has no bias, as in eq. 6; V and r are uniform in ±1/sqrt(fan-in).
* α is exposed for plotting (the paper's Figure 3) by :func:`channel_attention`,
  which records it only inside its own call (no module-level accumulators).
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Iterator, List, Optional, Tuple, Union

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .base import CellFactory, RecurrentCell, State, check_positive
from .registry import get_cell, register_cell

MCState = Tuple[Tensor, ...]
"""``(h_t (B, H), phase (B,) long, history_0 … history_{n−2}, *carried leaves (B, n−1, ...))``;
``history_d`` ``(B, n−1−d, H)`` holds h_{t−1−d} of the slots d … n−2 (the only ones that read it)."""


@register_cell()
class MultiChannel(RecurrentCell):
    """MC-RNN around any cell ``f`` (mc-rnn.md eq. 1–6), block size n, n − 1 channels:

        m^k_t = ((t − k − 1) mod (n − 1)) + 1                      (1)
        s^k_{t−1} = (1/m^k_t) Σ_{j=1..m^k_t} W_j h^k_{t−j}          (2)
        h^k_t = f(s^k_{t−1}, x_t)                                   (3)
        h_t = Σ_k α^k_t h^k_t,  α_t = softmax_k(e_t)               (4, 5)
        e^k_t = rᵀ tanh(V [h^k_t; x_t])                             (6)

    ``cell`` is the wrapped cell: a cell class, a factory ``(input_size,
    hidden_size) -> RecurrentCell`` or a registered name. ``block_size`` is n
    (≥ 2); the paper's MC-RNN-k has k = n − 1 channels, its best is MC-RNN-3
    (n = 4, the default). The layer output is the mixed h_t, stored in the
    state so :meth:`output` costs nothing. See the module docstring for the
    state layout and the choices made.
    """

    def __init__(self, input_size: int, hidden_size: int, *,
                 cell: Union[CellFactory, str], block_size: int = 4) -> None:
        super().__init__(input_size, hidden_size)
        check_positive(block_size=block_size)
        if block_size < 2:
            raise ValueError(f"block_size must be at least 2 (one channel), got {block_size}.")
        factory = get_cell(cell) if isinstance(cell, str) else cell
        inner = factory(input_size, hidden_size)
        if not isinstance(inner, RecurrentCell):
            raise TypeError(f"MultiChannel's cell factory returned {type(inner).__name__}, not a RecurrentCell; "
                            "pass a cell class from lit_rnncells.cells, a factory building one, or its name.")
        self.cell = inner
        self.block_size = block_size
        self.channels = block_size - 1
        self.has_aux_loss = inner.has_aux_loss
        self._mixed_leaf = _output_leaf(inner)
        c = self.channels
        self.mix_weight = nn.Parameter(torch.empty(c, hidden_size, hidden_size))  # W_1 … W_{n−1}, eq. 2
        # V = [V_h V_x] of eq. 6, kept as two parameters: V_x x is hoisted, V_h runs in the step.
        self.att_hidden = nn.Parameter(torch.empty(hidden_size, hidden_size))
        self.att_input = nn.Parameter(torch.empty(hidden_size, input_size))
        self.att_vector = nn.Parameter(torch.empty(hidden_size))  # r, eq. 6
        # m for the slots 1 … n − 1 (exact in every float dtype, unlike 1/m; not saved).
        self.register_buffer("degree", torch.arange(1, c + 1, dtype=torch.float32).unsqueeze(-1), persistent=False)
        self._attention_log: Optional[List[Tensor]] = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """W_j = I (block size 2 is the wrapped cell); V, r uniform in ±1/sqrt(fan-in)."""
        with torch.no_grad():
            self.mix_weight.copy_(torch.eye(self.hidden_size).expand_as(self.mix_weight))
        bound = 1 / math.sqrt(self.hidden_size + self.input_size)  # fan-in of V
        nn.init.uniform_(self.att_hidden, -bound, bound)
        nn.init.uniform_(self.att_input, -bound, bound)
        nn.init.uniform_(self.att_vector, -1 / math.sqrt(self.hidden_size), 1 / math.sqrt(self.hidden_size))

    # -- contract -----------------------------------------------------------------------------

    def project_input(self, x: Tensor) -> Tensor:
        """``[f.project_input(x), V_x x]``: the wrapped cell's input maps and eq. 6's input half."""
        inner = self.cell.project_input(x)
        att_x = F.linear(x, self.att_input)
        return torch.cat([inner, att_x.to(inner.dtype)], dim=-1)

    def initial_state(self, batch_size: int, *, device: torch.device | None = None,
                      dtype: torch.dtype | None = None) -> MCState:
        """h^k_t for t ≤ 0 is the wrapped cell's initial state in every channel and history slot."""
        c = self.channels
        inner = self.cell.initial_state(batch_size, device=device, dtype=dtype)
        leaves = list(inner) if isinstance(inner, tuple) else [inner]
        h0 = leaves.pop(self._mixed_leaf)
        history = [h0.unsqueeze(1).expand(batch_size, c - d, *h0.shape[1:]).contiguous() for d in range(c)]
        carried = [leaf.unsqueeze(1).expand(batch_size, c, *leaf.shape[1:]).contiguous() for leaf in leaves]
        phase = torch.zeros(batch_size, dtype=torch.long, device=h0.device)
        return (h0.clone(), phase, *history, *carried)

    def output(self, state: MCState) -> Tensor:  # type: ignore[override]
        return state[0]

    def step(self, x_proj_t: Tensor, state: MCState) -> MCState:  # type: ignore[override]
        return self._step(x_proj_t, state, want_aux=False)[0]

    def step_with_aux(  # type: ignore[override]
            self, x_proj_t: Tensor, state: MCState) -> Tuple[MCState, Optional[Tensor]]:
        return self._step(x_proj_t, state, want_aux=self.has_aux_loss)

    def _step(self, x_proj_t: Tensor, state: MCState, want_aux: bool) -> Tuple[MCState, Optional[Tensor]]:
        c, hs = self.channels, self.hidden_size
        phase, history, carried = state[1], state[2: 2 + c], state[2 + c:]
        batch = phase.shape[0]
        inner_x, att_x = x_proj_t[:, :-hs], x_proj_t[:, -hs:]
        # Eq. 2 on slots: slot i has in-degree m = i + 1 and needs h_{t−j} for j ≤ m; history_{j−1}
        # holds h_{t−j} of exactly the slots j − 1 … c − 1 that need it, and W_j multiplies only those.
        w = self.mix_weight.unbind(0)  # one unbind (its backward one stack) instead of a select per W_j
        s = torch.matmul(history[0], w[0].t())
        for d in range(1, c):
            s[:, d:] += torch.matmul(history[d], w[d].t())
        s = s / self.degree.to(s.dtype)
        # Eq. 3 for all channels at once: channels folded into the batch, (B, c, ...) -> (B*c, ...).
        leaves: List[Tensor] = [leaf.reshape(batch * c, *leaf.shape[2:]) for leaf in carried]
        leaves.insert(self._mixed_leaf, s.reshape(batch * c, *s.shape[2:]))
        inner_state: State = tuple(leaves) if len(leaves) > 1 else leaves[0]
        x_rep = inner_x.unsqueeze(1).expand(batch, c, inner_x.shape[-1]).reshape(batch * c, -1)
        if want_aux:
            new_inner, aux = self.cell.step_with_aux(x_rep, inner_state)
        else:
            new_inner, aux = self.cell.step(x_rep, inner_state), None
        new_leaves = list(new_inner) if isinstance(new_inner, tuple) else [new_inner]
        h_ch = new_leaves.pop(self._mixed_leaf).reshape(batch, c, hs)
        # Eq. 4–6: e = rᵀ tanh(V_h h^k + V_x x), softmax over channels, mix.
        energy = torch.matmul(torch.tanh(torch.matmul(h_ch, self.att_hidden.t()) + att_x.unsqueeze(1)),
                              self.att_vector)
        alpha = torch.softmax(energy, dim=1)
        h_t = torch.matmul(alpha.unsqueeze(1).to(h_ch.dtype), h_ch).squeeze(1)
        if self._attention_log is not None:
            self._attention_log.append(slots_to_channels(alpha.detach(), phase))
        # Rotate: slot i -> i + 1, the block end (slot c − 1) starts the next block in slot 0, where
        # only its newest h is read; so deeper history just drops its last slot (a view, no copy).
        new_history = [h_ch.roll(1, dims=1), *(h[:, :-1] for h in history[:-1])]
        new_carried = [leaf.reshape(batch, c, *leaf.shape[1:]).roll(1, dims=1) for leaf in new_leaves]
        if aux is not None:
            aux = aux.view(batch, c).mean(1)
        return (h_t, (phase + 1) % c, *new_history, *new_carried), aux

    # -- attention read-out -------------------------------------------------------------------

    @contextmanager
    def recording_attention(self) -> Iterator[List[Tensor]]:
        """Within the block, every step appends its detached α ``(B, n−1)`` (channel order) to the
        yielded list. Prefer :func:`channel_attention`, which uses this."""
        log: List[Tensor] = []
        previous, self._attention_log = self._attention_log, log
        try:
            yield log
        finally:
            self._attention_log = previous

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, block_size={self.block_size}"


def _output_leaf(cell: RecurrentCell) -> int:
    """Index of the state leaf the cell outputs (the one eq. 2 mixes); a clear error otherwise."""
    state = cell.initial_state(1)
    out = cell.output(state)
    leaves = list(state) if isinstance(state, tuple) else [state]
    for i, leaf in enumerate(leaves):
        if out is leaf and leaf.shape == (1, cell.hidden_size):
            return i
    raise TypeError(f"MultiChannel needs a cell whose output(state) is one of its state tensors of shape "
                    f"(batch, hidden_size); {type(cell).__name__} computes its output, so it cannot be wrapped.")


def slots_to_channels(alpha_slots: Tensor, phase: Tensor) -> Tensor:
    """Reorder per-slot values ``(B, n−1, ...)`` to channel order k = 1 … n − 1 given the phase
    (steps done mod n − 1) before the step: slot of channel k is ((phase − k) mod (n − 1)) (eq. 1)."""
    c = alpha_slots.shape[1]
    k = torch.arange(1, c + 1, device=phase.device)
    index = (phase.unsqueeze(1) - k) % c
    index = index.view(*index.shape, *([1] * (alpha_slots.dim() - 2))).expand_as(alpha_slots)
    return alpha_slots.gather(1, index)


def channel_attention(module: nn.Module, x: Tensor, state: Optional[Any] = None,
                      lengths: Optional[Tensor] = None, *, layer: int = 0, direction: int = 0) -> Tensor:
    """The channel attention α (eq. 5) for every step: ``(B, T, n−1)``, channels k = 1 … n − 1.

    ``module`` is a :class:`MultiChannel` cell (``x`` is then ``(B, T, input_size)``) or a
    ``Recurrent`` layer built around one (``x`` as its ``forward`` takes it; ``layer`` and
    ``direction`` pick the cell). Runs without gradients; padded steps give zeros. For plots
    like the paper's Figure 3.
    """
    with torch.no_grad():
        if isinstance(module, MultiChannel):
            return _cell_attention(module, x, state, lengths)
        if not hasattr(module, "cell") or not callable(module.cell):
            raise TypeError(f"channel_attention takes a MultiChannel cell or a Recurrent layer, "
                            f"got {type(module).__name__}.")
        cell = module.cell(layer, direction)
        if not isinstance(cell, MultiChannel):
            raise TypeError(f"Layer {layer}, direction {direction} holds a {type(cell).__name__}, not a MultiChannel.")
        with cell.recording_attention() as log:
            module(x, state, lengths)
        batch = x.shape[0] if module.batch_first else x.shape[1]
        if not log:
            return x.new_zeros(batch, 0, cell.channels)
        alpha = torch.stack(log)  # (T, B, c) in processing order
        if direction == 1:
            alpha = _unreverse(alpha, lengths)
        return _mask(alpha.transpose(0, 1), lengths)


def _cell_attention(cell: MultiChannel, x: Tensor, state: Optional[MCState], lengths: Optional[Tensor]) -> Tensor:
    if state is None:
        state = cell.initial_state(x.shape[0], device=x.device, dtype=x.dtype)
    x_proj = cell.project_input(x)
    alphas: List[Tensor] = []
    with cell.recording_attention() as log:
        for t in range(x.shape[1]):
            new = cell.step(x_proj[:, t], state)
            if lengths is not None:  # padded steps keep the state, as in Recurrent
                keep = torch.as_tensor(lengths, device=x.device) > t
                new = tuple(torch.where(keep.view(-1, *([1] * (n.dim() - 1))), n, o) for n, o in zip(new, state))
            state = new
        alphas = log
    if not alphas:
        return x.new_zeros(x.shape[0], 0, cell.channels)
    return _mask(torch.stack(alphas, dim=1), lengths)


def _mask(alpha: Tensor, lengths: Optional[Tensor]) -> Tensor:
    """Zero α (B, T, c) at padded steps."""
    if lengths is None:
        return alpha
    lengths = torch.as_tensor(lengths, device=alpha.device)
    real = torch.arange(alpha.shape[1], device=alpha.device).unsqueeze(0) < lengths.unsqueeze(1)
    return alpha * real.unsqueeze(-1).to(alpha.dtype)


def _unreverse(alpha: Tensor, lengths: Optional[Tensor]) -> Tensor:
    """Undo the backward direction's reversal (within each length) of α (T, B, c)."""
    if lengths is None:
        return alpha.flip(0)
    lengths = torch.as_tensor(lengths, device=alpha.device)
    t = torch.arange(alpha.shape[0], device=alpha.device).unsqueeze(1)
    rev = lengths.unsqueeze(0) - 1 - t
    index = torch.where(rev >= 0, rev, t)
    return alpha.gather(0, index.unsqueeze(-1).expand_as(alpha))
