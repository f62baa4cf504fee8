"""Python threads calling the module at once (include/posenc/context.h,
"Thread safety"): RoPE, ALiBi / T5 biases, reference and flash attention
from a ThreadPoolExecutor, sharing one posenc.Context and with the default
context, give results identical to serial calls; and the GIL is released
while a kernel runs (another Python thread makes progress meanwhile)."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import posenc


def _inputs(seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, 40, 4, 32)).astype(np.float32)
    k = rng.standard_normal((1, 40, 2, 32)).astype(np.float32)
    v = rng.standard_normal((1, 40, 2, 32)).astype(np.float32)
    table = rng.standard_normal((32, 4)).astype(np.float32)
    return q, k, v, table


def _jobs(ctx):
    q, k, v, table = _inputs(3)
    return [
        ("rope", lambda: posenc.apply_rope(q, layout="bshd", theta=500000.0, offset=5, ctx=ctx)),
        ("rope_hf_strided", lambda: posenc.apply_rope(q[:, ::2], layout="bshd", numerics="hf",
                                                      ctx=ctx)),
        ("alibi", lambda: posenc.alibi_bias(8, 40, 48, form="symmetric", ctx=ctx)),
        ("t5", lambda: posenc.t5_bias(table, 40, 44, query_offset=4, ctx=ctx)),
        ("attention_alibi", lambda: posenc.attention(q, k, v, scheme="alibi", ctx=ctx)),
        ("flash_rope", lambda: posenc.flash_attention(q, k, v, scheme="rope", query_tile=8,
                                                      key_tile=8, ctx=ctx)),
        ("flash_t5_lse", lambda: posenc.flash_attention(q, k, v, scheme="t5", table=table,
                                                        return_lse=True, ctx=ctx)),
    ]


def _as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("shared", [True, False], ids=["one_context", "default_context"])
def test_concurrent_calls_match_serial(shared):
    ctx = posenc.Context(2) if shared else None
    jobs = _jobs(ctx)
    serial = {name: _as_tuple(fn()) for name, fn in jobs}
    rounds = 3
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [(name, pool.submit(fn)) for _ in range(rounds) for name, fn in jobs]
        for name, fut in futures:
            got = _as_tuple(fut.result(timeout=120))
            assert len(got) == len(serial[name])
            for a, b in zip(got, serial[name]):
                np.testing.assert_array_equal(a, b, err_msg=name)


def test_gil_is_released_inside_kernels():
    """While a worker thread is inside a long flash attention call, the main
    thread keeps running Python: its largest pause inside the call is a small
    part of the call. Were the GIL held, the main thread would stand still
    for the whole call. Judged by the main thread's own time stamps against
    the worker's call interval, not by a fixed sleep, so a fast machine (the
    kernel done in a few milliseconds) cannot make it pass or fail by luck."""
    rng = np.random.default_rng(0)
    ctx = posenc.Context(1)  # the worker takes one core; the main thread the other
    calls = []  # (start, end) of each kernel call, perf_counter seconds
    done = threading.Event()
    seq = 2048

    def work():
        nonlocal seq
        try:
            # Grow the problem until one call lasts >= 0.15 s (at most 3 doublings).
            for _ in range(4):
                q = rng.standard_normal((1, seq, 4, 64)).astype(np.float32)
                t0 = time.perf_counter()
                posenc.flash_attention(q, q, q, scheme="rope", mask="bidirectional", ctx=ctx)
                calls.append((t0, time.perf_counter()))
                if calls[-1][1] - calls[-1][0] >= 0.15:
                    break
                seq *= 2
        finally:
            done.set()

    t = threading.Thread(target=work)
    stamps = []
    last = time.perf_counter()
    t.start()
    while not done.is_set():
        now = time.perf_counter()
        if now - last >= 0.0005:
            stamps.append(now)
            last = now
    t.join(timeout=120)
    t0, t1 = max(calls, key=lambda c: c[1] - c[0])
    duration = t1 - t0
    assert duration >= 0.02, f"the longest kernel call took only {duration * 1e3:.1f} ms"
    inside = [t0] + [s for s in stamps if t0 < s < t1] + [t1]
    max_gap = max(b - a for a, b in zip(inside, inside[1:]))
    assert max_gap < 0.5 * duration, (
        f"the main thread stood still for {max_gap * 1e3:.1f} ms of a "
        f"{duration * 1e3:.1f} ms kernel call (S = {seq}): the kernel holds the GIL")
