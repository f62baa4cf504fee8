"""Rotary position embedding (posenc/rope.h; scaling: posenc/rope_scaling.h)."""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from . import _posenc
from ._tensors import empty, empty_like


def rope_default_inv_freq(rotary_dim: int, *, theta: float = 10000.0,
                          numerics: str = "accurate") -> Tuple[np.ndarray, float]:
    """(inv_freq, attention_factor) of plain RoPE: theta^(-2j/rotary_dim), j <
    rotary_dim/2, as float64 (numerics="hf": the float32 values torch computes)."""
    return _posenc.rope_default_inv_freq(rotary_dim, theta, numerics)


def _frequencies(config: Any, inv_freq: Any, attention_factor: float,
                 seq_len: Optional[int], numerics: str,
                 pairing: Optional[str]) -> Tuple[Any, float, str]:
    """(inv_freq, attention_factor, pairing): from a HF config (dict or path;
    its pairing unless one is given) or as given (default pairing half_split)."""
    if config is not None:
        if inv_freq is not None:
            raise ValueError("config: got both config and inv_freq, expected one of them")
        from ._config import rope_config
        info = rope_config(config, seq_len, numerics=numerics)
        return info["inv_freq"], info["attention_factor"], pairing or info["pairing"]
    return inv_freq, attention_factor, pairing or "half_split"


def rope_cos_sin(positions: Any, head_dim: int, *, rotary_dim: int = 0,
                 theta: float = 10000.0, pairing: Optional[str] = None,
                 numerics: str = "accurate", config: Any = None, inv_freq: Any = None,
                 attention_factor: float = 1.0, offset: int = 0, dtype: Any = "float32",
                 ctx: Any = None) -> Tuple[Any, Any]:
    """cos and sin tables [count, rotary_dim] in Hugging Face's layout.

    positions: integer ids (1-D array, tensor or list) or an int n for the
    positions offset .. offset + n - 1. Columns hold cat(freqs, freqs) for
    pairing "half_split" and each frequency twice in adjacent columns for
    "interleaved"; values include the attention factor. Frequencies: the
    default theta table, `inv_freq` (+ attention_factor), or `config` (a HF
    config dict or config.json path; needs posenc.rope_inv_freq).
    """
    seq_len = None
    if isinstance(positions, (int, np.integer)):
        count, ids = int(positions), None
    else:
        ids, count = positions, len(positions)
        if offset:
            raise ValueError(f"offset: got {offset}, expected 0 when explicit positions are given")
    if config is not None:  # HF's seq_len for dynamic/longrope: max(position_ids) + 1
        seq_len = (offset + count if ids is None
                   else _max_position_plus_one(ids, None, "bhsd", 0))
    freqs, factor, pairing = _frequencies(config, inv_freq, attention_factor, seq_len, numerics,
                                          pairing)
    rd = rotary_dim if rotary_dim else (2 * len(freqs) if freqs is not None else head_dim)
    like = positions if ids is not None else None
    cos = empty((count, rd), dtype, like=like if _is_tensor_like(like) else None)
    sin = empty((count, rd), dtype, like=like if _is_tensor_like(like) else None)
    _posenc.rope_cos_sin(cos, sin, ids, offset, head_dim, rd, theta, pairing, numerics, freqs,
                         factor, ctx)
    return cos, sin


def _is_tensor_like(x: Any) -> bool:
    from ._tensors import is_torch
    return x is not None and is_torch(x)


def apply_rope(q: Any, positions: Any = None, *, layout: str = "bhsd", inplace: bool = False,
               rotary_dim: int = 0, pairing: Optional[str] = None, theta: float = 10000.0,
               config: Any = None, inv_freq: Any = None, attention_factor: float = 1.0,
               numerics: str = "accurate", direction: str = "forward", offset: int = 0,
               out: Any = None, ctx: Any = None) -> Any:
    """Rotates q (rank 4, numpy array or torch tensor; float32/float64/bfloat16/float16).

    layout: "bhsd" ([batch, heads, seq, head_dim]) or "bshd". positions:
    None (token s at offset + s), integer ids [seq] or [batch, seq]. Dims >=
    rotary_dim (0 = head_dim) pass unchanged. pairing: "half_split" (NeoX /
    Llama rotate_half) or "interleaved" (GPT-J rotate_every_two). numerics:
    "accurate" (float64 angles) or "hf" (Hugging Face's float32 recipe).
    direction "inverse" undoes the rotation. inplace=True rotates q itself
    and returns it; else returns a new array/tensor (or fills `out`).
    Not differentiable: use posenc.torch.apply_rope for autograd.
    """
    freqs, factor, pairing = _frequencies(
        config, inv_freq, attention_factor,
        _max_position_plus_one(positions, q, layout, offset) if config is not None else None,
        numerics, pairing)
    if inplace:
        if out is not None:
            raise ValueError("out: got an array with inplace=True, expected None")
        target = None
    else:
        target = empty_like(q) if out is None else out
    _posenc.apply_rope(q, target, layout, positions, offset, rotary_dim, theta, pairing,
                       numerics, freqs, factor, direction, ctx)
    return q if inplace else target


def apply_rope_qk(q: Any, k: Any, positions: Any = None, *, layout: str = "bhsd",
                  rotary_dim: int = 0, pairing: Optional[str] = None, theta: float = 10000.0,
                  config: Any = None, inv_freq: Any = None, attention_factor: float = 1.0,
                  numerics: str = "accurate", direction: str = "forward", offset: int = 0,
                  ctx: Any = None) -> Tuple[Any, Any]:
    """Rotates q and k in place in one pass (same batch, seq and positions;
    head counts may differ, as in GQA). Returns (q, k)."""
    freqs, factor, pairing = _frequencies(
        config, inv_freq, attention_factor,
        _max_position_plus_one(positions, q, layout, offset) if config is not None else None,
        numerics, pairing)
    _posenc.apply_rope_qk(q, k, layout, positions, offset, rotary_dim, theta, pairing, numerics,
                          freqs, factor, direction, ctx)
    return q, k


def _max_position_plus_one(positions: Any, q: Any, layout: str, offset: int) -> Optional[int]:
    """HF's seq_len for dynamic/longrope updates: max(position_ids) + 1."""
    if positions is None:
        seq_axis = 2 if layout == "bhsd" else 1
        return int(offset) + int(q.shape[seq_axis]) if len(q.shape) == 4 else None
    try:
        host = positions.cpu() if hasattr(positions, "cpu") else positions
        return int(np.asarray(host).max()) + 1
    except (TypeError, ValueError):
        return None  # the library reports bad positions with a proper message


def apply_mrope(x: Any, positions: Any, *, mrope_section: Any = (), kind: str = "mrope",
                layout: str = "bhsd", inplace: bool = False, rotary_dim: int = 0,
                theta: float = 10000.0, inv_freq: Any = None, attention_factor: float = 1.0,
                pairing: str = "half_split", numerics: str = "accurate",
                direction: str = "forward", out: Any = None, ctx: Any = None) -> Any:
    """Multi-stream RoPE (posenc/rope_multimodal.h).

    kind "mrope": Qwen2-VL M-RoPE, pairs split into [t, h, w] sections
    (mrope_section, pair counts summing to rotary_dim/2); "mrope_interleaved":
    Qwen3-VL; "axial2d": 2-D RoPE of image patches (row, column streams).
    positions: integers [streams, seq] (3 streams for M-RoPE: temporal,
    height, width ids; 2 for axial2d: row, column), or [streams, batch*seq].
    """
    target = None if inplace else (empty_like(x) if out is None else out)
    if inplace and out is not None:
        raise ValueError("out: got an array with inplace=True, expected None")
    _posenc.apply_multistream_rope(x, target, layout, positions, kind, list(mrope_section),
                                   rotary_dim, theta, inv_freq, attention_factor, pairing,
                                   numerics, direction, ctx)
    return x if inplace else target
