"""CARU, the content-adaptive recurrent unit (Chan et al., ICONIP 2020 eq. 4a–4e)."""
from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from .base import AffineCell
from .deferred import deferred_linear
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
    """

    gates = 2

    def project_input(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight_ih, self.bias_ih)  # [x', W_vz v + b_vz]

    def step(self, x_proj_t: Tensor, state: Tensor) -> Tensor:
        h = self.hidden_size
        gh = deferred_linear(state, self.weight_hh, self.bias_hh)
        feature = x_proj_t[:, :h]
        n = torch.tanh(gh[:, :h] + feature)
        z = torch.sigmoid(gh[:, h:] + x_proj_t[:, h:])
        gate = torch.sigmoid(feature) * z
        return torch.addcmul(state, gate, n - state)
