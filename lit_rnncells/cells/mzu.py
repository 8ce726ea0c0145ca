"""MZU, the multi-zone unit (Meng et al., AAAI 2020), with deep transition; and the GRU+DT baseline.

    h' = (1 − g) ⊙ h + g ⊙ h~,  h~ = tanh(M_h(x, h)),  g = σ(M_g(x, h))       eq. 1–3

``M_h`` and ``M_g`` are separate M-functions (:mod:`.mzu_functions`). Deep
transition (eq. 15–17): after the MZU cell, ``L`` transition cells (t-MZU)
per step take ``x = 0``. The zone disagreement (eq. 18–19) is the cell's
auxiliary loss.
"""
from __future__ import annotations

import math
from typing import Any, ContextManager, List, Optional, Tuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .base import RecurrentCell, check_positive, check_probability
from .classic import gru_update
from .deferred import deferred_addmm, deferred_linear
from .mzu_functions import ZoneFunctions
from .recording import recording_into
from .registry import register_cell


class MZUBlock(nn.Module):
    """One transition depth: the h-part of zone generation, fused for ``M_h`` and ``M_g``,
    its bias, the M-functions and optional layer normalisation.

    ``weight_hh`` ``(2 d_h, d_h)`` and ``bias`` ``(2 d_h)``: rows ``[0, d_h)`` feed ``M_h``
    (the N zones of eq. 4, or with REGULAR-TRANS the affine pre-activation of
    ``h~``), rows ``[d_h, 2 d_h)`` feed ``M_g`` (or with REGULAR-GATE the affine
    pre-activation of ``g``). The x-part of depth 0 lives on the cell (hoisted);
    at depth > 0 the input is zero, so the x-part is just ``bias``.
    """

    def __init__(self, hidden_size: int, *, zoned: Tuple[bool, bool], layer_norm: bool,
                 **zone_options: Any) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.zoned = zoned
        bound = 1.0 / math.sqrt(hidden_size)
        self.weight_hh = nn.Parameter(torch.empty(2 * hidden_size, hidden_size).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(2 * hidden_size).uniform_(-bound, bound))
        count = sum(zoned)
        self.zone_fns: Optional[ZoneFunctions] = (
            ZoneFunctions(count, hidden_size, **zone_options) if count else None)
        if layer_norm:
            self.ln_weight: Optional[nn.Parameter] = nn.Parameter(torch.ones(2, 1, hidden_size))
            self.ln_bias: Optional[nn.Parameter] = nn.Parameter(torch.zeros(2, 1, hidden_size))
        else:
            self.ln_weight = self.ln_bias = None

    def pre_activations(self, gen: Tensor, with_disagreement: bool) -> Tuple[Tensor, Optional[Tensor]]:
        """From the zone-generation output ``(B, 2 d_h)`` to ``[M_h, M_g]`` stacked ``(2, B, d_h)``
        (layer-normalised if enabled), and the summed mean zone cosine ``(B,)`` if asked."""
        b, dh = gen.shape[0], self.hidden_size
        pre = gen.view(b, 2, dh).transpose(0, 1)  # (2, B, d_h): [h~ slot, g slot]
        mean_cos: Optional[Tensor] = None
        if self.zone_fns is not None:
            zf = self.zone_fns
            if all(self.zoned):
                out, cos = zf(pre.reshape(2, b, zf.zones, zf.zone_size), with_disagreement)
                pre = out
            else:
                k = 0 if self.zoned[0] else 1
                out, cos = zf(pre[k].reshape(1, b, zf.zones, zf.zone_size), with_disagreement)
                pre = torch.stack((out[0], pre[1]) if k == 0 else (pre[0], out[0]))
            if cos is not None:
                mean_cos = cos.sum(0)
        if self.ln_weight is not None:
            pre = torch.addcmul(self.ln_bias, F.layer_norm(pre, (dh,)), self.ln_weight)
        return pre, mean_cos


class MZU(RecurrentCell):
    """Multi-zone unit with deep transition (Meng et al., AAAI 2020, eq. 1–4, 15–19); subclasses pick the composition.

    Per step and depth ``l = 0 … L`` (``L = transition_depth``; depth 0 sees ``x``,
    the t-MZU depths ``x = 0``, eq. 15–17)::

        Z_h, Z_g = W^l [x, h^{l−1}]                         (eq. 4, one fused matmul)
        h~ = tanh(LN(M_h)),  g = σ(LN(M_g))                 (eq. 2–3)
        h^l = (1 − g) ⊙ h^{l−1} + g ⊙ dropout(h~)           (eq. 1, 15)

    Options (keyword-only):

    - ``zones`` N (``hidden_size`` must be divisible by it), ``filter_size`` d_f of
      the zone FFN (default ``hidden_size``);
    - ``transition_depth`` L (default 1, the paper's +DT; 0 gives the plain MZU);
      ``share_transition``: all depths use depth 0's M-functions, zone-generation
      h-part, biases and LN (the paper does this for PTB); depth 0 keeps its own
      x-part only;
    - ``disagreement_weight`` λ (eq. 19, default 1.0): :meth:`step_with_aux` returns
      ``λ Σ_{depths} Σ_{M-functions} mean_{i,j} cos(z_i, z_j)`` per example
      (= ``−λ Σ D_zone``, to be minimised); with λ = 0 ``has_aux_loss`` is False
      and no cosine is computed;
    - ``regular_gate`` / ``regular_trans`` (Table 4): ``M_g`` / ``M_h`` replaced by an
      affine map of ``[x, h]`` (no zones, no disagreement term);
    - ``layer_norm``: the paper applies LN without saying where. We normalise the
      pre-activations, i.e. each M-function's output before tanh / σ, with its own
      gain and bias per depth (as layer-normalised GRUs do);
    - ``candidate_dropout``: dropout on ``h~`` before the gated update (training only,
      a fresh mask per step and depth).

    For plots (the paper's Figure 3), :func:`~lit_rnncells.nn.recording.candidate_activations` records ``h~`` of every
    step and depth with the new state, and :meth:`zone_slices` gives the zones' parts of the
    hidden vector.
    """

    aux_loss_name = "zone_disagreement"

    composition: str = ""

    def __init__(self, input_size: int, hidden_size: int, *, zones: int = 4, filter_size: Optional[int] = None,
                 transition_depth: int = 1, share_transition: bool = False, disagreement_weight: float = 1.0,
                 regular_gate: bool = False, regular_trans: bool = False, layer_norm: bool = False,
                 candidate_dropout: float = 0.0, **composition_options: Any) -> None:
        super().__init__(input_size, hidden_size)
        filter_size = hidden_size if filter_size is None else filter_size
        check_positive(zones=zones, filter_size=filter_size)
        if transition_depth < 0:
            raise ValueError(f"transition_depth must be 0 or more, got {transition_depth}.")
        if hidden_size % zones:
            raise ValueError(f"hidden_size={hidden_size} is not divisible by zones={zones}; pick a number of "
                             f"zones that divides hidden_size (e.g. {_divisor_near(hidden_size, zones)}).")
        check_probability(candidate_dropout=candidate_dropout)
        if disagreement_weight < 0:
            raise ValueError(f"disagreement_weight must be >= 0 (the paper uses 1.0), got {disagreement_weight}.")
        self.zones, self.filter_size = zones, filter_size
        self.transition_depth, self.share_transition = transition_depth, share_transition
        self.disagreement_weight = float(disagreement_weight)
        self.regular_gate, self.regular_trans = regular_gate, regular_trans
        self.layer_norm, self.candidate_dropout = layer_norm, candidate_dropout
        zoned = (not regular_trans, not regular_gate)
        self.has_aux_loss = self.disagreement_weight > 0 and any(zoned)
        bound = 1.0 / math.sqrt(hidden_size)
        self.weight_ih = nn.Parameter(torch.empty(2 * hidden_size, input_size).uniform_(-bound, bound))
        n_blocks = 1 if share_transition else transition_depth + 1
        self.blocks = nn.ModuleList(
            MZUBlock(hidden_size, zoned=zoned, layer_norm=layer_norm, composition=self.composition, zones=zones,
                     filter_size=filter_size, **composition_options) for _ in range(n_blocks))
        self._candidate_log: Optional[List[Tuple[Tensor, Tensor]]] = None  # inside recording_candidates()

    def block(self, depth: int) -> MZUBlock:
        """The parameters used at transition depth ``depth`` (0 = the MZU cell)."""
        return self.blocks[0 if self.share_transition else depth]  # type: ignore[return-value]

    def project_input(self, x: Tensor) -> Tensor:
        """The x-part of depth 0's zone generation (with its bias) for all steps: ``(..., T, 2 d_h)``."""
        return F.linear(x, self.weight_ih, self.blocks[0].bias)

    def _run(self, x_proj_t: Tensor, h: Tensor, with_aux: bool) -> Tuple[Tensor, Optional[Tensor]]:
        aux: Optional[Tensor] = None
        recorded: Optional[List[Tensor]] = [] if self._candidate_log is not None else None
        for depth in range(self.transition_depth + 1):
            block = self.block(depth)
            gen_in = x_proj_t if depth == 0 else block.bias
            gen = deferred_addmm(gen_in, h, block.weight_hh)
            pre, mean_cos = block.pre_activations(gen, with_aux)
            cand = torch.tanh(pre[0])
            if recorded is not None:
                recorded.append(cand.detach())
            if self.candidate_dropout > 0 and self.training:
                cand = F.dropout(cand, self.candidate_dropout, training=True)
            h = torch.addcmul(h, torch.sigmoid(pre[1]), cand - h)
            if mean_cos is not None:
                aux = mean_cos if aux is None else aux + mean_cos
        if aux is not None:
            aux = aux * self.disagreement_weight
        if recorded is not None and self._candidate_log is not None:
            self._candidate_log.append((torch.stack(recorded, dim=1), h.detach()))
        return h, aux

    def step(self, x_proj_t: Tensor, state: Tensor) -> Tensor:
        return self._run(x_proj_t, state, False)[0]

    def step_with_aux(self, x_proj_t: Tensor, state: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        """The new state and ``λ Σ`` mean zone cosines per example ``(B,)`` (``None`` when λ = 0)."""
        return self._run(x_proj_t, state, self.has_aux_loss)

    def zone_slices(self) -> List[slice]:
        """The N zones' parts of a ``d_h`` vector (``h``, ``h~``): contiguous blocks of ``d_z = d_h / N``,
        zone i at ``[i d_z, (i + 1) d_z)``, the layout zone generation (eq. 4) reshapes into zones."""
        size = self.hidden_size // self.zones
        return [slice(i * size, (i + 1) * size) for i in range(self.zones)]

    def recording_candidates(self) -> ContextManager[List[Tuple[Tensor, Tensor]]]:
        """Within the block, every step appends ``(h~ (B, L + 1, d_h), h (B, d_h))`` (detached) to the
        yielded list: the candidate activation of each depth (before ``candidate_dropout``) and the
        step's new state. Prefer :func:`~lit_rnncells.nn.recording.candidate_activations`, which uses this."""
        return recording_into(self, "_candidate_log")

    def extra_repr(self) -> str:
        opts = [f"zones={self.zones}", f"filter_size={self.filter_size}",
                f"transition_depth={self.transition_depth}", f"disagreement_weight={self.disagreement_weight}"]
        for name in ("share_transition", "regular_gate", "regular_trans", "layer_norm"):
            if getattr(self, name):
                opts.append(f"{name}=True")
        if self.candidate_dropout:
            opts.append(f"candidate_dropout={self.candidate_dropout}")
        return f"{self.input_size}, {self.hidden_size}, " + ", ".join(opts)


def _divisor_near(n: int, k: int) -> int:
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: (abs(d - k), d))


@register_cell()
class SatMZU(MZU):
    """satMZU: MZU whose zone composition is self-attention over the zones (eq. 6). See :class:`MZU`."""

    composition = "sat"

    def __init__(self, input_size: int, hidden_size: int, **options: Any) -> None:
        super().__init__(input_size, hidden_size, **options)


@register_cell()
class GcnMZU(MZU):
    """gcnMZU: graph convolution over the cosine-weighted zone graph (eq. 7–9). See :class:`MZU`.

    ``gcn_activation`` (default ``"relu"``, as in Kipf & Welling) is the σ of eq. 9.
    Negative edges are clamped at 0 before the self-connections are added, so
    every degree is ≥ 1 (see :func:`~.mzu_functions.gcn_adjacency`).
    """

    composition = "gcn"

    def __init__(self, input_size: int, hidden_size: int, *, gcn_activation: str = "relu",
                 **options: Any) -> None:
        super().__init__(input_size, hidden_size, gcn_activation=gcn_activation, **options)


@register_cell()
class CapMZU(MZU):
    """capMZU: capsule dynamic routing from N zones to J capsules (eq. 10–14). See :class:`MZU`.

    ``capsules`` J (paper: 2; ``hidden_size`` must be divisible by it, ``d_o = d_h / J``),
    ``routing_iterations`` T (paper: 3).
    """

    composition = "cap"

    def __init__(self, input_size: int, hidden_size: int, *, capsules: int = 2, routing_iterations: int = 3,
                 **options: Any) -> None:
        check_positive(capsules=capsules, routing_iterations=routing_iterations)
        if hidden_size % capsules:
            raise ValueError(f"hidden_size={hidden_size} is not divisible by capsules={capsules}; pick a number "
                             f"of capsules that divides hidden_size (e.g. {_divisor_near(hidden_size, capsules)}).")
        super().__init__(input_size, hidden_size, capsules=capsules, routing_iterations=routing_iterations,
                         **options)


@register_cell()
class GRUDT(RecurrentCell):
    """Deep-transition GRU (GRU+DT, Pascanu et al. 2014), the MZU paper's baseline.

    A GRU cell (torch.nn.GRU's equations and parameter names, so weights copy)
    followed by ``transition_depth`` L transition GRUs with zero input: for those
    the x-projection is just ``bias_ih`` (eq. 15–17 with a GRU in place of the
    MZU). ``share_transition`` makes every transition depth reuse the first GRU's
    ``weight_hh``, ``bias_hh`` and ``bias_ih``. ``transition_depth=0`` is a GRU.

    The paper trains its GRU baselines "with the same settings" as its MZUs, dropout and layer normalisation
    included (its footnote 3), without saying where; as for the MZU (:class:`MZU`): ``layer_norm`` normalises each
    pre-activation (r, z and the candidate n's) with its own gain and bias per depth (shared with
    ``share_transition``), and ``candidate_dropout`` drops the candidate n before the gated update (training
    only, a fresh mask per step and depth). With neither, the step is torch.nn.GRU's.
    """

    def __init__(self, input_size: int, hidden_size: int, *, transition_depth: int = 1,
                 share_transition: bool = False, layer_norm: bool = False, candidate_dropout: float = 0.0) -> None:
        super().__init__(input_size, hidden_size)
        if transition_depth < 0:
            raise ValueError(f"transition_depth must be 0 or more, got {transition_depth}.")
        check_probability(candidate_dropout=candidate_dropout)
        self.transition_depth, self.share_transition = transition_depth, share_transition
        self.layer_norm, self.candidate_dropout = layer_norm, candidate_dropout
        blocks = 1 if share_transition else transition_depth + 1
        self.ln_weight: Optional[nn.Parameter] = nn.Parameter(torch.ones(blocks, 3, hidden_size)) if layer_norm \
            else None
        self.ln_bias: Optional[nn.Parameter] = nn.Parameter(torch.zeros(blocks, 3, hidden_size)) if layer_norm \
            else None
        g, bound = 3 * hidden_size, 1.0 / math.sqrt(hidden_size)
        self.weight_ih = nn.Parameter(torch.empty(g, input_size).uniform_(-bound, bound))
        self.weight_hh = nn.Parameter(torch.empty(g, hidden_size).uniform_(-bound, bound))
        self.bias_ih = nn.Parameter(torch.empty(g).uniform_(-bound, bound))
        self.bias_hh = nn.Parameter(torch.empty(g).uniform_(-bound, bound))
        n = 0 if share_transition else transition_depth
        self.transition_weight_hh: Optional[nn.Parameter] = None
        self.transition_bias_ih: Optional[nn.Parameter] = None
        self.transition_bias_hh: Optional[nn.Parameter] = None
        if n:  # stacked (L, 3 d_h, ...) parameters of the transition GRUs
            self.transition_weight_hh = nn.Parameter(torch.empty(n, g, hidden_size).uniform_(-bound, bound))
            self.transition_bias_ih = nn.Parameter(torch.empty(n, g).uniform_(-bound, bound))
            self.transition_bias_hh = nn.Parameter(torch.empty(n, g).uniform_(-bound, bound))

    def project_input(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight_ih, self.bias_ih)

    def _depth_params(self, depth: int) -> Tuple[Tensor, Tensor, Tensor]:
        if depth == 0 or self.share_transition:
            return self.bias_ih, self.weight_hh, self.bias_hh
        assert self.transition_weight_hh is not None and self.transition_bias_ih is not None
        assert self.transition_bias_hh is not None
        i = depth - 1
        return self.transition_bias_ih[i], self.transition_weight_hh[i], self.transition_bias_hh[i]

    def step(self, x_proj_t: Tensor, state: Tensor) -> Tensor:
        h = state
        plain = self.ln_weight is None and not (self.candidate_dropout > 0 and self.training)
        for depth in range(self.transition_depth + 1):
            b_ih, w_hh, b_hh = self._depth_params(depth)
            x_part = x_proj_t if depth == 0 else b_ih
            gh = deferred_linear(h, w_hh, b_hh)
            h = gru_update(x_part, gh, h) if plain else self._regularised_update(x_part, gh, h, depth)
        return h

    def _regularised_update(self, x_part: Tensor, gh: Tensor, h: Tensor, depth: int) -> Tensor:
        """:func:`gru_update` with ``layer_norm`` on the r, z and n pre-activations and ``candidate_dropout`` on n."""
        n_h, k = self.hidden_size, 0 if self.share_transition else depth
        rz = x_part[..., : 2 * n_h] + gh[..., : 2 * n_h]
        if self.ln_weight is not None and self.ln_bias is not None:
            rz = torch.addcmul(self.ln_bias[k, :2], F.layer_norm(rz.unflatten(-1, (2, n_h)), (n_h,)),
                               self.ln_weight[k, :2]).flatten(-2)
        rz = torch.sigmoid(rz)
        r, z = rz[..., :n_h], rz[..., n_h:]
        n = torch.addcmul(x_part[..., 2 * n_h:], r, gh[..., 2 * n_h:])
        if self.ln_weight is not None and self.ln_bias is not None:
            n = torch.addcmul(self.ln_bias[k, 2], F.layer_norm(n, (n_h,)), self.ln_weight[k, 2])
        n = torch.tanh(n)
        if self.candidate_dropout > 0 and self.training:
            n = F.dropout(n, self.candidate_dropout, training=True)
        return torch.addcmul(n, z, h - n)

    def extra_repr(self) -> str:
        shared = ", share_transition=True" if self.share_transition else ""
        regularised = (", layer_norm=True" if self.layer_norm else "") + (
            f", candidate_dropout={self.candidate_dropout}" if self.candidate_dropout else "")
        return f"{self.input_size}, {self.hidden_size}, transition_depth={self.transition_depth}{shared}{regularised}"
