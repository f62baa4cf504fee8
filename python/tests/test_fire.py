"""FIRE through posenc.torch: the fused kernel and the reference against the
paper's formula in plain torch (FIRE.bias, its reference code) with torch's
own autograd for every parameter, both threshold regimes; the module's
initialisation; bad input."""
import pytest
import torch

import posenc
import posenc.torch as pt


def _plain_attention(f, q, k, v):
    s = q.shape[1]
    d = q.shape[-1]
    bias = f.bias(s).to(q.dtype)
    logits = torch.einsum("bihd,bjhd->bhij", q, k) / d ** 0.5 + bias
    mask = torch.ones(s, s, dtype=torch.bool).tril()
    logits = logits.masked_fill(~mask, float("-inf"))
    return torch.einsum("bhij,bjhd->bihd", logits.softmax(-1), v)


@pytest.mark.parametrize("kernel,dtype,tol", [("flash", torch.float32, 2e-5),
                                               ("reference", torch.float64, 1e-12)])
@pytest.mark.parametrize("threshold", [512.0, 20.0])
def test_fire_matches_plain_torch(kernel, dtype, tol, threshold):
    torch.manual_seed(0)
    f = pt.FIRE(4, 8, init_threshold=threshold).to(dtype)
    q, k, v = (torch.randn(2, 45, 4, 16, dtype=dtype, requires_grad=True) for _ in range(3))
    out = f(q, k, v, layout="bshd", kernel=kernel)
    g = torch.randn_like(out)
    grads = torch.autograd.grad((out * g).sum(), [q, k, v, *f.parameters()])
    ref = _plain_attention(f, q, k, v)
    ref_grads = torch.autograd.grad((ref * g).sum(), [q, k, v, *f.parameters()])
    assert (out - ref).abs().max() < tol * 10
    names = ["q", "k", "v"] + [n for n, _ in f.named_parameters()]
    for name, a, b in zip(names, grads, ref_grads):
        assert (a - b).abs().max() <= tol * (1 + b.abs().max()), name
    # The threshold is felt only by queries below |L| (all of them for L = 512).
    assert grads[names.index("threshold_multiplier")].abs() > 0


def test_fire_bias_matches_posenc_reference_rows():
    f = pt.FIRE(3, 5, init_threshold=7.0).double()
    b = f.bias(12)
    # posenc.attention with q = k = 0 gives softmax(bias) rows: compare those.
    z = torch.zeros(1, 12, 3, 4, dtype=torch.float64)
    v = torch.eye(12, dtype=torch.float64)[None, :, None, :4].expand(1, 12, 3, 4).contiguous()
    out, probs = posenc.attention(z, z, v, scheme="fire", return_probs=True,
                                  **{n: t.detach() for n, t in f.scheme_args().items()
                                     if torch.is_tensor(t)})
    expect = b.masked_fill(~torch.ones(12, 12, dtype=torch.bool).tril(), float("-inf"))
    assert torch.allclose(probs[0], expect.softmax(-1), atol=1e-14)


def test_fire_initialisation_is_the_papers():
    f = pt.FIRE(8, 32)
    assert f.c.item() == pytest.approx(0.1)
    assert f.threshold().item() == 512.0
    assert f.mlp_in.weight.shape == (32, 1) and f.mlp_out.weight.shape == (8, 32)
    assert posenc.scheme_info("fire")["causal_only"]


def test_fire_rejects_bidirectional_and_bad_tensors():
    f = pt.FIRE(2, 4)
    q = torch.randn(1, 5, 2, 8)
    with pytest.raises(ValueError, match="mask: got bidirectional, expected causal"):
        f(q, q, q, layout="bshd", mask="bidirectional")
    args = f.scheme_args()
    args["w2"] = torch.zeros(3, 4)
    with pytest.raises(ValueError, match="scheme.fire.w2"):
        pt.attention(q, q, q, layout="bshd", scheme="fire", **args)
    with pytest.raises(ValueError, match="scheme.fire.c"):
        pt.attention(q, q, q, layout="bshd", scheme="fire",
                     **{**f.scheme_args(), "c": torch.tensor(float("nan"))})
