"""Attention (nn/attention.py): masking, the three score functions, hoisted key projections."""
from __future__ import annotations

import pytest
import torch

from lit_rnncells.nn.attention import Attention


@pytest.mark.parametrize("kind", ["additive", "dot", "general"])
def test_padding_gets_no_weight_and_does_not_change_the_context(kind: str) -> None:
    torch.manual_seed(0)
    att = Attention(6, 6, kind).double()
    keys = torch.randn(2, 5, 6, dtype=torch.float64)
    query = torch.randn(2, 6, dtype=torch.float64)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    ctx, w = att(query, att.precompute(keys), keys, mask)
    assert torch.all(w[1, 3:] == 0)
    assert torch.allclose(w.sum(-1), torch.ones(2, dtype=torch.float64))
    # the padded sentence alone (no padding) gives the same weights and context
    alone_ctx, alone_w = att(query[1:], att.precompute(keys[1:, :3]), keys[1:, :3], None)
    assert torch.allclose(alone_w[0], w[1, :3], atol=1e-12)
    assert torch.allclose(alone_ctx[0], ctx[1], atol=1e-12)
    # garbage in the padding changes nothing
    noisy = keys.clone()
    noisy[1, 3:] = 1e3
    ctx2, w2 = att(query, att.precompute(noisy), noisy, mask)
    assert torch.allclose(ctx2[1], ctx[1], atol=1e-12) and torch.allclose(w2[1], w[1], atol=1e-12)


def test_scores_follow_the_formulas() -> None:
    torch.manual_seed(1)
    q, k = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 7, 5, dtype=torch.float64)
    add = Attention(4, 5, "additive", hidden_size=9).double()
    _, w = add(q, add.precompute(k), k, None)
    energy = torch.tanh(k @ add.key_proj.weight.t() + add.key_proj.bias + (q @ add.query_proj.weight.t())[:, None]) \
        @ add.score
    assert torch.allclose(w, torch.softmax(energy, -1), atol=1e-12)
    gen = Attention(4, 5, "general").double()
    ctx, w = gen(q, gen.precompute(k), k, None)
    energy = torch.einsum("bq,qk,bsk->bs", q, gen.key_proj.weight, k)
    assert torch.allclose(w, torch.softmax(energy, -1), atol=1e-12)
    assert torch.allclose(ctx, torch.einsum("bs,bsk->bk", w, k), atol=1e-12)
    dot = Attention(5, 5, "dot").double()
    q5 = torch.randn(3, 5, dtype=torch.float64)
    _, w = dot(q5, dot.precompute(k), k, None)
    assert torch.allclose(w, torch.softmax(torch.einsum("bk,bsk->bs", q5, k), -1), atol=1e-12)


def test_bad_options_fail_at_construction() -> None:
    with pytest.raises(ValueError, match="dot attention needs the query size"):
        Attention(4, 8, "dot")
    with pytest.raises(ValueError, match="Unknown attention 'bilinear'"):
        Attention(4, 4, "bilinear")
    with pytest.raises(ValueError, match="attention_size must be a positive integer"):
        Attention(4, 4, "additive", hidden_size=0)
