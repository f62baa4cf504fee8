"""Property tests of the Python API with Hypothesis (Debian python3-hypothesis).

Random shapes, strides (non-contiguous slices, transposes), dtypes, layouts
and positions for RoPE, ALiBi / T5 biases and attention, each checked
against an independent reference: RoPE and ALiBi in float64 numpy from
their formulas, the T5 bias as a lookup of t5_bucket (which the golden
tests pin to HF), flash attention against posenc.attention (the float64
executable specification) and that against a numpy softmax. Bad arguments
of the right Python type must raise ValueError (posenc.ConfigError is one)
or posenc.IoError, never crash the interpreter.

Example counts are bounded and the runs derandomized (a fixed seed from
the test's source), so the suite is fast and the same on every run.
"""
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import posenc

settings.register_profile(
    "posenc", derandomize=True, deadline=None, max_examples=40, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("posenc")

NUMPY_DTYPES = ["float32", "float64", "float16"]
# Absolute error allowed per unit of max |input|: one rounding of the dtype
# (twice for 16-bit: input conversion and output rounding), plus float32 maths.
TOL = {"float64": 1e-12, "float32": 4e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


# ---- strategies -------------------------------------------------------------
@st.composite
def strided_array(draw, shape, dtype):
    """A view of `shape` over a larger buffer of `dtype`: axes in a random
    memory order (transposes), optional step-2 slicing (non-contiguous)."""
    ndim = len(shape)
    order = draw(st.permutations(range(ndim)))
    steps = [draw(st.sampled_from([1, 1, 2])) for _ in range(ndim)]
    base_shape = [shape[a] * steps[a] for a in order]
    seed = draw(st.integers(0, 2**31 - 1))
    values = np.random.default_rng(seed).standard_normal(base_shape)
    inverse = np.argsort(order).tolist()
    slices = tuple(slice(None, None, s) for s in steps)
    if dtype == "bfloat16":
        base = torch.from_numpy(values).to(torch.bfloat16)
        view = base.permute(*inverse)[slices]
    else:
        view = np.transpose(values.astype(dtype), inverse)[slices]
    assert tuple(view.shape) == tuple(shape)
    return view


def as_f64(x):
    if isinstance(x, torch.Tensor):
        return x.to(torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def max_abs(x):
    return float(np.max(np.abs(as_f64(x)))) if as_f64(x).size else 0.0


# ---- references -------------------------------------------------------------
def rope_reference(x, positions, layout, rotary_dim, theta, pairing):
    """RoPE in float64 numpy from the formula (posenc/rope.h)."""
    x = as_f64(x)
    if layout == "bhsd":
        x = np.transpose(x, (0, 2, 1, 3))  # -> bshd
    b, s, h, d = x.shape
    rd = rotary_dim or d
    inv_freq = theta ** (-np.arange(0, rd, 2, dtype=np.float64) / rd)
    pos = np.broadcast_to(np.asarray(positions, dtype=np.float64).reshape(-1, s), (b, s))
    ang = pos[:, :, None, None] * inv_freq[None, None, None, :]
    cos, sin = np.cos(ang), np.sin(ang)
    out = x.copy()
    if pairing == "half_split":
        x1, x2 = x[..., : rd // 2], x[..., rd // 2: rd]
        out[..., : rd // 2] = x1 * cos - x2 * sin
        out[..., rd // 2: rd] = x2 * cos + x1 * sin
    else:
        x1, x2 = x[..., 0:rd:2], x[..., 1:rd:2]
        out[..., 0:rd:2] = x1 * cos - x2 * sin
        out[..., 1:rd:2] = x2 * cos + x1 * sin
    return np.transpose(out, (0, 2, 1, 3)) if layout == "bhsd" else out


def alibi_slopes_reference(n):
    """Press et al.'s get_slopes (the paper's code)."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + alibi_slopes_reference(2 * closest)[0::2][: n - closest]


def softmax_attention_reference(q, k, v, causal):
    """Plain softmax attention in float64, bshd, queries bottom-right aligned."""
    q, k, v = as_f64(q), as_f64(k), as_f64(v)
    b, sq, h, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    k = np.repeat(k, h // hkv, axis=2)
    v = np.repeat(v, h // hkv, axis=2)
    logits = np.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(d)
    if causal:
        i = np.arange(sq)[:, None] + (sk - sq)
        j = np.arange(sk)[None, :]
        logits = np.where(j <= i, logits, -np.inf)
    m = np.max(logits, axis=-1, keepdims=True)
    p = np.exp(logits - m)
    p /= np.sum(p, axis=-1, keepdims=True)
    return np.einsum("bhij,bjhd->bihd", p, v)


# ---- RoPE -------------------------------------------------------------------
@st.composite
def rope_case(draw):
    b, s, h = draw(st.integers(1, 3)), draw(st.integers(1, 9)), draw(st.integers(1, 4))
    d = 2 * draw(st.integers(1, 12))
    rd = draw(st.sampled_from([0, 2 * draw(st.integers(1, d // 2))]))
    layout = draw(st.sampled_from(["bshd", "bhsd"]))
    dtype = draw(st.sampled_from(NUMPY_DTYPES + ["bfloat16"]))
    shape = (b, s, h, d) if layout == "bshd" else (b, h, s, d)
    x = draw(strided_array(shape, dtype))
    kind = draw(st.sampled_from(["offset", "shared", "per_row"]))
    if kind == "offset":
        offset = draw(st.integers(0, 1000))
        positions, ids = None, offset + np.arange(s)
    else:
        n = s if kind == "shared" else b * s
        ids = np.array(draw(st.lists(st.integers(0, posenc.MAX_POSITION), min_size=n,
                                     max_size=n)), dtype=np.int64)
        positions, offset = (ids if kind == "shared" else ids.reshape(b, s)), 0
    theta = draw(st.sampled_from([10000.0, 500000.0, 1.5]))
    pairing = draw(st.sampled_from(["half_split", "interleaved"]))
    return x, positions, offset, ids, layout, rd, theta, pairing, dtype


@given(rope_case(), st.booleans())
def test_apply_rope_matches_formula_on_any_strides(case, inplace):
    x, positions, offset, ids, layout, rd, theta, pairing, dtype = case
    expected = rope_reference(x, ids, layout, rd, theta, pairing)
    before = as_f64(x).copy()
    got = posenc.apply_rope(x, positions, layout=layout, rotary_dim=rd, theta=theta,
                            pairing=pairing, offset=offset, inplace=inplace)
    assert got.shape == x.shape
    if inplace:
        assert got is x
    else:
        np.testing.assert_array_equal(as_f64(x), before)  # input untouched
    # Storage rounding of the dtype, plus the float64 angle p * inv_freq whose
    # last bit may differ between two correct computations (|error| ~ p * 2^-52).
    scale = max(1.0, max_abs(before))
    angle_error = 4 * 2.0**-52 * (float(np.max(ids)) + 1)
    tol = (TOL[dtype] * (4 if dtype == "float32" else 1) + angle_error) * scale
    np.testing.assert_allclose(as_f64(got), expected, rtol=0, atol=tol + 1e-12)


@given(rope_case())
def test_apply_rope_inverse_undoes_forward(case):
    x, positions, offset, ids, layout, rd, theta, pairing, dtype = case
    if dtype not in ("float32", "float64"):
        return  # 16-bit storage rounds each pass; the formula test covers it
    y = posenc.apply_rope(x, positions, layout=layout, rotary_dim=rd, theta=theta,
                          pairing=pairing, offset=offset)
    back = posenc.apply_rope(y, positions, layout=layout, rotary_dim=rd, theta=theta,
                             pairing=pairing, offset=offset, direction="inverse")
    np.testing.assert_allclose(as_f64(back), as_f64(x), rtol=0,
                               atol=8 * TOL[dtype] * max(1.0, max_abs(x)))


# ---- ALiBi / T5 ---------------------------------------------------------------
@given(st.integers(1, 40), st.integers(1, 12), st.integers(0, 12),
       st.sampled_from(["causal", "symmetric"]), st.sampled_from(["float32", "float64"]))
def test_alibi_bias_matches_paper_formula(heads, query_len, extra_keys, form, dtype):
    key_len = query_len + extra_keys
    got = posenc.alibi_bias(heads, query_len, key_len, form=form, dtype=dtype)
    slopes = np.array(alibi_slopes_reference(heads))
    # The paper's recursion rounds once per power; posenc's slopes are exact.
    np.testing.assert_allclose(posenc.alibi_slopes(heads), slopes, rtol=1e-14)
    i = np.arange(query_len)[:, None] + (key_len - query_len)
    j = np.arange(key_len)[None, :]
    dist = (i - j) if form == "causal" else np.abs(i - j)
    expected = -slopes[:, None, None] * dist[None]
    if form == "causal":
        expected = np.where((j > i)[None], -np.inf, expected)
    assert got.shape == (heads, query_len, key_len)
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=TOL[dtype], atol=0)


@given(st.integers(1, 6), st.sampled_from([8, 16, 32]), st.sampled_from([16, 64, 128]),
       st.integers(1, 12), st.integers(0, 8), st.booleans(), st.integers(0, 300),
       st.sampled_from(["float32", "float64"]), st.integers(0, 2**31 - 1))
def test_t5_bias_is_the_bucket_lookup(heads, num_buckets, max_distance, query_len, extra,
                                      bidirectional, query_offset, dtype, seed):
    if max_distance <= num_buckets // (4 if bidirectional else 2):
        max_distance = 4 * num_buckets
    key_len = query_len + extra
    table = np.random.default_rng(seed).standard_normal((num_buckets, heads)).astype(dtype)
    table_view = np.asfortranarray(table)  # column-major: non-contiguous rows
    got = posenc.t5_bias(table_view, query_len, key_len, max_distance=max_distance,
                         bidirectional=bidirectional, query_offset=query_offset)
    rel = np.arange(key_len)[None, :] - (query_offset + np.arange(query_len))[:, None]
    buckets = posenc.t5_bucket(rel, num_buckets=num_buckets, max_distance=max_distance,
                               bidirectional=bidirectional)
    # The learned table is float32 (posenc/t5.h): float64 values are rounded once.
    expected = np.transpose(table.astype(np.float32)[buckets], (2, 0, 1)).astype(dtype)
    np.testing.assert_array_equal(got, expected)


# ---- attention ----------------------------------------------------------------
@st.composite
def attention_case(draw):
    b, sq, extra = draw(st.integers(1, 2)), draw(st.integers(1, 10)), draw(st.integers(0, 6))
    hkv = draw(st.integers(1, 2))
    h = hkv * draw(st.integers(1, 3))
    d = 2 * draw(st.integers(1, 8))
    layout = draw(st.sampled_from(["bshd", "bhsd"]))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    sk = sq + extra

    def shape(s, heads):
        return (b, s, heads, d) if layout == "bshd" else (b, heads, s, d)
    q = draw(strided_array(shape(sq, h), dtype))
    k = draw(strided_array(shape(sk, hkv), dtype))
    v = draw(strided_array(shape(sk, hkv), dtype))
    mask = draw(st.sampled_from(["causal", "bidirectional"]))
    scheme = draw(st.sampled_from(["none", "rope", "alibi"]))
    window = draw(st.sampled_from([None, None, draw(st.integers(1, 8))]))
    tiles = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    return q, k, v, layout, dtype, mask, scheme, window, tiles


def to_bshd(x, layout):
    x = as_f64(x)
    return x if layout == "bshd" else np.transpose(x, (0, 2, 1, 3))


@given(attention_case())
def test_flash_attention_matches_reference_attention(case):
    q, k, v, layout, dtype, mask, scheme, window, (qt, kt) = case
    ref = posenc.attention(q, k, v, scheme=scheme, layout=layout, mask=mask,
                           sliding_window=window)
    got = posenc.flash_attention(q, k, v, scheme=scheme, layout=layout, mask=mask,
                                 sliding_window=window, query_tile=qt, key_tile=kt)
    assert got.shape == ref.shape
    scale = max(1.0, max_abs(v))
    np.testing.assert_allclose(as_f64(got), as_f64(ref), rtol=0, atol=2e-5 * scale)


@given(attention_case())
def test_reference_attention_matches_numpy_softmax(case):
    q, k, v, layout, dtype, mask, _, _, _ = case
    got = posenc.attention(q, k, v, scheme="none", layout=layout, mask=mask)
    expected = softmax_attention_reference(to_bshd(q, layout), to_bshd(k, layout),
                                           to_bshd(v, layout), mask == "causal")
    tol = 1e-12 if dtype == "float64" else 2e-6
    np.testing.assert_allclose(to_bshd(got, layout), expected, rtol=0,
                               atol=tol * max(1.0, max_abs(v)))


# ---- bad arguments --------------------------------------------------------------
BAD_INTS = st.one_of(st.integers(-2**63, 0), st.integers(2**40, 2**63 - 1),
                     st.sampled_from([-1, 0, 2**24 + 1, 2**31, 2**62]))
BAD_FLOATS = st.sampled_from([float("nan"), float("inf"), -float("inf"), 0.0, -1.0, 1.0, 1e308])
ERRORS = (ValueError, posenc.IoError)  # posenc.ConfigError is a ValueError


@given(BAD_INTS, st.integers(1, 8))
def test_bad_sizes_raise_value_error(bad, good):
    calls = [
        lambda: posenc.alibi_slopes(bad),
        lambda: posenc.alibi_bias(bad, good),
        lambda: posenc.alibi_bias(good, bad),
        lambda: posenc.alibi_bias(good, good, bad),
        lambda: posenc.relative_matrix(bad),
        lambda: posenc.sinusoidal_table(bad, 2 * good),
        lambda: posenc.sinusoidal_table(good, bad),
        lambda: posenc.rope_cos_sin(bad, 2 * good),
        lambda: posenc.rope_cos_sin(good, bad),
        lambda: posenc.rope_cos_sin(good, 2 * good, offset=bad) if bad != 0 else
        posenc.rope_cos_sin(good, 2 * good, offset=-1),
        lambda: posenc.rope_default_inv_freq(bad),
        lambda: posenc.t5_bucket(np.arange(3), num_buckets=bad),
        lambda: posenc.t5_bucket(np.arange(3), max_distance=bad),
        lambda: posenc.deberta_relative_position(bad),
    ]
    for call in calls:
        with pytest.raises(ERRORS):
            call()


@given(BAD_FLOATS)
def test_bad_floats_raise_value_error(bad):
    x = np.ones((1, 2, 1, 4), np.float32)
    finite = math.isfinite(bad)
    # (call, whether `bad` is allowed there): theta / base finite > 1,
    # inv_freq finite >= 0, attention factor / max_bias / scale finite > 0.
    calls = [
        (lambda: posenc.apply_rope(x, theta=bad), finite and bad > 1),
        (lambda: posenc.rope_cos_sin(2, 4, theta=bad), finite and bad > 1),
        (lambda: posenc.sinusoidal_table(2, 4, base=bad), finite and bad > 1),
        (lambda: posenc.rope_cos_sin(2, 4, inv_freq=[bad, 0.5]), finite and bad >= 0),
        (lambda: posenc.rope_cos_sin(2, 4, inv_freq=[0.5, 0.5], attention_factor=bad),
         finite and bad > 0),
        (lambda: posenc.alibi_slopes(4, max_bias=bad), finite and bad > 0),
        (lambda: posenc.attention(x, x, x, scale=bad), finite and bad > 0),
        (lambda: posenc.flash_attention(x, x, x, scale=bad), finite and bad > 0),
    ]
    for call, allowed in calls:
        if allowed:
            call()  # must simply work
        else:
            with pytest.raises(ERRORS):
                call()


@st.composite
def bad_view_case(draw):
    """q/k/v with one thing wrong: rank, a mismatched size, a position out of
    range, a layout or mask name, an overlapping out."""
    b, s, h, d = 1, draw(st.integers(2, 6)), 2, 4
    q = np.ones((b, s, h, d), np.float32)
    what = draw(st.sampled_from(["rank", "head_dim", "heads", "position", "layout", "mask",
                                 "overlap", "window", "negative_stride"]))
    return q, what, draw(st.integers(0, 3))


@given(bad_view_case())
def test_bad_views_raise_value_error(case):
    q, what, n = case
    k = v = q
    kwargs = {}
    if what == "rank":
        k = q[0]
    elif what == "head_dim":
        k = np.ones(q.shape[:3] + (q.shape[3] + 2 + n,), np.float32)
    elif what == "heads":
        k = np.ones(q.shape[:2] + (3,) + q.shape[3:], np.float32)
    elif what == "position":
        kwargs["query_positions"] = np.full(q.shape[1], posenc.MAX_POSITION + 1 + n, np.int64)
    elif what == "layout":
        kwargs["layout"] = ["BSHD", "", "bshd ", "x"][n]
    elif what == "mask":
        kwargs["mask"] = ["Causal", "", "none", "full"][n]
    elif what == "overlap":
        kwargs["out"] = q
    elif what == "window":
        kwargs["sliding_window"] = [0, -1, -5, -2**40][n]
    elif what == "negative_stride":
        k = q[:, ::-1]
    for fn in (posenc.attention, posenc.flash_attention):
        try:
            fn(q, k, v, **kwargs)
        except ERRORS:
            continue
        if what == "negative_stride":
            continue  # accepted by copying is also correct: no crash is the property
        pytest.fail(f"{fn.__name__} accepted a bad {what}")
    with pytest.raises(ERRORS):
        if what == "rank":
            posenc.apply_rope(k)
        elif what == "head_dim":
            posenc.apply_rope(q, rotary_dim=q.shape[3] + 2 + 2 * n)
        elif what == "position":
            posenc.apply_rope(q, np.full(q.shape[2], posenc.MAX_POSITION + 1 + n, np.int64),
                              layout="bhsd")
        elif what == "layout":
            posenc.apply_rope(q, layout=kwargs["layout"])
        else:
            posenc.apply_rope(q, layout="bshd", offset=-1 - n)


@given(text=st.text(max_size=40), data=st.binary(max_size=64))
def test_bad_config_and_npy_raise_config_or_io_error(tmp_path_factory, text, data):
    path = tmp_path_factory.mktemp("bad") / "config.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    with pytest.raises(ERRORS):
        posenc.rope_config(str(path))
    npy = path.with_suffix(".npy")
    npy.write_bytes(data)
    with pytest.raises(ERRORS):
        posenc.LearnedTable.load_npy(str(npy))
