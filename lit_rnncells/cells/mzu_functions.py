"""The multi-zone transformation function (M-function) of MZU (Meng et al., AAAI 2020 eq. 4–14).

An M-function maps ``[x, h]`` to ``d_h`` in three parts:

1. zone generation ``z_i = W_i [x, h]`` (eq. 4), ``N`` zones of ``d_z = d_h / N``;
2. zone composition ``Z (N × d_z) → O (J × d_o)`` by self-attention (eq. 6),
   graph convolution (eq. 7–9) or capsule dynamic routing (eq. 10–14);
3. zone aggregation: a position-wise FFN shared by the ``J`` zones (eq. 5),
   concatenation, and one affine map to ``d_h``.

Zone generation is an affine map of ``[x, h]``; the cell owns it so that the
x-part is hoisted out of the time loop and the h-parts of ``M_h`` and ``M_g``
share one matmul. This module holds parts 2 and 3 of ``count`` M-functions
stacked on a leading dimension, so ``M_h`` and ``M_g`` run in the same batched
kernels. Every function works on zones shaped ``(M, B, N, d_z)``: no Python
loop over zones, capsules, batch items or M-functions (only the ``T`` routing
iterations loop).
"""
from __future__ import annotations

import math
from typing import Callable, Dict, Optional, Tuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .deferred import deferred_baddbmm
from .fusable import small_matmul

COMPOSITIONS = ("sat", "gcn", "cap")

GCN_ACTIVATIONS: Dict[str, Callable[[Tensor], Tensor]] = {
    "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "identity": lambda t: t,
}


def normalize_zones(z: Tensor) -> Tensor:
    """Unit-length zones ``z_i / ‖z_i‖`` over the last dim; a zero zone stays zero (finite gradients)."""
    return F.normalize(z, dim=-1, eps=1e-12)


def cosine_matrix(z: Tensor) -> Tensor:
    """Pairwise cosines ``w_ij`` of eq. 7: zones ``(..., N, d) → (..., N, N)``.

    A zero zone has cosine 0 with every zone (itself included).
    """
    zn = normalize_zones(z)
    return small_matmul(zn, zn.transpose(-1, -2))


def mean_zone_cosine(z: Tensor) -> Tensor:
    """``(1/N²) Σ_i Σ_j cos(z_i, z_j)`` = ``−D_zone`` of eq. 18: zones ``(..., N, d) → (...)``.

    Computed as ``‖mean_i ẑ_i‖²`` (ẑ the unit zones), which equals the mean of the
    cosine matrix in O(N d) instead of O(N² d).
    """
    return normalize_zones(z).mean(-2).pow(2).sum(-1)


def self_attention_compose(z: Tensor, w_qkv: Tensor, b_qkv: Tensor) -> Tensor:
    """satMZU composition, eq. 6: ``O = softmax(Q Kᵀ / √d_z) V``.

    ``z`` ``(M, B, N, d_z)``; ``w_qkv`` ``(M, d_z, 3 d_z)`` and ``b_qkv`` ``(M, 3 d_z)``
    hold the Q, K and V maps (different weights for Q, K and V, each shared by all
    zones, as a Transformer shares them over positions). Returns ``(M, B, N, d_z)``.
    """
    m, b, n, dz = z.shape
    qkv = torch.baddbmm(b_qkv.unsqueeze(1), z.reshape(m, b * n, dz), w_qkv).view(m * b, n, 3 * dz)
    q, k, v = qkv.split(dz, dim=-1)
    scores = small_matmul(q, k.transpose(1, 2)) * (1.0 / math.sqrt(dz))
    return small_matmul(torch.softmax(scores, dim=-1), v).view(m, b, n, dz)


def gcn_adjacency(cos: Tensor) -> Tensor:
    """The normalised zone graph ``D̃^-½ Ã D̃^-½`` of eq. 8–9 from the cosines ``(..., N, N)``.

    The paper is silent on negative cosines, which can make a degree
    ``D̃_ii = Σ_j Ã_ij`` zero or negative (``D̃^-½`` then NaN). We clamp edges at
    0 before adding the self-connections (footnote 1: added after the cosine
    computation): ``Ã = max(W, 0) + I``. Every degree is then ≥ 1, also for
    opposite zones (``z_j = −z_i``) and zero zones, and ``Ã`` stays symmetric.
    """
    n = cos.shape[-1]
    adj = cos.clamp_min(0.0) + torch.eye(n, dtype=cos.dtype, device=cos.device)
    d = adj.sum(-1).rsqrt()
    return d.unsqueeze(-1) * adj * d.unsqueeze(-2)


def graph_convolution_compose(z: Tensor, w_g: Tensor, activation: Callable[[Tensor], Tensor],
                              cos: Optional[Tensor] = None) -> Tensor:
    """gcnMZU composition, eq. 7–9: ``O = act(D̃^-½ Ã D̃^-½ Z W_g)`` with ``d_g = d_z``.

    ``z`` ``(M, B, N, d_z)``, ``w_g`` ``(M, d_z, d_z)``; ``cos`` the zones' cosine
    matrix if already computed. Returns ``(M, B, N, d_z)``.
    """
    m, b, n, dz = z.shape
    if cos is None:
        cos = cosine_matrix(z)
    zw = torch.bmm(z.reshape(m, b * n, dz), w_g).view(m * b, n, -1)
    mixed = small_matmul(gcn_adjacency(cos).reshape(m * b, n, n), zw)
    return activation(mixed).view(m, b, n, -1)


def squash(s: Tensor) -> Tensor:
    """``squash(s) = ‖s‖²/(1+‖s‖²) · s/‖s‖`` (eq. 13), written as ``s ‖s‖ / (1+‖s‖²)``.

    That form never divides by ``‖s‖``: ``s = 0`` gives 0 with a finite (zero)
    gradient. The result's norm is ``‖s‖²/(1+‖s‖²) < 1``.
    """
    norm = torch.linalg.vector_norm(s, dim=-1, keepdim=True)
    return s * (norm / (1.0 + norm * norm))


def capsule_compose(z: Tensor, w_c: Tensor, capsules: int, iterations: int) -> Tensor:
    """capMZU composition, eq. 10–14: dynamic routing from N zone capsules to J capsules.

    ``z`` ``(M, B, N, d_z)``; ``w_c`` ``(M, d_z, J d_o)`` is ``W^c`` shared by all
    input capsules (footnote 2). Predictions ``û_{j|i} = z_i W^c_j`` (eq. 10);
    logits ``b_ij = 0``; each iteration ``c_i = softmax_j(b_i)`` (eq. 11),
    ``s_j = Σ_i c_ij û_{j|i}`` (eq. 12), ``o_j = squash(s_j)`` (eq. 13),
    ``b_ij += û_{j|i} · o_j`` (eq. 14; skipped after the last iteration, where it
    has no effect). Returns ``(M, B, J, d_o)``.
    """
    m, b, n, dz = z.shape
    u = torch.bmm(z.reshape(m, b * n, dz), w_c).view(m * b, n, capsules, -1)
    logits: Optional[Tensor] = None
    out = u  # replaced below; iterations >= 1
    for it in range(iterations):
        if logits is None:
            s = u.sum(1) * (1.0 / capsules)  # b = 0: uniform coupling 1/J
        else:
            s = _coupled_sum(torch.softmax(logits, dim=-1), u)
        out = squash(s)
        if it + 1 < iterations:
            agreement = _agreement(u, out)
            logits = agreement if logits is None else logits + agreement
    return out.view(m, b, capsules, -1)


def _coupled_sum(coupling: Tensor, u: Tensor) -> Tensor:
    """``s_j = Σ_i c_ij û_{j|i}`` (eq. 12): ``(R, N, J)``, ``(R, N, J, d_o)`` → ``(R, J, d_o)``, as a product per
    (R, j) that a compiled step fuses (:func:`~.fusable.small_matmul`)."""
    return small_matmul(coupling.permute(0, 2, 1).unsqueeze(-2), u.permute(0, 2, 1, 3)).squeeze(-2)


def _agreement(u: Tensor, out: Tensor) -> Tensor:
    """``û_{j|i} · o_j`` (eq. 14): ``(R, N, J, d_o)``, ``(R, J, d_o)`` → ``(R, N, J)``, as a product per (R, j)
    that a compiled step fuses (:func:`~.fusable.small_matmul`)."""
    return small_matmul(u.permute(0, 2, 1, 3), out.unsqueeze(-1)).squeeze(-1).permute(0, 2, 1)


def _uniform(*shape: int, fan_in: int) -> nn.Parameter:
    bound = 1.0 / math.sqrt(fan_in)
    return nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))


class ZoneFunctions(nn.Module):
    """Zone composition and aggregation of ``count`` M-functions, stacked for batched evaluation.

    Input: zones ``(M, B, N, d_z)`` (``M = count``) from the cell's zone
    generation. Output: ``(M, B, d_h)``, the M-functions' values. Parameters
    (all with a leading ``count`` dimension):

    - sat: ``w_qkv``/``b_qkv``, Q, K, V maps ``d_z → d_z`` (eq. 6);
    - gcn: ``w_g`` ``d_z → d_z`` without bias (eq. 9);
    - cap: ``w_c`` ``d_z → J d_o`` (eq. 10, footnote 2);
    - the FFN ``f_j = max(0, o_j W_1 + b_1) W_2 + b_2`` shared by the J zones
      (eq. 5, filter size ``d_f``), and the final affine map ``J d_o = d_h → d_h``.
    """

    def __init__(self, count: int, hidden_size: int, *, composition: str, zones: int, filter_size: int,
                 capsules: int = 2, routing_iterations: int = 3, gcn_activation: str = "relu") -> None:
        super().__init__()
        if composition not in COMPOSITIONS:
            raise ValueError(f"composition must be one of {COMPOSITIONS}, got {composition!r}.")
        if gcn_activation not in GCN_ACTIVATIONS:
            raise ValueError(f"gcn_activation must be one of {sorted(GCN_ACTIVATIONS)}, got {gcn_activation!r}.")
        self.count, self.hidden_size, self.composition = count, hidden_size, composition
        self.zones, self.filter_size = zones, filter_size
        self.zone_size = hidden_size // zones
        self.capsules = capsules if composition == "cap" else zones
        self.routing_iterations = routing_iterations
        self.gcn_activation = gcn_activation
        self.out_zone_size = hidden_size // self.capsules  # d_o (= d_z for sat and gcn)
        dz, do = self.zone_size, self.out_zone_size
        if composition == "sat":
            self.w_qkv = _uniform(count, dz, 3 * dz, fan_in=dz)
            self.b_qkv = _uniform(count, 3 * dz, fan_in=dz)
        elif composition == "gcn":
            self.w_g = _uniform(count, dz, dz, fan_in=dz)
        else:
            self.w_c = _uniform(count, dz, self.capsules * do, fan_in=dz)
        self.ffn_w1 = _uniform(count, do, filter_size, fan_in=do)
        self.ffn_b1 = _uniform(count, filter_size, fan_in=do)
        self.ffn_w2 = _uniform(count, filter_size, do, fan_in=filter_size)
        self.ffn_b2 = _uniform(count, do, fan_in=filter_size)
        self.out_w = _uniform(count, hidden_size, hidden_size, fan_in=hidden_size)
        self.out_b = _uniform(count, hidden_size, fan_in=hidden_size)

    def compose(self, z: Tensor, cos: Optional[Tensor] = None) -> Tensor:
        """Zone composition ``(M, B, N, d_z) → (M, B, J, d_o)``."""
        if self.composition == "sat":
            return self_attention_compose(z, self.w_qkv, self.b_qkv)
        if self.composition == "gcn":
            return graph_convolution_compose(z, self.w_g, GCN_ACTIVATIONS[self.gcn_activation], cos)
        return capsule_compose(z, self.w_c, self.capsules, self.routing_iterations)

    def aggregate(self, o: Tensor) -> Tensor:
        """Zone aggregation (eq. 5 + concatenation + affine): ``(M, B, J, d_o) → (M, B, d_h)``."""
        m, b, j, do = o.shape
        hidden = torch.relu(torch.baddbmm(self.ffn_b1.unsqueeze(1), o.reshape(m, b * j, do), self.ffn_w1))
        f = torch.baddbmm(self.ffn_b2.unsqueeze(1), hidden, self.ffn_w2)
        return deferred_baddbmm(self.out_b.unsqueeze(1), f.view(m, b, j * do), self.out_w)

    def forward(self, z: Tensor, with_disagreement: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        """The M-functions' values ``(M, B, d_h)`` and, if asked, each one's mean zone cosine ``(M, B)``."""
        cos: Optional[Tensor] = None
        mean_cos: Optional[Tensor] = None
        if self.composition == "gcn":
            cos = cosine_matrix(z)
            if with_disagreement:
                mean_cos = cos.mean((-2, -1))
        elif with_disagreement:
            mean_cos = mean_zone_cosine(z)
        return self.aggregate(self.compose(z, cos)), mean_cos

    def extra_repr(self) -> str:
        extra = ""
        if self.composition == "cap":
            extra = f", capsules={self.capsules}, routing_iterations={self.routing_iterations}"
        elif self.composition == "gcn":
            extra = f", activation={self.gcn_activation}"
        return (f"{self.composition}, count={self.count}, hidden={self.hidden_size}, zones={self.zones}, "
                f"filter={self.filter_size}{extra}")
