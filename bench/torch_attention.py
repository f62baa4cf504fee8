#!/usr/bin/python3
"""PyTorch-eager attention baseline for `posenc bench attention` (docs/PERFORMANCE.md).

Usage: torch_attention.py '{"mode": "forward"|"backward"|"decode", "scheme":
"alibi"|"t5"|"rope"|"none", "seq": S, "heads": H, "head_dim": D, "threads": N,
"reps": R, "warmup": W[, "dtype": "bfloat16"|"float32"][, "kv_heads": Hkv]}'
-> one JSON object on stdout: {"ms", "peak_extra_mib", "torch", "torch_threads", "variant"}.

mode "forward" (default) is described below. mode "backward" (`posenc bench
attention --backward`) times forward + backward of the same formula in
`dtype` with q, k, v requiring grad: out = attention(q, k, v);
out.backward(dout) with dout prepared before timing; the .grad tensors are
reset to None between calls (so every call allocates them, like a training
step's first backward). mode "decode" (`--decode`) times one decode step:
q [1, H, 1, D] at position S - 1 against a bfloat16 cache k, v [1, Hkv, S, D]
(HF's cache layout), GQA by grouped matmuls (q viewed as [1, Hkv, H / Hkv, D]:
HF's repeat_kv would copy the cache first, so this is faster than HF eager),
bias [1, H, 1, S] materialised before timing, rope rotating q in the call
(keys pre-rotated in the cache).

One case per process, so that the peak memory is this case's alone. The
attention is Hugging Face's eager path in bfloat16 (torch's fastest CPU dtype
here: its float32 matmul goes to Debian's reference BLAS), bias materialised:
    scores = (q @ k^T) / sqrt(D) + bias + causal_mask      [1, H, S, S] bfloat16
    probs  = softmax(scores, dim=-1, dtype=float32).to(bfloat16)   (HF's upcast)
    out    = probs @ v
with q, k, v [1, H, S, D] bfloat16 and
  alibi  bias[h, i, j] = -slope_h * |i - j| (slopes 2^(-8 (h + 1) / H), the
         symmetric form of the posenc kernel; HF BLOOM's key-only form is
         equal after the softmax for causal rows),
  t5     HF T5Attention.compute_bias: _relative_position_bucket (causal,
         32 buckets, max distance 128) + an nn.Embedding(32, H) lookup,
  rope   HF apply_rotary_pos_emb on q and k inside the timed call (cos/sin
         precomputed once, as HF's rotary embedding does once per forward),
  none   the causal mask only.
The bias + causal mask tensor ([1, H, S, S] bfloat16, or [1, 1, S, S] for
rope/none) is built once before timing (HF builds it once per model forward
and reuses it in every layer); it counts in the peak memory. The timed call
is the attention of one layer: W warm-up calls, then the median of R calls.
Peak extra memory: ru_maxrss (high-water RSS) after the calls minus
ru_maxrss after q, k, v, cos/sin were allocated and touched. Run with
jemalloc preloaded (LD_PRELOAD=libjemalloc.so.2,
MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1), like torch_baseline.py.
"""
import json
import math
import os
import resource
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_common import relative_position_bucket, rotate_half  # noqa: E402


def max_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def t5_compute_bias(embedding, seq):
    """HF T5Attention.compute_bias: [1, H, S, S]."""
    context_position = torch.arange(seq, dtype=torch.long)[:, None]
    memory_position = torch.arange(seq, dtype=torch.long)[None, :]
    bucket = relative_position_bucket(memory_position - context_position, bidirectional=False)
    values = embedding(bucket)  # [S, S, H]
    return values.permute([2, 0, 1]).unsqueeze(0)


def make_bias(scheme, h, s, dt):
    """The bias + causal mask HF adds to the scores, [1, H, S, S] (rope / none: [1, 1, S, S])."""
    causal = torch.full((s, s), float("-inf")).triu(1)  # HF's 4D causal mask, additive
    if scheme == "alibi":
        slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)])
        dist = (torch.arange(s)[None, :] - torch.arange(s)[:, None]).abs().float()
        return (-slopes[:, None, None] * dist[None] + causal[None])[None].to(dt)
    if scheme == "t5":
        embedding = torch.nn.Embedding(32, h)
        with torch.no_grad():
            return (t5_compute_bias(embedding, s) + causal[None, None]).to(dt)
    return causal[None, None].to(dt)


def rope_tables(s, d, dt, start=0):
    inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    freqs = torch.outer(torch.arange(start, s, dtype=torch.float32), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dt)[None, None], emb.sin().to(dt)[None, None]


def timed(run, warmup, reps):
    for _ in range(warmup):
        run()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        run()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def eager_attention(q, k, v, cos, sin, bias, scale, dt):
    """HF's eager attention: optional RoPE (half split), scores + materialised bias, float32
    softmax, P . V."""
    if cos is not None:
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
    scores = torch.matmul(q, k.transpose(2, 3)) * scale + bias
    probs = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(dt)
    return torch.matmul(probs, v)


def main_backward(c):
    scheme, s, h, d = c["scheme"], int(c["seq"]), int(c["heads"]), int(c["head_dim"])
    dt = torch.bfloat16 if c.get("dtype", "bfloat16") == "bfloat16" else torch.float32
    q = torch.randn(1, h, s, d).to(dt).requires_grad_()
    k = torch.randn(1, h, s, d).to(dt).requires_grad_()
    v = torch.randn(1, h, s, d).to(dt).requires_grad_()
    dout = torch.randn(1, h, s, d).to(dt)
    cos = sin = None
    if scheme == "rope":
        cos, sin = rope_tables(s, d, dt)
    before = max_rss_mib()
    bias = make_bias(scheme, h, s, dt)
    scale = 1.0 / math.sqrt(d)

    def run():
        out = eager_attention(q, k, v, cos, sin, bias, scale, dt)
        out.backward(dout)
        q.grad = k.grad = v.grad = None

    ms = timed(run, int(c["warmup"]), int(c["reps"]))
    return ms, max_rss_mib() - before, "hf_eager_autograd_materialised_bias"


def main_decode(c):
    scheme, s, h, d = c["scheme"], int(c["seq"]), int(c["heads"]), int(c["head_dim"])
    hkv = int(c.get("kv_heads", h))
    g = h // hkv
    dt = torch.bfloat16
    with torch.no_grad():
        q = torch.randn(1, h, 1, d).to(dt)
        k = torch.randn(1, hkv, s, d).to(dt)
        v = torch.randn(1, hkv, s, d).to(dt)
        before = max_rss_mib()
        if scheme == "alibi":
            slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)])
            dist = (torch.arange(s) - (s - 1)).abs().float()
            bias = (-slopes[:, None] * dist[None])[None, :, None, :].to(dt)
        elif scheme == "t5":
            embedding = torch.nn.Embedding(32, h)
            rel = torch.arange(s)[None, :] - (s - 1)
            bucket = relative_position_bucket(rel, bidirectional=False)
            bias = embedding(bucket).permute([2, 0, 1]).unsqueeze(0).to(dt)  # [1, H, 1, S]
        else:
            bias = None
        cos = sin = None
        if scheme == "rope":
            cos, sin = rope_tables(s, d, dt, start=s - 1)
        scale = 1.0 / math.sqrt(d)

        def run():
            qq = q
            if cos is not None:
                qq = q * cos + rotate_half(q) * sin
            scores = torch.matmul(qq.view(1, hkv, g, d), k.transpose(2, 3)).view(1, h, 1, s)
            scores = scores * scale
            if bias is not None:
                scores = scores + bias
            probs = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(dt)
            return torch.matmul(probs.view(1, hkv, g, s), v).view(1, h, 1, d)

        ms = timed(run, int(c["warmup"]), int(c["reps"]))
    return ms, max_rss_mib() - before, "hf_eager_decode_grouped_bf16"


def main():
    c = json.loads(sys.argv[1])
    torch.set_num_threads(int(c["threads"]))
    torch.manual_seed(0)
    mode = c.get("mode", "forward")
    if mode != "forward":
        ms, mib, variant = (main_backward if mode == "backward" else main_decode)(c)
        json.dump({"ms": ms, "peak_extra_mib": mib, "torch": torch.__version__,
                   "torch_threads": torch.get_num_threads(), "variant": variant}, sys.stdout)
        return
    scheme, s, h, d = c["scheme"], int(c["seq"]), int(c["heads"]), int(c["head_dim"])
    dt = torch.bfloat16
    with torch.no_grad():
        q = torch.randn(1, h, s, d).to(dt)
        k = torch.randn(1, h, s, d).to(dt)
        v = torch.randn(1, h, s, d).to(dt)
        cos = sin = None
        if scheme == "rope":
            cos, sin = rope_tables(s, d, dt)
        before = max_rss_mib()
        bias = make_bias(scheme, h, s, dt)
        scale = 1.0 / math.sqrt(d)

        def run():
            return eager_attention(q, k, v, cos, sin, bias, scale, dt)

        for _ in range(int(c["warmup"])):
            run()
        times = []
        for _ in range(int(c["reps"])):
            t0 = time.perf_counter()
            out = run()
            times.append((time.perf_counter() - t0) * 1e3)
            del out
        after = max_rss_mib()
    json.dump({"ms": statistics.median(times), "peak_extra_mib": after - before,
               "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
               "variant": "hf_eager_bf16_materialised_bias"}, sys.stdout)


if __name__ == "__main__":
    main()
