"""posenc.attention / posenc.torch.attention (the exact reference): plain-torch
formulas, probabilities, gradcheck of the autograd Function, table gradients."""
import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt


def plain_attention(q, k, v, bias=None, causal=True):
    """bshd, GQA by repeat_interleave, bottom-right causal mask."""
    h = q.shape[2]
    k = k.repeat_interleave(h // k.shape[2], 2)
    v = v.repeat_interleave(h // v.shape[2], 2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / q.shape[-1] ** 0.5
    if bias is not None:
        s = s + bias
    if causal:
        sq, sk = s.shape[-2:]
        s = s.masked_fill(~torch.ones(sq, sk, dtype=torch.bool).tril(sk - sq), float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v)


def inputs(dtype=torch.float64, grad=False):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 5, 4, 8, dtype=dtype, generator=g)
    k = torch.randn(2, 7, 2, 8, dtype=dtype, generator=g)
    v = torch.randn(2, 7, 2, 6, dtype=dtype, generator=g)
    return [t.requires_grad_(grad) for t in (q, k, v)]


def test_none_and_alibi_match_plain_torch_and_probs_sum_to_one():
    q, k, v = inputs()
    assert torch.allclose(posenc.attention(q, k, v), plain_attention(q, k, v), atol=1e-12)
    slopes = torch.from_numpy(posenc.alibi_slopes(4))
    i = torch.arange(5)[:, None] + 2
    j = torch.arange(7)[None, :]
    bias = -slopes[:, None, None] * (i - j).abs()
    out, probs = posenc.attention(q, k, v, scheme="alibi", return_probs=True)
    assert torch.allclose(out, plain_attention(q, k, v, bias[None]), atol=1e-12)
    assert probs.shape == (2, 4, 5, 7)
    assert torch.allclose(probs.sum(-1), torch.ones(2, 4, 5, dtype=torch.float64))
    assert (probs[..., 0, 3:] == 0).all()  # query 0 sits at 2: keys 3.. are future


def test_rope_scheme_equals_rotating_q_and_k_first():
    q, k, v = inputs()
    qp = torch.arange(2, 7)
    q_rot = posenc.apply_rope(q, qp, layout="bshd", theta=500.0)
    k_rot = posenc.apply_rope(k, torch.arange(7), layout="bshd", theta=500.0)
    want = plain_attention(q_rot, k_rot, v)
    assert torch.allclose(posenc.attention(q, k, v, scheme="rope", theta=500.0), want,
                          atol=1e-12)


def test_gradcheck_attention_float64():
    q, k, v = inputs(grad=True)
    for scheme, kw in [("none", {}), ("alibi", {"mask": "bidirectional"}),
                       ("rope", {"theta": 100.0, "sliding_window": 3})]:
        assert torch.autograd.gradcheck(
            lambda a, b, c: pt.attention(a, b, c, scheme=scheme, **kw), (q, k, v)), scheme


def test_t5_table_gradient_matches_plain_torch():
    q, k, v = inputs()
    table = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
    out = pt.attention(q, k, v, scheme="t5", table=table, max_distance=16)
    out.square().sum().backward()
    ref_table = table.detach().clone().requires_grad_(True)
    rel = torch.arange(7)[None, :] - (torch.arange(5)[:, None] + 2)
    buckets = posenc.t5_bucket(rel, num_buckets=8, max_distance=16)
    bias = ref_table[buckets].permute(2, 0, 1)[None]
    # T5 keeps scale 1/sqrt(D) here: posenc's T5 bias is unscaled, like HF.
    ref = plain_attention(q, k, v, bias)
    ref.square().sum().backward()
    assert torch.allclose(out, ref, atol=1e-6)  # the table is stored in float32
    assert torch.allclose(table.grad, ref_table.grad, atol=1e-5)


def test_attention_errors():
    q, k, v = inputs()
    with pytest.raises(ValueError, match="scheme"):
        posenc.attention(q, k, v, scheme="xpos")
    with pytest.raises(ValueError, match="tabel"):
        posenc.attention(q, k, v, scheme="t5", tabel=torch.zeros(8, 4))
    with pytest.raises(ValueError, match="table"):
        posenc.attention(q, k, v, scheme="t5")
    with pytest.raises(ValueError, match="mask"):
        posenc.attention(q, k, v, mask="full")
    with pytest.raises(ValueError):
        posenc.attention(q, k[:, :, :1].repeat(1, 1, 3, 1), v, scheme="none")  # 4 % 3 heads


@pytest.mark.parametrize("scheme,args", [
    ("none", {}),
    ("alibi", {"max_bias": 8.0}),
    ("rope", {"theta": 10000.0}),
    ("t5", {"table": np.random.default_rng(3).normal(size=(32, 4)).astype(np.float32)}),
])
@pytest.mark.parametrize("mask", ["causal", "bidirectional"])
def test_flash_attention_numpy_matches_reference(scheme, args, mask):
    rng = np.random.default_rng(11)
    q = rng.normal(size=(2, 37, 4, 16)).astype(np.float32)
    k = rng.normal(size=(2, 45, 2, 16)).astype(np.float32)
    v = rng.normal(size=(2, 45, 2, 16)).astype(np.float32)
    ref = posenc.attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                           scheme=scheme, mask=mask, **args)
    out, lse = posenc.flash_attention(q, k, v, scheme=scheme, mask=mask, return_lse=True,
                                      query_tile=16, key_tile=8, **args)
    assert out.dtype == np.float32 and lse.shape == (2, 4, 37) and lse.dtype == np.float32
    np.testing.assert_allclose(out, ref, atol=2e-5, rtol=0)
    assert np.isfinite(lse).all()


def test_flash_attention_numpy_rejects_reference_only_scheme():
    q = np.zeros((1, 4, 2, 8), np.float32)
    with pytest.raises(ValueError, match="scheme.kind"):
        posenc.flash_attention(q, q, q, scheme="deberta")
