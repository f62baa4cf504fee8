"""Sinusoidal and learned absolute encodings through the module: golden
fixtures, properties, the learned table's memory sharing and autograd."""
import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt
from conftest import golden


def test_sinusoidal_golden_tables():
    cases = golden("sinusoidal.json")["cases"]
    assert len(cases) == 6
    for c in cases:
        want = np.array(c["table"])
        if c["kind"] == "seed_formula_float64":
            got = posenc.sinusoidal_table(c["max_len"], c["d"], dtype="float64")
            assert np.abs(got - want).max() <= 1e-12
        elif c["kind"] == "distilbert_create_sinusoidal_embeddings":
            got = posenc.sinusoidal_table(c["max_len"], c["d"])
            assert np.array_equal(got, want.astype(np.float32))
        else:
            got = posenc.sinusoidal_table(c["max_len"], c["d"], layout="split")
            assert np.abs(got - want).max() <= 1e-6


def test_sinusoidal_positions_offset_and_add():
    full = posenc.sinusoidal_table(20, 12, dtype="float64")
    assert np.array_equal(posenc.sinusoidal_table(5, 12, offset=15, dtype="float64"), full[15:])
    at = posenc.sinusoidal_table(None, 12, positions=[19, 0, 7], dtype="float64")
    assert np.array_equal(at, full[[19, 0, 7]])
    x = np.zeros((2, 3, 12))
    posenc.add_sinusoidal(x, np.array([[0, 1, 2], [10, 11, 12]]))
    assert np.allclose(x[1], full[10:13]) and np.allclose(x[0], full[:3])
    inv = posenc.sinusoidal_inv_freq(12)
    assert np.allclose(inv, 10000.0 ** (-np.arange(0, 12, 2) / 12), rtol=1e-15)
    with pytest.raises(ValueError, match="dim"):
        posenc.sinusoidal_table(3, 0)
    with pytest.raises(ValueError, match="layout"):
        posenc.sinusoidal_table(3, 4, layout="sincos")
    with pytest.raises(ValueError, match="base"):
        posenc.sinusoidal_table(3, 4, base=1.0)
    with pytest.raises(ValueError, match="dtype"):
        posenc.sinusoidal_table(3, 4, dtype="int8")


def test_sinusoidal_module():
    m = pt.SinusoidalPositionalEncoding(16)
    x = torch.randn(2, 10, 16, requires_grad=True)
    y = m(x)
    assert torch.allclose(y - x, torch.from_numpy(posenc.sinusoidal_table(10, 16)), atol=1e-6)
    y.sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))
    y2 = m(x, positions=torch.tensor([[5] * 10, list(range(10))]))
    assert torch.allclose(y2[0, 3] - x[0, 3], torch.from_numpy(posenc.sinusoidal_table(6, 16)[5]),
                          atol=1e-6)
    with pytest.raises(ValueError, match="x.shape"):
        m(torch.zeros(2, 10, 8))


def test_learned_table_values_share_memory_and_lookup():
    t = posenc.LearnedTable.random_normal(10, 768, stddev=0.02, seed=7)
    v = t.values
    assert v.shape == (10, 768) and v.dtype == np.float32
    assert 0.017 < v.std() < 0.023 and abs(v.mean()) < 0.003
    again = posenc.LearnedTable.random_normal(10, 768, stddev=0.02, seed=7)
    assert np.array_equal(again.values, v)
    v[4, :] = 1.5  # writes go to the C++ table
    got = t.lookup([4, 0, 4])
    assert np.array_equal(got[0], np.full(768, 1.5, np.float32)) and np.array_equal(got[2], got[0])
    x = np.zeros((1, 2, 768), np.float32)
    t.add_to(x, [[4, 0]])
    assert np.array_equal(x[0, 1], v[0])
    g = t.backward(np.ones((3, 768), np.float32), [4, 0, 4])
    assert g[4, 0] == 2 and g[0, 0] == 1 and g[1].sum() == 0
    with pytest.raises(ValueError, match="10"):
        t.lookup([10])


def test_learned_table_npy_round_trip_and_errors(tmp_path):
    t = posenc.LearnedTable.random_normal(6, 5, seed=1)
    path = tmp_path / "wpe.npy"
    t.save_npy(path)
    assert np.array_equal(np.load(path), t.values)
    assert np.array_equal(posenc.LearnedTable.load_npy(path).values, t.values)
    np.save(tmp_path / "bad.npy", np.zeros((2, 3, 4), np.float32))
    with pytest.raises(posenc.IoError, match="bad.npy"):
        posenc.LearnedTable.load_npy(tmp_path / "bad.npy")
    with pytest.raises(OSError):
        posenc.LearnedTable.load_npy(tmp_path / "missing.npy")
    r = t.resized(12, alignment="corners")
    assert r.max_positions == 12 and np.allclose(r.values[0], t.values[0])
    assert np.allclose(r.values[-1], t.values[-1])
    with pytest.raises(ValueError, match="max_positions"):
        posenc.LearnedTable(0, 4)


def test_learned_module_trains_the_shared_table():
    m = pt.LearnedPositionalEmbedding(16, 8, seed=3)
    before = m.table.values.copy()
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    pos = torch.tensor([[1, 2, 2], [3, 1, 0]])
    m(pos).sum().backward()
    assert m.weight.grad[2, 0] == 2 and m.weight.grad[1, 0] == 2 and m.weight.grad[5].sum() == 0
    opt.step()
    assert np.allclose(m.table.values[2], before[2] - 1.0)  # the C++ table moved
    assert np.array_equal(m(torch.tensor([2])).detach().numpy()[0], m.table.values[2])


def test_gradcheck_learned_lookup_float64():
    w = torch.randn(12, 5, dtype=torch.float64, requires_grad=True)
    pos = torch.tensor([[0, 11, 3], [3, 3, 7]])
    assert torch.autograd.gradcheck(lambda w_: pt.learned_lookup(w_, pos), (w,))
    with pytest.raises(ValueError, match="positions"):
        pt.learned_lookup(w, torch.tensor([12]))
