"""ALiBi, T5 buckets and bias, relative matrices, DeBERTa buckets through the
module: golden fixtures, HF's formulas in plain torch, autograd, errors."""
import math

import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt
from conftest import golden


# ---- Hugging Face formulas in plain torch
def bloom_build_alibi_tensor(attention_mask, num_heads, dtype):
    """models/bloom/modeling_bloom.py build_alibi_tensor."""
    batch_size, seq_length = attention_mask.shape
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))),
                                  dtype=torch.float32)
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
    alibi = slopes[..., None] * arange_tensor
    return alibi.reshape(batch_size * num_heads, 1, seq_length).to(dtype)


def t5_relative_position_bucket(relative_position, bidirectional=True, num_buckets=32,
                                max_distance=128):
    """models/t5/modeling_t5.py T5Attention._relative_position_bucket."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact) * (num_buckets - max_exact)).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def t5_compute_bias(weight, query_length, key_length, bidirectional, num_buckets, max_distance):
    context_position = torch.arange(query_length, dtype=torch.long)[:, None]
    memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
    relative_position = memory_position - context_position
    buckets = t5_relative_position_bucket(relative_position, bidirectional, num_buckets,
                                          max_distance)
    values = torch.nn.functional.embedding(buckets, weight)
    return values.permute([2, 0, 1]).unsqueeze(0)


# ---- ALiBi
def test_alibi_slopes_golden_every_head_count():
    data = golden("alibi.json")
    assert len(data["slopes"]) == 64
    for case in data["slopes"]:
        h = case["num_heads"]
        ref = posenc.alibi_slopes(h)
        # the paper's start * ratio**i accumulates a few ulp; posenc is exact
        assert np.abs(ref / np.array(case["paper_slopes_float64"]) - 1).max() <= 1e-14, h
        f32 = np.array(case["paper_slopes_float32"], dtype=np.float64)
        assert np.abs(ref.astype(np.float32) / f32 - 1).max() <= 2.5e-7, h
        bloom = posenc.alibi_slopes(h, convention="bloom_float32").astype(np.float32)
        want = np.array(case["bloom_slopes"], dtype=np.float32)
        ulp = np.spacing(want)
        assert (np.abs(bloom - want) <= ulp).all(), h


def test_bloom_alibi_tensor_golden_and_plain_torch():
    data = golden("alibi.json")
    for case in data["bloom_alibi_tensors"]:
        mask = torch.tensor(case["attention_mask"])
        got = posenc.bloom_alibi_tensor(mask, case["num_heads"])
        assert list(got.shape) == case["alibi_shape"]
        want = torch.tensor(case["alibi"], dtype=torch.float32)
        assert torch.equal(got, want)
        assert torch.equal(got, bloom_build_alibi_tensor(mask, case["num_heads"], torch.float32))


def test_alibi_bias_causal_and_symmetric_values():
    slopes = posenc.alibi_slopes(4)
    b = posenc.alibi_bias(4, 3, 5, dtype="float64")
    assert b.shape == (4, 3, 5)
    for h in range(4):
        for i in range(3):
            for j in range(5):
                ip = 5 - 3 + i
                want = -slopes[h] * (ip - j) if j <= ip else -np.inf
                assert b[h, i, j] == want
    s = posenc.alibi_bias(4, 5, form="symmetric", dtype="float64")
    assert s[2, 1, 4] == -slopes[2] * 3 and s[2, 4, 1] == -slopes[2] * 3


def test_alibi_module_adds_bias_and_softmax_is_shift_invariant():
    scores = torch.randn(2, 8, 6, 6)
    out = pt.ALiBi(8)(scores)
    bloom = bloom_build_alibi_tensor(torch.ones(2, 6, dtype=torch.long), 8, torch.float32)
    bloom = bloom.reshape(2, 8, 1, 6)
    causal = torch.triu(torch.full((6, 6), float("-inf")), 1)
    p_hf = torch.softmax(scores + bloom + causal, dim=-1)
    assert torch.allclose(torch.softmax(out, -1), p_hf, atol=1e-6)


def test_alibi_errors():
    with pytest.raises(ValueError, match="num_heads: got 0"):
        posenc.alibi_slopes(0)
    with pytest.raises(ValueError, match="max_bias"):
        posenc.alibi_slopes(4, max_bias=-1.0)
    with pytest.raises(ValueError, match="convention"):
        posenc.alibi_slopes(4, convention="paper")
    with pytest.raises(ValueError, match="form"):
        posenc.alibi_bias(4, 3, form="both")


# ---- T5
def test_t5_buckets_golden_and_plain_torch():
    cases = golden("t5_buckets.json")["cases"]
    assert len(cases) == 3
    for c in cases:
        rel = np.arange(c["relative_position_first"], c["relative_position_last"] + 1)
        got = posenc.t5_bucket(rel, num_buckets=c["num_buckets"], max_distance=c["max_distance"],
                               bidirectional=c["bidirectional"])
        assert got.tolist() == c["buckets"]
        rel_t = torch.arange(-3000, 3001)
        got_t = posenc.t5_bucket(rel_t, num_buckets=c["num_buckets"],
                                 max_distance=c["max_distance"], bidirectional=c["bidirectional"])
        assert torch.is_tensor(got_t)
        assert torch.equal(got_t, t5_relative_position_bucket(
            rel_t, c["bidirectional"], c["num_buckets"], c["max_distance"]))


def test_t5_bias_matches_hf_compute_bias_and_gradcheck():
    mod = pt.T5RelativeBias(4, num_buckets=32, max_distance=128)
    # The direction follows the mask unless given: HF's encoder (two-sided) / decoder.
    assert torch.equal(mod(5, 9), t5_compute_bias(mod.weight, 5, 9, False, 32, 128))
    got = mod(5, 9, mask="bidirectional")
    want = t5_compute_bias(mod.weight, 5, 9, True, 32, 128)
    assert torch.equal(got, want)
    fixed = pt.T5RelativeBias(4, bidirectional=True)
    assert torch.equal(fixed(5, 9), t5_compute_bias(fixed.weight, 5, 9, True, 32, 128))
    got.sum().backward()
    ref_w = mod.weight.detach().clone().requires_grad_(True)
    t5_compute_bias(ref_w, 5, 9, True, 32, 128).sum().backward()
    assert torch.allclose(mod.weight.grad, ref_w.grad)
    table = torch.randn(16, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda t: pt.t5_bias(t, 4, 7, max_distance=20, bidirectional=False, query_offset=3),
        (table,))


def test_t5_bias_context_threads_and_backend_give_the_same_values():
    table = np.random.default_rng(7).normal(size=(32, 6)).astype(np.float32)
    ref = posenc.t5_bias(table, 150, 203, query_offset=9, ctx=posenc.Context(1, "scalar"))
    assert ref.shape == (6, 150, 203)
    for ctx in [posenc.Context(3, "auto"), posenc.Context(2, "simd"), None]:
        assert np.array_equal(posenc.t5_bias(table, 150, 203, query_offset=9, ctx=ctx), ref)
    # A gathered table: every value is one of the table's entries of its head.
    assert all(np.isin(ref[h], table[:, h]).all() for h in range(6))
    with pytest.raises(ValueError, match="ctx"):
        posenc.t5_bias(table, 4, 4, ctx="two threads")


def test_t5_errors():
    with pytest.raises(ValueError, match="num_buckets"):
        posenc.t5_bucket([0, 1], num_buckets=1)
    with pytest.raises(ValueError, match="relative_position.dtype"):
        posenc.t5_bucket(np.array([0.5]))
    with pytest.raises(ValueError, match=r"relative_position\[1\]"):
        posenc.t5_bucket(np.array([0, 2 ** 40]))


# ---- relative matrices and DeBERTa
def test_relative_matrix_6x6():
    m = posenc.relative_matrix(6)
    i, j = np.meshgrid(np.arange(6), np.arange(6), indexing="ij")
    assert np.array_equal(m, i - j)
    assert np.array_equal(posenc.relative_matrix(2, 4, query_offset=2, sign="key_minus_query"),
                          np.arange(4)[None, :] - np.array([[2], [3]]))
    with pytest.raises(ValueError, match="query_len"):
        posenc.relative_matrix(0)
    with pytest.raises(ValueError, match="sign"):
        posenc.relative_matrix(3, sign="i-j")


def test_deberta_golden():
    for c in golden("deberta_buckets.json")["cases"]:
        if c["function"] == "make_log_bucket_position":
            rel = np.arange(c["relative_position_first"], c["relative_position_last"] + 1)
            got = posenc.deberta_bucket(rel, bucket_size=c["bucket_size"],
                                        max_position=c["max_position"])
            assert got.tolist() == [int(v) for v in c["bucket_pos"]]
        else:
            got = posenc.deberta_relative_position(c["query_size"], c["key_size"],
                                                   bucket_size=c["bucket_size"],
                                                   max_position=c["max_position"])
            if "rows_included" in c:
                for r, row in zip(c["rows_included"], c["rel_pos_rows"]):
                    assert got[r].tolist() == row
            else:
                assert got.tolist() == c["rel_pos"][0]
    with pytest.raises(ValueError, match="bucket_size"):
        posenc.deberta_bucket([1], bucket_size=1, max_position=512)
