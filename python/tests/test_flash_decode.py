"""posenc.flash_attention_decode: a dense cache against the float64
reference (posenc.attention) for every fused scheme with its own arguments;
a paged cache (block table + lengths) against the dense decode of each
sequence: the same bits for one sequence in pages of 64, float32 rounding
for sequences of different lengths in pages of 16 and 5, NumPy and torch
alike; and the errors of the paged arguments."""
import numpy as np
import pytest

import posenc

H, HKV, D = 4, 2, 32


def _rng_cache(rng, b, sk):
    k = rng.standard_normal((b, sk, HKV, D)).astype(np.float32)
    v = rng.standard_normal((b, sk, HKV, D)).astype(np.float32)
    return k, v


SCHEMES = {
    "none": {},
    "alibi": {"slopes": np.array([0.5, 0.25, 0.125, 0.0625])},
    "rope": {"theta": 500.0, "pairing": "half_split"},
    "t5": {"table": (np.arange(32 * H, dtype=np.float32).reshape(32, H) % 7) * 0.1,
           "max_distance": 128, "bidirectional": False},
}


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("sq", [1, 3])
def test_dense_decode_matches_the_reference(scheme, sq):
    rng = np.random.default_rng(1)
    k, v = _rng_cache(rng, 2, 301)
    q = rng.standard_normal((2, sq, H, D)).astype(np.float32)
    args = SCHEMES[scheme]
    out, lse = posenc.flash_attention_decode(q, k, v, scheme=scheme, return_lse=True, **args)
    ref = posenc.attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                           scheme=scheme, **args)
    assert out.shape == (2, sq, H, D) and lse.shape == (2, H, sq)
    np.testing.assert_allclose(out, ref, atol=2e-5, rtol=0)
    # The prefill kernel on the same call gives the same rows to float32 rounding.
    prefill = posenc.flash_attention(q, k, v, scheme=scheme, **args)
    np.testing.assert_allclose(out, prefill, atol=2e-6, rtol=0)


def _paged(k, v, lens, page, rng, spare=3):
    """Pools [num_pages, page, HKV, D] poisoned with NaN, the sequences' keys
    in shuffled pages, and the block table (-1 in unused entries)."""
    b = k.shape[0]
    max_pages = max((n + page - 1) // page for n in lens)
    num_pages = b * max_pages + spare
    ids = rng.permutation(num_pages).astype(np.int32)
    kp = np.full((num_pages, page, HKV, D), np.nan, np.float32)
    vp = np.full_like(kp, np.nan)
    table = np.full((b, max_pages), -1, np.int32)
    at = 0
    for s, n in enumerate(lens):
        for i in range((n + page - 1) // page):
            table[s, i] = ids[at]
            at += 1
            rows = slice(i * page, min(n, (i + 1) * page))
            kp[table[s, i], :rows.stop - rows.start] = k[s, rows]
            vp[table[s, i], :rows.stop - rows.start] = v[s, rows]
    return kp, vp, table


def test_paged_one_sequence_is_bit_identical_to_dense():
    rng = np.random.default_rng(2)
    k, v = _rng_cache(rng, 1, 1000)
    q = rng.standard_normal((1, 1, H, D)).astype(np.float32)
    kp, vp, table = _paged(k, v, [1000], 64, rng)
    for scheme, args in SCHEMES.items():
        dense = posenc.flash_attention_decode(q, k, v, scheme=scheme, **args)
        paged = posenc.flash_attention_decode(q, kp, vp, block_table=table,
                                              seq_lens=np.array([1000], np.int32),
                                              scheme=scheme, **args)
        assert np.array_equal(dense, paged), scheme


@pytest.mark.parametrize("page", [16, 5])
def test_paged_sequences_of_different_lengths(page):
    rng = np.random.default_rng(3)
    lens = [300, 37, 129]
    k, v = _rng_cache(rng, 3, max(lens))
    q = rng.standard_normal((3, 2, H, D)).astype(np.float32)
    kp, vp, table = _paged(k, v, lens, page, rng)
    for scheme, args in SCHEMES.items():
        out, lse = posenc.flash_attention_decode(q, kp, vp, block_table=table,
                                                 seq_lens=np.array(lens), scheme=scheme,
                                                 return_lse=True, **args)
        assert np.isfinite(out).all()
        for s, n in enumerate(lens):
            ref, ref_lse = posenc.flash_attention_decode(q[s:s + 1], k[s:s + 1, :n],
                                                         v[s:s + 1, :n], scheme=scheme,
                                                         return_lse=True, **args)
            np.testing.assert_allclose(out[s:s + 1], ref, atol=2e-6, rtol=0, err_msg=scheme)
            np.testing.assert_allclose(lse[s:s + 1], ref_lse, atol=2e-6, rtol=0)


def test_paged_torch_tensors():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    k, v = _rng_cache(rng, 1, 200)
    q = rng.standard_normal((1, 1, H, D)).astype(np.float32)
    kp, vp, table = _paged(k, v, [200], 16, rng)
    want = posenc.flash_attention_decode(q, kp, vp, block_table=table,
                                         seq_lens=np.array([200]))
    got = posenc.flash_attention_decode(torch.from_numpy(q), torch.from_numpy(kp),
                                        torch.from_numpy(vp),
                                        block_table=torch.from_numpy(table),
                                        seq_lens=torch.tensor([200]))
    assert isinstance(got, torch.Tensor)
    np.testing.assert_array_equal(got.numpy(), want)


def test_paged_errors_name_the_argument():
    rng = np.random.default_rng(5)
    k, v = _rng_cache(rng, 2, 40)
    q = rng.standard_normal((2, 1, H, D)).astype(np.float32)
    kp, vp, table = _paged(k, v, [40, 20], 16, rng, spare=0)
    lens = np.array([40, 20], np.int32)
    with pytest.raises(ValueError, match="block_table: got None.*seq_lens"):
        posenc.flash_attention_decode(q, kp, vp, seq_lens=lens)
    bad = table.copy()
    bad[1, 1] = kp.shape[0]
    with pytest.raises(ValueError, match=r"cache.block_table\[1\]\[1\]: got"):
        posenc.flash_attention_decode(q, kp, vp, block_table=bad, seq_lens=lens)
    with pytest.raises(ValueError, match=r"cache.seq_lens\[0\]: got 49"):
        posenc.flash_attention_decode(q, kp, vp, block_table=table,
                                      seq_lens=np.array([49, 20]))
    with pytest.raises(ValueError, match=r"block_table\[0\]: got 42949672\d+, expected .*int32"):
        posenc.flash_attention_decode(q, kp, vp, block_table=table.astype(np.int64) + 2**32,
                                      seq_lens=lens)
    with pytest.raises(ValueError, match="seq_lens.shape\\[0\\]: got 3"):
        posenc.flash_attention_decode(q, kp, vp, block_table=table,
                                      seq_lens=np.array([40, 20, 1]))
    with pytest.raises(ValueError, match="block_table.ndim: got 1"):
        posenc.flash_attention_decode(q, kp, vp, block_table=table[0], seq_lens=lens)
