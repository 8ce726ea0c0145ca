"""CARU, the content-adaptive recurrent unit (Chan et al., caru.md eq. 4a–4e)."""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .base import RecurrentCell
from .registry import register_cell


@register_cell()
class CARU(RecurrentCell):
    """Content-adaptive recurrent unit, caru.md equations 4a–4e:

        x' = W_vn v + b_vn                              (4a)
        n  = tanh(W_hn h + b_hn + x')                   (4b)
        z  = σ(W_hz h + b_hz + W_vz v + b_vz)           (4c)
        l  = σ(x') ⊙ z                                  (4d)
        h' = (1 − l) ⊙ h + l ⊙ n                        (4e)

    ``weight_ih`` stacks W_vn and W_vz, ``weight_hh`` stacks W_hn and W_hz.
    x', σ(x') and the x-part of z depend on the input only, so
    :meth:`project_input` computes them for all steps at once. Unlike the
    authors' code, whose first step (no state) returns tanh(x'), we start from
    a zero state like every other cell (with h = 0 the first step gives
    l ⊙ tanh(x' + b_hn)).
    """

    recurrent_weights = ("weight_hh",)  # hidden-to-hidden maps, for DropConnect (nn.dropout.WeightDrop)

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__(input_size, hidden_size)
        self.weight_ih = nn.Parameter(torch.empty(2 * hidden_size, input_size))
        self.bias_ih = nn.Parameter(torch.empty(2 * hidden_size))
        self.weight_hh = nn.Parameter(torch.empty(2 * hidden_size, hidden_size))
        self.bias_hh = nn.Parameter(torch.empty(2 * hidden_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def project_input(self, x: Tensor) -> Tensor:
        proj = F.linear(x, self.weight_ih, self.bias_ih)  # [x', W_vz v + b_vz]
        feature = proj[..., : self.hidden_size]
        return torch.cat([proj, torch.sigmoid(feature)], dim=-1)  # [x', W_vz v + b_vz, σ(x')]

    def step(self, x_proj_t: Tensor, state: Tensor) -> Tensor:
        h = self.hidden_size
        gh = F.linear(state, self.weight_hh, self.bias_hh)
        n = torch.tanh(gh[:, :h] + x_proj_t[:, :h])
        z = torch.sigmoid(gh[:, h:] + x_proj_t[:, h: 2 * h])
        gate = x_proj_t[:, 2 * h:] * z
        return torch.addcmul(state, gate, n - state)
