#!/usr/bin/python3
"""PyTorch-eager attention baseline for `posenc bench attention` (docs/PERFORMANCE.md).

Usage: torch_attention.py '{"scheme": "alibi"|"t5"|"rope"|"none", "seq": S,
"heads": H, "head_dim": D, "threads": N, "reps": R, "warmup": W}'
-> one JSON object on stdout: {"ms", "peak_extra_mib", "torch", "torch_threads", "variant"}.

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


def main():
    c = json.loads(sys.argv[1])
    torch.set_num_threads(int(c["threads"]))
    torch.manual_seed(0)
    scheme, s, h, d = c["scheme"], int(c["seq"]), int(c["heads"]), int(c["head_dim"])
    dt = torch.bfloat16
    with torch.no_grad():
        q = torch.randn(1, h, s, d).to(dt)
        k = torch.randn(1, h, s, d).to(dt)
        v = torch.randn(1, h, s, d).to(dt)
        cos = sin = None
        if scheme == "rope":
            inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
            freqs = torch.outer(torch.arange(s, dtype=torch.float32), inv)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos().to(dt)[None, None], emb.sin().to(dt)[None, None]
        before = max_rss_mib()
        causal = torch.full((s, s), float("-inf")).triu(1)  # HF's 4D causal mask, additive
        if scheme == "alibi":
            slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)])
            dist = (torch.arange(s)[None, :] - torch.arange(s)[:, None]).abs().float()
            bias = (-slopes[:, None, None] * dist[None] + causal[None])[None].to(dt)
        elif scheme == "t5":
            embedding = torch.nn.Embedding(32, h)
            bias = (t5_compute_bias(embedding, s) + causal[None, None]).to(dt)
        else:
            bias = causal[None, None].to(dt)
        del causal
        scale = 1.0 / math.sqrt(d)

        def run():
            qq, kk = q, k
            if cos is not None:
                qq = q * cos + rotate_half(q) * sin
                kk = k * cos + rotate_half(k) * sin
            scores = torch.matmul(qq, kk.transpose(2, 3)) * scale + bias
            probs = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(dt)
            return torch.matmul(probs, v)

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
