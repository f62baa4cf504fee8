"""RoPE through the Python module: the HF golden fixtures (rope_apply.json,
rope_init.json), plain-torch HF formulas written here, layouts, in place,
dtypes, autograd and the RotaryEmbedding module."""
import math

import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt


# ---- Hugging Face's formulas in plain torch (modeling_llama.py / modeling_gptj.py)
def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def llama_cos_sin(inv_freq, position_ids, attention_scaling=1.0):
    """LlamaRotaryEmbedding.forward: float32 angle, cat(freqs, freqs)."""
    inv = torch.tensor(inv_freq, dtype=torch.float32)[None, :, None]
    pos = position_ids[:, None, :].float()
    freqs = (inv @ pos).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * attention_scaling, emb.sin() * attention_scaling


def rotate_every_two(x):
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def golden_q(num_heads, head_dim):
    """q[0,h,p,d] = float32(sin(0.37*(h*1000 + p*100 + d) + 0.11)), shape [1, H, 6, D]."""
    h, p, d = np.meshgrid(np.arange(num_heads), np.arange(6), np.arange(head_dim), indexing="ij")
    return np.sin(0.37 * (h * 1000 + p * 100 + d) + 0.11).astype(np.float32)[None]


# ---- golden: the hf policy reproduces rope_apply.json through the module
def test_hf_policy_reproduces_rope_apply_golden(rope_apply):
    checked = 0
    for case in rope_apply["cases"]:
        q = golden_q(case["num_heads"], case["head_dim"])
        pos = np.array(case["position_ids"], dtype=np.int64)
        variant = case["variant"]
        kw = dict(positions=pos, layout="bhsd", numerics="hf", rotary_dim=case["rotary_dim"])
        if variant == "gptj_rotate_every_two":
            kw.update(pairing="interleaved", theta=float(case["theta"]))
        else:
            kw.update(inv_freq=np.array(case["inv_freq_used"]),
                      attention_factor=case["attention_scaling"],
                      pairing="interleaved" if variant == "deepseek_interleave" else "half_split")
        out = posenc.apply_rope(q, **kw)
        if variant == "deepseek_interleave":  # HF de-interleaves its output
            out = np.concatenate([out[..., 0::2], out[..., 1::2]], axis=-1)
        want = np.array(case["q_embed"], dtype=np.float32)
        bound = 4e-6 + 4e-7 * pos.max() * case["attention_scaling"]
        err = np.abs(out.astype(np.float64) - want).max()
        assert err <= bound, (case["name"], err)
        if variant in ("neox_rotate_half", "gptj_rotate_every_two"):
            assert err <= 4e-6, (case["name"], err)  # the fixture's own frequencies: tight
        checked += 1
    assert checked == len(rope_apply["cases"]) == 8


def test_cos_sin_match_golden_tables(rope_apply):
    for case in rope_apply["cases"]:
        if case["variant"] not in ("neox_rotate_half", "neox_partial_rotate_half"):
            continue
        cos, sin = posenc.rope_cos_sin(np.array(case["position_ids"]), case["head_dim"],
                                       inv_freq=np.array(case["inv_freq_used"]),
                                       attention_factor=case["attention_scaling"], numerics="hf")
        assert np.abs(cos - np.array(case["cos"])).max() <= 2e-6
        assert np.abs(sin - np.array(case["sin"])).max() <= 2e-6


def hf_config(case):
    """The config dict of a rope_init.json case, as a config.json would hold it."""
    cfg = {k: v for k, v in case["config"].items() if v is not None}
    cfg["rope_parameters"] = cfg.pop("rope_parameters_input")
    top = cfg.pop("original_max_position_embeddings_top_level", None)
    if top is not None:
        cfg["original_max_position_embeddings"] = top
    return cfg


def test_rope_inv_freq_from_config_matches_every_rope_init_case(rope_init):
    assert len(rope_init["cases"]) == 15
    for case in rope_init["cases"]:
        inv, factor = posenc.rope_inv_freq(hf_config(case))
        want = np.array(case["inv_freq"])
        assert inv.shape == want.shape, case["name"]
        assert np.abs(inv / want - 1).max() <= 1e-6, case["name"]
        assert factor == pytest.approx(case["attention_factor"], rel=1e-12), case["name"]
        for ev in case["evaluations"]:  # dynamic / longrope: the table of that call
            inv_e, factor_e = posenc.rope_inv_freq(hf_config(case),
                                                   seq_len=ev["seq_len_seen_by_forward"])
            assert np.abs(inv_e / np.array(ev["inv_freq_used"]) - 1).max() <= 1e-6, \
                (case["name"], ev["label"])
            assert factor_e == pytest.approx(ev["attention_scaling"], rel=1e-12)


def test_matches_plain_torch_hf_formula_bshd_and_gqa():
    torch.manual_seed(1)
    q = torch.randn(2, 7, 4, 32)  # bshd
    k = torch.randn(2, 7, 2, 32)
    pos = torch.tensor([[0, 1, 2, 3, 10, 11, 500], [5, 6, 7, 8, 9, 10, 11]])
    inv, _ = posenc.rope_default_inv_freq(32, theta=10000.0, numerics="hf")
    cos, sin = llama_cos_sin(inv, pos)
    q_hf, k_hf = apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=2)
    q2, k2 = q.clone(), k.clone()
    posenc.apply_rope_qk(q2, k2, pos, layout="bshd", numerics="hf")
    assert torch.allclose(q2, q_hf, atol=2e-6) and torch.allclose(k2, k_hf, atol=2e-6)
    q3 = posenc.apply_rope(q, positions=pos, layout="bshd", numerics="accurate")
    assert torch.allclose(q3, q_hf, atol=1e-4)


def test_interleaved_matches_gptj_rotate_every_two():
    q = torch.randn(1, 3, 5, 16)
    pos = torch.tensor([0, 2, 4, 8, 100])
    inv = 1.0 / (10000 ** (torch.arange(0, 16, 2, dtype=torch.float64) / 16))
    ang = pos[:, None].double() * inv[None]
    sin = torch.repeat_interleave(ang.sin(), 2, dim=-1).float()[None, None]
    cos = torch.repeat_interleave(ang.cos(), 2, dim=-1).float()[None, None]
    want = q * cos + rotate_every_two(q) * sin
    got = posenc.apply_rope(q, positions=pos, pairing="interleaved")
    assert torch.allclose(got, want, atol=1e-6)


def test_inplace_numpy_and_torch_share_memory_and_round_trip():
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 8)).astype(np.float32)
    pos = np.array([0, 1, 2, 5, 1000, 4096])
    ref = posenc.apply_rope(x, positions=pos)
    y = x.copy()
    r = posenc.apply_rope(y, positions=pos, layout="bhsd", inplace=True)
    assert r is y and np.array_equal(y, ref)
    t = torch.from_numpy(x.copy())
    posenc.apply_rope(t, positions=torch.from_numpy(pos), inplace=True)
    assert np.array_equal(t.numpy(), ref)
    back = posenc.apply_rope(ref, positions=pos, direction="inverse")
    assert np.abs(back - x).max() < 1e-5


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_16bit_and_float64_tensors(dtype):
    q = torch.randn(1, 2, 4, 8)
    pos = torch.arange(4)
    ref = posenc.apply_rope(q.double(), pos)
    got = posenc.apply_rope(q.to(dtype), pos)
    assert got.dtype == dtype
    tol = {torch.float16: 4e-3, torch.bfloat16: 3e-2, torch.float64: 1e-12}[dtype]
    assert (got.double() - ref).abs().max() <= tol


def test_relative_property_dot_products():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 1, 1, 64))
    k = rng.standard_normal((1, 1, 1, 64))
    dots = []
    for m, n in [(5, 2), (103, 100), (4003, 4000)]:
        qm = posenc.apply_rope(q, positions=[m])
        kn = posenc.apply_rope(k, positions=[n])
        dots.append(float((qm * kn).sum()))
    assert max(dots) - min(dots) < 1e-9


def test_config_path_and_dynamic_seq_len(tmp_path):
    cfg = {"hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 1024,
           "rope_theta": 10000.0, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    import json
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    inv0, f0 = posenc.rope_inv_freq(str(path), seq_len=None)
    inv_default, _ = posenc.rope_default_inv_freq(64, numerics="hf")
    assert np.array_equal(inv0, inv_default) and f0 == 1.0
    inv1, _ = posenc.rope_inv_freq(path, seq_len=4096)
    base = 10000.0 * ((2.0 * 4096 / 1024) - 1) ** (64 / 62)
    want = 1.0 / base ** (np.arange(0, 64, 2) / 64)
    assert np.abs(inv1 / want - 1).max() < 1e-6
    info = posenc.inspect(path)
    assert info["rope_type"] == "dynamic" and info["head_dim"] == 64 and len(info["pairs"]) == 32


def test_rotary_embedding_from_config_llama3(rope_init):
    case = next(c for c in rope_init["cases"] if c["rope_type"] == "llama3")
    rope = pt.RotaryEmbedding.from_config(hf_config(case), layout="bhsd")
    ev = case["evaluations"][0]
    pos = torch.tensor(ev["position_ids"])
    q = torch.ones(1, 1, len(pos), rope.head_dim)
    q_rot, _ = rope(q, q.clone(), pos)
    cos, sin = torch.tensor(ev["cos"]), torch.tensor(ev["sin"])
    want = q * cos + rotate_half(q) * sin
    bound = 4e-6 + 4e-7 * float(pos.max())
    assert (q_rot - want).abs().max() <= bound


def test_gradcheck_apply_rope_float64():
    q = torch.randn(2, 4, 4, 8, dtype=torch.float64, requires_grad=True)  # seq 4 either layout
    pos = torch.tensor([[0, 1, 7, 300], [2, 2, 9, 4096]])
    for kw in [dict(layout="bshd"), dict(layout="bhsd", pairing="interleaved", rotary_dim=4),
               dict(layout="bhsd", inv_freq=np.array([1.0, 0.3, 0.01, 1e-4]),
                    attention_factor=1.25)]:
        assert torch.autograd.gradcheck(lambda x: pt.apply_rope(x, pos, **kw), (q,))


def test_rope_errors_are_value_errors_naming_the_argument():
    q = np.zeros((1, 2, 3, 8), np.float32)
    with pytest.raises(ValueError, match="rotary_dim: got 3"):
        posenc.apply_rope(q, rotary_dim=3)
    with pytest.raises(ValueError, match="layout: got 'bsdh'|layout: got bsdh"):
        posenc.apply_rope(q, layout="bsdh")
    with pytest.raises(ValueError, match="positions"):
        posenc.apply_rope(q, positions=[0, 1])  # seq is 3
    with pytest.raises(ValueError, match="positions.dtype"):
        posenc.apply_rope(q, positions=np.array([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="x.ndim: got 3"):
        posenc.apply_rope(q[0])
    with pytest.raises(ValueError, match="theta"):
        posenc.apply_rope(q, theta=1.0)
    with pytest.raises(ValueError, match="pairing"):
        posenc.apply_rope(q, pairing="neox")
    with pytest.raises(ValueError, match="positions"):
        posenc.apply_rope(q, positions=[0, 1, -1])
    with pytest.raises(posenc.ConfigError):
        posenc.rope_inv_freq({"hidden_size": 64, "num_attention_heads": 2,
                              "rope_scaling": {"rope_type": "linear", "factor": "2"}})
    with pytest.raises(posenc.IoError):
        posenc.rope_inv_freq("/nonexistent/config.json")


def test_mrope_matches_hf_qwen2_vl_formula():
    """modeling_qwen2_vl.py apply_multimodal_rotary_pos_emb with the
    Qwen2VLRotaryEmbedding cos/sin of position_ids [3, batch, seq]."""
    torch.manual_seed(2)
    q = torch.randn(1, 2, 5, 16, dtype=torch.float64)
    pos = torch.tensor([[0, 1, 2, 3, 4], [0, 0, 1, 1, 2], [0, 1, 0, 1, 0]])
    section = [2, 3, 3]
    inv = 1.0 / 10000.0 ** (torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    freqs = pos[:, :, None].double() * inv  # [3, seq, 8]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    split = section * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(cos.split(split, dim=-1))], dim=-1)
    sin = torch.cat([m[i % 3] for i, m in enumerate(sin.split(split, dim=-1))], dim=-1)
    want = q * cos + rotate_half(q) * sin
    got = posenc.apply_mrope(q, pos, mrope_section=section)
    assert torch.allclose(got, want, atol=1e-12)
    same = posenc.apply_mrope(q, pos[[0, 0, 0]], mrope_section=section)  # equal streams: RoPE
    assert torch.allclose(same, posenc.apply_rope(q, pos[0]), atol=1e-12)
    with pytest.raises(ValueError, match="positions.shape"):
        posenc.apply_mrope(q, pos[:2], mrope_section=section)
    with pytest.raises(ValueError, match="mrope_section"):
        posenc.apply_mrope(q, pos, mrope_section=[2, 2, 2])
