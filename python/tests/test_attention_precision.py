"""precision="bfloat16" (FlashAttention-2's bfloat16 P and dS) against torch's own bfloat16 eager
attention, the error rule of the attention-precision issue.

On each shape (the flash tests' shapes: 37 causal, 45 GQA bidirectional with a window, and rows of
2048 keys), for every fused scheme and every output -- O, dQ, dK, dV and the gradients of the
scheme's learned tensors (T5 table, Shaw a_key / a_value, FIRE's MLP, c and threshold) -- the
maximum and the mean absolute error of posenc.torch.attention(..., precision="bfloat16") against
the float64 reference are at most 1.5x those of torch's bfloat16 eager attention on the same
inputs. torch eager is Hugging Face's formula in bfloat16: scores = q k^T (bfloat16 matmul),
scaled, plus the position terms in bfloat16, masked, softmax in float32 cast back to bfloat16,
then @ v, differentiated by torch's autograd. The float64 reference is posenc's
(kernel="reference") on the same bfloat16 values in float64. The test prints both errors.
"""
import copy
import math

import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt

SCHEMES = ("none", "alibi", "t5", "shaw", "rope", "fire")
# (name, B, S, H, Hkv, D, mask, window): the shapes of tests/unit/flash_*_test.cc.
SHAPES = [("S37", 1, 37, 2, 2, 64, "causal", None),
          ("S45_gqa_bidir_window", 2, 45, 4, 2, 48, "bidirectional", 17),
          ("S2048", 1, 2048, 2, 1, 64, "causal", None)]
RULE = 1.5


def _bf16_values(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(torch.bfloat16).double()


def _visible(s, mask, window):
    i = torch.arange(s)[:, None]
    j = torch.arange(s)[None, :]
    ok = torch.ones(s, s, dtype=torch.bool) if mask == "bidirectional" else j <= i
    if window is not None:
        ok &= (i - j).abs() < window
    return ok


class Case:
    """Inputs of one (scheme, shape) case as float64 tensors holding bfloat16 values, and the
    scheme's tensors (leaves) in a given dtype."""

    def __init__(self, scheme, b, s, h, hkv, d, mask, window):
        self.scheme, self.s, self.h, self.d, self.mask, self.window = scheme, s, h, d, mask, window
        self.q = _bf16_values((b, h, s, d), 1)
        self.k = _bf16_values((b, hkv, s, d), 2)
        self.v = _bf16_values((b, hkv, s, d), 3)
        self.dout = _bf16_values((b, h, s, d), 4)
        self.clip = 5
        if scheme == "t5":
            self.table = _bf16_values((32, h), 5)
        if scheme == "shaw":
            self.a_key = _bf16_values((2 * self.clip + 1, d), 6) * 0.5
            self.a_value = _bf16_values((2 * self.clip + 1, d), 7) * 0.5
        if scheme == "fire":
            torch.manual_seed(8)
            self.fire = pt.FIRE(h, 8, init_threshold=64.0).double()
            with torch.no_grad():  # bfloat16 values, so every run sees the same parameters
                for p in self.fire.parameters():
                    p.copy_(p.to(torch.bfloat16).double())

    def leaves(self, dtype):
        """The scheme's learned tensors as fresh leaves of `dtype` (name -> tensor), or the FIRE
        module in `dtype`."""
        if self.scheme == "t5":
            return {"table": self.table.to(dtype).requires_grad_()}
        if self.scheme == "shaw":
            return {"a_key": self.a_key.to(dtype).requires_grad_(),
                    "a_value": self.a_value.to(dtype).requires_grad_()}
        if self.scheme == "fire":
            return {"module": copy.deepcopy(self.fire).to(dtype)}
        return {}

    def scheme_args(self, leaves):
        if self.scheme == "alibi":
            return {"slopes": posenc.alibi_slopes(self.h)}
        if self.scheme == "t5":
            return {"table": leaves["table"], "max_distance": 128}
        if self.scheme == "shaw":
            return {"clip": self.clip, "a_key": leaves["a_key"], "a_value": leaves["a_value"]}
        if self.scheme == "rope":
            return {"theta": 10000.0, "pairing": "half_split"}
        if self.scheme == "fire":
            return leaves["module"].scheme_args()
        return {}

    @staticmethod
    def params(leaves):
        if "module" in leaves:
            return list(leaves["module"].named_parameters())
        return list(leaves.items())


def _gradients(case, out, inputs, leaves):
    tensors = [("dq", inputs[0]), ("dk", inputs[1]), ("dv", inputs[2])] + \
        [(f"d{n}", t) for n, t in Case.params(leaves)]
    grads = torch.autograd.grad(out, [t for _, t in tensors], case.dout.to(out.dtype))
    result = {"O": out.detach().double()}
    result.update({n: g.double() for (n, _), g in zip(tensors, grads)})
    return result


def run_posenc(case, precision, dtype, kernel):
    inputs = [x.to(dtype).requires_grad_() for x in (case.q, case.k, case.v)]
    leaves = case.leaves(torch.float32 if dtype != torch.float64 else torch.float64)
    out = pt.attention(*inputs, layout="bhsd", scheme=case.scheme, mask=case.mask,
                       sliding_window=case.window, kernel=kernel,
                       **({"precision": precision} if precision else {}),
                       **case.scheme_args(leaves))
    return _gradients(case, out, inputs, leaves)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def run_torch_eager(case):
    """HF's eager attention, everything in bfloat16 but the float32 softmax."""
    bf = torch.bfloat16
    q, k, v = (x.to(bf).requires_grad_() for x in (case.q, case.k, case.v))
    leaves = case.leaves(bf)
    s, h, d = case.s, case.h, case.d
    group = q.shape[1] // k.shape[1]
    qq, kk, vv = q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    if case.scheme == "rope":
        inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        ang = torch.arange(s, dtype=torch.float32)[:, None] * inv[None, :]
        emb = torch.cat((ang, ang), dim=-1)
        cos, sin = emb.cos().to(bf), emb.sin().to(bf)
        qq = qq * cos + _rotate_half(qq) * sin
        kk = kk * cos + _rotate_half(kk) * sin
    scores = torch.matmul(qq, kk.transpose(-1, -2))
    rel = torch.from_numpy(posenc.relative_matrix(s, s, sign="key_minus_query"))
    if case.scheme == "shaw":
        idx = rel.clamp(-case.clip, case.clip) + case.clip
        scores = scores + torch.einsum("bhid,ijd->bhij", qq, leaves["a_key"][idx])
    scores = scores * (1.0 / math.sqrt(d))
    if case.scheme == "alibi":
        slopes = torch.from_numpy(posenc.alibi_slopes(h))
        scores = scores + (-slopes[:, None, None] * rel.abs()[None].double()).to(bf)
    if case.scheme == "t5":
        bucket = posenc.t5_bucket(rel, num_buckets=32, max_distance=128,
                                  bidirectional=case.mask == "bidirectional")
        scores = scores + leaves["table"][bucket].permute(2, 0, 1)
    if case.scheme == "fire":
        scores = scores + leaves["module"].bias(s)
    scores = scores.masked_fill(~_visible(s, case.mask, case.window), float("-inf"))
    p = torch.softmax(scores, dim=-1, dtype=torch.float32).to(bf)
    out = torch.matmul(p, vv)
    if case.scheme == "shaw":
        out = out + torch.einsum("bhij,ijd->bhid", p, leaves["a_value"][idx])
    return _gradients(case, out, [q, k, v], leaves)


def _errors(result, ref):
    return {n: ((x - ref[n]).abs().max().item(), (x - ref[n]).abs().mean().item())
            for n, x in result.items()}


@pytest.mark.parametrize("shape", SHAPES, ids=[s[0] for s in SHAPES])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_bfloat16_precision_within_torch_bfloat16_error(scheme, shape):
    name, b, s, h, hkv, d, mask, window = shape
    if scheme == "fire" and mask != "causal":
        pytest.skip("FIRE is causal only")
    torch.set_num_threads(2)
    case = Case(scheme, b, s, h, hkv, d, mask, window)
    ref = run_posenc(case, None, torch.float64, "reference")
    ours = _errors(run_posenc(case, "bfloat16", torch.bfloat16, "flash"), ref)
    theirs = _errors(run_torch_eager(case), ref)
    print(f"\n{scheme} {name}: output  posenc bfloat16 max / mean   "
          "torch bfloat16 eager max / mean")
    failures = []
    for n in ref:
        (pm, pa), (tm, ta) = ours[n], theirs[n]
        print(f"  {n:>22}  {pm:.3e} / {pa:.3e}   {tm:.3e} / {ta:.3e}   ratio {pm / tm:.2f} / "
              f"{pa / ta:.2f}")
        if pm > RULE * tm or pa > RULE * ta:
            failures.append(n)
    assert not failures, f"over {RULE}x torch bfloat16 eager: {failures}"


def test_bfloat16_differs_from_float32_and_rounds_p():
    """The option takes effect: O of precision="bfloat16" (float32 out) is far closer to a
    float64 model that rounds P to bfloat16 than the float32 precision's O is."""
    case = Case("alibi", 1, 64, 2, 2, 32, "causal", None)
    q, k, v = (x.to(torch.bfloat16) for x in (case.q, case.k, case.v))
    args = case.scheme_args({})
    outs = {p: posenc.flash_attention(q, k, v, layout="bhsd", scheme="alibi", precision=p,
                                      out=torch.empty(1, 2, 64, 32), **args).double()
            for p in ("float32", "bfloat16")}  # float32 out: no bfloat16 rounding of O
    # float64 model: P from float64 logits, rounded to bfloat16, sums in float64.
    rel = torch.from_numpy(posenc.relative_matrix(64, 64, sign="key_minus_query")).double()
    slopes = torch.from_numpy(posenc.alibi_slopes(2))
    logits = case.q @ case.k.transpose(-1, -2) / math.sqrt(32) - slopes[:, None, None] * rel.abs()
    logits = logits.masked_fill(~_visible(64, "causal", None), float("-inf"))
    m = logits.amax(-1, keepdim=True)
    e = (logits - m).exp()
    model = (e.to(torch.bfloat16).double() @ case.v) / e.sum(-1, keepdim=True)
    err = {p: (o - model).abs().mean().item() for p, o in outs.items()}
    assert err["bfloat16"] < 0.5 * err["float32"], err
    assert not torch.equal(outs["float32"], outs["bfloat16"])


def test_precision_bad_input():
    q = torch.randn(1, 2, 8, 16)
    with pytest.raises(ValueError, match=r"precision: got 'float16', expected one of float32, "
                                         r"bfloat16"):
        pt.attention(q, q, q, layout="bhsd", precision="float16")
    with pytest.raises(ValueError, match=r"precision: got bfloat16, expected float32 for q of "
                                         r"dtype float32"):
        pt.attention(q, q, q, layout="bhsd", precision="bfloat16")
    qb = q.to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"precision: got 'bfloat16' with the float64 reference"):
        pt.attention(qb, qb, qb, layout="bhsd", precision="bfloat16", kernel="reference")
    with pytest.raises(ValueError, match=r"precision: got 'bfloat16' with the float64 reference"):
        pt.attention(qb, qb, qb, layout="bhsd", precision="bfloat16", scheme="deberta")
    with pytest.raises(ValueError, match=r"precision: got fp8, expected one of float32, bfloat16"):
        posenc.flash_attention(qb, qb, qb, layout="bhsd", precision="fp8")
    out = posenc.flash_attention(qb, qb, qb, layout="bhsd")
    with pytest.raises(ValueError, match=r"for dout of dtype float32"):
        posenc.flash_attention_backward(qb, qb, qb, out, torch.zeros(1, 2, 8, 16), layout="bhsd",
                                        precision="bfloat16")
    assert np.isfinite(out.float().numpy()).all()
