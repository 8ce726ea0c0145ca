"""A user's own cell that is not registered: the leaderboard test names it by its import path only."""
import torch
from torch import nn
from torch.nn import functional as F

from lit_rnncells.cells import RecurrentCell


class GainRNN(RecurrentCell):
    """h' = g ⊙ tanh(W x + U h): an Elman cell with a learned per-unit gain g (not in the registry)."""

    recurrent_weights = ("weight_hh",)

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__(input_size, hidden_size)
        self.weight_ih = nn.Parameter(torch.randn(hidden_size, input_size) / input_size ** 0.5)
        self.weight_hh = nn.Parameter(torch.randn(hidden_size, hidden_size) / hidden_size ** 0.5)
        self.gain = nn.Parameter(torch.ones(hidden_size))

    def project_input(self, x):
        return F.linear(x, self.weight_ih)

    def step(self, x_proj_t, h):
        return self.gain * torch.tanh(x_proj_t + h @ self.weight_hh.t())
