"""Attention with a positional scheme.

attention(): the exact reference (posenc/attention.h): float64 accumulation,
any float dtype in and out; slow by design (the executable specification).
flash_attention(): the fused CPU kernel (posenc/flash_attention.h): float32
arithmetic, the position terms computed per tile, O(N) extra memory; schemes
none, absolute, rope, alibi, t5 and shaw."""
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
        b, h = q.shape[0], (q.shape[2] if layout == "bshd" else q.shape[1])
        sq = q.shape[1] if layout == "bshd" else q.shape[2]
        sk = k.shape[1] if layout == "bshd" else k.shape[2]
        probs = empty((b, h, sq, sk), _dtype(q), like=q)
    _posenc.attention(q, k, v, out, probs, layout, mask,
                      -1 if sliding_window is None else int(sliding_window), scale,
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
        b, h = q.shape[0], (q.shape[2] if layout == "bshd" else q.shape[1])
        sq = q.shape[1] if layout == "bshd" else q.shape[2]
        lse = empty((b, h, sq), "float32", like=q)
    _posenc.flash_attention(q, k, v, out, lse, layout, mask,
                            -1 if sliding_window is None else int(sliding_window), scale,
                            query_positions, key_positions, scheme, scheme_args,
                            query_tile, key_tile, rope_keys, ctx)
    return (out, lse) if return_lse else out


def _dtype(x: Any) -> str:
    from ._tensors import dtype_name
    return dtype_name(x.dtype)


__all__ = ["attention", "flash_attention", "SCHEMES", "FLASH_SCHEMES"]
