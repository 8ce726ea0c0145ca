"""Classic cells: Elman (tanh) RNN, GRU, LSTM and MGU.

Parameter names and gate orders of Elman, GRU and LSTM follow torch.nn.RNN /
GRU / LSTM (``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``), so weights
copy across one to one.
"""
from __future__ import annotations

from typing import Optional, Set, Tuple, Union

import torch
from torch import Tensor
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .base import AffineCell
from .deferred import deferred_addmm, deferred_linear
from .registry import register_cell

_CPU_AUTOCAST_WITHOUT_FUSED: Set[Tuple[str, torch.dtype]] = {(k, torch.float16) for k in ("lstm", "gru", "rnn_tanh")}
"""(kernel, autocast dtype) pairs this machine's CPU has no fused kernel for (float16 never; found on first use)."""


def fused_kernel(cell: AffineCell, defined_by: type, kernel: str, x: Tensor, hx: Union[Tensor, Tuple[Tensor, ...]],
                 lengths: Optional[Tensor] = None) -> Optional[Tuple[Tensor, ...]]:
    """``torch.<kernel>`` (``lstm``, ``gru`` or ``rnn_tanh``: oneDNN or native on CPU, cuDNN on a GPU) over the
    time-major ``x`` from ``hx`` (``(1, B, H)`` leaves), one layer with ``cell``'s weights read at call time (so
    DropConnect's dropped copies are used): ``(outputs (T, B, H), *final (1, B, H) leaves)``. With ``lengths``
    (B,) the batch is padded and runs packed: zero outputs at padded steps, each final state at its sequence's
    last real step. ``None``, so the layer loops over the step instead, when ``cell``'s step is not
    ``defined_by``'s (a subclass's or a patched step is not the kernel's), under a ``torch.func`` transform (torch
    has no ``vmap`` rule for these kernels; the step's ops have), or where CPU autocast's dtype has no such kernel
    on this machine (bfloat16 has one only on CPUs with bf16 instructions)."""
    if getattr(cell.step, "__func__", None) is not defined_by.step or torch._C._are_functorch_transforms_active():
        return None
    cpu_autocast = x.device.type == "cpu" and torch.is_autocast_enabled("cpu")
    key = (kernel, torch.get_autocast_dtype("cpu")) if cpu_autocast else None
    if key in _CPU_AUTOCAST_WITHOUT_FUSED:
        return None
    params = [cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh]
    try:
        if lengths is None:
            return getattr(torch, kernel)(x, hx, params, True, 1, 0.0, cell.training, False, False)
        packed = pack_padded_sequence(x, lengths.cpu(), enforce_sorted=False)
        leaves = hx if isinstance(hx, tuple) else (hx,)
        sorted_hx = tuple(h.index_select(1, packed.sorted_indices) for h in leaves)
        ran = getattr(torch, kernel)(packed.data, packed.batch_sizes, sorted_hx if isinstance(hx, tuple)
                                     else sorted_hx[0], params, True, 1, 0.0, cell.training, False)
        out, _ = pad_packed_sequence(packed._replace(data=ran[0]), total_length=x.shape[0])
        return (out, *(h.index_select(1, packed.unsorted_indices) for h in ran[1:]))
    except RuntimeError:
        if key is None:
            raise
        _CPU_AUTOCAST_WITHOUT_FUSED.add(key)
        return None


def gru_update(x_part: Tensor, gh: Tensor, h: Tensor) -> Tensor:
    """torch.nn.GRU's update from ``W_i x + b_i`` and ``W_h h + b_h`` (gate order r, z, n)."""
    n_h = h.shape[-1]
    rz = torch.sigmoid(x_part[..., : 2 * n_h] + gh[..., : 2 * n_h])
    r, z = rz[..., :n_h], rz[..., n_h:]
    n = torch.tanh(torch.addcmul(x_part[..., 2 * n_h:], r, gh[..., 2 * n_h:]))
    return torch.addcmul(n, z, h - n)


@register_cell()
class Elman(AffineCell):
    """Elman (tanh) RNN: h' = tanh(W_ih x + b_ih + W_hh h + b_hh)."""

    fused_takes_lengths = True
    gates = 1

    def project_input(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight_ih, self.bias_ih + self.bias_hh)

    def step(self, x_proj_t: Tensor, state: Tensor) -> Tensor:
        return torch.tanh(deferred_addmm(x_proj_t, state, self.weight_hh))

    def fused_sequence(self, x: Tensor, state: Tensor, lengths: Optional[Tensor] = None
                       ) -> Optional[Tuple[Tensor, Tensor]]:
        """The same equation through torch's fused tanh RNN (cuDNN on a GPU)."""
        ran = fused_kernel(self, Elman, "rnn_tanh", x, state.unsqueeze(0), lengths)
        return None if ran is None else (ran[0], ran[1][0].to(state.dtype))


@register_cell()
class GRU(AffineCell):
    """Gated recurrent unit, exactly torch.nn.GRU's equations (Cho et al., 2014):

    r = σ(W_ir x + b_ir + W_hr h + b_hr), z = σ(W_iz x + b_iz + W_hz h + b_hz),
    n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)), h' = (1 − z) ⊙ n + z ⊙ h.

    ``update_bias=b`` adds ``b`` to b_hz at initialisation (default 0, torch.nn.GRU's initialisation): the step
    1 − z then starts near σ(−b) instead of ½, e.g. ``b = 1.1`` starts it near ¼, where CARU's l = σ(x') ⊙ z
    starts; the equations, and the fused kernel that runs them, are unchanged.
    """

    fused_takes_lengths = True
    gates = 3
    gate_bias_option = ("update_bias", 1)  # b_hz

    def __init__(self, input_size: int, hidden_size: int, *, update_bias: float = 0.0) -> None:
        super().__init__(input_size, hidden_size)
        self.update_bias = float(update_bias)
        self.shift_gate_bias()

    def extra_repr(self) -> str:
        return super().extra_repr() + (f", update_bias={self.update_bias:g}" if self.update_bias else "")

    def step(self, x_proj_t: Tensor, state: Tensor) -> Tensor:
        return gru_update(x_proj_t, deferred_linear(state, self.weight_hh, self.bias_hh), state)

    def fused_sequence(self, x: Tensor, state: Tensor, lengths: Optional[Tensor] = None
                       ) -> Optional[Tuple[Tensor, Tensor]]:
        """The same equations through torch's fused GRU (cuDNN on a GPU)."""
        ran = fused_kernel(self, GRU, "gru", x, state.unsqueeze(0), lengths)
        return None if ran is None else (ran[0], ran[1][0].to(state.dtype))


@register_cell()
class LSTM(AffineCell):
    """Long short-term memory, exactly torch.nn.LSTM's equations (gate order i, f, g, o):

    c' = f ⊙ c + i ⊙ g, h' = o ⊙ tanh(c'). The state is ``(h, c)``.
    """

    fused_takes_lengths = True
    gates = 4

    def project_input(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight_ih, self.bias_ih + self.bias_hh)

    def initial_state(self, batch_size: int, *, device=None, dtype=None) -> Tuple[Tensor, Tensor]:
        zeros = torch.zeros(batch_size, self.hidden_size, device=device, dtype=dtype)
        return zeros, zeros.clone()

    def step(self, x_proj_t: Tensor, state: Tuple[Tensor, Tensor]) -> Tuple[Tensor, Tensor]:
        h_prev, c_prev = state
        h = self.hidden_size
        gates = deferred_addmm(x_proj_t, h_prev, self.weight_hh)
        sig = torch.sigmoid(gates)
        i, f, o = sig[:, :h], sig[:, h: 2 * h], sig[:, 3 * h:]
        g = torch.tanh(gates[:, 2 * h: 3 * h])
        c = torch.addcmul(f * c_prev, i, g)
        return o * torch.tanh(c), c

    def output(self, state: Tuple[Tensor, Tensor]) -> Tensor:
        return state[0]

    def fused_sequence(self, x: Tensor, state: Tuple[Tensor, Tensor], lengths: Optional[Tensor] = None
                       ) -> Optional[Tuple[Tensor, Tuple[Tensor, Tensor]]]:
        """The same equations through torch's fused LSTM kernel (oneDNN on CPU, cuDNN on GPU).

        Reads the weights at call time, so DropConnect's dropped copies are used.
        """
        h0, c0 = state
        ran = fused_kernel(self, LSTM, "lstm", x, (h0.unsqueeze(0), c0.unsqueeze(0)), lengths)
        if ran is None:
            return None
        out, h_n, c_n = ran
        return out, (h_n[0].to(h0.dtype), c_n[0].to(c0.dtype))


@register_cell()
class MGU(AffineCell):
    """Minimal gated unit (Zhou et al., 2016):

    f = σ(W_f [x, h] + b_f), h~ = tanh(W_h [x, f ⊙ h] + b_h), h' = (1 − f) ⊙ h + f ⊙ h~.
    ``weight_ih`` stacks the x-parts of W_f and W_h; ``weight_hh`` their h-parts.
    """

    gates = 2

    def project_input(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight_ih, self.bias_ih + self.bias_hh)

    def step(self, x_proj_t: Tensor, state: Tensor) -> Tensor:
        h = self.hidden_size
        f = torch.sigmoid(torch.addmm(x_proj_t[:, :h], state, self.weight_hh[:h].t()))
        cand = torch.tanh(torch.addmm(x_proj_t[:, h:], f * state, self.weight_hh[h:].t()))
        return torch.addcmul(state, f, cand - state)
