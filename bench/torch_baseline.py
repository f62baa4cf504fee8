#!/usr/bin/python3
"""PyTorch-eager / numpy baselines for `posenc bench` (docs/PERFORMANCE.md).

Usage: torch_baseline.py SPEC.json  -> JSON on stdout.

SPEC: {"threads": N, "reps": R, "warmup": W, "cases": [{"id": I, "kernel": K,
"dtype": "float32"|"bfloat16"|"float16", "shape": [...]}, ...]} with kernel one of
  rope         HF transformers apply_rotary_pos_emb (Llama): q*cos +
               rotate_half(q)*sin for q and k [b, h, s, d] (bhsd), cos/sin
               [b, s, d] precomputed in q's dtype (only the apply is timed)
  rope_cos_sin HF LlamaRotaryEmbedding.forward: inv_freq @ positions, cat,
               cos(), sin() (float32), cast to dtype; shape [rows, rotary_dim]
  sinusoidal   the best of numpy variants of the lesson's table
               (sin/cos of pos * inv_freq into a preallocated [rows, dim]
               float32 array) and the torch equivalent; shape [rows, dim]
  alibi        the materialised causal ALiBi bias [H, S, S] in torch eager
               (x-transformers AlibiPositionalBias / HF-style): -slope *
               |i - j| from arange differences (paper slopes, float32),
               masked_fill(-inf) above the diagonal, cast to dtype;
               shape [H, S, S]
  t5_bias      HF T5Attention.compute_bias(S, S) verbatim (bidirectional,
               32 buckets, max distance 128): _relative_position_bucket on
               the [S, S] relative positions, then nn.Embedding(32, H) in
               dtype; it materialises the H * S * S values as [S, S, H]
               (HF returns the permuted [1, H, S, S] view); shape [H, S, S]
A case whose ops torch cannot run on the CPU for its dtype reports
"ms": null and the error in "variant" (never a made-up figure).
Each case: inputs allocated and touched once, W warm-up calls, then R timed
calls; reports the median in ms. Run it with jemalloc preloaded
(LD_PRELOAD=libjemalloc.so.2, MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1)
so torch's fresh outputs reuse memory instead of faulting new pages.
"""
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_common import relative_position_bucket, rotate_half  # noqa: E402


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


# Cases slower than this budget per measurement (e.g. torch float16 on the
# CPU, which has no vectorised kernels for some ops) run fewer timed calls:
# at least 3, reported in the variant as "(N reps)".
BUDGET_MS = 30000.0
LAST_REPS = {"reps": None}


def median_ms(fn, reps, warmup):
    t0 = time.perf_counter()
    fn()  # the first warm-up call also sizes the run
    first_ms = (time.perf_counter() - t0) * 1e3
    LAST_REPS["reps"] = None
    if first_ms * (reps + warmup) > BUDGET_MS and reps > 3:
        reps, warmup = max(3, int(BUDGET_MS / first_ms)), 0
        LAST_REPS["reps"] = reps
    for _ in range(warmup - 1):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def inv_freq(dim, base=10000.0):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def case_rope(c, reps, warmup):
    b, h, s, d = c["shape"]
    dt = DTYPES[c["dtype"]]
    q = torch.randn(b, h, s, d).to(dt)
    k = torch.randn(b, h, s, d).to(dt)
    pos = torch.arange(s, dtype=torch.float32)
    freqs = torch.outer(pos, inv_freq(d))
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos()[None].expand(b, s, d).contiguous().to(dt)
    sin = emb.sin()[None].expand(b, s, d).contiguous().to(dt)
    with torch.no_grad():
        return median_ms(lambda: apply_rotary_pos_emb(q, k, cos, sin), reps, warmup)


def case_rope_cos_sin(c, reps, warmup):
    rows, rd = c["shape"]
    dt = DTYPES[c["dtype"]]
    inv = inv_freq(rd)
    position_ids = torch.arange(rows)[None]

    def run():
        inv_expanded = inv[None, :, None].float().expand(1, -1, 1)
        freqs = (inv_expanded @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dt), emb.sin().to(dt)

    with torch.no_grad():
        return median_ms(run, reps, warmup)


def case_sinusoidal(c, reps, warmup):
    rows, dim = c["shape"]
    half = dim // 2
    inv = (1.0 / 10000.0 ** (np.arange(0, dim, 2, dtype=np.float32) / dim)).astype(np.float32)
    pos = np.arange(rows, dtype=np.float32)[:, None]
    out = np.empty((rows, dim), dtype=np.float32)
    angles = np.empty((rows, half), dtype=np.float32)

    def numpy_strided():  # sin/cos written straight into the interleaved columns
        np.multiply(pos, inv[None, :], out=angles)
        np.sin(angles, out=out[:, 0::2])
        np.cos(angles, out=out[:, 1::2])

    sin_buf = np.empty_like(angles)
    cos_buf = np.empty_like(angles)

    def numpy_contiguous():  # contiguous sin/cos, then one interleaving copy
        np.multiply(pos, inv[None, :], out=angles)
        np.sin(angles, out=sin_buf)
        np.cos(angles, out=cos_buf)
        out.reshape(rows, half, 2)[:, :, 0] = sin_buf
        out.reshape(rows, half, 2)[:, :, 1] = cos_buf

    t_pos = torch.arange(rows, dtype=torch.float32)[:, None]
    t_inv = torch.from_numpy(inv)[None, :]
    t_out = torch.empty(rows, dim)

    def torch_version():
        a = t_pos * t_inv
        t_out[:, 0::2] = torch.sin(a)
        t_out[:, 1::2] = torch.cos(a)

    best = None
    for name, fn in (("numpy_strided", numpy_strided), ("numpy_contiguous", numpy_contiguous),
                     ("torch", torch_version)):
        ms = median_ms(fn, reps, warmup)
        if best is None or ms < best[1]:
            best = (name, ms)
    return best[1], best[0]


def alibi_slopes(n_heads):
    """The paper's get_slopes (ofirpress/attention_with_linear_biases)."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n_heads).is_integer():
        return power_of_2(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return power_of_2(closest) + alibi_slopes(2 * closest)[0::2][: n_heads - closest]


def case_alibi(c, reps, warmup):
    h, sq, sk = c["shape"]
    dt = DTYPES[c["dtype"]]
    slopes = torch.tensor(alibi_slopes(h), dtype=torch.float32)[:, None, None]

    def run():
        context = torch.arange(sq)[:, None] + (sk - sq)  # bottom-right aligned queries
        memory = torch.arange(sk)[None, :]
        distance = context - memory  # [Sq, Sk] int64, i - j
        bias = slopes * -distance.abs().float()[None]  # [H, Sq, Sk] float32
        bias.masked_fill_((distance < 0)[None], float("-inf"))
        return bias.to(dt)

    with torch.no_grad():
        return median_ms(run, reps, warmup)


def case_t5_bias(c, reps, warmup):
    h, sq, sk = c["shape"]
    dt = DTYPES[c["dtype"]]
    emb = torch.nn.Embedding(32, h).to(dt)

    def compute_bias():  # HF T5Attention.compute_bias
        context_position = torch.arange(sq, dtype=torch.long)[:, None]
        memory_position = torch.arange(sk, dtype=torch.long)[None, :]
        relative_position = memory_position - context_position
        bucket = relative_position_bucket(relative_position, True, 32, 128)
        values = emb(bucket)  # [Sq, Sk, H]
        return values.permute([2, 0, 1]).unsqueeze(0)

    with torch.no_grad():
        return median_ms(compute_bias, reps, warmup)


def run_case(fn, c, reps, warmup):
    """fn's median ms, or the error text when torch cannot run the case."""
    try:
        return fn(c, reps, warmup)
    except (RuntimeError, NotImplementedError) as e:
        return str(e).splitlines()[0][:200]


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    torch.set_num_threads(int(spec["threads"]))
    reps, warmup = int(spec.get("reps", 10)), int(spec.get("warmup", 3))
    results = []
    for c in spec["cases"]:
        variant = "hf_apply_rotary_pos_emb"
        if c["kernel"] == "rope":
            ms = run_case(case_rope, c, reps, warmup)
        elif c["kernel"] == "rope_cos_sin":
            ms = case_rope_cos_sin(c, reps, warmup)
            variant = "hf_llama_rotary_embedding"
        elif c["kernel"] == "sinusoidal":
            ms, variant = case_sinusoidal(c, reps, warmup)
        elif c["kernel"] == "alibi":
            variant = "xtransformers_alibi_causal_masked"
            ms = run_case(case_alibi, c, reps, warmup)
        elif c["kernel"] == "t5_bias":
            variant = "hf_t5_compute_bias"
            ms = run_case(case_t5_bias, c, reps, warmup)
        else:
            raise SystemExit("torch_baseline.py: unknown kernel " + repr(c["kernel"]))
        if isinstance(ms, str):  # torch has no CPU kernel for an op in this dtype
            variant, ms = variant + " unsupported: " + ms, None
        elif LAST_REPS["reps"] is not None:
            variant += " (%d reps)" % LAST_REPS["reps"]
        results.append({"id": c["id"], "ms": ms, "variant": variant})
    json.dump({"torch": torch.__version__, "numpy": np.__version__,
               "torch_threads": torch.get_num_threads(), "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
