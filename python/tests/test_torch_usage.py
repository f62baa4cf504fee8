"""posenc.torch as a PyTorch user composes it (issue 34): one layout rule
(`layout` required everywhere, shape contradictions named), checks at
construction and at the first call, the RoPE buffers, T5's bucket direction
following the mask, one dtype for q/k/v, the warning of the slow reference
path, the exception of an unparsable config, and RotaryEmbedding.from_config
feeding attention in a GQA block with a KV cache against plain torch."""
import json
import math
import warnings

import pytest
import torch

import posenc
import posenc.torch as pt
from posenc.torch import _attention, _context

from conftest import ROOT

LLAMA31 = ROOT / "examples" / "configs" / "llama-3.1-8b.json"


def bhsd(b=1, h=4, hkv=2, s=6, d=16, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, h, s, d, generator=g, dtype=dtype),
            torch.randn(b, hkv, s, d, generator=g, dtype=dtype),
            torch.randn(b, hkv, s, d, generator=g, dtype=dtype))


# --------------------------------------------------------------------------- layout

def test_layout_has_no_default_anywhere():
    q, k, v = bhsd(h=2, hkv=2)
    rope_q, rope_k = pt.RotaryEmbedding(16, layout="bhsd")(q, k)
    calls = [lambda: pt.attention(rope_q, rope_k, v),  # rotated q, k with defaults: raises
             lambda: pt.apply_rope(q),
             lambda: pt.RotaryEmbedding(16),
             lambda: pt.RotaryEmbedding.from_config(str(LLAMA31)),
             lambda: pt.FIRE(2, 4)(q, k, v)]
    for call in calls:
        with pytest.raises(TypeError, match="layout"):
            call()


def test_rotated_q_k_with_the_modules_layout_are_right():
    q, k, v = bhsd()
    rope = pt.RotaryEmbedding(16, layout="bhsd")
    q_rot, k_rot = rope(q, k)
    got = pt.attention(q_rot, k_rot, v, layout=rope.layout)
    # = the rope scheme rotating inside the kernel
    want = pt.attention(q, k, v, layout="bhsd", scheme="rope")
    assert torch.allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("bad", ["nhsd", "BHSD", None, 4])
def test_a_bad_layout_is_refused_at_construction_and_call(bad):
    q, k, v = bhsd()
    for call in (lambda: pt.RotaryEmbedding(16, layout=bad),
                 lambda: pt.RotaryEmbedding.from_config(str(LLAMA31), layout=bad),
                 lambda: pt.apply_rope(q, layout=bad),
                 lambda: pt.attention(q, k, v, layout=bad)):
        with pytest.raises(ValueError, match=r"layout: got .*, expected 'bhsd' .* or 'bshd'"):
            call()


def test_gqa_shapes_in_the_wrong_layout_name_the_layout():
    q, k, v = bhsd(h=8, hkv=2, s=16)  # [B, H, S, D] given as bshd: 8 "queries", 2 "keys"
    with pytest.raises(ValueError, match="layout: got 'bshd'.*fit layout='bhsd'"):
        pt.attention(q, k, v, layout="bshd")
    qs, ks, vs = (t.transpose(1, 2) for t in (q, k, v))  # and the other way round
    with pytest.raises(ValueError, match="layout: got 'bhsd'.*fit layout='bshd'"):
        pt.attention(qs, ks, vs, layout="bhsd")
    q3, k3, v3 = bhsd(h=3, hkv=2)
    with pytest.raises(ValueError, match="k's 2 heads do not divide q's 3 heads"):
        pt.attention(q3, k3, v3, layout="bhsd")
    rope = pt.RotaryEmbedding(16, layout="bshd")
    with pytest.raises(ValueError, match="layout: got 'bshd'.*fit layout='bhsd'"):
        rope(q, k)


# --------------------------------------------------------------------------- checks

def test_head_dim_is_checked_at_construction_and_every_call():
    with pytest.raises(ValueError, match="rotary_dim: got 96"):
        pt.RotaryEmbedding(64, layout="bhsd", rotary_dim=96)
    with pytest.raises(ValueError, match="inv_freq"):
        pt.RotaryEmbedding(8, layout="bhsd", inv_freq=[1.0] * 8)  # rotary dim 16 > 8
    with pytest.raises(ValueError, match="pairing: got neox"):
        pt.RotaryEmbedding(64, layout="bhsd", pairing="neox")
    with pytest.raises(ValueError, match="head_dim: got 0"):
        pt.RotaryEmbedding(0, layout="bhsd")
    x = torch.randn(1, 2, 3, 32)
    with pytest.raises(ValueError, match=r"q.shape\[-1\]: got 32 .*expected head_dim=64"):
        pt.RotaryEmbedding(64, layout="bhsd")(x, x)
    llama = pt.RotaryEmbedding.from_config(str(LLAMA31), layout="bhsd")
    y = torch.randn(1, 2, 3, 256)
    with pytest.raises(ValueError, match=r"q.shape\[-1\]: got 256 .*expected head_dim=128"):
        llama(y, y)
    with pytest.raises(ValueError, match=r"k.shape\[-1\]: got 256"):
        llama(torch.randn(1, 2, 3, 128), y)


def test_q_k_v_must_share_a_dtype():
    q, k, v = bhsd()
    with pytest.raises(ValueError, match="k.dtype: got torch.float32, expected q.dtype "
                                         "torch.float16"):
        pt.attention(q.half(), k, v, layout="bhsd")
    with pytest.raises(ValueError, match="v.dtype: got torch.float64"):
        pt.attention(q, k, v.double(), layout="bhsd")
    out = pt.attention(q.half(), k.half(), v.half(), layout="bhsd")
    assert out.dtype == torch.float16


# --------------------------------------------------------------------------- prepared calls

def _step(q, k, v, **kw):
    """out and the gradients of q, k, v for sum(out * w), w fixed."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = pt.attention(q, k, v, layout="bhsd", **kw)
    w = torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(out.dtype)
    (out.float() * w.float()).sum().backward()
    return [out.detach(), q.grad, k.grad, v.grad]


def test_prepared_argument_sets_are_reused_only_for_equal_arguments(monkeypatch):
    monkeypatch.setattr(_attention, "_PREPARED", {})
    q, k, v = bhsd(h=4, hkv=4, s=37, d=16, dtype=torch.bfloat16)
    kw = dict(scheme="alibi", precision="bfloat16")
    first = _step(q, k, v, **kw)
    assert len(_attention._PREPARED) == 1
    again = _step(q, k, v, **kw)
    assert len(_attention._PREPARED) == 1
    # The same slopes as a tensor: a set of their own, kept for that tensor
    # object and version, with the same bits as the slopes by default.
    slopes = torch.from_numpy(posenc.alibi_slopes(4))
    as_tensor = _step(q, k, v, slopes=slopes, **kw)
    assert len(_attention._PREPARED) == 2
    assert _step(q, k, v, slopes=slopes, **kw)[0].equal(as_tensor[0])
    assert len(_attention._PREPARED) == 2
    for a, b, c in zip(first, again, as_tensor):
        assert torch.equal(a, b) and torch.equal(a, c)
    # An in-place change bumps the tensor's version: a new set, new values.
    slopes.mul_(2.0)
    doubled = _step(q, k, v, slopes=slopes, **kw)
    assert len(_attention._PREPARED) == 3 and not torch.equal(doubled[0], first[0])
    assert torch.equal(doubled[0], _step(q, k, v, slopes=slopes.clone(), **kw)[0])
    # Another tensor of equal values is another object: another set, the same values.
    assert len(_attention._PREPARED) == 4
    _attention._PREPARED.clear()
    # Any other value is another argument set, with its own result.
    other = _step(q, k, v, scale=0.5, **kw)
    assert len(_attention._PREPARED) == 1 and not torch.equal(other[0], first[0])
    bidi = _step(q, k, v, mask="bidirectional", **kw)
    assert len(_attention._PREPARED) == 2 and not torch.equal(bidi[0], first[0])
    # 1 and 1.0 are equal as keys but not as types: two sets, one result.
    one, one_f = _step(q, k, v, scale=1, **kw), _step(q, k, v, scale=1.0, **kw)
    assert len(_attention._PREPARED) == 4 and torch.equal(one[0], one_f[0])
    # Position ids are never kept.
    _step(q, k, v, query_positions=torch.arange(37), **kw)
    assert len(_attention._PREPARED) == 4


def test_prepared_argument_sets_are_bounded(monkeypatch):
    monkeypatch.setattr(_attention, "_PREPARED", {})
    q, k, v = bhsd(h=2, hkv=2, s=5, d=8)
    for i in range(_attention._PREPARED_MAX + 3):
        pt.attention(q, k, v, layout="bhsd", scale=0.1 + i)
        assert 1 <= len(_attention._PREPARED) <= _attention._PREPARED_MAX


def test_a_prepared_argument_set_still_checks_each_call_s_tensors(monkeypatch):
    monkeypatch.setattr(_attention, "_PREPARED", {})
    q, k, v = bhsd(h=4, hkv=2)
    pt.attention(q, k, v, layout="bhsd", scheme="alibi")
    assert len(_attention._PREPARED) == 1
    with pytest.raises(ValueError, match="layout: got 'bhsd'.*batch sizes differ"):
        pt.attention(q, k[:, :, :, :].repeat(2, 1, 1, 1), v, layout="bhsd", scheme="alibi")
    with pytest.raises(ValueError, match="v.dtype: got torch.float64"):
        pt.attention(q, k, v.double(), layout="bhsd", scheme="alibi")
    with pytest.raises(ValueError, match="k.shape: got \\(1, 2, 6\\), expected rank 4"):
        pt.attention(q, k[..., 0], v, layout="bhsd", scheme="alibi")


def test_pre_rotated_keys_are_a_fused_kernel_option():
    q, k, v = bhsd(h=2, hkv=2)
    rope = pt.RotaryEmbedding(16, layout="bhsd")
    _, k_rot = rope(k, k)
    want = pt.attention(q, k, v, layout="bhsd", scheme="rope")
    got = pt.attention(q, k_rot, v, layout="bhsd", scheme="rope", rope_keys="pre_rotated")
    assert torch.allclose(got, want, atol=1e-5)
    ref = pt.attention(q, k, v, layout="bhsd", scheme="rope", rope_keys="rotate",
                       kernel="reference")
    assert torch.allclose(ref, want, atol=1e-5)
    with pytest.raises(ValueError, match="rope_keys: got 'pre_rotated' with the reference "
                                         "kernel .*float64"):
        pt.attention(q.double(), k_rot.double(), v.double(), layout="bhsd", scheme="rope",
                     rope_keys="pre_rotated")


# --------------------------------------------------------------------------- buffers

def test_inv_freq_and_attention_factor_are_buffers():
    rope = pt.RotaryEmbedding.from_config(str(LLAMA31), layout="bhsd")
    buffers = dict(rope.named_buffers())
    inv, factor = posenc.rope_inv_freq(str(LLAMA31))
    assert torch.equal(buffers["inv_freq"], torch.from_numpy(inv))
    assert buffers["attention_factor"].item() == factor
    assert rope.inv_freq.dtype == torch.float64
    assert "inv_freq" not in rope.state_dict()  # derived from the config: non-persistent
    assert "inv_freq" not in pt.RotaryEmbedding(64, layout="bhsd").state_dict()  # from theta
    explicit = pt.RotaryEmbedding(64, layout="bhsd", inv_freq=inv[:16], attention_factor=1.5)
    assert set(explicit.state_dict()) == {"inv_freq", "attention_factor"}
    assert explicit.rotary_dim == 32
    # .to(dtype) keeps float64 frequencies; .to(device) moves them.
    assert rope.half().inv_freq.dtype == torch.float64
    assert torch.equal(rope.inv_freq, torch.from_numpy(inv))
    moved = pt.RotaryEmbedding(64, layout="bhsd").to("meta")
    assert moved.inv_freq.device.type == "meta" and moved.inv_freq.dtype == torch.float64


def test_the_buffer_is_what_forward_uses():
    rope = pt.RotaryEmbedding(16, layout="bhsd")
    q, k, _ = bhsd()
    with torch.no_grad():
        rope.inv_freq.zero_()  # angle 0 everywhere: the identity rotation
    q_rot, k_rot = rope(q, k)
    assert torch.equal(q_rot, q) and torch.equal(k_rot, k)


def test_repr_shows_rope_type_and_parameters():
    text = repr(pt.RotaryEmbedding.from_config(str(LLAMA31), layout="bshd"))
    for part in ("rope_type='llama3'", "factor=8.0", "theta=500000.0",
                 "original_max_position_embeddings=8192", "numerics='hf'", "layout='bshd'"):
        assert part in text, text
    text = repr(pt.RotaryEmbedding(64, layout="bhsd", theta=500.0))
    assert "rope_type='default'" in text and "theta=500.0" in text
    assert "numerics='accurate'" in text


# --------------------------------------------------------------------------- T5

def plain_t5(q, k, v, bias, scale, causal):
    s = q @ k.transpose(-1, -2) * scale + bias
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    return s.softmax(-1) @ v


@pytest.mark.parametrize("mask", ["causal", "bidirectional"])
def test_t5_direction_follows_the_mask(mask):
    q, k, v = bhsd(h=2, hkv=2, s=40, dtype=torch.float64)
    t5 = pt.T5RelativeBias(2, num_buckets=8, max_distance=16)
    assert "bidirectional" not in t5.scheme_args()
    got = pt.attention(q, k, v, layout="bhsd", scheme="t5", mask=mask, scale=1.0,
                       **t5.scheme_args())
    bias = t5(40, 40, mask=mask)
    want = plain_t5(q, k, v, bias.double(), 1.0, mask == "causal")
    assert torch.allclose(got, want, atol=1e-6)
    explicit = pt.attention(q, k, v, layout="bhsd", scheme="t5", mask=mask, scale=1.0,
                            table=t5.weight, max_distance=16,
                            bidirectional=mask == "bidirectional")
    assert torch.equal(got, explicit)
    # Two-sided buckets under a causal mask differ (the keys behind share buckets
    # with the keys ahead only when one-sided): the default is not the encoder's.
    if mask == "causal":
        encoder = pt.attention(q, k, v, layout="bhsd", scheme="t5", mask=mask, scale=1.0,
                               table=t5.weight, max_distance=16, bidirectional=True)
        assert not torch.allclose(got, encoder)


def test_t5_module_fixed_direction_is_passed_on():
    t5 = pt.T5RelativeBias(2, num_buckets=8, max_distance=16, bidirectional=True)
    assert t5.scheme_args()["bidirectional"] is True
    assert t5.direction("causal") is True
    with pytest.raises(ValueError, match="mask: got 'full'"):
        t5(4, mask="full")


# --------------------------------------------------------------------------- fallback warning

def test_reference_fallback_warns_once(monkeypatch):
    monkeypatch.setattr(_context, "_WARNED", set())
    q, k, v = bhsd(h=2, hkv=2, s=4, d=8)
    args = dict(r_w_bias=torch.zeros(2, 8), r_r_bias=torch.zeros(2, 8), rw=torch.zeros(4, 2, 8))

    def call(dtype, **kw):
        return pt.attention(q.to(dtype), k.to(dtype), v.to(dtype), layout="bhsd",
                            scheme="transformer_xl", **{n: t.to(dtype) for n, t in args.items()},
                            **kw)
    with pytest.warns(pt.ReferenceFallbackWarning, match="'transformer_xl' has no fused kernel"):
        call(torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        call(torch.float32)  # once per (scheme, dtype)
        call(torch.float64)  # float64 is the exact path by design
        call(torch.float16, kernel="reference")  # chosen explicitly
    assert issubclass(pt.ReferenceFallbackWarning, UserWarning)
    with pytest.warns(pt.ReferenceFallbackWarning, match="torch.bfloat16"):
        call(torch.bfloat16)


# --------------------------------------------------------------------------- config errors

def test_unparsable_config_is_an_io_error(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 64, "num_attention_heads": ')  # truncated
    calls = [lambda: posenc.rope_config(str(bad)), lambda: posenc.inspect(str(bad)),
             lambda: posenc.rope_inv_freq(str(bad)),
             lambda: pt.RotaryEmbedding.from_config(str(bad), layout="bhsd"),
             lambda: posenc.apply_rope(torch.zeros(1, 1, 2, 8), layout="bhsd", config=str(bad))]
    for call in calls:
        with pytest.raises(posenc.IoError, match="not valid JSON") as info:
            call()
        assert isinstance(info.value, OSError) and not isinstance(info.value, ValueError)
    with pytest.raises(posenc.ConfigError):  # valid JSON, not a usable config
        posenc.rope_config({"hidden_size": 64, "num_attention_heads": 2,
                            "rope_scaling": {"rope_type": "warp"}})


# --------------------------------------------------------------------------- composition

def llama3_inv_freq(cfg, dim):
    """transformers' _compute_llama3_parameters (float32)."""
    r = cfg["rope_scaling"]
    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    orig = r["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    inv_l = torch.where(wavelen > orig / r["low_freq_factor"], inv / r["factor"], inv)
    smooth = (orig / wavelen - r["low_freq_factor"]) / (r["high_freq_factor"]
                                                       - r["low_freq_factor"])
    smoothed = (1 - smooth) * inv_l / r["factor"] + smooth * inv_l
    medium = ~(wavelen < orig / r["high_freq_factor"]) & ~(wavelen > orig / r["low_freq_factor"])
    return torch.where(medium, smoothed, inv_l)


def plain_block(q, k, v, inv_freq):
    """HF LlamaAttention core in plain torch, [B, H, S, D]: rotate_half, repeat_kv, masked
    softmax with scale 1/sqrt(D)."""
    s, d = q.shape[2], q.shape[3]
    freqs = torch.arange(s, dtype=torch.float32)[:, None] * inv_freq[None, :]
    cos, sin = torch.cat([freqs, freqs], -1).cos(), torch.cat([freqs, freqs], -1).sin()

    def rot(x):
        return x * cos + torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1) * sin
    q, k = rot(q), rot(k)
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    scores = scores.masked_fill(~torch.ones(s, s, dtype=torch.bool).tril(), float("-inf"))
    return scores.softmax(-1) @ v


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_from_config_rope_feeding_attention_gqa_kv_cache_matches_plain_torch(layout):
    cfg = json.loads(LLAMA31.read_text())
    rope = pt.RotaryEmbedding.from_config(str(LLAMA31), layout=layout)
    d, h, hkv, s, prefill = rope.head_dim, 4, 2, 11, 7
    q, k, v = (t.requires_grad_() for t in bhsd(b=2, h=h, hkv=hkv, s=s, d=d))
    to = (lambda t: t) if layout == "bhsd" else (lambda t: t.transpose(1, 2))
    sdim = 2 if layout == "bhsd" else 1

    q_rot, k_rot = rope(to(q), to(k))
    out = to(pt.attention(q_rot, k_rot, to(v), layout=layout))
    want = plain_block(q, k, v, llama3_inv_freq(cfg, d))
    assert (out - want).abs().max() < 2e-6
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(5))
    grads = torch.autograd.grad((out * g).sum(), (q, k, v))
    grads_want = torch.autograd.grad((want * g).sum(), (q, k, v))
    for a, b in zip(grads, grads_want):
        assert (a - b).abs().max() < 2e-5

    with torch.no_grad():  # prefill, then one token at a time against a cache of rotated keys
        qs, ks, vs = to(q), to(k), to(v)
        q_p, k_cache = rope(qs.narrow(sdim, 0, prefill), ks.narrow(sdim, 0, prefill))
        v_cache = vs.narrow(sdim, 0, prefill)
        steps = [pt.attention(q_p, k_cache, v_cache, layout=layout)]
        for t in range(prefill, s):
            q_t, k_t = rope(qs.narrow(sdim, t, 1), ks.narrow(sdim, t, 1), offset=t)
            k_cache = torch.cat([k_cache, k_t], sdim)
            v_cache = torch.cat([v_cache, vs.narrow(sdim, t, 1)], sdim)
            steps.append(pt.attention(q_t, k_cache, v_cache, layout=layout))
        decoded = to(torch.cat(steps, sdim))
    assert (decoded - want).abs().max() < 2e-6
