"""Each MZU equation computed by hand on a tiny input with fixed weights, against our implementation.

Meng, Zhang, Liu & Zhou, *Multi-Zone Unit for Recurrent Neural Networks* (AAAI 2020): zone generation (eq. 4),
satMZU's attention (eq. 6), gcnMZU's graph mixing (eq. 7–9), capMZU's dynamic routing (eq. 10–14), zone
aggregation (eq. 5 with the concatenation and the affine map), the zone disagreement and its sign in the
training loss (eq. 18–19), and deep transition with the M-functions shared across depths (eq. 1–3, 15–17).

The expected values are written out with Python floats and explicit loops (no tensor op of ours, no matrix
product), so an error in a vectorised layout, an axis or a constant shows as a mismatch. Each test was checked
to fail with a planted error in the function it covers (docs/reproduction/mzu.md lists them).
"""
from __future__ import annotations

import math
from functools import partial
from typing import List, Sequence

import torch
from torch import Tensor
from torch.nn import functional as F

from lit_rnncells.cells import CapMZU, GcnMZU, SatMZU
from lit_rnncells.cells import mzu_functions as mf
from lit_rnncells.tasks import LanguageModel

D = torch.float64
Vec = List[float]
Mat = List[List[float]]


# --------------------------------------------------------------------------- hand arithmetic
def fixed(*shape: int, offset: int = 0) -> Tensor:
    """Deterministic weights in [-0.75, 0.75]: ``((7 i + 3 offset) mod 13 − 6) / 8`` over the flat index i."""
    n = math.prod(shape)
    return torch.tensor([((7 * i + 3 * offset) % 13 - 6) / 8 for i in range(n)], dtype=D).view(*shape)


def set_fixed(module: torch.nn.Module) -> None:
    """Every parameter of ``module`` to :func:`fixed` values (a different offset per parameter)."""
    with torch.no_grad():
        for k, (_, p) in enumerate(sorted(module.named_parameters())):
            p.copy_(fixed(*p.shape, offset=k + 1))


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


def norm(a: Sequence[float]) -> float:
    return math.sqrt(dot(a, a))


def vec_mat(v: Sequence[float], w: Mat) -> Vec:
    """``v W`` for ``W`` given as rows: ``out[c] = Σ_r v[r] W[r][c]``."""
    return [sum(v[r] * w[r][c] for r in range(len(v))) for c in range(len(w[0]))]


def hand_cos(a: Sequence[float], b: Sequence[float]) -> float:
    return dot(a, b) / (norm(a) * norm(b))


def hand_zones(w_ih: Mat, w_hh: Mat, bias: Vec, x: Vec, h: Vec, m: int, zones: int) -> List[Vec]:
    """Eq. 4 for M-function ``m`` (0: M_h, 1: M_g): ``z_i = W_i [x, h] + b_i``, row by row of the fused weights."""
    dh = len(h)
    dz = dh // zones
    xh = list(x) + list(h)
    out = []
    for i in range(zones):
        rows = range(m * dh + i * dz, m * dh + (i + 1) * dz)
        out.append([dot(list(w_ih[r]) + list(w_hh[r]), xh) + bias[r] for r in rows])
    return out


def hand_attention(z: List[Vec], w: Mat, b: Vec) -> List[Vec]:
    """Eq. 6: queries, keys and values by their own linear maps, ``softmax(Q Kᵀ / √d_z) V`` zone by zone."""
    dz = len(z[0])
    qkv = [[sum(zi[c] * w[c][k] for c in range(dz)) + b[k] for k in range(3 * dz)] for zi in z]
    q, key, v = [r[:dz] for r in qkv], [r[dz:2 * dz] for r in qkv], [r[2 * dz:] for r in qkv]
    out = []
    for i in range(len(z)):
        e = [math.exp(dot(q[i], key[j]) / math.sqrt(dz)) for j in range(len(z))]
        alpha = [ej / sum(e) for ej in e]
        out.append([sum(alpha[j] * v[j][k] for j in range(len(z))) for k in range(dz)])
    return out


def hand_aggregate(o: List[Vec], w1: Mat, b1: Vec, w2: Mat, b2: Vec, out_w: Mat, out_b: Vec) -> Vec:
    """Eq. 5 on each zone with the same W_1, W_2, then the concatenation and the affine map to d_h."""
    f: Vec = []
    for oj in o:
        hidden = [max(0.0, sum(oj[c] * w1[c][r] for c in range(len(oj))) + b1[r]) for r in range(len(b1))]
        f += [sum(hidden[r] * w2[r][k] for r in range(len(hidden))) + b2[k] for k in range(len(b2))]
    return [sum(f[c] * out_w[c][k] for c in range(len(f))) + out_b[k] for k in range(len(out_b))]


def sigmoid(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


# --------------------------------------------------------------------------- eq. 4
def test_zone_generation_eq4() -> None:
    """The zones reaching the composition are ``W_i [x, h] + b_i``, zone i of M_h from rows ``[i d_z, (i+1) d_z)``
    and of M_g from rows ``d_h + [i d_z, (i+1) d_z)`` of the fused weights (our zone generation has a bias)."""
    cell = SatMZU(2, 4, zones=2, transition_depth=0, filter_size=3).double()
    set_fixed(cell)
    x, h = [0.5, -1.0], [0.2, -0.4, 0.6, 0.1]
    seen: List[Tensor] = []
    hook = cell.blocks[0].zone_fns.register_forward_hook(lambda mod, args, out: seen.append(args[0].detach()))
    cell.step(cell.project_input(torch.tensor([x], dtype=D)), torch.tensor([h], dtype=D))
    hook.remove()
    z = seen[0]  # (M, B, N, d_z)
    assert z.shape == (2, 1, 2, 2)
    w_ih, w_hh, bias = cell.weight_ih.tolist(), cell.blocks[0].weight_hh.tolist(), cell.blocks[0].bias.tolist()
    for m in range(2):
        expected = hand_zones(w_ih, w_hh, bias, x, h, m, zones=2)
        for i in range(2):
            for k in range(2):
                assert math.isclose(z[m, 0, i, k].item(), expected[i][k], abs_tol=1e-12), (m, i, k)


# --------------------------------------------------------------------------- eq. 6
def test_self_attention_eq6() -> None:
    z = [[0.5, -1.0], [1.5, 0.25], [-0.75, 0.5]]  # N = 3 zones of d_z = 2
    w, b = fixed(1, 2, 6, offset=1), fixed(1, 6, offset=2)
    expected = hand_attention(z, w[0].tolist(), b[0].tolist())
    ours = mf.self_attention_compose(torch.tensor([[z]], dtype=D), w, b)[0, 0]
    for i in range(3):
        for k in range(2):
            assert math.isclose(ours[i, k].item(), expected[i][k], abs_tol=1e-12), (i, k)


# --------------------------------------------------------------------------- eq. 7–9
def test_graph_convolution_eq7_to_9() -> None:
    """Cosine edges (eq. 7), negative edges clamped at 0 and then self-connections (footnote 1; our documented
    reading), ``D̃_ii = Σ_j Ã_ij``, ``O = ReLU(D̃^-½ Ã D̃^-½ Z W_g)`` (eq. 9)."""
    z = [[1.0, 0.5], [-0.8, 1.0], [1.0, 1.0]]  # zones 1 and 2 point apart (cos < 0); zone 3 near both
    assert hand_cos(z[0], z[1]) < 0 < min(hand_cos(z[0], z[2]), hand_cos(z[1], z[2]))
    w_g = fixed(1, 2, 2, offset=3)
    a = [[max(hand_cos(z[i], z[j]), 0.0) + (1.0 if i == j else 0.0) for j in range(3)] for i in range(3)]
    deg = [sum(row) for row in a]
    assert len(set(deg)) == 3  # unequal degrees: D̃^-½ Ã D̃^-½ differs from D̃^-1 Ã
    zw = [vec_mat(zi, w_g[0].tolist()) for zi in z]
    expected = [[max(0.0, sum(a[i][j] / math.sqrt(deg[i] * deg[j]) * zw[j][k] for j in range(3)))
                 for k in range(2)] for i in range(3)]
    assert any(v == 0.0 for row in expected for v in row) and any(v > 0 for row in expected for v in row)
    ours = mf.graph_convolution_compose(torch.tensor([[z]], dtype=D), w_g, torch.relu)[0, 0]
    for i in range(3):
        for k in range(2):
            assert math.isclose(ours[i, k].item(), expected[i][k], abs_tol=1e-12), (i, k)


# --------------------------------------------------------------------------- eq. 10–14
def hand_routing(z: List[Vec], w_c: Mat, capsules: int, iterations: int) -> List[Vec]:
    """Eq. 10–14: ``û_{j|i} = z_i W^c_j`` (W^c_j shared by the inputs, footnote 2), b = 0, then per iteration
    ``c_i = softmax_j b_i``, ``s_j = Σ_i c_ij û_{j|i}``, ``o_j = squash(s_j)``, ``b_ij += û_{j|i} · o_j``."""
    do = len(w_c[0]) // capsules
    u = [[[sum(zi[c] * w_c[c][j * do + k] for c in range(len(zi))) for k in range(do)] for j in range(capsules)]
         for zi in z]
    b = [[0.0] * capsules for _ in z]
    o: List[Vec] = []
    for _ in range(iterations):
        c = [[math.exp(bi[j]) / sum(math.exp(v) for v in bi) for j in range(capsules)] for bi in b]
        s = [[sum(c[i][j] * u[i][j][k] for i in range(len(z))) for k in range(do)] for j in range(capsules)]
        o = [[norm(sj) ** 2 / (1 + norm(sj) ** 2) * v / norm(sj) for v in sj] for sj in s]
        b = [[b[i][j] + dot(u[i][j], o[j]) for j in range(capsules)] for i in range(len(z))]
    return o


def test_capsule_routing_eq10_to_14() -> None:
    """N = 4 zones, J = 2 output capsules, T = 3 routing iterations (the paper's settings)."""
    z = [[1.0, 0.5], [-0.5, 2.0], [1.5, -1.0], [0.25, 0.75]]
    w_c = fixed(1, 2, 2 * 3, offset=4)  # d_z = 2 → J = 2 capsules of d_o = 3
    expected = hand_routing(z, w_c[0].tolist(), capsules=2, iterations=3)
    once = hand_routing(z, w_c[0].tolist(), capsules=2, iterations=1)
    assert max(abs(a - b) for oa, ob in zip(expected, once) for a, b in zip(oa, ob)) > 1e-3  # routing matters
    assert all(norm(oj) < 1 for oj in expected)  # squash: lengths below 1
    ours = mf.capsule_compose(torch.tensor([[z]], dtype=D), w_c, capsules=2, iterations=3)[0, 0]
    assert ours.shape == (2, 3)
    for j in range(2):
        for k in range(3):
            assert math.isclose(ours[j, k].item(), expected[j][k], abs_tol=1e-12), (j, k)


# --------------------------------------------------------------------------- eq. 5 + concatenation + affine
def test_zone_aggregation_eq5() -> None:
    zf = mf.ZoneFunctions(1, 4, composition="sat", zones=2, filter_size=3).double()
    set_fixed(zf)
    o = [[0.5, -1.0], [1.25, 0.75]]  # J = 2 zones of d_o = 2
    p = {n: t[0].tolist() for n, t in zf.named_parameters()}
    hidden = [sum(oj[c] * p["ffn_w1"][c][r] for c in range(2)) + p["ffn_b1"][r] for oj in o for r in range(3)]
    assert any(v < 0 for v in hidden) and any(v > 0 for v in hidden)  # the ReLU acts
    expected = hand_aggregate(o, p["ffn_w1"], p["ffn_b1"], p["ffn_w2"], p["ffn_b2"], p["out_w"], p["out_b"])
    ours = zf.aggregate(torch.tensor([[o]], dtype=D))[0, 0]
    for k in range(4):
        assert math.isclose(ours[k].item(), expected[k], abs_tol=1e-12), k


# --------------------------------------------------------------------------- eq. 18–19
def test_disagreement_loss_and_its_sign_eq18_19() -> None:
    """The task's loss is ``NLL + λ · mean over tokens of Σ_{depths, M-functions} (1/N²) Σ_ij cos(z_i, z_j)``:
    maximising ``L + λ Σ D_zone`` with ``D_zone = −(1/N²) Σ_ij cos`` (eq. 18) is minimising NLL minus λ Σ D,
    so the cosine term is ADDED; the zones come from the cell's zone generation (checked by the eq. 4 test)."""
    lam = 0.5
    factory = partial(GcnMZU, zones=2, transition_depth=1, filter_size=3, disagreement_weight=lam)
    model = LanguageModel(cell=factory, vocab_size=5, embedding_size=2, hidden_size=4).double()
    set_fixed(model)
    cell = model.rnns[0].module.cells[0]
    batch = {"inputs": torch.tensor([[0, 3, 1], [4, 2, 2]]), "targets": torch.tensor([[3, 1, 0], [2, 2, 4]]),
             "epoch": 0, "window": 0, "seq_len": 3, "bptt": 3}
    zones_seen: List[Tensor] = []
    hooks = [blk.zone_fns.register_forward_hook(lambda mod, args, out: zones_seen.append(args[0].detach()))
             for blk in cell.blocks]
    model.train()
    loss = model.training_step(batch, 0)
    for hook in hooks:
        hook.remove()
    assert len(zones_seen) == 3 * 2  # T steps × (MZU cell + one t-MZU)
    total_d = 0.0  # Σ over steps, depths, M-functions and examples of D_zone (eq. 18)
    for z in zones_seen:
        for m in range(z.shape[0]):
            for b in range(z.shape[1]):
                zs = z[m, b].tolist()
                total_d += -sum(hand_cos(zi, zj) for zi in zs for zj in zs) / len(zs) ** 2
    tokens = batch["targets"].numel()
    logits, _, _ = model(batch["inputs"])
    nll = F.cross_entropy(logits.reshape(-1, 5), batch["targets"].reshape(-1)).item()
    # the task sums the auxiliary loss in float32
    assert math.isclose(loss.item(), nll - lam * total_d / tokens, rel_tol=1e-6)
    assert loss.item() - nll > 0  # these zones agree more than they disagree: the term adds a positive cost


# --------------------------------------------------------------------------- eq. 1–3, 15–17
def test_deep_transition_with_shared_m_functions_eq15_to_17() -> None:
    """One MZU cell then one t-MZU whose input is 0 (eq. 16–17), both with the same M-functions, zone-generation
    h-part and bias (shared across depths, as the paper does on PTB); each depth's update is eq. 1–3."""
    cell = SatMZU(2, 4, zones=2, transition_depth=1, share_transition=True, filter_size=3).double()
    set_fixed(cell)
    alone = SatMZU(2, 4, zones=2, transition_depth=0, filter_size=3)
    assert sum(p.numel() for p in cell.parameters()) == sum(p.numel() for p in alone.parameters())
    zf = cell.blocks[0].zone_fns
    w_ih, w_hh, bias = cell.weight_ih.tolist(), cell.blocks[0].weight_hh.tolist(), cell.blocks[0].bias.tolist()
    p = {n: t.tolist() for n, t in zf.named_parameters()}

    def m_function(m: int, x: Vec, h: Vec) -> Vec:
        z = hand_zones(w_ih, w_hh, bias, x, h, m, zones=2)
        o = hand_attention(z, p["w_qkv"][m], p["b_qkv"][m])
        return hand_aggregate(o, p["ffn_w1"][m], p["ffn_b1"][m], p["ffn_w2"][m], p["ffn_b2"][m],
                              p["out_w"][m], p["out_b"][m])

    x, h = [0.5, -1.0], [0.2, -0.4, 0.6, 0.1]
    for depth_input in (x, [0.0, 0.0]):  # depth 0 sees x, the t-MZU sees the zero vector
        cand = [math.tanh(v) for v in m_function(0, depth_input, h)]  # eq. 2 / 16
        gate = [sigmoid(v) for v in m_function(1, depth_input, h)]  # eq. 3 / 17
        h = [(1 - g) * hv + g * c for g, hv, c in zip(gate, h, cand)]  # eq. 1 / 15
    ours = cell.step(cell.project_input(torch.tensor([x], dtype=D)), torch.tensor([[0.2, -0.4, 0.6, 0.1]],
                                                                                     dtype=D))[0]
    for k in range(4):
        assert math.isclose(ours[k].item(), h[k], abs_tol=1e-12), k


def test_capsule_cell_uses_the_papers_defaults() -> None:
    """4 zones, 2 output capsules, 3 routing iterations and λ = 1 unless told otherwise (the paper's settings)."""
    cell = CapMZU(3, 8)
    zf = cell.blocks[0].zone_fns
    assert (cell.zones, zf.capsules, zf.routing_iterations, cell.disagreement_weight) == (4, 2, 3, 1.0)
    assert GcnMZU(3, 8).zones == 4
