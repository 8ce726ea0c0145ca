"""Small products written so that a compiled step fuses them.

Inside ``Recurrent(compile=True)``'s step, Inductor turns pointwise ops and reductions into a few fused
kernels, but a matrix product stays an external call of its own, forward and backward, however small. A
cell's products of a few hundred multiply-adds (MZU's N × N zone products, MuFuRU's op-weight contraction)
cost more as calls than as arithmetic; :func:`small_matmul` writes them as a broadcast product and a sum
while compiling, which fuses with the ops around it, and as a matrix product eagerly, which is faster
there. Measured in docs/measured.md, "Where a compiled CPU step's time goes".
"""
from __future__ import annotations

import torch
from torch import Tensor


def small_matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` (``torch.matmul``'s broadcasting of batch dims): a matrix product eagerly, a broadcast product
    and a sum over the inner dimension inside a compiled step. Same values up to float summation order; for
    small inner and outer sizes only (the broadcast product is ``(..., n, k, m)`` before the sum)."""
    if torch.compiler.is_compiling():
        return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2)
    return torch.matmul(a, b)
