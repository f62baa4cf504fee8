"""Attention with a positional scheme.

attention(): the exact reference (posenc/attention.h): float64 accumulation,
any float dtype in and out; slow by design (the executable specification).
flash_attention(): the fused CPU kernel (posenc/flash_attention.h): float32
arithmetic, the position terms computed per tile, O(N) extra memory; schemes
none, absolute, rope, alibi, t5 and shaw.
flash_attention_varlen(): the same kernel on packed variable-length sequences."""
from __future__ import annotations

from typing import Any, Optional, Tuple, Union

from . import _posenc
from ._tensors import empty

SCHEMES = ("none", "absolute", "rope", "alibi", "t5", "shaw", "transformer_xl", "deberta")


def attention(q: Any, k: Any, v: Any, *, scheme: str = "none", layout: str = "bshd",
              mask: str = "causal", sliding_window: Optional[int] = None,
              scale: Optional[float] = None, query_positions: Any = None,
              key_positions: Any = None, return_probs: bool = False, out: Any = None,
              ctx: Any = None, **scheme_args: Any) -> Union[Any, Tuple[Any, Any]]:
    """softmax(scale * q k^T + position terms) v for q [B, Sq, H, D], k/v
    [B, Sk, Hkv, D/Dv] (layout "bshd", or "bhsd"), H a multiple of Hkv.

    scheme and its keyword arguments:
      "none" / "absolute": none (absolute encodings are added to the inputs)
      "rope": theta, rotary_dim, pairing, numerics, inv_freq, attention_factor
      "alibi": slopes, or max_bias / convention (one slope per query head)
      "t5": table [num_buckets, H], max_distance, bidirectional
      "shaw": clip, a_key [2 clip + 1, D], a_value [2 clip + 1, Dv]
      "transformer_xl": r_w_bias [H, D], r_r_bias [H, D], rw [R, H, D]
      "deberta": pos_key / pos_query [2 att_span, H, D], position_buckets,
                 max_relative_positions, pos_att_type
    mask "causal" or "bidirectional", optional sliding_window W. Queries sit
    at Sk - Sq + i by default (KV cache), keys at j. Returns out (like q's
    layout, v's head dim) or (out, probs [B, H, Sq, Sk]) with return_probs.
    """
    if out is None:
        out = empty((q.shape[0], q.shape[1], q.shape[2], v.shape[3]), _dtype(q), like=q)
    probs = None
    if return_probs:
        b, h, sq, sk = _batch_heads_seqs(q, k, layout)
        probs = empty((b, h, sq, sk), _dtype(q), like=q)
    _posenc.attention(q, k, v, out, probs, layout, mask,
                      _window(sliding_window), scale,
                      query_positions, key_positions, scheme, scheme_args, ctx)
    return (out, probs) if return_probs else out


FLASH_SCHEMES = ("none", "absolute", "rope", "alibi", "t5", "shaw")


def flash_attention(q: Any, k: Any, v: Any, *, scheme: str = "none", layout: str = "bshd",
                    mask: str = "causal", sliding_window: Optional[int] = None,
                    scale: Optional[float] = None, query_positions: Any = None,
                    key_positions: Any = None, return_lse: bool = False, out: Any = None,
                    query_tile: int = 64, key_tile: int = 64, rope_keys: str = "rotate",
                    ctx: Any = None, **scheme_args: Any) -> Union[Any, Tuple[Any, Any]]:
    """The fused (flash) attention: same arguments and result as attention()
    for the schemes in FLASH_SCHEMES, computed tile by tile in float32 with
    no [Sq, Sk] array. rope_keys "pre_rotated" takes k as already rotated (a
    RoPE KV cache). With return_lse, also the row log-sum-exp (float32
    [B, H, Sq], -inf for a query that sees no key), the input of the
    backward pass (posenc.torch.attention uses both)."""
    if out is None:
        out = empty((q.shape[0], q.shape[1], q.shape[2], v.shape[3]), _dtype(q), like=q)
    lse = None
    if return_lse:
        b, h, sq, _ = _batch_heads_seqs(q, k, layout)
        lse = empty((b, h, sq), "float32", like=q)
    _posenc.flash_attention(q, k, v, out, lse, layout, mask,
                            _window(sliding_window), scale,
                            query_positions, key_positions, scheme, scheme_args,
                            query_tile, key_tile, rope_keys, ctx)
    return (out, lse) if return_lse else out


def flash_attention_varlen(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, *,
                           scheme: str = "none", mask: str = "causal",
                           sliding_window: Optional[int] = None, scale: Optional[float] = None,
                           out: Any = None, query_tile: int = 64, key_tile: int = 64,
                           ctx: Any = None, **scheme_args: Any) -> Any:
    """The fused attention on packed variable-length sequences (flash-attn's
    flash_attn_varlen_func convention): q [total_q, H, D], k [total_k, Hkv, D],
    v [total_k, Hkv, Dv]; cu_seqlens_q / cu_seqlens_k hold batch + 1 integer
    offsets (first 0, nondecreasing, last total_q / total_k), sequence b owns
    query rows cu_seqlens_q[b]:cu_seqlens_q[b + 1] and key rows
    cu_seqlens_k[b]:cu_seqlens_k[b + 1]. Every sequence is attended on its
    own with the same scheme (FLASH_SCHEMES, keyword arguments as in
    attention()); positions restart at 0 in every sequence, queries
    bottom-right aligned (Sq_b <= Sk_b). Returns out [total_q, H, Dv]."""
    if out is None:
        out = empty((q.shape[0], q.shape[1], v.shape[2]), _dtype(q), like=q)
    _posenc.flash_attention_varlen(q, k, v, out, cu_seqlens_q, cu_seqlens_k, mask,
                                   _window(sliding_window), scale,
                                   scheme, scheme_args, query_tile, key_tile, ctx)
    return out


def _window(sliding_window: Optional[int]) -> int:
    """The binding's window argument: -1 for none. A given window must be
    >= 1 (-1 or 0 would silently mean "no window")."""
    if sliding_window is None:
        return -1
    w = int(sliding_window)
    if w < 1:
        raise ValueError(f"sliding_window: got {w}, expected None or a window W >= 1")
    return w


def _batch_heads_seqs(q: Any, k: Any, layout: str) -> Tuple[int, int, int, int]:
    """(batch, query heads, Sq, Sk) of rank-4 q and k in layout "bshd" or "bhsd"."""
    if layout == "bshd":
        return q.shape[0], q.shape[2], q.shape[1], k.shape[1]
    return q.shape[0], q.shape[1], q.shape[2], k.shape[2]


def _dtype(x: Any) -> str:
    from ._tensors import dtype_name
    return dtype_name(x.dtype)


__all__ = ["attention", "flash_attention", "flash_attention_varlen", "SCHEMES", "FLASH_SCHEMES"]
