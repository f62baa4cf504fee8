"""posenc.torch.attention on the fused flash kernel (FlashAttentionWithLse +
FlashAttentionBackward): forward and gradients (q, k, v, T5 table, Shaw
tables) against torch autograd of a plain torch implementation in float64,
gradcheck of the flash path with float32-sized tolerances, the kernel
dispatch rules and errors."""
import pytest
import torch

import posenc
import posenc._posenc as _native
import posenc.torch as pt
from posenc.torch import _attention

SCHEMES = ("none", "absolute", "rope", "alibi", "t5", "shaw")


def rope_plain(x, pos, theta=10000.0):
    """Half-split RoPE (posenc's default pairing) on [B, S, H, D]."""
    d = x.shape[-1]
    inv = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = pos.to(torch.float64)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[None, :, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[None, :, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def plain_attention(q, k, v, scheme, mask="causal", window=None, table=None, a_key=None,
                    a_value=None, clip=3, max_distance=16):
    """bshd, GQA by repeat_interleave, bottom-right positions, float64 math."""
    b, sq, h, d = q.shape
    sk = k.shape[1]
    qpos, kpos = torch.arange(sq) + sk - sq, torch.arange(sk)
    if scheme == "rope":
        q, k = rope_plain(q, qpos), rope_plain(k, kpos)
    k = k.repeat_interleave(h // k.shape[2], 2)
    v = v.repeat_interleave(h // v.shape[2], 2)
    rel = kpos[None, :] - qpos[:, None]  # r - p
    s = torch.einsum("bqhd,bkhd->bhqk", q, k)
    if scheme == "shaw":
        idx = rel.clamp(-clip, clip) + clip
        s = s + torch.einsum("bqhd,qkd->bhqk", q, a_key[idx])
    s = s / d ** 0.5
    if scheme == "alibi":
        slopes = torch.from_numpy(posenc.alibi_slopes(h))
        s = s - slopes[:, None, None] * rel.abs()
    if scheme == "t5":
        buckets = posenc.t5_bucket(rel, num_buckets=table.shape[0], max_distance=max_distance)
        s = s + table[buckets].permute(2, 0, 1)[None]
    visible = torch.ones(sq, sk, dtype=torch.bool)
    if mask == "causal":
        visible &= rel <= 0
    if window is not None:
        visible &= rel.abs() < window
    p = s.masked_fill(~visible, float("-inf")).softmax(-1)
    out = torch.einsum("bhqk,bkhd->bqhd", p, v)
    if scheme == "shaw":
        idx = rel.clamp(-clip, clip) + clip
        out = out + torch.einsum("bhqk,qkd->bqhd", p, a_value[idx])
    return out


def make(scheme, dtype=torch.float32, b=2, sq=9, sk=13, h=4, hkv=2, d=8, dv=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, sq, h, d, dtype=torch.float64, generator=g)
    k = torch.randn(b, sk, hkv, d, dtype=torch.float64, generator=g)
    v = torch.randn(b, sk, hkv, dv, dtype=torch.float64, generator=g)
    tables = {}
    if scheme == "t5":
        tables["table"] = torch.randn(8, h, dtype=torch.float64, generator=g)
    if scheme == "shaw":
        tables["a_key"] = torch.randn(7, d, dtype=torch.float64, generator=g)
        tables["a_value"] = torch.randn(7, dv, dtype=torch.float64, generator=g)
    cast = {n: t.to(dtype).requires_grad_(True) for n, t in dict(q=q, k=k, v=v, **tables).items()}
    exact = {n: t.detach().to(torch.float64).requires_grad_(True) for n, t in cast.items()}
    return cast, exact


def scheme_kwargs(scheme, t):
    if scheme == "t5":
        return dict(table=t["table"], max_distance=16, bidirectional=True)
    if scheme == "shaw":
        return dict(a_key=t["a_key"], a_value=t["a_value"], clip=3)
    return {}


def torch_step(x, seed, **kw):
    """pt.attention(**kw) on x and its backward for a random bfloat16 dout:
    out, dout, the detached q, k, v and the scheme's detached keywords."""
    scheme = kw["scheme"]
    out = pt.attention(x["q"], x["k"], x["v"], **kw, **scheme_kwargs(scheme, x))
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)
    out.backward(dout)
    q, k, v = (x[n].detach() for n in ("q", "k", "v"))
    return out, dout, q, k, v, scheme_kwargs(scheme, {n: t.detach() for n, t in x.items()})


def plain_kwargs(scheme, t):
    if scheme == "t5":
        return dict(table=t["table"])
    if scheme == "shaw":
        return dict(a_key=t["a_key"], a_value=t["a_value"])
    return {}


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("mask,window", [("causal", None), ("bidirectional", 4)])
def test_flash_forward_and_gradients_match_plain_torch(scheme, mask, window):
    x, ref = make(scheme)
    out = pt.attention(x["q"], x["k"], x["v"], layout="bshd", scheme=scheme, mask=mask,
                       sliding_window=window,
                       **scheme_kwargs(scheme, x))
    assert out.dtype == torch.float32
    want = plain_attention(ref["q"], ref["k"], ref["v"], scheme, mask, window,
                           **plain_kwargs(scheme, ref))
    assert torch.allclose(out.double(), want, atol=2e-6, rtol=1e-5)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    (out.double() * w).sum().backward()
    (want * w).sum().backward()
    for name in x:
        got, exp = x[name].grad, ref[name].grad
        assert got is not None and got.dtype == torch.float32, name
        tol = 2e-5 * max(1.0, exp.abs().max().item())
        assert (got.double() - exp).abs().max().item() < tol, (scheme, name)


def test_flash_gradcheck_with_float32_tolerances():
    for scheme in SCHEMES:
        x, _ = make(scheme, dtype=torch.float64, b=1, sq=3, sk=5, h=2, hkv=1, d=4, dv=4)
        names = list(x)

        def fn(*args, scheme=scheme, names=names):
            t = dict(zip(names, args))
            return pt.attention(t["q"], t["k"], t["v"], layout="bshd", scheme=scheme,
                                kernel="flash", mask="bidirectional", **scheme_kwargs(scheme, t))

        inputs = tuple(x[n] for n in names)
        assert fn(*inputs).dtype == torch.float64
        # float32 arithmetic inside: numerical derivatives with a 1e-3 step.
        assert torch.autograd.gradcheck(fn, inputs, eps=1e-3, atol=2e-3, rtol=2e-3), scheme


def test_auto_kernel_dispatch():
    x, _ = make("none", dtype=torch.float64, b=1, sq=3, sk=5, h=2, hkv=1, d=4, dv=4)
    exact = pt.attention(x["q"], x["k"], x["v"], layout="bshd", kernel="reference")
    # float64 inputs stay on the exact reference (bit-identical results).
    assert torch.equal(pt.attention(x["q"], x["k"], x["v"], layout="bshd"), exact)
    fused = pt.attention(x["q"], x["k"], x["v"], layout="bshd", kernel="flash")
    assert not torch.equal(fused, exact) and torch.allclose(fused, exact, atol=1e-6)


def test_bfloat16_inputs_use_flash():
    x, ref = make("alibi", dtype=torch.bfloat16)
    out = pt.attention(x["q"], x["k"], x["v"], layout="bshd", scheme="alibi")
    assert out.dtype == torch.bfloat16
    want = plain_attention(ref["q"], ref["k"], ref["v"], "alibi")
    assert torch.allclose(out.double(), want, atol=3e-2)
    out.double().sum().backward()
    want.sum().backward()
    for name in ("q", "k", "v"):
        assert x[name].grad.dtype == torch.bfloat16
        assert torch.allclose(x[name].grad.double(), ref[name].grad, atol=5e-2), name


@pytest.mark.parametrize("scheme", ("alibi", "t5", "shaw"))
@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16, torch.float32))
def test_nothing_to_differentiate_gives_the_same_output(scheme, dtype):
    # Under torch.no_grad() or with no input requiring grad, the kernel writes
    # O in q's dtype directly (no float32 O, no lse): the same bits as the
    # differentiable call's float32 O rounded by .to().
    x, _ = make(scheme, dtype=dtype)
    kw = dict(layout="bshd", scheme=scheme, **scheme_kwargs(scheme, x))
    for precision in (("float32", "bfloat16") if dtype == torch.bfloat16 else ("float32",)):
        graded = pt.attention(x["q"], x["k"], x["v"], precision=precision, **kw)
        assert graded.requires_grad and graded.grad_fn is not None
        with torch.no_grad():
            free = pt.attention(x["q"], x["k"], x["v"], precision=precision, **kw)
        detached = {n: t.detach() for n, t in x.items()}
        plain = pt.attention(detached["q"], detached["k"], detached["v"], precision=precision,
                             layout="bshd", scheme=scheme, **scheme_kwargs(scheme, detached))
        bits = torch.int32 if dtype == torch.float32 else torch.int16
        for out in (free, plain):
            assert out.dtype == dtype and not out.requires_grad
            assert torch.equal(out.view(bits), graded.detach().view(bits))


def test_out_copy_is_the_converted_output():
    x, _ = make("alibi", dtype=torch.bfloat16, sq=70, sk=70)
    q, k, v = (x[n].detach() for n in ("q", "k", "v"))
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        out = torch.empty(q.shape[:3] + (v.shape[3],), dtype=torch.float32)
        copy = torch.full_like(out, 7.0, dtype=dtype)
        got, lse = posenc.flash_attention(q, k, v, scheme="alibi", return_lse=True, out=out,
                                          out_copy=copy)
        plain, plain_lse = posenc.flash_attention(q, k, v, scheme="alibi", return_lse=True,
                                                  out=torch.empty_like(out))
        assert torch.equal(got, plain) and torch.equal(lse, plain_lse)
        assert torch.equal(copy, out.to(dtype)), dtype
    with pytest.raises(ValueError, match="out_copy"):
        posenc.flash_attention(q, k, v, scheme="alibi", out_copy=copy)
    with pytest.raises(ValueError, match="out_copy"):  # the wrong head dim
        posenc.flash_attention(q, k, v, scheme="alibi", return_lse=True,
                               out_copy=torch.empty(q.shape[:3] + (3,)))


@pytest.mark.parametrize("precision,scheme,learned", [("bfloat16", "alibi", False),
                                                       ("bfloat16", "t5", False),
                                                       ("bfloat16", "t5", True),
                                                       ("float32", "alibi", False)])
def test_backward_delta_comes_from_the_returned_output_only_without_learned_terms(
        precision, scheme, learned):
    # D_i = dO_i . O_i: from the bfloat16 O returned under precision="bfloat16"
    # when no scheme tensor is differentiated (FlashAttention-2's choice), else
    # from a float32 O of the same forward. The gradients are the fused
    # backward's on that O, bit for bit, and differ from those of the other O.
    x, _ = make(scheme, dtype=torch.bfloat16, sq=40, sk=40)
    if scheme == "t5" and not learned:
        x["table"] = x["table"].detach()
    kw = dict(layout="bshd", scheme=scheme, precision=precision)
    out, dout, q, k, v, args = torch_step(x, 5, **kw)
    o32, lse = posenc.flash_attention(q, k, v, return_lse=True, out=torch.empty(out.shape),
                                      **kw, **args)
    assert torch.equal(o32.to(torch.bfloat16), out.detach())
    grads = ("table",) if learned else ()
    used, other = (out.detach(), o32) if precision == "bfloat16" and not learned else \
        (o32, out.detach())
    want = posenc.flash_attention_backward(q, k, v, used, dout, lse, grads=grads, **kw, **args)
    keys = {"q": "dq", "k": "dk", "v": "dv", "table": "table"}
    for name in ("q", "k", "v") + grads:
        assert torch.equal(x[name].grad, want[keys[name]]), name
    alt = posenc.flash_attention_backward(q, k, v, other, dout, lse, grads=grads, **kw, **args)
    assert not torch.equal(x["q"].grad, alt["dq"])


def test_backward_binding_recomputes_lse_when_none():
    x, _ = make("rope")
    q, k, v = (x[n].detach() for n in ("q", "k", "v"))
    out = torch.empty(q.shape[:3] + (v.shape[3],))
    lse = torch.empty(q.shape[0], q.shape[2], q.shape[1])
    args = ("bshd", "causal", -1, None, None, None, "rope", {})
    _native.flash_attention(q, k, v, out, lse, *args)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(3))
    grads = []
    for saved in (lse, None):
        g = [torch.empty_like(t) for t in (q, k, v)]
        _native.flash_attention_backward(q, k, v, out, dout, saved, *g, {}, *args)
        grads.append(g)
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-6)


def test_errors():
    x, _ = make("none")
    q, k, v = x["q"], x["k"], x["v"]
    with pytest.raises(ValueError, match="kernel"):
        pt.attention(q, k, v, layout="bshd", kernel="cuda")
    with pytest.raises(ValueError, match="kernel"):
        pt.attention(q, k, v, layout="bshd", scheme="transformer_xl", kernel="flash",
                     r_w_bias=torch.zeros(4, 8), r_r_bias=torch.zeros(4, 8),
                     rw=torch.zeros(13, 4, 8))
    out = torch.empty(q.shape[:3] + (v.shape[3],))
    with pytest.raises(ValueError, match="lse"):
        _native.flash_attention(q.detach(), k.detach(), v.detach(), out, torch.empty(2, 4),
                                "bshd", "causal", -1, None, None, None, "none", {})
    with pytest.raises(ValueError, match="rope_keys"):
        _native.flash_attention(q.detach(), k.detach(), v.detach(), out, None, "bshd", "causal",
                                -1, None, None, None, "none", {}, rope_keys="cached")
    g = [torch.empty_like(t.detach()) for t in (q, k, v)]
    with pytest.raises(ValueError, match="dout"):
        _native.flash_attention_backward(q.detach(), k.detach(), v.detach(), out,
                                         torch.empty(2, 9, 4, 4), None, *g, {}, "bshd",
                                         "causal", -1, None, None, None, "none", {})


@pytest.mark.parametrize("scheme", ("alibi", "t5"))
@pytest.mark.parametrize("precision", ("float32", "bfloat16"))
def test_torch_attention_runs_its_own_tiles_each_way(scheme, precision):
    # posenc.torch's forward runs key tiles of 128 and its backward of 64
    # (_attention._FORWARD_TILES): O is the fused forward's with those tiles,
    # bit for bit, and the gradients are the fused backward's with the
    # default tiles; with 200 keys the forward's tiles change O's bits.
    x, _ = make(scheme, dtype=torch.bfloat16, sq=200, sk=200, h=2, hkv=2, d=32, dv=32)
    kw = dict(layout="bshd", scheme=scheme, precision=precision)
    out, dout, q, k, v, args = torch_step(x, 3, **kw)
    tiles = _attention._FORWARD_TILES
    assert tiles == {"query_tile": 64, "key_tile": 128}
    o32, lse = posenc.flash_attention(q, k, v, return_lse=True, out=torch.empty(out.shape), **kw,
                                      **tiles, **args)
    assert torch.equal(o32.to(torch.bfloat16), out.detach())
    o64 = posenc.flash_attention(q, k, v, out=torch.empty(out.shape), **kw, **args)
    assert not torch.equal(o64, o32)
    learned = scheme == "t5"
    used = o32 if precision == "float32" or learned else out.detach()
    want = posenc.flash_attention_backward(q, k, v, used, dout, lse, grads=("table",) * learned,
                                           **kw, **args)
    for name, key in (("q", "dq"), ("k", "dk"), ("v", "dv")) + (("table", "table"),) * learned:
        assert torch.equal(x[name].grad, want[key]), name
