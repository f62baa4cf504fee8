"""The Python <-> C++ boundary: zero-copy numpy (buffer protocol) and torch
(DLPack) views, dtypes, strides, capsules, error mapping, the GIL."""
import threading
import time

import numpy as np
import pytest
import torch
import torch.utils.dlpack

import posenc


def test_numpy_output_is_written_in_place_without_copy():
    out = np.full((10, 16), np.nan, dtype=np.float32)
    r = posenc.sinusoidal_table(10, 16, out=out)
    assert r is out and np.isfinite(out).all()
    assert out[3, 0] == np.float32(np.sin(3.0))


def test_torch_output_through_dlpack_shares_memory():
    out = torch.full((10, 16), float("nan"))
    ptr = out.data_ptr()
    r = posenc.sinusoidal_table(10, 16, out=out)
    assert r is out and out.data_ptr() == ptr and torch.isfinite(out).all()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_every_dtype(dtype):
    t = posenc.sinusoidal_table(4, 512, dtype=dtype)
    ref = posenc.sinusoidal_table(4, 512, dtype="float64")
    if dtype == "bfloat16":  # numpy has no bfloat16: a torch tensor comes back
        assert torch.is_tensor(t) and t.dtype == torch.bfloat16
        got = t.double().numpy()
    else:
        got = t.astype(np.float64)
    tol = {"float32": 1e-6, "float64": 1e-15, "float16": 2 ** -11, "bfloat16": 2 ** -8}[dtype]
    assert np.abs(got - ref).max() <= tol


def test_strided_views_numpy_and_torch():
    base = np.zeros((10, 32), dtype=np.float32)
    posenc.sinusoidal_table(10, 16, out=base[:, ::2])  # column stride 2
    assert np.array_equal(base[:, ::2], posenc.sinusoidal_table(10, 16))
    assert not base[:, 1::2].any()
    q = torch.randn(1, 6, 2, 8)  # bshd storage, viewed as bhsd
    pos = torch.arange(6)
    a = posenc.apply_rope(q.transpose(1, 2), pos, layout="bhsd")
    b = posenc.apply_rope(q, pos, layout="bshd").transpose(1, 2)
    assert torch.equal(a, b)


def test_raw_dlpack_capsule_is_consumed_and_renamed():
    t = torch.zeros(3, 4)
    cap = torch.utils.dlpack.to_dlpack(t)
    posenc.sinusoidal_table(3, 4, out=cap)
    assert t[1, 0] == pytest.approx(np.sin(1.0))
    assert "used_dltensor" in repr(cap)
    with pytest.raises(ValueError, match="used_dltensor"):
        posenc.sinusoidal_table(3, 4, out=cap)


def test_non_float_and_bad_objects_are_value_errors():
    with pytest.raises(ValueError, match=r"out.dtype: got int64"):
        posenc.sinusoidal_table(3, 4, out=np.zeros((3, 4), dtype=np.int64))
    with pytest.raises(ValueError, match=r"out.dtype: got int32"):
        posenc.sinusoidal_table(3, 4, out=torch.zeros(3, 4, dtype=torch.int32))
    with pytest.raises(ValueError, match="out: got list"):
        posenc.sinusoidal_table(3, 4, out=[[0.0] * 4] * 3)
    ro = np.zeros((3, 4), dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        posenc.sinusoidal_table(3, 4, out=ro)
    with pytest.raises(ValueError, match=r"out.shape\[0\]"):
        posenc.sinusoidal_table(3, 4, out=np.zeros((5, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="ctx"):
        posenc.sinusoidal_table(3, 4, ctx="threads=2")


def test_requires_grad_tensor_cannot_be_written_in_place():
    q = torch.zeros(1, 1, 2, 4, requires_grad=True)
    with pytest.raises(ValueError, match="requires grad"):
        posenc.apply_rope(q, inplace=True)
    out = posenc.apply_rope(q, torch.arange(2))  # reading it is fine (no autograd)
    assert not out.requires_grad


def test_meta_device_tensor_rejected():
    with pytest.raises((ValueError, RuntimeError)):
        posenc.sinusoidal_table(3, 4, out=torch.empty(3, 4, device="meta"))


def test_context_threads_and_backends_agree():
    x = np.random.default_rng(0).standard_normal((2, 4, 33, 64)).astype(np.float32)
    pos = np.arange(33) * 7
    ref = posenc.apply_rope(x, pos, ctx=posenc.Context(1, "scalar"))
    for ctx in [posenc.Context(4, "auto"), posenc.Context(0, "simd"), None]:
        assert np.abs(posenc.apply_rope(x, pos, ctx=ctx) - ref).max() <= 2e-6
    assert posenc.Context(3).num_threads == 3
    assert posenc.Context(backend="scalar").backend == "scalar"
    with pytest.raises(ValueError, match="num_threads"):
        posenc.Context(-1)
    with pytest.raises(ValueError, match="backend"):
        posenc.Context(1, "gpu")
    assert isinstance(posenc.simd_target(), str) and posenc.simd_target()


def test_context_workers():
    """workers="openmp": the same values as the pool; refused with a clear
    error where the build has no OpenMP; any other name is a ValueError."""
    assert posenc.Context(2).workers == "pool"
    with pytest.raises(ValueError, match="workers: got omp, expected one of pool, openmp"):
        posenc.Context(2, workers="omp")
    if not posenc.openmp_available():
        with pytest.raises(ValueError, match="workers: got openmp.*no OpenMP"):
            posenc.Context(2, workers="openmp")
        return
    ctx = posenc.Context(3, "auto", "openmp")
    assert ctx.workers == "openmp" and ctx.num_threads == 3
    assert repr(ctx) == "posenc.Context(threads=3, backend='auto', workers='openmp')"
    x = np.random.default_rng(1).standard_normal((2, 4, 33, 64)).astype(np.float32)
    pos = np.arange(33) * 7
    assert np.array_equal(posenc.apply_rope(x, pos, ctx=ctx),
                          posenc.apply_rope(x, pos, ctx=posenc.Context(3)))


def test_pool_spin_from_the_environment(monkeypatch):
    """POSENC_POOL_SPIN_US (context.h): how long a pool's threads poll between
    calls; 0 (sleep at once) and the default give the same values, a bad
    value is a ValueError naming the variable and the allowed range."""
    x = np.random.default_rng(2).standard_normal((2, 4, 33, 64)).astype(np.float32)
    pos = np.arange(33) * 3
    ref = posenc.apply_rope(x, pos, ctx=posenc.Context(3))
    monkeypatch.setenv("POSENC_POOL_SPIN_US", "0")
    assert np.array_equal(posenc.apply_rope(x, pos, ctx=posenc.Context(3)), ref)
    monkeypatch.setenv("POSENC_POOL_SPIN_US", "2.5")
    with pytest.raises(ValueError, match=r"POSENC_POOL_SPIN_US: got 2\.5, expected a whole number "
                                         r"of microseconds in \[0, 100000\]"):
        posenc.Context(2)


def test_gil_is_released_inside_kernels():
    out = np.empty((300_000, 128), dtype=np.float32)
    ticks = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0)

    worker = threading.Thread(target=spin)
    worker.start()
    time.sleep(0.05)
    t0 = time.perf_counter()
    posenc.sinusoidal_table(300_000, 128, out=out)
    t1 = time.perf_counter()
    stop.set()
    worker.join()
    during = [t for t in ticks if t0 < t < t1]
    # With the GIL held the other thread could not run at all inside the call.
    assert t1 - t0 > 0.02 and len(during) > 10
