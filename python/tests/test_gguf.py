"""llama.cpp GGUF files through the Python API: posenc.rope_inv_freq,
posenc.inspect and posenc.torch.RotaryEmbedding.from_config take a .gguf path
and agree with the HF config.json it was converted from (within float32
rounding); ALiBi models report their slopes; broken files raise
posenc.IoError naming the file."""
import numpy as np
import pytest

import posenc
from conftest import GOLDEN, ROOT

GGUF = GOLDEN / "gguf"
LLAMA31 = GGUF / "b_llama31_8b_llama3_rope_freqs.gguf"
LLAMA31_JSON = ROOT / "examples" / "configs" / "llama-3.1-8b.json"


def test_rope_inv_freq_of_gguf_matches_its_config():
    inv, factor = posenc.rope_inv_freq(str(LLAMA31))
    inv_hf, factor_hf = posenc.rope_inv_freq(LLAMA31_JSON)
    assert inv.shape == (64,)
    np.testing.assert_allclose(inv, inv_hf, rtol=4 * 2.0**-24, atol=0)
    assert factor == factor_hf == 1.0
    info = posenc.inspect(LLAMA31)
    assert info["format"] == "gguf" and info["position_encoding"] == "rope"
    assert info["pairing"] == "interleaved" and info["theta"] == 500000.0
    assert info["freq_factors"].shape == (64,) and info["freq_factors"][-1] == 8.0


def test_rotary_embedding_from_gguf():
    torch = pytest.importorskip("torch")
    import posenc.torch as pt
    rope = pt.RotaryEmbedding.from_config(str(LLAMA31), layout="bshd")
    assert rope.pairing == "interleaved" and rope.head_dim == 128
    q = torch.randn(1, 5, 2, 128)
    k = torch.randn(1, 5, 1, 128)
    q_rot, k_rot = rope(q, k, torch.arange(5))
    # The same rotation as from explicit frequencies with llama.cpp's pairing.
    inv, _ = posenc.rope_inv_freq(str(LLAMA31))
    want = posenc.apply_rope(q, positions=torch.arange(5), layout="bshd", pairing="interleaved",
                             inv_freq=inv, numerics="hf")
    assert torch.equal(q_rot, want)
    assert k_rot.shape == k.shape


def test_alibi_gguf_reports_slopes():
    info = posenc.inspect(GGUF / "f_bloom_alibi.gguf")
    assert info["position_encoding"] == "alibi" and info["num_heads"] == 32
    np.testing.assert_array_equal(info["slopes"], posenc.alibi_slopes(32))
    with pytest.raises(posenc.ConfigError, match="ALiBi"):
        posenc.rope_inv_freq(GGUF / "f_bloom_alibi.gguf")


@pytest.mark.parametrize("name,field", [("g_truncated_in_kv.gguf", "kv[5].key length"),
                                        ("h_nkv_2pow40.gguf", "header.n_kv")])
def test_broken_gguf_raises_io_error(name, field):
    with pytest.raises(posenc.IoError) as e:
        posenc.rope_inv_freq(GGUF / name)
    assert name in str(e.value) and field in str(e.value)
