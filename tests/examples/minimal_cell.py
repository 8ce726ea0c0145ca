"""The README's "Adding a cell" example, a cell of a user's own module (named by import path in configs)."""
import torch
from torch import nn
from torch.nn import functional as F

from lit_rnncells.cells import RecurrentCell, register_cell


@register_cell()
class MinimalRNN(RecurrentCell):
    """h' = (1 − u) ⊙ h + u ⊙ tanh(W x), u = σ(U h + V x)."""

    recurrent_weights = ("weight_hh",)

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__(input_size, hidden_size)
        self.weight_ih = nn.Parameter(torch.randn(2 * hidden_size, input_size) / input_size ** 0.5)
        self.weight_hh = nn.Parameter(torch.randn(hidden_size, hidden_size) / hidden_size ** 0.5)

    def project_input(self, x):
        return F.linear(x, self.weight_ih)

    def step(self, x_proj_t, h):
        z, ux = x_proj_t.chunk(2, dim=-1)
        u = torch.sigmoid(ux + h @ self.weight_hh.t())
        return h + u * (torch.tanh(z) - h)
