"""CARU, the content-adaptive recurrent unit (Chan et al., ICONIP 2020 eq. 4a–4e)."""
from __future__ import annotations

from typing import ContextManager, List, Optional, Tuple

import torch
from torch import Tensor
from torch.nn import functional as F

from .base import AffineCell
from .deferred import deferred_linear
from .recording import recording_into
from .registry import register_cell


@register_cell()
class CARU(AffineCell):
    """Content-adaptive recurrent unit, Chan et al., ICONIP 2020, equations 4a–4e:

        x' = W_vn v + b_vn                              (4a)
        n  = tanh(W_hn h + b_hn + x')                   (4b)
        z  = σ(W_hz h + b_hz + W_vz v + b_vz)           (4c)
        l  = σ(x') ⊙ z                                  (4d)
        h' = (1 − l) ⊙ h + l ⊙ n                        (4e)

    ``weight_ih`` stacks W_vn and W_vz, ``weight_hh`` stacks W_hn and W_hz.
    x' and the x-part of z depend on the input only, so :meth:`project_input`
    computes them for all steps at once; σ(x') is taken inside the step (an
    element-wise op on a slice) rather than stored for all steps beside them,
    which keeps a training step's memory near torch.nn.GRU's. Unlike the
    authors' code, whose first step (no state) returns tanh(x'), we start from
    a zero state like every other cell (with h = 0 the first step gives
    l ⊙ tanh(x' + b_hn)).

    ``word_weight=False`` is an ablation the paper does not run: l = z, eq. 4d without the word
    weight σ(x') (x' still enters the candidate, 4b), so the cell is a GRU without its reset gate. It
    separates the word weight from the reset gate CARU gives up, e.g. ``--cells CARU
    "CARU(word_weight=false)"`` in ``compare``.

    ``content_weight_bias=b`` adds ``b`` to b_hz at initialisation, an option the paper does not have
    (it states no initialisation): with the default 0, σ(x') and z each start near ½, so the first
    steps move the state by l ≈ ¼ where a GRU's update moves it by about ½; ``b = 2`` starts z near
    σ(2) ≈ 0.88 and l near 0.44. It tests whether that halved step, rather than the gate itself, is
    what CARU pays for, e.g. ``--cells CARU "CARU(content_weight_bias=2)"``. The equations are unchanged.

    Inside :meth:`recording_gates` every step records its word weight σ(x') (ones under the
    ablation) and content weight z; :func:`~lit_rnncells.nn.recording.content_adaptive_gates` runs a
    layer so and returns them.
    """

    gates = 2
    gate_bias_option = ("content_weight_bias", 1)  # b_hz
    _gate_log: Optional[List[Tuple[Tensor, Tensor]]] = None  # (σ(x'), z) of each step, inside recording_gates()

    def __init__(self, input_size: int, hidden_size: int, *, word_weight: bool = True,
                 content_weight_bias: float = 0.0) -> None:
        super().__init__(input_size, hidden_size)
        self.word_weight = bool(word_weight)
        self.content_weight_bias = float(content_weight_bias)
        self.shift_gate_bias()

    def project_input(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight_ih, self.bias_ih)  # [x', W_vz v + b_vz]

    def step(self, x_proj_t: Tensor, state: Tensor) -> Tensor:
        h = self.hidden_size
        gh = deferred_linear(state, self.weight_hh, self.bias_hh)
        feature = x_proj_t[:, :h]
        n = torch.tanh(gh[:, :h] + feature)
        z = torch.sigmoid(gh[:, h:] + x_proj_t[:, h:])
        if not self.word_weight:  # the ablation: l = z
            if self._gate_log is not None:
                self._gate_log.append((torch.ones_like(z), z.detach()))
            return torch.addcmul(state, z, n - state)
        word_weight = torch.sigmoid(feature)
        if self._gate_log is not None:
            self._gate_log.append((word_weight.detach(), z.detach()))
        return torch.addcmul(state, word_weight * z, n - state)

    def extra_repr(self) -> str:
        return super().extra_repr() + ("" if self.word_weight else ", word_weight=False") + (
            f", content_weight_bias={self.content_weight_bias:g}" if self.content_weight_bias else "")

    def recording_gates(self) -> ContextManager[List[Tuple[Tensor, Tensor]]]:
        """Within the block, every step appends its detached word weight σ(x') and content weight z, each
        ``(B, H)`` (eq. 4d's two factors; their product is the content-adaptive gate l), to the yielded list.
        Prefer :func:`~lit_rnncells.nn.recording.content_adaptive_gates`."""
        return recording_into(self, "_gate_log")
