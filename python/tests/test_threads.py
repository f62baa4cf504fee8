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
    """While one thread runs a long flash attention, the main thread wakes
    from a sleep and runs Python: impossible if the kernel held the GIL."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 2048, 4, 64)).astype(np.float32)
    kernel_done = threading.Event()
    started = threading.Event()

    def work():
        started.set()
        for _ in range(3):
            posenc.flash_attention(q, q, q, scheme="rope", mask="bidirectional")
        kernel_done.set()

    t = threading.Thread(target=work)
    t.start()
    started.wait()
    time.sleep(0.05)  # the worker is inside the kernel by now
    spins = 0
    deadline = time.monotonic() + 0.05
    while time.monotonic() < deadline:
        spins += 1
    still_running = not kernel_done.is_set()
    t.join()
    assert spins > 0
    assert still_running, "the main thread could not run Python until the kernels finished"
