"""RotaryEmbedding.from_config inside a small PyTorch attention layer.

Writes a Llama-3.1-style config.json (llama3 rope scaling), builds a causal
self-attention block whose q and k go through posenc's differentiable RoPE,
runs forward and backward, and checks the KV-cache property: decoding the
last token with offset = past length gives the same output as the full pass.
"""
import json
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


class Attention(nn.Module):
    def __init__(self, config_path):
        super().__init__()
        self.rope = pt.RotaryEmbedding.from_config(config_path, layout="bhsd")
        self.heads, self.kv_heads, self.d = 4, 2, self.rope.head_dim
        self.q = nn.Linear(128, self.heads * self.d, bias=False)
        self.k = nn.Linear(128, self.kv_heads * self.d, bias=False)
        self.v = nn.Linear(128, self.kv_heads * self.d, bias=False)
        self.o = nn.Linear(self.heads * self.d, 128, bias=False)

    def forward(self, x, offset=0, past=None):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.d).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv_heads, self.d).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv_heads, self.d).transpose(1, 2)
        q, k = self.rope(q, k, offset=offset)
        if past is not None:
            k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)
        k = k.repeat_interleave(self.heads // self.kv_heads, 1)
        v = v.repeat_interleave(self.heads // self.kv_heads, 1)
        scores = q @ k.transpose(-1, -2) / self.d ** 0.5
        sk = k.shape[2]
        mask = torch.ones(s, sk, dtype=torch.bool).tril(sk - s)
        probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
        return self.o((probs @ v).transpose(1, 2).reshape(b, s, -1))


torch.manual_seed(0)
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "config.json")
    with open(path, "w") as f:
        json.dump(CONFIG, f)
    layer = Attention(path)
print("rope:", layer.rope.rope_type, layer.rope)
x = torch.randn(2, 10, 128)
y = layer(x)
y.square().mean().backward()
print("output", tuple(y.shape), "grad of q weight finite:",
      bool(torch.isfinite(layer.q.weight.grad).all()))

with torch.no_grad():  # decode token 9 against a cache of tokens 0..8
    b, s = 2, 9
    k = layer.k(x[:, :s]).view(b, s, 2, layer.d).transpose(1, 2)
    v = layer.v(x[:, :s]).view(b, s, 2, layer.d).transpose(1, 2)
    k, _ = layer.rope(k, k.clone())
    step = layer(x[:, s:], offset=s, past=(k, v))
print("kv-cache step matches full pass:", bool(torch.allclose(step, y[:, s:], atol=1e-5)))
