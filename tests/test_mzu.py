"""MZU (Meng et al., AAAI 2020): each composition against a slow, literal implementation of its equations,
numerical safety, deep transition, parameter sharing, the disagreement loss, and GRU+DT."""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Tuple

import pytest
import torch
from torch import Tensor
from torch.nn import functional as F

from lit_rnncells.cells import GRU, GRUDT, CapMZU, GcnMZU, SatMZU, build_cell
from lit_rnncells.cells import mzu_functions as mf
from lit_rnncells.cells.fusable import small_matmul
from lit_rnncells.cells.mzu import MZU
from lit_rnncells.nn import Recurrent

MZU_CLASSES = [SatMZU, GcnMZU, CapMZU]
D = torch.float64


# --------------------------------------------------------------------------- slow references
def ref_cos(a: Tensor, b: Tensor) -> float:
    a, b = a.detach(), b.detach()
    na, nb = a.norm(), b.norm()
    return 0.0 if na == 0 or nb == 0 else float(a @ b / (na * nb))


def ref_sat(zs: List[Tensor], w_qkv: Tensor, b_qkv: Tensor) -> List[Tensor]:
    """Eq. 6 zone by zone; asserts every row of attention weights sums to 1."""
    dz = zs[0].shape[0]
    q = [z @ w_qkv[:, :dz] + b_qkv[:dz] for z in zs]
    k = [z @ w_qkv[:, dz: 2 * dz] + b_qkv[dz: 2 * dz] for z in zs]
    v = [z @ w_qkv[:, 2 * dz:] + b_qkv[2 * dz:] for z in zs]
    out = []
    for i in range(len(zs)):
        e = [math.exp(float((q[i] @ k[j]).detach()) / math.sqrt(dz)) for j in range(len(zs))]
        alpha = [x / sum(e) for x in e]
        assert abs(sum(alpha) - 1.0) < 1e-12
        out.append(sum(a * vj for a, vj in zip(alpha, v)))
    return out


def ref_gcn(zs: List[Tensor], w_g: Tensor, act: Callable[[Tensor], Tensor] = torch.relu) -> List[Tensor]:
    """Eq. 7–9 with edges clamped at 0 and self-connections added after."""
    n = len(zs)
    a = [[max(ref_cos(zs[i], zs[j]), 0.0) + (1.0 if i == j else 0.0) for j in range(n)] for i in range(n)]
    d = [sum(row) for row in a]
    return [act(sum(a[i][j] / math.sqrt(d[i] * d[j]) * (zs[j] @ w_g) for j in range(n))) for i in range(n)]


def ref_squash(s: Tensor) -> Tensor:
    n = float(s.detach().norm())
    return s * 0 if n == 0 else (n * n / (1 + n * n)) * s / n


def ref_cap(zs: List[Tensor], w_c: Tensor, caps: int, iters: int) -> Tuple[List[Tensor], List[List[float]]]:
    """Eq. 10–14 capsule by capsule; also returns the couplings c of the first iteration."""
    do = w_c.shape[1] // caps
    u = [[z @ w_c[:, j * do:(j + 1) * do] for j in range(caps)] for z in zs]
    b = [[0.0] * caps for _ in zs]
    first_c: List[List[float]] = []
    o: List[Tensor] = []
    for t in range(iters):
        c = [[math.exp(bij) / sum(math.exp(x) for x in bi) for bij in bi] for bi in b]
        if t == 0:
            first_c = c
        o = [ref_squash(sum(c[i][j] * u[i][j] for i in range(len(zs)))) for j in range(caps)]
        b = [[b[i][j] + float((u[i][j] @ o[j]).detach()) for j in range(caps)] for i in range(len(zs))]
    return o, first_c


def ref_m_function(zf: mf.ZoneFunctions, k: int, gen: Tensor) -> Tensor:
    """One M-function on one example: zones (eq. 4) → composition → FFN per zone (eq. 5) → concat → affine."""
    dz = zf.zone_size
    zs = [gen[i * dz:(i + 1) * dz] for i in range(zf.zones)]
    if zf.composition == "sat":
        os_ = ref_sat(zs, zf.w_qkv[k], zf.b_qkv[k])
    elif zf.composition == "gcn":
        os_ = ref_gcn(zs, zf.w_g[k], mf.GCN_ACTIVATIONS[zf.gcn_activation])
    else:
        os_ = ref_cap(zs, zf.w_c[k], zf.capsules, zf.routing_iterations)[0]
    fs = [torch.relu(o @ zf.ffn_w1[k] + zf.ffn_b1[k]) @ zf.ffn_w2[k] + zf.ffn_b2[k] for o in os_]
    return torch.cat(fs) @ zf.out_w[k] + zf.out_b[k]


def ref_mzu_step(cell: MZU, x: Tensor, h: Tensor) -> Tuple[Tensor, float]:
    """Eq. 1–4 and 15–17 on one example; also λ Σ mean zone cosines (eq. 18)."""
    dh = cell.hidden_size
    aux = 0.0
    for depth in range(cell.transition_depth + 1):
        blk = cell.block(depth)
        inp = torch.cat([x if depth == 0 else torch.zeros_like(x), h])  # t-MZU: zero input
        gen = torch.cat([cell.weight_ih, blk.weight_hh], 1) @ inp + blk.bias
        slots, pres, k = [gen[:dh], gen[dh:]], [], 0
        for slot, zoned in zip(slots, blk.zoned):
            if zoned:
                pres.append(ref_m_function(blk.zone_fns, k, slot))
                zs = slot.view(cell.zones, -1)
                aux += sum(ref_cos(a, b) for a in zs for b in zs) / cell.zones ** 2
                k += 1
            else:
                pres.append(slot)
        if blk.ln_weight is not None:
            pres = [F.layer_norm(p, (dh,)) * blk.ln_weight[i, 0] + blk.ln_bias[i, 0] for i, p in enumerate(pres)]
        g = torch.sigmoid(pres[1])
        h = (1 - g) * h + g * torch.tanh(pres[0])
    return h, cell.disagreement_weight * aux


# --------------------------------------------------------------------------- compositions
def test_self_attention_hand_example_and_reference() -> None:
    z = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=D)
    w = torch.cat([torch.eye(2, dtype=D)] * 3, 1)  # Q = K = V = identity
    out = mf.self_attention_compose(z.view(1, 1, 2, 2), w.unsqueeze(0), torch.zeros(1, 6, dtype=D))
    a = math.exp(1 / math.sqrt(2)) / (math.exp(1 / math.sqrt(2)) + 1)  # softmax([1, 0]/√2)
    torch.testing.assert_close(out[0, 0], torch.tensor([[a, 1 - a], [1 - a, a]], dtype=D))
    zs = torch.randn(2, 3, 4, 5, dtype=D)
    w, b = torch.randn(2, 5, 15, dtype=D), torch.randn(2, 15, dtype=D)
    fast = mf.self_attention_compose(zs, w, b)
    for m in range(2):
        for bi in range(3):
            torch.testing.assert_close(fast[m, bi], torch.stack(ref_sat(list(zs[m, bi]), w[m], b[m])))


def test_gcn_hand_example_and_reference() -> None:
    z = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0]], dtype=D)  # cos = [[1,1,0],[1,1,0],[0,0,1]]
    adj = mf.gcn_adjacency(mf.cosine_matrix(z))  # Ã = cos + I, degrees 3, 3, 2
    torch.testing.assert_close(adj, torch.tensor([[2 / 3, 1 / 3, 0], [1 / 3, 2 / 3, 0], [0, 0, 1]], dtype=D))
    out = mf.graph_convolution_compose(z.view(1, 1, 3, 2), torch.eye(2, dtype=D).unsqueeze(0), lambda t: t)
    torch.testing.assert_close(out[0, 0], torch.tensor([[4 / 3, 0], [5 / 3, 0], [0, 3]], dtype=D))
    zs = torch.randn(2, 3, 4, 5, dtype=D)
    w = torch.randn(2, 5, 5, dtype=D)
    fast = mf.graph_convolution_compose(zs, w, torch.relu)
    for m in range(2):
        for bi in range(3):
            torch.testing.assert_close(fast[m, bi], torch.stack(ref_gcn(list(zs[m, bi]), w[m])))


@pytest.mark.parametrize("case", ["opposite", "zero", "one_zero"])
def test_gcn_is_finite_for_opposite_and_zero_zones(case: str) -> None:
    z1 = torch.randn(3, dtype=D)
    zones = {"opposite": [z1, -z1], "zero": [z1 * 0, z1 * 0], "one_zero": [z1, z1 * 0]}[case]
    z = torch.stack(zones).view(1, 1, 2, 3).requires_grad_(True)
    w = torch.randn(1, 3, 3, dtype=D, requires_grad=True)
    out = mf.graph_convolution_compose(z, w, torch.tanh)
    adj = mf.gcn_adjacency(mf.cosine_matrix(z.detach()))
    if case == "opposite":  # cos = −1 clamps to 0: each zone only sees itself
        torch.testing.assert_close(adj[0, 0], torch.eye(2, dtype=D))
    (out.sum() + mf.mean_zone_cosine(z).sum()).backward()
    assert torch.isfinite(out).all() and torch.isfinite(z.grad).all() and torch.isfinite(w.grad).all()


def test_capsule_hand_example_and_reference() -> None:
    torch.testing.assert_close(mf.squash(torch.tensor([3.0, 4.0], dtype=D)),
                               torch.tensor([0.6, 0.8], dtype=D) * 25 / 26)
    zs = torch.randn(2, 3, 4, 6, dtype=D)
    w = torch.randn(2, 6, 3 * 5, dtype=D)  # J = 3, d_o = 5
    for iters in (1, 3):
        fast = mf.capsule_compose(zs, w, 3, iters)
        assert (fast.norm(dim=-1) < 1).all()
        for m in range(2):
            for bi in range(3):
                o, first_c = ref_cap(list(zs[m, bi]), w[m], 3, iters)
                assert all(abs(c - 1 / 3) < 1e-15 for row in first_c for c in row)  # b = 0: uniform
                torch.testing.assert_close(fast[m, bi], torch.stack(o))
    # one iteration: o_j = squash(Σ_i û_{j|i} / J)
    u = torch.einsum("mbnd,mde->mbne", zs, w).view(2, 3, 4, 3, 5)
    torch.testing.assert_close(mf.capsule_compose(zs, w, 3, 1), mf.squash(u.sum(2) / 3))


def test_capsules_finite_for_zero_predictions() -> None:
    z = torch.zeros(1, 2, 4, 3, dtype=D, requires_grad=True)
    w = torch.randn(1, 3, 4, dtype=D, requires_grad=True)
    out = mf.capsule_compose(z, w, 2, 3)
    out.sum().backward()
    assert torch.equal(out, torch.zeros_like(out))
    assert torch.isfinite(z.grad).all() and torch.isfinite(w.grad).all()
    zero_w = torch.zeros(1, 3, 4, dtype=D, requires_grad=True)
    out = mf.capsule_compose(torch.randn(1, 2, 4, 3, dtype=D), zero_w, 2, 3)
    out.sum().backward()
    assert torch.isfinite(zero_w.grad).all()


def test_mean_zone_cosine_equals_mean_of_cosine_matrix() -> None:
    z = torch.randn(2, 3, 4, 5, dtype=D)
    z[0, 0, 1] = 0
    torch.testing.assert_close(mf.mean_zone_cosine(z), mf.cosine_matrix(z).mean((-2, -1)))


# --------------------------------------------------------------------------- the cell
CELL_VARIANTS = [
    dict(transition_depth=0),
    dict(transition_depth=2),
    dict(transition_depth=2, share_transition=True, layer_norm=True),
    dict(transition_depth=1, regular_gate=True, disagreement_weight=0.5),
    dict(transition_depth=1, regular_trans=True, layer_norm=True),
]


@pytest.mark.parametrize("cls", MZU_CLASSES)
@pytest.mark.parametrize("options", CELL_VARIANTS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_cell_matches_slow_reference(cls: type[MZU], options: Dict[str, Any]) -> None:
    cell = cls(5, 8, zones=4, filter_size=6, **options).double()
    for p in cell.parameters():  # LN gains/biases away from 1/0 so the test sees them
        p.data.uniform_(-0.7, 0.7)
    x, h = torch.randn(3, 5, dtype=D), torch.randn(3, 8, dtype=D)
    new, aux = cell.step_with_aux(cell.project_input(x), h)
    torch.testing.assert_close(cell.step(cell.project_input(x), h), new)
    for b in range(3):
        want, want_aux = ref_mzu_step(cell, x[b], h[b])
        torch.testing.assert_close(new[b], want)
        torch.testing.assert_close(float(aux[b].detach()), want_aux)


@pytest.mark.parametrize("cls", MZU_CLASSES)
def test_transition_depth_zero_is_the_plain_cell_and_dt_chains_it(cls: type[MZU]) -> None:
    """L = 0 is eq. 1–3 alone; a shared L = 1 cell is that cell applied again with x = 0."""
    deep = cls(5, 8, transition_depth=1, share_transition=True).double()
    plain = cls(5, 8, transition_depth=0).double()
    plain.load_state_dict(deep.state_dict())
    x, h = torch.randn(3, 5, dtype=D), torch.randn(3, 8, dtype=D)
    h0 = plain.step(plain.project_input(x), h)
    torch.testing.assert_close(h0, torch.stack([ref_mzu_step(plain, x[b], h[b])[0] for b in range(3)]))
    zero_input = plain.project_input(torch.zeros(3, 5, dtype=D))  # = the bias only
    torch.testing.assert_close(deep.step(deep.project_input(x), h), plain.step(zero_input, h0))


@pytest.mark.parametrize("cls", MZU_CLASSES)
@pytest.mark.parametrize("depth", [1, 3])
def test_sharing_removes_exactly_the_shared_m_functions(cls: type[MZU], depth: int) -> None:
    unshared = cls(7, 8, transition_depth=depth)
    shared = cls(7, 8, transition_depth=depth, share_transition=True)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    per_depth = count(shared.blocks[0])  # zone-generation h-part + bias + M_h + M_g
    assert count(unshared) - count(shared) == depth * per_depth
    assert count(shared) == count(cls(7, 8, transition_depth=0))


def test_grudt_sharing_and_l0_is_gru() -> None:
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(GRUDT(5, 8, transition_depth=2)) - count(GRUDT(5, 8, transition_depth=2, share_transition=True)) \
        == 2 * (3 * 8 * 8 + 2 * 3 * 8)
    gru, dt0 = GRU(5, 8), GRUDT(5, 8, transition_depth=0)
    dt0.load_state_dict(gru.state_dict())
    x, h = torch.randn(3, 5), torch.randn(3, 8)
    torch.testing.assert_close(dt0.step(dt0.project_input(x), h), gru.step(gru.project_input(x), h))
    dt1, t = GRUDT(5, 8, transition_depth=1), GRU(5, 8)
    gru.load_state_dict({k: v for k, v in dt1.state_dict().items() if not k.startswith("transition")})
    t.weight_hh.data.copy_(dt1.transition_weight_hh[0])
    t.bias_hh.data.copy_(dt1.transition_bias_hh[0])
    t.bias_ih.data.copy_(dt1.transition_bias_ih[0])
    h1 = gru.step(gru.project_input(x), h)
    torch.testing.assert_close(dt1.step(dt1.project_input(x), h), t.step(t.project_input(torch.zeros(3, 5)), h1))


@pytest.mark.parametrize("cls", MZU_CLASSES)
def test_disagreement_gradient_reaches_zone_generation_only(cls: type[MZU]) -> None:
    layer = Recurrent(lambda i, h: cls(i, h, transition_depth=1), 5, 8)
    _, _, aux = layer(torch.randn(4, 2, 5), return_aux=True)
    assert aux.requires_grad and float(aux.detach()) > 0
    aux.backward()
    cell = layer.cell(0)
    for p in [cell.weight_ih] + [b.weight_hh for b in cell.blocks] + [b.bias for b in cell.blocks]:
        assert p.grad is not None and p.grad.abs().sum() > 0
    # within one step (given state) the term depends on zone generation alone
    cell = cls(5, 8, transition_depth=0)
    _, aux = cell.step_with_aux(cell.project_input(torch.randn(3, 5)), torch.randn(3, 8))
    aux.sum().backward()
    for p in (cell.weight_ih, cell.blocks[0].weight_hh, cell.blocks[0].bias):
        assert p.grad is not None and p.grad.abs().sum() > 0
    for name, p in cell.named_parameters():
        if "zone_fns" in name:
            assert p.grad is None, name


@pytest.mark.parametrize("cls", MZU_CLASSES)
def test_no_disagreement_when_lambda_is_zero(cls: type[MZU], monkeypatch: pytest.MonkeyPatch) -> None:
    cell = cls(5, 8, disagreement_weight=0.0)
    assert not cell.has_aux_loss
    xp, h = cell.project_input(torch.randn(2, 5)), torch.randn(2, 8)
    state, aux = cell.step_with_aux(xp, h)
    assert aux is None
    torch.testing.assert_close(state, cell.step(xp, h))
    layer = Recurrent(lambda i, hs: cls(i, hs, disagreement_weight=0.0), 5, 8)
    _, _, aux = layer(torch.randn(3, 2, 5), return_aux=True)
    assert float(aux) == 0 and not aux.requires_grad
    # the plain step never computes the disagreement, whatever λ
    monkeypatch.setattr(mf, "mean_zone_cosine", lambda z: (_ for _ in ()).throw(AssertionError("computed")))
    cls(5, 8).step(xp, h)


def test_aux_loss_is_the_weighted_sum_over_m_functions_and_depths() -> None:
    cell = SatMZU(5, 8, transition_depth=2, disagreement_weight=2.0).double()
    x, h = torch.randn(2, 5, dtype=D), torch.randn(2, 8, dtype=D)
    _, aux = cell.step_with_aux(cell.project_input(x), h)
    _, want = ref_mzu_step(cell, x[0], h[0])
    assert 0 < want <= 2.0 * 6  # 3 depths × 2 M-functions, each mean cosine ≤ 1
    torch.testing.assert_close(float(aux[0].detach()), want)


def test_size_errors_name_the_fix() -> None:
    with pytest.raises(ValueError, match="divisible by zones=4.*e.g. 5"):
        SatMZU(3, 10)
    with pytest.raises(ValueError, match="divisible by capsules=4"):
        CapMZU(3, 6, zones=3, capsules=4)
    with pytest.raises(ValueError, match="transition_depth"):
        GcnMZU(3, 8, transition_depth=-1)
    assert type(build_cell("cap_mzu", 3, 8)) is CapMZU and type(build_cell("grudt", 3, 8)) is GRUDT


@pytest.mark.parametrize("cls", MZU_CLASSES)
def test_candidate_dropout_only_in_training(cls: type[MZU]) -> None:
    cell = cls(5, 8, candidate_dropout=0.5)
    xp, h = cell.project_input(torch.randn(4, 5)), torch.randn(4, 8)
    cell.eval()
    torch.testing.assert_close(cell.step(xp, h), cell.step(xp, h))
    cell.train()
    assert not torch.allclose(cell.step(xp, h), cell.step(xp, h))


def _traced_ops(fn: Callable, *args: Tensor) -> Tuple[Tensor, List[str]]:
    """``fn(*args)`` through torch.compile, and the names of the ops in the graph it traced."""
    ops: List[str] = []

    def record(graph_module: torch.fx.GraphModule, _inputs: Any) -> Callable:
        ops.extend(str(node.target) for node in graph_module.graph.nodes if node.op in ("call_function", "call_method"))
        return graph_module.forward

    torch._dynamo.reset()
    return torch.compile(fn, backend=record, fullgraph=True)(*args), ops


@pytest.mark.parametrize("name, fn, shapes", [
    ("zone product", small_matmul, [(6, 4, 8), (6, 8, 4)]),
    ("MuFuRU's op weights", small_matmul, [(4, 7), (3, 7, 8)]),
    ("coupled_sum", mf._coupled_sum, [(6, 4, 2), (6, 4, 2, 8)]),
    ("agreement", mf._agreement, [(6, 4, 2, 8), (6, 2, 8)]),
])
def test_small_products_compile_to_a_product_and_sum_with_the_same_values(name, fn, shapes):
    torch.manual_seed(0)
    args = [torch.randn(*s) for s in shapes]
    compiled, ops = _traced_ops(fn, *args)
    assert torch.allclose(compiled, fn(*args), atol=1e-6), name
    assert not [op for op in ops if "matmul" in op or "bmm" in op or "einsum" in op], (name, ops)
    assert any("sum" in op for op in ops), (name, ops)


@pytest.mark.parametrize("share", [False, True])
def test_grudt_layer_norm_and_candidate_dropout_by_hand(share: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The MZU paper's GRU baselines (its footnote 3: dropout and layer norm as for the MZUs): each pre-activation
    (r, z, and the candidate's) layer-normalised with its own gain and bias per depth, dropout on the candidate n."""
    torch.manual_seed(0)
    cell = GRUDT(5, 8, transition_depth=1, share_transition=share, layer_norm=True, candidate_dropout=0.5)
    with torch.no_grad():
        cell.ln_weight.uniform_(0.5, 1.5)
        cell.ln_bias.uniform_(-0.5, 0.5)
    x, h = torch.randn(3, 5), torch.randn(3, 8)

    def ln(v, depth, gate):
        k = 0 if share else depth
        mean, var = v.mean(-1, keepdim=True), v.var(-1, unbiased=False, keepdim=True)
        return (v - mean) / torch.sqrt(var + 1e-5) * cell.ln_weight[k, gate] + cell.ln_bias[k, gate]

    def by_hand(masks):
        state = h
        for depth in range(2):
            b_ih, w_hh, b_hh = cell._depth_params(depth)
            xp = x @ cell.weight_ih.t() + cell.bias_ih if depth == 0 else b_ih
            gh = state @ w_hh.t() + b_hh
            r = torch.sigmoid(ln(xp[..., :8] + gh[..., :8], depth, 0))
            z = torch.sigmoid(ln(xp[..., 8:16] + gh[..., 8:16], depth, 1))
            n = torch.tanh(ln(xp[..., 16:] + r * gh[..., 16:], depth, 2)) * masks[depth]
            state = (1 - z) * n + z * state
        return state

    cell.eval()
    torch.testing.assert_close(cell.step(cell.project_input(x), h), by_hand([1.0, 1.0]))
    cell.train()  # training: F.dropout gives each depth's n a fresh mask (here fixed ones, to compute by hand)
    masks = [torch.bernoulli(torch.full((3, 8), 0.5)) * 2.0 for _ in range(2)]
    given = iter(masks)
    monkeypatch.setattr(torch.nn.functional, "dropout", lambda v, p, training: v * next(given) if p == 0.5 else v)
    torch.testing.assert_close(cell.step(cell.project_input(x), h), by_hand(masks))
    assert "layer_norm=True" in repr(cell) and "candidate_dropout=0.5" in repr(cell)
