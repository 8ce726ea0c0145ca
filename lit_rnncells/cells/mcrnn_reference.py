"""The literal, slow reference of MC-RNN (Xu et al., AAAI 2019, eq. 1–6), for tests and benchmarks only.

One channel at a time, Python loops over steps, channels and block
predecessors, the in-degree computed by eq. 1 at every node, the attention
with the full V applied to the concatenation [h^k_t; x_t]. It shares the
parameters of a :class:`~lit_rnncells.cells.mcrnn.MultiChannel` cell, so the
fast version can be checked against it (outputs, α and gradients) and timed
against it. It always starts from the zero state (h^k_t = 0 for t ≤ 0) and
takes no padding. Do not use it for training.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import torch
from torch import Tensor

from .mcrnn import MultiChannel


def in_degree(t: int, k: int, block_size: int) -> int:
    """Eq. 1: m^k_t = ((t − k − 1) mod (n − 1)) + 1 for step t ≥ 1 and channel k ∈ 1 … n − 1."""
    return (t - k - 1) % (block_size - 1) + 1


def reference_forward(mc: MultiChannel, x: Tensor) -> Tuple[Tensor, Tensor]:
    """Run ``mc`` literally over ``x`` (B, T, input_size) from the zero state.

    Returns the outputs h_t ``(B, T, H)`` (eq. 4) and the attention α ``(B, T, n−1)``
    (eq. 5) with channels in order k = 1 … n − 1.
    """
    n, channels = mc.block_size, mc.channels
    f = mc.cell
    batch, steps = x.shape[0], x.shape[1]
    hs = mc.hidden_size
    x_proj = f.project_input(x)  # the wrapped cell's own input maps (its contract), for every step
    init = f.initial_state(batch, device=x.device, dtype=x.dtype)
    init_leaves = list(init) if isinstance(init, tuple) else [init]
    mixed = mc._mixed_leaf
    zero = torch.zeros(batch, hs, dtype=x.dtype, device=x.device)
    # h[k][t] for t ≤ 0 is zero; other leaves (LSTM's c) of the latest node of channel k.
    h: Dict[int, Dict[int, Tensor]] = {k: {} for k in range(1, channels + 1)}
    carried: Dict[int, List[Tensor]] = {k: [leaf for i, leaf in enumerate(init_leaves) if i != mixed]
                                        for k in range(1, channels + 1)}
    big_v = torch.cat([mc.att_hidden, mc.att_input], dim=1)  # V of eq. 6, acting on [h; x]
    outputs: List[Tensor] = []
    alphas: List[Tensor] = []
    for t in range(1, steps + 1):
        x_t = x[:, t - 1]
        h_t_channels: List[Tensor] = []
        energies: List[Tensor] = []
        for k in range(1, channels + 1):
            m = in_degree(t, k, n)
            s = zero
            for j in range(1, m + 1):  # eq. 2
                s = s + h[k].get(t - j, zero) @ mc.mix_weight[j - 1].t()
            s = s / m
            leaves = list(carried[k])
            leaves.insert(mixed, s)
            state = tuple(leaves) if len(leaves) > 1 else leaves[0]
            new = f.step(x_proj[:, t - 1], state)  # eq. 3
            new_leaves = list(new) if isinstance(new, tuple) else [new]
            h_k = new_leaves.pop(mixed)
            h[k][t] = h_k
            carried[k] = new_leaves  # c^k_t, carried to the next node of channel k
            h_t_channels.append(h_k)
            v = torch.tanh(torch.cat([h_k, x_t], dim=-1) @ big_v.t())  # eq. 6
            energies.append(v @ mc.att_vector)
        alpha = torch.softmax(torch.stack(energies, dim=1), dim=1)  # eq. 5
        h_t = sum(alpha[:, k - 1: k] * h_t_channels[k - 1] for k in range(1, channels + 1))  # eq. 4
        outputs.append(h_t)
        alphas.append(alpha)
    if not outputs:
        return x.new_zeros(batch, 0, hs), x.new_zeros(batch, 0, channels)
    return torch.stack(outputs, dim=1), torch.stack(alphas, dim=1)
