"""The model of the extrapolation experiment: a small decoder-only transformer
over bytes, the same for every scheme except its positional part
(schemes.py).

GPT-2 style (Radford et al. 2019; nanoGPT's layout): token embedding E [256, d]
initialised N(0, 1/d) and scaled by sqrt(d) (Vaswani et al. 2017: per
coordinate the tokens have RMS 1, the added sinusoidal table 0.71; the learned
table starts at posenc's N(0, 0.02^2), BERT/GPT-2's init, and grows as it
trains; other matrices N(0, 0.02^2), the residual projections divided by
sqrt(2 layers) as in GPT-2), then `layers` pre-LayerNorm blocks
x += W_o attn(LN(x)); x += W_2 GELU(W_1 LN(x)) (W_1: d -> 4d, linear layers
without biases), a final LayerNorm and the logits LN(x) E^T (tied
embeddings). Attention is posenc.torch.attention (the fused kernel forward and
backward) with the scheme's arguments, causal, layout bshd.

`attention_impl="torch"` swaps the fused kernel for torch's own attention
(scores materialised, float32 softmax) for the speed comparison only; it
supports the schemes whose bias is a plain matrix (none, alibi).
"""
from __future__ import annotations

import math
from typing import Any, Dict

import torch
import torch.nn.functional as F
from torch import nn

import posenc
import posenc.torch as pt

from .schemes import ModelShape, Positional, Scheme

VOCAB = 256
INIT_STD = 0.02


class Block(nn.Module):
    def __init__(self, shape: ModelShape, index: int) -> None:
        super().__init__()
        d = shape.dim
        self.shape, self.index = shape, index
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d, bias=False)
        self.fc2 = nn.Linear(4 * d, d, bias=False)

    def forward(self, x: torch.Tensor, position: Positional, attention_impl: str,
                precision: str = "float32") -> torch.Tensor:
        b, t, d = x.shape
        h, hd = self.shape.heads, self.shape.head_dim
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, h, hd).unbind(2)
        scheme, kwargs = position.attention(self.index, t)
        if attention_impl == "posenc":
            a = pt.attention(q, k, v, scheme=scheme, layout="bshd", mask="causal",
                             precision=precision, **kwargs)
        else:
            a = torch_attention(q, k, v, scheme)
        x = x + self.proj(a.reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def torch_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    scheme: str) -> torch.Tensor:
    """softmax(q k^T / sqrt(D) + bias + causal mask) v in plain torch (bshd),
    the bias materialised [H, T, T]: what the fused kernel is compared with."""
    t, h, hd = q.shape[1], q.shape[2], q.shape[3]
    qh, kh, vh = (z.transpose(1, 2) for z in (q, k, v))
    scores = (qh @ kh.transpose(-1, -2)).float() / math.sqrt(hd)
    if scheme == "alibi":
        scores = scores + torch.from_numpy(posenc.alibi_bias(h, t, t, form="causal"))
    elif scheme == "none":
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    else:
        raise ValueError(f"attention: got the torch path with scheme {scheme!r}, expected "
                         "none or alibi")
    return (scores.softmax(-1).to(vh.dtype) @ vh).transpose(1, 2)


class TransformerLM(nn.Module):
    """Byte-level language model; forward(tokens [B, T]) -> logits [B, T, 256]
    (float32). The shared parts are initialised from `seed`, the positional
    part from seed + 1, so every scheme starts from the same shared weights."""

    def __init__(self, shape: ModelShape, scheme: Scheme, seed: int,
                 precision: str = "float32") -> None:
        super().__init__()
        self.shape, self.scheme_name = shape, scheme.name
        self.attention_impl = "posenc"
        self.precision = precision  # of P and dS in posenc's attention (Options.precision)
        torch.manual_seed(seed)
        self.embed = nn.Embedding(VOCAB, shape.dim)
        self.blocks = nn.ModuleList(Block(shape, i) for i in range(shape.layers))
        self.ln_f = nn.LayerNorm(shape.dim)
        for name, p in self.named_parameters():
            if name == "embed.weight":  # Vaswani et al.: d^-1/2, times sqrt(d) at the input
                nn.init.normal_(p, 0.0, shape.dim ** -0.5)
            elif p.dim() == 2:
                std = INIT_STD / math.sqrt(2 * shape.layers) if name.endswith(
                    ("proj.weight", "fc2.weight")) else INIT_STD
                nn.init.normal_(p, 0.0, std)
        torch.manual_seed(seed + 1)
        self.position = scheme.build(shape, seed + 1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) * math.sqrt(self.shape.dim)
        x = self.position.add(x)
        for block in self.blocks:
            x = block(x, self.position, self.attention_impl, self.precision)
        return (self.ln_f(x) @ self.embed.weight.t()).float()

    def param_groups(self, weight_decay: float) -> list:
        """AdamW groups: decay the weight matrices, not the embeddings,
        positional tables, norms."""
        decay, keep = [], []
        for name, p in self.named_parameters():
            (decay if p.dim() == 2 and name.startswith("blocks.") else keep).append(p)
        return [{"params": decay, "weight_decay": weight_decay},
                {"params": keep, "weight_decay": 0.0}]

    def counts(self) -> Dict[str, int]:
        total = sum(p.numel() for p in self.parameters())
        positional = sum(p.numel() for p in self.position.parameters())
        return {"params": total, "positional_params": positional}


def losses(model: TransformerLM, windows: torch.Tensor, autocast: Any) -> torch.Tensor:
    """Cross-entropy in nats of every predicted byte: windows [B, T + 1] ->
    [B, T] (float32)."""
    with autocast():
        logits = model(windows[:, :-1])
    return F.cross_entropy(logits.reshape(-1, VOCAB), windows[:, 1:].reshape(-1),
                           reduction="none").view(windows.shape[0], -1)
