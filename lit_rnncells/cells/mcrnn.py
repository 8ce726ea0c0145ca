"""MC-RNN: the multi-channel, multi-block wrapper around any cell (Xu et al., AAAI 2019 eq. 1–6).

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
  slots with m ≥ j, so depth j is one matmul on the n − j slots that need it, and
  over all j the step does (n − 1) n / 2 H×H products per example instead of
  (n − 1)², all in one autograd node (``_SlotMix``, with a hand-written backward).
* Eq. 3: channels fold into the batch — one call of the wrapped cell's ``step``
  on a ``((n − 1) B, ...)`` batch; its ``project_input`` runs once on x and is
  repeated across channels.
* Eq. 4–6 (the attention over channels) never feed back: eq. 2 reads each
  channel's own h^k, not the mixed h_t. So the step keeps the channels' new h
  (and V_x x_t) in the state and the layer computes h_t for all steps at once
  after the time loop (:meth:`MultiChannel.output_sequence`, one matmul with
  V_h on T·B·(n − 1) rows); :meth:`MultiChannel.output` does the same for one
  state. V = [V_h V_x] is split and V_x x is hoisted into
  :meth:`MultiChannel.project_input`.

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
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable
from torch.nn import functional as F

from .base import CellFactory, RecurrentCell, State, check_positive
from .recording import cell_in, mask_padded, unreverse_steps
from .registry import get_cell, register_cell

MCState = Tuple[Tensor, ...]
"""``(V_x x_t (B, H), phase (B,) long, R_1 … R_{n−1} (B, n−1, H), *carried leaves (B, n−1, ...))``:
``R_j`` holds the channels' h from j steps back, its slots in the order they had one step after
that (so ``R_1`` is in the slot order of the next step); carried leaves are in ``R_1``'s order.
The output h_t (eq. 4) is computed from ``R_1`` and V_x x_t by ``output`` / ``output_sequence``."""


@register_cell()
class MultiChannel(RecurrentCell):
    """MC-RNN around any cell ``f`` (Xu et al., AAAI 2019, eq. 1–6), block size n, n − 1 channels:

        m^k_t = ((t − k − 1) mod (n − 1)) + 1                      (1)
        s^k_{t−1} = (1/m^k_t) Σ_{j=1..m^k_t} W_j h^k_{t−j}          (2)
        h^k_t = f(s^k_{t−1}, x_t)                                   (3)
        h_t = Σ_k α^k_t h^k_t,  α_t = softmax_k(e_t)               (4, 5)
        e^k_t = rᵀ tanh(V [h^k_t; x_t])                             (6)

    ``cell`` is the wrapped cell: a cell class, a factory ``(input_size,
    hidden_size) -> RecurrentCell`` or a registered name. ``block_size`` is n
    (≥ 2); the paper's MC-RNN-k has k = n − 1 channels, its best is MC-RNN-3
    (n = 4, the default). The layer output is the mixed h_t, computed after the
    time loop from the channels' h^k kept in the state. See the module docstring for the
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
        # m of the slots, eq. 2 (divided by: exact in every float dtype, unlike 1/m; not saved).
        self.register_buffer("degree", torch.arange(1, c + 1, dtype=torch.float32).view(c, 1, 1), persistent=False)
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
        """h^k_t for t ≤ 0 is the wrapped cell's initial state in every channel and history slot
        (so :meth:`output` of it is that state's h, whatever α); V_x x_0 is zero."""
        c = self.channels
        inner = self.cell.initial_state(batch_size, device=device, dtype=dtype)
        leaves = list(inner) if isinstance(inner, tuple) else [inner]
        h0 = leaves.pop(self._mixed_leaf)
        history = [_swap_slots_and_batch(h0.unsqueeze(0).expand(c, *h0.shape).contiguous()) for _ in range(c)]
        carried = [_swap_slots_and_batch(leaf.unsqueeze(0).expand(c, *leaf.shape).contiguous()) for leaf in leaves]
        phase = torch.zeros(batch_size, dtype=torch.long, device=h0.device)
        return (torch.zeros_like(h0), phase, *history, *carried)

    def output(self, state: MCState) -> Tensor:  # type: ignore[override]
        """Eq. 4–6 on the channels' newest h (``R_1``) and the step's V_x x_t (see :data:`MCState`)."""
        return self.output_sequence([state])[0]

    def output_sequence(self, states: Sequence[MCState]) -> Tensor:  # type: ignore[override]
        """Eq. 4–6 for all steps at once: e = rᵀ tanh(V_h h^k_t + V_x x_t), α = softmax_k(e),
        h_t = Σ_k α^k_t h^k_t. The attention never feeds back into the recurrence (eq. 2 reads the
        channels' own h^k), so it runs after the time loop as one (T·B·c, H) × (H, H) matmul."""
        h_ch = torch.stack([s[2] for s in states])  # (T, B, c, H), slots as after the step
        att_x = torch.stack([s[0] for s in states])  # (T, B, H)
        # Plain 2-D matmuls and a weighted sum: CPU bmm/mv over T·B tiny batches loops per batch.
        features = torch.tanh(F.linear(h_ch, self.att_hidden) + att_x.unsqueeze(2))
        energy = features.flatten(0, -2).mv(self.att_vector.to(features.dtype)).view(features.shape[:-1])
        alpha = torch.softmax(energy, dim=2)
        if self._attention_log is not None:
            phase = torch.stack([s[1] for s in states])  # steps done mod c, after each step
            self._attention_log.extend(slots_to_channels(alpha.detach().flatten(0, 1), phase.flatten())
                                       .view_as(alpha).unbind(0))
        return (alpha.unsqueeze(-1).to(h_ch.dtype) * h_ch).sum(2)

    def step(self, x_proj_t: Tensor, state: MCState) -> MCState:  # type: ignore[override]
        return self._step(x_proj_t, state, want_aux=False)[0]

    def step_with_aux(  # type: ignore[override]
            self, x_proj_t: Tensor, state: MCState) -> Tuple[MCState, Optional[Tensor]]:
        return self._step(x_proj_t, state, want_aux=self.has_aux_loss)

    def _step(self, x_proj_t: Tensor, state: MCState, want_aux: bool) -> Tuple[MCState, Optional[Tensor]]:
        """Eq. 1–3 for all channels; the attention (eq. 4–6) is left to :meth:`output_sequence`.

        The wrapped cell runs on the channels folded into the batch, ``(c·B, ...)`` rows in
        slot-major order; the state's ``(B, c, ...)`` leaves are views of slot-major memory, so
        the folding is a view. Few autograd nodes per step: that is where the time goes."""
        c, hs = self.channels, self.hidden_size
        phase, history, carried = state[1], state[2: 2 + c], state[2 + c:]
        batch = phase.shape[0]
        inner_x, att_x = x_proj_t.split([x_proj_t.shape[-1] - hs, hs], dim=-1)
        # Eq. 2, in the slot order of the next step (see _SlotMix), so the cell's new h needs no rotation.
        s = _slot_mix(self.mix_weight, self.degree, history)
        # Eq. 3 for all channels at once. The other leaves (LSTM's c) rotate with the slots:
        # slot i -> i + 1, the block end -> 0.
        leaves: List[Tensor] = [_swap_slots_and_batch(leaf).roll(1, dims=0).flatten(0, 1) for leaf in carried]
        leaves.insert(self._mixed_leaf, s)
        inner_state: State = tuple(leaves) if len(leaves) > 1 else leaves[0]
        x_rep = inner_x.repeat(c, 1)
        if want_aux:
            new_inner, aux = self.cell.step_with_aux(x_rep, inner_state)
        else:
            new_inner, aux = self.cell.step(x_rep, inner_state), None
        new_leaves = [_swap_slots_and_batch(leaf.unflatten(0, (c, batch)))
                      for leaf in (new_inner if isinstance(new_inner, tuple) else (new_inner,))]
        h_ch = new_leaves.pop(self._mixed_leaf)
        if aux is not None:
            aux = aux.view(c, batch).mean(0)
        # h_{t−j} moves one step deeper; the oldest is dropped.
        return (att_x, (phase + 1) % c, h_ch, *history[:-1], *new_leaves), aux

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


def _slot_mix(weight: Tensor, degree: Tensor, history: Sequence[Tensor]) -> Tensor:
    """Eq. 2 for every slot, as :class:`_SlotMix` defines it (same inputs, same result, same summation order).

    Eagerly it is ``_SlotMix``'s one autograd node. While ``torch.compile`` traces the step it is written in
    plain ops instead, which the compiler differentiates and fuses itself: a custom ``autograd.Function``
    gains nothing there, and torch 2.11's Dynamo failed an internal assertion tracing this one for CUDA graphs
    (``reduce-overhead``) on an H200."""
    if not torch.compiler.is_compiling():
        return _SlotMix.apply(weight, degree, *history)
    slots = [_swap_slots_and_batch(h) for h in history]  # (c, B, H) each
    c, batch, hidden = slots[0].shape
    s = torch.matmul(slots[0], weight[0].t())
    for d in range(1, c):  # W_d on the prefix R_d[: c − d], added into slots d … c − 1
        s = s + F.pad(torch.matmul(slots[d][: c - d], weight[d].t()), (0, 0, 0, 0, d, 0))
    s = s / degree.to(s.dtype)
    return s.roll(1, dims=0).reshape(c * batch, hidden)


class _SlotMix(torch.autograd.Function):
    """Eq. 2 for every slot in one autograd node: s_i = (1/m_i) Σ_{j ≤ m_i} W_j h_{t−j}, m_i = i + 1.

    Inputs: ``W`` (c, H, H), ``degree`` (c, 1, 1) holding m_i, and ``R_1 … R_c`` (the state's
    ``(B, c, H)`` leaves, used slot-first as (c, B, H)), where
    ``R_j`` holds the channels' h from step t − j with its rows in the slot order of step
    t − j + 1. The channel in slot i now (in-degree i + 1) was in slot i − j + 1 then, so W_j
    multiplies the prefix ``R_j[: c − j + 1]`` and adds into slots j − 1 … c − 1:
    c (c + 1) / 2 H×H products per example in c matmuls. The result is returned rotated by
    one slot (slot i -> i + 1, the block end -> 0), the slot order of step t + 1, as the
    wrapped cell's ``(c·B, H)`` batch, so its new h is already the next step's ``R_1``.

    One node instead of some twenty small ones (matmuls on slices, in-place adds, rotations and
    their backward), which is what the step's time went to. Matmuls follow autocast in the
    forward; the backward computes in the gradient's dtype and returns each input's own dtype.
    """

    @staticmethod
    def forward(ctx, weight: Tensor, degree: Tensor, *history: Tensor) -> Tensor:  # type: ignore[override]
        slots = [_swap_slots_and_batch(h) for h in history]  # (c, B, H) each, contiguous when made by this class
        c, batch, hidden = slots[0].shape
        # s (c·B, H) = R_1 W_1ᵀ, then W_j's rows added in place into the slots j − 1 … c − 1.
        s = torch.matmul(_rows(slots[0], c), weight[0].t())
        for d in range(1, c):
            s[d * batch:] += torch.matmul(_rows(slots[d], c - d), weight[d].t())
        s = s.view(c, batch, hidden)
        s.div_(degree.to(s.dtype))
        ctx.save_for_backward(weight, degree, *history)
        return s.roll(1, dims=0).view(c * batch, hidden)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor):  # type: ignore[override]
        weight, degree, *history = ctx.saved_tensors
        c, dtype = weight.shape[0], grad_out.dtype
        grad_out = grad_out.view(c, -1, grad_out.shape[-1])
        grad_s = (grad_out.roll(-1, dims=0) / degree.to(dtype)).flatten(0, 1)
        batch = grad_out.shape[1]
        grad_weight = weight.new_empty(weight.shape, dtype=dtype) if ctx.needs_input_grad[0] else None
        grad_history: List[Optional[Tensor]] = []
        for d, hist in enumerate(history):
            slots = _swap_slots_and_batch(hist)
            g = grad_s[d * batch:]
            if grad_weight is not None:
                torch.mm(g.t(), _rows(slots, c - d).to(dtype), out=grad_weight[d])
            if not ctx.needs_input_grad[2 + d]:
                grad_history.append(None)
                continue
            grad = grad_s.new_empty(slots.shape)  # slot-major, returned as the input's batch-first view
            grad[c - d:] = 0
            torch.mm(g, weight[d].to(dtype), out=_rows(grad, c - d))
            grad_history.append(_swap_slots_and_batch(grad.to(slots.dtype)))
        if grad_weight is not None:
            grad_weight = grad_weight.to(weight.dtype)
        return (grad_weight, None, *grad_history)


def _rows(slots: Tensor, count: int) -> Tensor:
    """The first ``count`` slots of ``(c, B, H)`` as ``(count·B, H)`` rows (a view when contiguous)."""
    return slots[:count].reshape(-1, slots.shape[-1])


def _swap_slots_and_batch(leaf: Tensor) -> Tensor:
    """A state leaf ``(B, slots, ...)`` as ``(slots, B, ...)`` and back (a view). The state's
    leaves are batch-first views of slot-major memory, so the slot-first view is contiguous."""
    return leaf.transpose(0, 1)


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
        cell = cell_in(module, MultiChannel, "channel_attention", layer, direction)
        with cell.recording_attention() as log:
            module(x, state, lengths)
        batch = x.shape[0] if module.batch_first else x.shape[1]
        if not log:
            return x.new_zeros(batch, 0, cell.channels)
        alpha = torch.stack(log)  # (T, B, c) in processing order
        if direction == 1:
            alpha = unreverse_steps(alpha, lengths)
        return mask_padded(alpha.transpose(0, 1), lengths)


def _cell_attention(cell: MultiChannel, x: Tensor, state: Optional[MCState], lengths: Optional[Tensor]) -> Tensor:
    if state is None:
        state = cell.initial_state(x.shape[0], device=x.device, dtype=x.dtype)
    x_proj = cell.project_input(x)
    states: List[MCState] = []
    for t in range(x.shape[1]):
        new = cell.step(x_proj[:, t], state)
        if lengths is not None:  # padded steps keep the state, as in Recurrent
            keep = torch.as_tensor(lengths, device=x.device) > t
            new = tuple(torch.where(keep.view(-1, *([1] * (n.dim() - 1))), n, o) for n, o in zip(new, state))
        state = new
        states.append(state)
    if not states:
        return x.new_zeros(x.shape[0], 0, cell.channels)
    with cell.recording_attention() as log:
        cell.output_sequence(states)
    return mask_padded(torch.stack(log, dim=1), lengths)
