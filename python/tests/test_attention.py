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
            lambda a, b, c: pt.attention(a, b, c, layout="bshd", scheme=scheme, **kw),
            (q, k, v)), scheme


def test_t5_table_gradient_matches_plain_torch():
    q, k, v = inputs()
    table = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
    out = pt.attention(q, k, v, layout="bshd", scheme="t5", table=table, max_distance=16)
    out.square().sum().backward()
    ref_table = table.detach().clone().requires_grad_(True)
    rel = torch.arange(7)[None, :] - (torch.arange(5)[:, None] + 2)
    # mask="causal" (the default) and no `bidirectional`: one-sided buckets, as in T5's decoder.
    buckets = posenc.t5_bucket(rel, num_buckets=8, max_distance=16, bidirectional=False)
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
    with pytest.raises(ValueError, match="scheme.name"):
        posenc.flash_attention(q, q, q, scheme="deberta")


@pytest.mark.parametrize("scheme,args", [
    ("none", {}),
    ("alibi", {"max_bias": 8.0}),
    ("rope", {"theta": 10000.0}),
    ("t5", {"table": np.random.default_rng(3).normal(size=(32, 4)).astype(np.float32),
            "bidirectional": False}),
    ("shaw", {"clip": 5, "a_key": np.random.default_rng(4).normal(size=(11, 16)),
              "a_value": np.random.default_rng(5).normal(size=(11, 16))}),
])
@pytest.mark.parametrize("mask,window", [("causal", None), ("bidirectional", None),
                                         ("causal", 6)])
def test_flash_attention_varlen_matches_per_sequence_reference(scheme, args, mask, window):
    # Sequences of 5, 0 (4 keys nobody sees), 23 (of 30 keys: bottom-right
    # queries) and 1 query; GQA 4 query heads on 2 kv heads.
    q_lens, k_lens = [5, 0, 23, 1], [5, 4, 30, 9]
    cu_q, cu_k = np.cumsum([0] + q_lens), np.cumsum([0] + k_lens)
    rng = np.random.default_rng(21)
    q = rng.normal(size=(cu_q[-1], 4, 16)).astype(np.float32)
    k = rng.normal(size=(cu_k[-1], 2, 16)).astype(np.float32)
    v = rng.normal(size=(cu_k[-1], 2, 16)).astype(np.float32)
    out = posenc.flash_attention_varlen(q, k, v, cu_q, cu_k, scheme=scheme, mask=mask,
                                        sliding_window=window, query_tile=8, key_tile=8,
                                        ctx=posenc.Context(2), **args)
    assert out.shape == (cu_q[-1], 4, 16) and out.dtype == np.float32
    for b in range(len(q_lens)):
        if q_lens[b] == 0:
            continue
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        ref = posenc.attention(q[qs][None].astype(np.float64), k[ks][None].astype(np.float64),
                               v[ks][None].astype(np.float64), scheme=scheme, mask=mask,
                               sliding_window=window, **args)
        np.testing.assert_allclose(out[qs], ref[0], atol=2e-5, rtol=0, err_msg="sequence %d" % b)


def test_flash_attention_varlen_torch_inputs_and_int32_offsets():
    q, k, v = (torch.randn(12, 2, 8, generator=torch.Generator().manual_seed(s)) for s in (1, 2, 3))
    cu = torch.tensor([0, 5, 12], dtype=torch.int32)
    out = posenc.flash_attention_varlen(q, k, v, cu, cu, scheme="alibi")
    assert isinstance(out, torch.Tensor) and out.shape == (12, 2, 8)
    for s, e in ((0, 5), (5, 12)):
        ref = posenc.attention(q[s:e][None].double(), k[s:e][None].double(),
                               v[s:e][None].double(), scheme="alibi")
        assert torch.allclose(out[s:e].double(), ref[0], atol=2e-5, rtol=0)


def test_flash_attention_varlen_rejects_bad_cu_seqlens():
    q = np.zeros((8, 2, 8), np.float32)
    with pytest.raises(ValueError, match=r"cu_seqlens_q\[2\]: got 7"):
        posenc.flash_attention_varlen(q, q, q, [0, 3, 7], [0, 3, 8])

