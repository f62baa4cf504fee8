"""Absolute encodings: fixed sinusoidal tables (posenc/sinusoidal.h) and
learned tables (posenc/learned.h)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _posenc
from ._tensors import empty


def sinusoidal_inv_freq(dim: int, *, base: float = 10000.0,
                        layout: str = "interleaved") -> np.ndarray:
    """Frequencies (radians per position) of the column pairs, float64 [ceil(dim/2)]."""
    return _posenc.sinusoidal_inv_freq(dim, base, layout)


def sinusoidal_table(num_positions: Optional[int], dim: int, *, base: float = 10000.0,
                     layout: str = "interleaved", offset: int = 0, positions: Any = None,
                     dtype: Any = "float32", out: Any = None, ctx: Any = None) -> Any:
    """The fixed sinusoidal table of Vaswani et al. 2017, section 3.5.

    Row r is PE(offset + r) for r < num_positions, or PE(positions[r]) when
    `positions` (1-D integers) is given (then num_positions may be None).
    layout: "interleaved" (sin, cos, sin, ...; DistilBERT), "split" (all sines
    then all cosines; GPT-J, Transformer-XL) or "split_t2t" (tensor2tensor).
    Computed in float64 and rounded once to `dtype` (float32 within 1e-6 of
    float64 truth for positions < 2^24). Returns a numpy array, or a torch
    tensor for a torch dtype / bfloat16; with `out` (a [rows, dim] array or
    tensor) fills and returns it.
    """
    if out is None:
        rows = num_positions
        if positions is not None:
            rows = len(positions) if num_positions is None else num_positions
        if rows is None:
            raise ValueError("num_positions: got None, expected a count >= 1 (or positions)")
        out = empty((rows, dim), dtype)
    rows = -1 if num_positions is None else int(num_positions)
    _posenc.sinusoidal_table(out, rows, dim, base, layout, offset, positions, ctx)
    return out


def add_sinusoidal(x: Any, positions: Any = None, *, offset: int = 0, base: float = 10000.0,
                   layout: str = "interleaved", ctx: Any = None) -> Any:
    """x[b, s, :] += PE(pos(b, s)) in place (x: [batch, seq, dim]); returns x.

    positions: None (token s at offset + s) or integer ids [seq] / [batch, seq].
    """
    _posenc.add_sinusoidal(x, int(x.shape[-1]), base, layout, offset, positions, ctx)
    return x


class LearnedTable:
    """A learned absolute position table E [max_positions, dim] (BERT, GPT-2).

    `values` is a writable float32 numpy view of the C++ storage (no copy):
    torch.from_numpy(table.values) shares it. Construct zero-filled, or with
    LearnedTable.random_normal / from_array / load_npy.
    """

    def __init__(self, max_positions: int, dim: int, *, _native: Any = None) -> None:
        self._t = _native if _native is not None else _posenc.LearnedTable(max_positions, dim)

    @classmethod
    def random_normal(cls, max_positions: int, dim: int, *, stddev: float = 0.02,
                      seed: int = 0) -> "LearnedTable":
        """N(0, stddev^2) from a seeded std::mt19937_64 (HF initializer_range 0.02)."""
        return cls(0, 0, _native=_posenc.LearnedTable.random_normal(max_positions, dim, stddev,
                                                                     seed))

    @classmethod
    def from_array(cls, table: Any) -> "LearnedTable":
        """A copy of a [max_positions, dim] float array or tensor."""
        return cls(0, 0, _native=_posenc.LearnedTable.from_array(table))

    @classmethod
    def load_npy(cls, path: str) -> "LearnedTable":
        """Loads a rank-2 float32/float64/float16 .npy file (posenc.IoError if bad)."""
        return cls(0, 0, _native=_posenc.LearnedTable.load_npy(str(path)))

    def save_npy(self, path: str) -> None:
        self._t.save_npy(str(path))

    @property
    def max_positions(self) -> int:
        return self._t.max_positions

    @property
    def dim(self) -> int:
        return self._t.dim

    @property
    def values(self) -> np.ndarray:
        return self._t.values

    def lookup(self, positions: Any = None, *, count: Optional[int] = None, offset: int = 0,
               dtype: Any = "float32", out: Any = None, ctx: Any = None) -> Any:
        """out[r, :] = E[positions[r]] (or E[offset + r], r < count); [count, dim]."""
        if out is None:
            rows = count if positions is None else len(positions)
            if rows is None:
                raise ValueError("count: got None, expected a count >= 1 when positions is None")
            out = empty((rows, self.dim), dtype,
                        like=positions if positions is not None and _is_torch(positions) else None)
        self._t.lookup(out, positions, offset, ctx)
        return out

    def add_to(self, x: Any, positions: Any = None, *, offset: int = 0, ctx: Any = None) -> Any:
        """x[b, s, :] += E[pos(b, s)] in place (x: [batch, seq, dim]); returns x."""
        self._t.add_to(x, positions, offset, ctx)
        return x

    def backward(self, d_out: Any, positions: Any = None, *, grad: Any = None, offset: int = 0,
                 ctx: Any = None) -> Any:
        """Scatter-add of d_out ([count, dim] or [batch, seq, dim]) into grad
        [max_positions, dim] (zeros when None); repeated positions accumulate."""
        if grad is None:
            grad = np.zeros((self.max_positions, self.dim), dtype=np.float32)
        self._t.backward(d_out, positions, offset, grad, ctx)
        return grad

    def sgd_step(self, grad: Any, learning_rate: float) -> None:
        """E -= learning_rate * grad."""
        self._t.sgd_step(grad, learning_rate)

    def resized(self, new_max_positions: int, *, alignment: str = "half_pixel") -> "LearnedTable":
        """A table of new_max_positions rows, linearly interpolated along positions
        (alignment "half_pixel" = torch align_corners=False, "corners" = True)."""
        return LearnedTable(0, 0, _native=self._t.resized(new_max_positions, alignment))

    def __repr__(self) -> str:
        return f"posenc.LearnedTable(max_positions={self.max_positions}, dim={self.dim})"


def _is_torch(x: Any) -> bool:
    from ._tensors import is_torch
    return is_torch(x)
