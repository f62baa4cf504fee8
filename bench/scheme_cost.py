#!/usr/bin/env python3
"""The cost of each positional scheme inside posenc's fused attention, at one
shape, relative to attention without a positional term ("none"): the
measured-cost evidence of `posenc choose` (scripts/make_evidence.py reads the
JSON this writes).

Shape (the default): batch 1, 8 heads, S = 2048 queries and keys, head_dim 64,
causal, bshd, float32 inputs, 2 threads: one training-size attention call.
For each scheme, forward (posenc.flash_attention) and forward + backward
(posenc.flash_attention_backward) are timed. Rounds alternate over the schemes
(one call of each per round, after one untimed warm-up round; each round
starts at the next scheme), so every scheme sees the same machine load; the
median of the rounds counts. The positional
parameters are the experiment's (schemes.py): RoPE base 10000, ALiBi slopes of
the head count, T5 32 buckets / max distance 128, Shaw clip 16, FIRE hidden 32.

usage: PYTHONPATH=build/release/python /usr/bin/python3 bench/scheme_cost.py \
         [--seq 2048] [--rounds 7] [--threads 2] [-o FILE]
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

import numpy as np

import posenc
from posenc.experiments.extrapolation.machine import cpu_model

SCHEMES = ("none", "rope", "alibi", "t5", "shaw", "fire")


def scheme_args(name, heads, head_dim, rng):
    if name == "rope":
        return {"theta": 10000.0}
    if name == "t5":
        return {"table": rng.standard_normal((32, heads)).astype(np.float32) * 0.1,
                "max_distance": 128, "bidirectional": False}
    if name == "shaw":
        rows = 2 * 16 + 1
        return {"clip": 16,
                "a_key": rng.standard_normal((rows, head_dim)).astype(np.float32) * 0.02,
                "a_value": rng.standard_normal((rows, head_dim)).astype(np.float32) * 0.02}
    if name == "fire":
        hidden = 32
        return {"w1": rng.standard_normal(hidden).astype(np.float32),
                "b1": rng.standard_normal(hidden).astype(np.float32),
                "w2": rng.standard_normal((heads, hidden)).astype(np.float32) * 0.1,
                "b2": np.zeros(heads, np.float32), "c": np.float32(0.1),
                "threshold": np.float32(512.0)}
    return {}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("-o", "--output", default="-")
    a = p.parse_args()
    posenc.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    shape = (1, a.seq, a.heads, a.head_dim)
    q, k, v, dout = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    args = {s: scheme_args(s, a.heads, a.head_dim, rng) for s in SCHEMES}
    out = np.empty_like(q)

    def forward(s):
        return posenc.flash_attention(q, k, v, scheme=s, layout="bshd", mask="causal",
                                      out=out, return_lse=True, **args[s])

    def backward(s, lse):
        return posenc.flash_attention_backward(q, k, v, out, dout, lse, scheme=s,
                                               layout="bshd", mask="causal", **args[s])

    times = {s: {"forward": [], "forward_backward": []} for s in SCHEMES}
    for r in range(a.rounds + 1):
        # Each round starts at another scheme (rotated order): the first call
        # of a round pays for waking the threads, and no scheme always pays.
        order = SCHEMES[r % len(SCHEMES):] + SCHEMES[:r % len(SCHEMES)]
        for s in order:
            t0 = time.perf_counter()
            _, lse = forward(s)
            t1 = time.perf_counter()
            backward(s, lse)
            t2 = time.perf_counter()
            if r > 0:  # round 0 warms up
                times[s]["forward"].append(t1 - t0)
                times[s]["forward_backward"].append(t2 - t0)
    med = {s: {m: statistics.median(v) for m, v in t.items()} for s, t in times.items()}
    results = []
    for s in SCHEMES:
        results.append({
            "scheme": s,
            "forward_ms": med[s]["forward"] * 1e3,
            "forward_backward_ms": med[s]["forward_backward"] * 1e3,
            "forward_relative_to_none": med[s]["forward"] / med["none"]["forward"],
            "forward_backward_relative_to_none":
                med[s]["forward_backward"] / med["none"]["forward_backward"],
        })
    doc = {
        "benchmark": "scheme_cost",
        "command": "PYTHONPATH=build/release/python /usr/bin/python3 bench/scheme_cost.py "
                   + " ".join(sys.argv[1:]),
        "shape": {"batch": 1, "seq": a.seq, "heads": a.heads, "head_dim": a.head_dim,
                  "mask": "causal", "layout": "bshd", "dtype": "float32"},
        "rounds": a.rounds, "threads": a.threads,
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                    "simd_target": posenc.simd_target(), "posenc": posenc.__version__},
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "results": results,
    }
    text = json.dumps(doc, indent=1) + "\n"
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(text)
    for r in results:
        print(f"{r['scheme']:<6} forward {r['forward_ms']:8.2f} ms "
              f"({r['forward_relative_to_none']:.2f}x)"
              f"  forward+backward {r['forward_backward_ms']:8.2f} ms "
              f"({r['forward_backward_relative_to_none']:.2f}x)", file=sys.stderr)


if __name__ == "__main__":
    main()
