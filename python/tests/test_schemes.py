"""The scheme registry from Python (posenc.schemes / scheme_info), the
generic argument parsing derived from the declarations, the public backward
functions, and the process-wide thread default."""
import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt


def test_registry_lists_every_scheme_with_its_arguments():
    assert posenc.schemes() == ("none", "absolute", "rope", "alibi", "t5", "shaw",
                                "transformer_xl", "deberta", "fire")
    assert "transformer_xl" not in posenc.schemes(fused=True)
    info = posenc.scheme_info("t5")
    table = next(a for a in info["args"] if a["name"] == "table")
    assert table["trainable"] and table["required"] and table["shape"] == "[num_buckets, H]"
    assert info["terms"] == ["bias"] and info["fused"]
    assert pt.FLASH_SCHEMES == posenc.schemes(fused=True)
    with pytest.raises(ValueError, match="scheme: got cope, expected one of none"):
        posenc.scheme_info("cope")


def test_arguments_are_checked_by_declaration():
    q = np.random.default_rng(0).standard_normal((1, 4, 2, 8)).astype(np.float32)
    with pytest.raises(ValueError, match="one of the alibi arguments: slopes, max_bias"):
        posenc.flash_attention(q, q, q, scheme="alibi", slope=0.5)
    with pytest.raises(ValueError, match="scheme.alibi.max_bias: got str, expected a number"):
        posenc.flash_attention(q, q, q, scheme="alibi", max_bias="eight")
    with pytest.raises(ValueError, match="scheme.t5.table: got nothing"):
        posenc.attention(q, q, q, scheme="t5")


def test_public_backward_matches_torch_autograd():
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 7, 2, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    table = torch.randn(32, 2, dtype=torch.float64, requires_grad=True)
    out = pt.attention(q, k, v, layout="bshd", scheme="t5", table=table, bidirectional=False,
                       kernel="reference")
    g = torch.randn_like(out)
    ref = torch.autograd.grad((out * g).sum(), [q, k, v, table])
    for fn, extra in ((posenc.attention_backward, {}),):
        grads = fn(q.detach(), k.detach(), v.detach(), g, scheme="t5", table=table.detach(),
                   bidirectional=False, **extra)
        for name, expect in zip(("dq", "dk", "dv", "table"), ref):
            assert torch.allclose(grads[name], expect, atol=1e-12), name
    out32, lse = posenc.flash_attention(q.float().detach(), k.float().detach(),
                                        v.float().detach(), scheme="t5",
                                        table=table.float().detach(), bidirectional=False,
                                        return_lse=True)
    grads = posenc.flash_attention_backward(
        q.float().detach(), k.float().detach(), v.float().detach(), out32, g.float(), lse,
        scheme="t5", table=table.float().detach(), bidirectional=False)
    for name, expect in zip(("dq", "dk", "dv", "table"), ref):
        assert torch.allclose(grads[name].double(), expect, atol=1e-4), name
    with pytest.raises(ValueError, match="grads: got 'slopes'"):
        posenc.attention_backward(q.detach(), k.detach(), v.detach(), g, scheme="t5",
                                  table=table.detach(), grads=("slopes",))


def test_thread_default_and_torch_threads():
    before = posenc.get_num_threads()
    assert before >= 1
    posenc.set_num_threads(1)
    assert posenc.get_num_threads() == 1
    posenc.set_num_threads(0)  # one per core available
    assert posenc.get_num_threads() >= 1
    with pytest.raises(ValueError, match="threads: got -1"):
        posenc.set_num_threads(-1)
    posenc.set_num_threads(before)
    n = torch.get_num_threads()
    assert pt._torch_ctx().num_threads == max(1, n)
    # On torch's own OpenMP threads where torch runs OpenMP and posenc has it
    # (Debian's torch does: its ATen backend is OpenMP, on libgomp).
    aten_openmp = "ATen parallel backend: OpenMP" in torch.__config__.parallel_info()
    want = "openmp" if aten_openmp and posenc.openmp_available() else "pool"
    assert pt._torch_ctx().workers == want


def test_torch_attention_same_bits_on_torch_threads_and_on_the_pool():
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 70, 4, 32).to(torch.bfloat16).requires_grad_() for _ in range(3))
    dout = torch.randn(2, 70, 4, 32).to(torch.bfloat16)
    results = []
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # ctx=None: two of torch's threads
    try:
        for ctx in (None, posenc.Context(2), posenc.Context(1)):
            out = pt.attention(q, k, v, layout="bshd", scheme="alibi", precision="bfloat16",
                               ctx=ctx)
            out.backward(dout)
            results.append([out.detach()] + [t.grad for t in (q, k, v)])
            q.grad = k.grad = v.grad = None
        assert pt._torch_ctx().num_threads == 2
    finally:
        torch.set_num_threads(before)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert torch.equal(a, b)
