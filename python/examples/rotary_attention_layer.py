"""RotaryEmbedding.from_config feeding posenc.torch.attention: a Llama-style
grouped-query attention block with a KV cache, checked against plain torch.

Writes a Llama-3.1-style config.json (llama3 rope scaling, 4 query heads
sharing 2 kv heads), builds the block with posenc (RoPE from the config, the
fused attention reading the kv heads directly) and the same block in plain
torch as Hugging Face writes it (llama3 frequencies, rotate_half,
repeat_kv, a masked softmax), with the same weights. Then checks the full
pass and the gradients, and decodes: a 6-token prefill into the cache, then
one token at a time (offset = cache length), each step against the plain
block's full pass.

The layout is stated once per call site: q, k, v come out of the
projections as [batch, seq, heads, head_dim] ("bshd"), RotaryEmbedding and
attention are told so, and no transpose is needed.
"""
import json
import math
import os
import tempfile

import torch
from torch import nn

import posenc.torch as pt

CONFIG = {
    "hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 131072, "rope_theta": 500000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
}
HEADS, KV_HEADS, HIDDEN = 4, 2, 128
D = HIDDEN // HEADS


class Projections(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(HIDDEN, HEADS * D, bias=False)
        self.k = nn.Linear(HIDDEN, KV_HEADS * D, bias=False)
        self.v = nn.Linear(HIDDEN, KV_HEADS * D, bias=False)
        self.o = nn.Linear(HEADS * D, HIDDEN, bias=False)

    def qkv(self, x):  # [batch, seq, heads, head_dim]: layout "bshd"
        b, s, _ = x.shape
        return (self.q(x).view(b, s, HEADS, D), self.k(x).view(b, s, KV_HEADS, D),
                self.v(x).view(b, s, KV_HEADS, D))


class PosencAttention(nn.Module):
    """The block with posenc: forward(x, cache) -> (y, cache); cache holds
    the rotated keys and the values, [batch, past, kv_heads, head_dim]."""

    def __init__(self, config_path, proj):
        super().__init__()
        self.rope = pt.RotaryEmbedding.from_config(config_path, layout="bshd")
        self.proj = proj

    def forward(self, x, cache=None):
        q, k, v = self.proj.qkv(x)
        past = 0 if cache is None else cache[0].shape[1]
        q, k = self.rope(q, k, offset=past)  # positions past .. past + seq - 1
        if cache is not None:
            k, v = torch.cat([cache[0], k], 1), torch.cat([cache[1], v], 1)
        # GQA: 4 query heads read 2 kv heads; new queries sit at the last positions.
        out = pt.attention(q, k, v, layout="bshd", mask="causal")
        return self.proj.o(out.reshape(x.shape[0], x.shape[1], -1)), (k, v)


def llama3_inv_freq(cfg):
    """transformers' _compute_llama3_parameters, in float32."""
    r = cfg["rope_scaling"]
    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    low_wavelen = r["original_max_position_embeddings"] / r["low_freq_factor"]
    high_wavelen = r["original_max_position_embeddings"] / r["high_freq_factor"]
    wavelen = 2 * math.pi / inv
    inv_l = torch.where(wavelen > low_wavelen, inv / r["factor"], inv)
    smooth = (r["original_max_position_embeddings"] / wavelen - r["low_freq_factor"]) / (
        r["high_freq_factor"] - r["low_freq_factor"])
    smoothed = (1 - smooth) * inv_l / r["factor"] + smooth * inv_l
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, inv_l)


def rotate_half(x):
    return torch.cat([-x[..., D // 2:], x[..., :D // 2]], -1)


def plain_attention(proj, inv_freq, x):
    """The same block in plain torch, HF LlamaAttention style ([B, H, S, D])."""
    b, s, _ = x.shape
    q, k, v = (t.transpose(1, 2) for t in proj.qkv(x))
    freqs = torch.arange(s, dtype=torch.float32)[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], -1)
    q = q * emb.cos() + rotate_half(q) * emb.sin()
    k = k * emb.cos() + rotate_half(k) * emb.sin()
    k, v = (t.repeat_interleave(HEADS // KV_HEADS, 1) for t in (k, v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(D)
    scores = scores.masked_fill(~torch.ones(s, s, dtype=torch.bool).tril(), float("-inf"))
    return proj.o((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, -1))


torch.manual_seed(0)
proj = Projections()
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "config.json")
    with open(path, "w") as f:
        json.dump(CONFIG, f)
    layer = PosencAttention(path, proj)
print("rope:", layer.rope.rope_type, layer.rope)

x = torch.randn(2, 10, HIDDEN)
y, _ = layer(x)
want = plain_attention(proj, llama3_inv_freq(CONFIG), x)
print(f"full pass matches plain torch: {bool(torch.allclose(y, want, atol=1e-5))} "
      f"(max |diff| {(y - want).abs().max().item():.1e})")
grads = torch.autograd.grad(y.square().mean(), list(proj.parameters()))
grads_want = torch.autograd.grad(want.square().mean(), list(proj.parameters()))
print("output", tuple(y.shape), "grad of q weight finite:", bool(torch.isfinite(grads[0]).all()))
print("gradients match plain torch:",
      all(torch.allclose(a, b, atol=1e-5) for a, b in zip(grads, grads_want)))

with torch.no_grad():  # prefill 6 tokens, then decode tokens 6..9 one at a time
    steps = [layer(x[:, :6])]
    for t in range(6, 10):
        steps.append(layer(x[:, t:t + 1], cache=steps[-1][1]))
    decoded = torch.cat([s[0] for s in steps], 1)
    print("cache length", steps[-1][1][0].shape[1],
          "kv-cache step matches full pass:", bool(torch.allclose(decoded, want, atol=1e-5)))

q, k, v = proj.qkv(x)
try:  # posenc.torch never guesses a layout
    pt.attention(q, k, v)
except TypeError as e:
    print("attention without a layout:", e)
