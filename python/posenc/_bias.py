"""Attention-side position biases: ALiBi (posenc/alibi.h), T5 buckets and
bias (posenc/t5.h), relative position matrices (posenc/relative.h), DeBERTa
log buckets (posenc/deberta.h)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _posenc
from ._tensors import empty, is_torch


def _like(result: np.ndarray, source: Any) -> Any:
    """Integer results come back as torch tensors for torch inputs."""
    if is_torch(source):
        import torch
        return torch.from_numpy(result).to(source.device)
    return result


def alibi_slopes(num_heads: int, *, max_bias: float = 8.0,
                 convention: str = "reference") -> np.ndarray:
    """Per-head ALiBi slopes (Press et al. 2021), float64 [num_heads].

    convention "reference": the paper's get_slopes (exact, for any head
    count: the geometric series of the nearest power of two, then every other
    slope of the next); "bloom_float32": HF Bloom's float32 recipe (within 1
    ulp of build_alibi_tensor's slopes).
    """
    return _posenc.alibi_slopes(num_heads, max_bias, convention)


def alibi_bias(num_heads: int, query_len: int, key_len: Optional[int] = None, *,
               form: str = "causal", max_bias: float = 8.0, convention: str = "reference",
               slopes: Any = None, dtype: Any = "float32", out: Any = None,
               ctx: Any = None) -> Any:
    """The ALiBi bias [num_heads, query_len, key_len] added to attention scores.

    Queries are bottom-right aligned (query i sits at key_len - query_len + i,
    the KV-cache convention). form "causal": -slope * (i' - j) for j <= i',
    -inf above the diagonal; "symmetric": -slope * |i' - j|. slopes: explicit
    per-head slopes (else from max_bias/convention).
    """
    key_len = query_len if key_len is None else key_len
    if out is None:
        out = empty((num_heads, query_len, key_len), dtype)
    _posenc.alibi_bias(out, num_heads, max_bias, convention, slopes, query_len, key_len, form,
                       ctx)
    return out


def bloom_alibi_tensor(attention_mask: Any, num_heads: int, *, max_bias: float = 8.0,
                       convention: str = "bloom_float32", slopes: Any = None,
                       dtype: Any = "float32", out: Any = None) -> Any:
    """HF Bloom's build_alibi_tensor: [batch*num_heads, 1, seq] from a 0/1
    padding mask [batch, seq]; bit for bit with the default convention."""
    shape = tuple(int(s) for s in attention_mask.shape) if hasattr(attention_mask, "shape") \
        else np.asarray(attention_mask).shape
    if out is None:
        if len(shape) != 2:
            raise ValueError(f"attention_mask.ndim: got {len(shape)}, expected 2 ([batch, seq])")
        out = empty((shape[0] * num_heads, 1, shape[1]), dtype,
                    like=attention_mask if is_torch(attention_mask) else None)
    _posenc.bloom_alibi_tensor(out, attention_mask, num_heads, max_bias, convention, slopes)
    return out


def t5_bucket(relative_position: Any, *, num_buckets: int = 32, max_distance: int = 128,
              bidirectional: bool = True) -> Any:
    """HF T5Attention._relative_position_bucket for relative = key - query
    (int64 array of the input's shape; a torch tensor for a torch input)."""
    direction = "bidirectional" if bidirectional else "causal"
    return _like(_posenc.t5_bucket(relative_position, num_buckets, max_distance, direction),
                 relative_position)


def t5_bias(table: Any, query_len: int, key_len: Optional[int] = None, *,
            max_distance: int = 128, bidirectional: bool = True, query_offset: int = 0,
            query_positions: Any = None, dtype: Any = None, out: Any = None,
            ctx: Any = None) -> Any:
    """HF T5 compute_bias: out[h, i, j] = table[bucket(j - q_i), h] with the
    learned table [num_buckets, heads]; queries at query_offset + i (the past
    length) or at query_positions, keys at 0..key_len-1. [heads, query_len, key_len].
    ctx: a posenc.Context (threads, backend); None runs the default context."""
    key_len = query_len if key_len is None else key_len
    num_buckets, heads = int(table.shape[0]), int(table.shape[1])
    if out is None:
        out = empty((heads, query_len, key_len), dtype or _dtype_of(table),
                    like=table if is_torch(table) else None)
    _posenc.t5_bias(out, table, num_buckets, max_distance,
                    "bidirectional" if bidirectional else "causal", query_positions,
                    query_offset, query_len, key_len, ctx)
    return out


def t5_bias_grad(d_bias: Any, num_buckets: int, *, max_distance: int = 128,
                 bidirectional: bool = True, query_offset: int = 0,
                 query_positions: Any = None, out: Any = None) -> Any:
    """Backward of t5_bias: the table gradient [num_buckets, heads],
    d_table[bucket(j - q_i), h] = sum of d_bias[h, i, j] over the pairs of
    each bucket, from d_bias [heads, query_len, key_len] (queries as in
    t5_bias). `out` (float32 or float64 [num_buckets, heads]) is overwritten."""
    heads = int(d_bias.shape[0])
    if out is None:
        out = empty((num_buckets, heads), _dtype_of(d_bias) if _dtype_of(d_bias) == "float64"
                    else "float32", like=d_bias if is_torch(d_bias) else None)
    _posenc.t5_bias_grad(out, d_bias, num_buckets, max_distance,
                         "bidirectional" if bidirectional else "causal", heads, query_positions,
                         query_offset, "overwrite")
    return out


def _dtype_of(x: Any) -> str:
    from ._tensors import dtype_name
    return dtype_name(x.dtype)


def relative_matrix(query_len: int, key_len: Optional[int] = None, *, query_offset: int = 0,
                    sign: str = "query_minus_key") -> np.ndarray:
    """Relative positions [query_len, key_len], int64: i' - j ("query_minus_key",
    Shaw / Transformer-XL / DeBERTa) or j - i' ("key_minus_query", T5), with
    query i at query_offset + i."""
    key_len = query_len if key_len is None else key_len
    return _posenc.relative_matrix(query_len, key_len, query_offset, sign)


def deberta_bucket(relative_position: Any, *, bucket_size: int = 256,
                   max_position: int = 512) -> Any:
    """HF DeBERTa-v2 make_log_bucket_position (int64, same shape as the input)."""
    return _like(_posenc.deberta_bucket(relative_position, bucket_size, max_position),
                 relative_position)


def deberta_relative_position(query_size: int, key_size: Optional[int] = None, *,
                              bucket_size: int = -1, max_position: int = -1) -> np.ndarray:
    """HF DeBERTa-v2 build_relative_position [query_size, key_size] (bucketed
    when bucket_size and max_position are > 0)."""
    key_size = query_size if key_size is None else key_size
    return _posenc.deberta_relative_position(query_size, key_size, bucket_size, max_position)
