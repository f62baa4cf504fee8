#!/usr/bin/python3
"""A training step's attention through posenc.torch.attention, exactly as a model calls it,
against PyTorch eager autograd (docs/PERFORMANCE.md, "From Python").

Usage (from the repository root, after a release build):
  PYTHONPATH=build/release/python /usr/bin/python3 bench/posenc_torch_attention.py \
      [--threads 2] [--reps 20] [--warmup 3] [--dtype bfloat16] [--precision float32] \
      [--batch 32 --seq 128 --heads 4 --head-dim 32] [--scheme alibi] [--workers auto]
-> one JSON object on stdout: {"case", "threads", "precision", "posenc_ms", "torch_ms",
   "speedup_vs_torch", "posenc_forward_ms", "torch_forward_ms", "max_abs_diff_vs_torch", "torch",
   "posenc_threads_followed_torch", "posenc_workers"}. `posenc bench attention --backward` runs it
   (entries "attention_train_step") at this case and at S = 4096, H = 8, D = 64.

The case is the issue's model-shaped one: causal ALiBi self-attention, q, k, v
[B, S, H, D] (bshd, the layout a model has right after its q/k/v projections
and .view), bfloat16, requires_grad; one step is out = attention(q, k, v);
out.backward(dout), the .grad tensors reset between steps, median of --reps
steps after --warmup. posenc runs `posenc.torch.attention(q, k, v,
scheme="alibi", mask="causal", layout="bshd", precision=--precision)` with
no ctx: it follows torch.get_num_threads() (set here with
torch.set_num_threads), on torch's own OpenMP threads where torch runs
OpenMP (posenc.torch's choice; --workers pool or openmp passes
ctx=posenc.Context(threads, workers=...) instead, to compare). torch runs
Hugging Face's eager formula (BLOOM/MPT-style ALiBi): q, k, v transposed to
[B, H, S, D], scores = q k^T / sqrt(D) + (ALiBi bias + causal mask, [1, H, S, S]
materialised once before timing, as HF builds it once per forward),
softmax in float32, cast back, @ v, transposed back. Same threads, same
process, same inputs, calls alternating (posenc, torch, posenc, ...) so that
both medians see the same minutes of a noisy machine. The forward alone is
timed too (no_grad).
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch

import posenc
import posenc.torch as pt


def timed(fns, warmup, reps):
    """Medians (ms) of each function, called alternately after `warmup` rounds."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for _ in range(reps):
        for fn, t in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            t.append((time.perf_counter() - t0) * 1e3)
    return [statistics.median(t) for t in times]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    ap.add_argument("--precision", choices=["float32", "bfloat16"], default="float32")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--scheme", choices=["alibi", "none"], default="alibi")
    ap.add_argument("--workers", choices=["auto", "pool", "openmp"], default="auto")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    dt = getattr(torch, a.dtype)
    b, s, h, d = a.batch, a.seq, a.heads, a.head_dim
    q = torch.randn(b, s, h, d).to(dt).requires_grad_()
    k = torch.randn(b, s, h, d).to(dt).requires_grad_()
    v = torch.randn(b, s, h, d).to(dt).requires_grad_()
    dout = torch.randn(b, s, h, d).to(dt)
    slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)])
    causal = torch.full((s, s), float("-inf")).triu(1)
    if a.scheme == "alibi":
        dist = (torch.arange(s)[None, :] - torch.arange(s)[:, None]).abs().float()
        bias = (-slopes[:, None, None] * dist[None] + causal[None])[None].to(dt)
    else:
        bias = causal[None, None].to(dt)
    scale = 1.0 / math.sqrt(d)

    def torch_attention(q, k, v):
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        scores = torch.matmul(qt, kt.transpose(2, 3)) * scale + bias
        probs = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(dt)
        return torch.matmul(probs, vt).transpose(1, 2)

    kwargs = dict(slopes=slopes.double()) if a.scheme == "alibi" else {}
    if a.workers != "auto":
        kwargs["ctx"] = posenc.Context(a.threads, workers=a.workers)

    def posenc_attention(q, k, v):
        return pt.attention(q, k, v, scheme=a.scheme, mask="causal", layout="bshd",
                            precision=a.precision, **kwargs)

    def step(fn):
        def run():
            out = fn(q, k, v)
            out.backward(dout)
            q.grad = k.grad = v.grad = None
        return run

    def forward(fn):
        def run():
            with torch.no_grad():
                fn(q, k, v)
        return run

    # The two agree (same inputs, same formula) before anything is timed.
    with torch.no_grad():
        diff = (posenc_attention(q, k, v).float() - torch_attention(q, k, v).float()).abs().max()
    posenc_ms, torch_ms = timed([step(posenc_attention), step(torch_attention)], a.warmup,
                                a.reps)
    posenc_fwd, torch_fwd = timed([forward(posenc_attention), forward(torch_attention)],
                                  a.warmup, a.reps)
    result = {
        "case": {"batch": b, "seq": s, "heads": h, "head_dim": d, "dtype": a.dtype,
                 "scheme": a.scheme, "mask": "causal", "layout": "bshd"},
        "threads": torch.get_num_threads(),
        "precision": a.precision,
        "posenc_ms": posenc_ms,
        "torch_ms": torch_ms,
        "speedup_vs_torch": torch_ms / posenc_ms,
        "posenc_forward_ms": posenc_fwd,
        "torch_forward_ms": torch_fwd,
        "max_abs_diff_vs_torch": float(diff),
        "torch": torch.__version__,
        "posenc_threads_followed_torch": pt._torch_ctx().num_threads == torch.get_num_threads(),
        "posenc_workers": kwargs["ctx"].workers if "ctx" in kwargs else pt._torch_ctx().workers,
    }
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
