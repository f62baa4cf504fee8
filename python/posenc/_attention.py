"""Attention with a positional scheme.

attention(): the exact reference (posenc/attention.h): float64 accumulation,
any float dtype in and out; slow by design (the executable specification).
flash_attention(): the fused CPU kernel (posenc/flash_attention.h): float32
arithmetic, the position terms computed per tile, O(N) extra memory; the
schemes whose declaration says "fused".
flash_attention_varlen(): the same kernel on packed variable-length sequences.
attention_backward() / flash_attention_backward(): their gradients, for q, k,
v and the scheme's trainable tensor arguments (returned in a dict).
schemes() / scheme_info(name): the registry of positional schemes
(posenc/scheme.h): names, terms, kernels, masks and every argument with its
type, shape and whether it is trainable. Scheme arguments are keywords of
every function here, by the names the declaration gives.
"""
from __future__ import annotations

import functools
from typing import Any, Dict, Iterable, Optional, Tuple, Union

from . import _posenc
from ._tensors import empty, empty_like


def scheme_info(name: str) -> Dict[str, Any]:
    """The declaration of one positional scheme: {"name", "title", "paper",
    "formula", "terms" (rotation/bias/logit/value), "fused" (the fused
    kernels evaluate it), "causal_only", "args": [{"name", "type" (tensor,
    number, integer, text, flag), "shape", "trainable", "required",
    "default", "doc"}]}."""
    return _posenc.scheme_info(name)


# The registry is fixed at build time: internal callers on the per-call path
# (posenc.torch.attention, trainable_args) share one copy per scheme and never
# modify it; scheme_info() gives every caller its own.
_cached_scheme_info = functools.lru_cache(maxsize=None)(_posenc.scheme_info)


def schemes(*, fused: bool = False) -> Tuple[str, ...]:
    """Names of the registered schemes (with fused=True: those the fused
    kernels evaluate), in registry order."""
    return tuple(i["name"] for i in _posenc.schemes() if i["fused"] or not fused)


def trainable_args(scheme: str) -> Tuple[str, ...]:
    """Names of the scheme's trainable tensor arguments."""
    return tuple(a["name"] for a in _cached_scheme_info(scheme)["args"] if a["trainable"])


SCHEMES = schemes()


def attention(q: Any, k: Any, v: Any, *, scheme: str = "none", layout: str = "bshd",
              mask: str = "causal", sliding_window: Optional[int] = None,
              scale: Optional[float] = None, query_positions: Any = None,
              key_positions: Any = None, return_probs: bool = False, out: Any = None,
              ctx: Any = None, **scheme_args: Any) -> Union[Any, Tuple[Any, Any]]:
    """softmax(scale * q k^T + position terms) v for q [B, Sq, H, D], k/v
    [B, Sk, Hkv, D/Dv] (layout "bshd", or "bhsd"), H a multiple of Hkv.

    scheme and its keyword arguments (scheme_info(name) lists them all):
      "none" / "absolute": none (absolute encodings are added to the inputs)
      "rope": theta, rotary_dim, pairing, numerics, inv_freq, attention_factor
      "alibi": slopes, or max_bias / convention (one slope per query head)
      "t5": table [num_buckets, H], max_distance, bidirectional
      "shaw": clip, a_key [2 clip + 1, D], a_value [2 clip + 1, Dv]
      "transformer_xl": r_w_bias [H, D], r_r_bias [H, D], rw [R, H, D]
      "deberta": pos_key / pos_query [2 att_span, H, D], position_buckets,
                 max_relative_positions, pos_att_type
      "fire": w1 [hidden], b1 [hidden], w2 [H, hidden], b2 [H], c, threshold
              (0-d), eps; causal only
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


FLASH_SCHEMES = schemes(fused=True)


def flash_attention(q: Any, k: Any, v: Any, *, scheme: str = "none", layout: str = "bshd",
                    mask: str = "causal", sliding_window: Optional[int] = None,
                    scale: Optional[float] = None, query_positions: Any = None,
                    key_positions: Any = None, return_lse: bool = False, out: Any = None,
                    query_tile: int = 64, key_tile: int = 64, rope_keys: str = "rotate",
                    precision: str = "float32", ctx: Any = None, out_copy: Any = None,
                    **scheme_args: Any) -> Union[Any, Tuple[Any, Any]]:
    """The fused (flash) attention: same arguments and result as attention()
    for the schemes in FLASH_SCHEMES, computed tile by tile in float32 with
    no [Sq, Sk] array. rope_keys "pre_rotated" takes k as already rotated (a
    RoPE KV cache). With return_lse, also the row log-sum-exp (float32
    [B, H, Sq], -inf for a query that sees no key), the input of the
    backward pass (posenc.torch.attention uses both).

    precision: "float32" (default) or "bfloat16": the precision of the
    probabilities P where they enter P . V (and of dS in the backward),
    FlashAttention-2's and torch's bfloat16 path: P rounded to bfloat16,
    float32 accumulation, softmax statistics in float32. "bfloat16" needs
    bfloat16 q, k, v (and dout); RoPE-rotated q and k are rounded to
    bfloat16 too.

    out_copy (with return_lse only): a second output array of out's shape in
    any float dtype, written from the same float32 values in the same pass,
    rounded as converting out would round it: e.g. out float32 for the
    backward's D = dO . O and out_copy bfloat16 for the caller."""
    if out is None:
        out = empty((q.shape[0], q.shape[1], q.shape[2], v.shape[3]), _dtype(q), like=q)
    lse = None
    if return_lse:
        b, h, sq, _ = _batch_heads_seqs(q, k, layout)
        lse = empty((b, h, sq), "float32", like=q)
    _posenc.flash_attention(q, k, v, out, lse, layout, mask,
                            _window(sliding_window), scale,
                            query_positions, key_positions, scheme, scheme_args,
                            query_tile, key_tile, rope_keys, precision, ctx, out_copy)
    return (out, lse) if return_lse else out


def _flash_call(*, scheme: str = "none", layout: str = "bshd", mask: str = "causal",
                sliding_window: Optional[int] = None, scale: Optional[float] = None,
                query_positions: Any = None, key_positions: Any = None, query_tile: int = 64,
                key_tile: int = 64, rope_keys: str = "rotate", precision: str = "float32",
                **scheme_args: Any) -> Any:
    """flash_attention's keywords parsed once: a _posenc.FlashAttentionCall,
    whose forward(q, k, v, out, lse, out_copy, ctx) and backward(q, k, v,
    out, dout, lse, dq, dk, dv, scheme_grads, ctx) run the fused kernel on
    caller-made arrays with these arguments (posenc.torch.attention keeps
    one per argument set). Bad keywords raise here, as flash_attention would."""
    return _posenc.FlashAttentionCall(layout, mask, _window(sliding_window), scale,
                                      query_positions, key_positions, scheme, scheme_args,
                                      query_tile, key_tile, rope_keys, precision)


def flash_attention_varlen(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, *,
                           scheme: str = "none", mask: str = "causal",
                           sliding_window: Optional[int] = None, scale: Optional[float] = None,
                           out: Any = None, query_tile: int = 64, key_tile: int = 64,
                           precision: str = "float32", ctx: Any = None,
                           **scheme_args: Any) -> Any:
    """The fused attention on packed variable-length sequences (flash-attn's
    flash_attn_varlen_func convention): q [total_q, H, D], k [total_k, Hkv, D],
    v [total_k, Hkv, Dv]; cu_seqlens_q / cu_seqlens_k hold batch + 1 integer
    offsets (first 0, nondecreasing, last total_q / total_k), sequence b owns
    query rows cu_seqlens_q[b]:cu_seqlens_q[b + 1] and key rows
    cu_seqlens_k[b]:cu_seqlens_k[b + 1]. Every sequence is attended on its
    own with the same scheme (FLASH_SCHEMES, keyword arguments as in
    attention()); positions restart at 0 in every sequence, queries
    bottom-right aligned (Sq_b <= Sk_b); precision as in flash_attention.
    Returns out [total_q, H, Dv]."""
    if out is None:
        out = empty((q.shape[0], q.shape[1], v.shape[2]), _dtype(q), like=q)
    _posenc.flash_attention_varlen(q, k, v, out, cu_seqlens_q, cu_seqlens_k, mask,
                                   _window(sliding_window), scale,
                                   scheme, scheme_args, query_tile, key_tile, precision, ctx)
    return out


def flash_attention_decode(q: Any, k: Any, v: Any, *, block_table: Any = None,
                           seq_lens: Any = None, scheme: str = "none", layout: str = "bshd",
                           mask: str = "causal", sliding_window: Optional[int] = None,
                           scale: Optional[float] = None, query_positions: Any = None,
                           key_positions: Any = None, return_lse: bool = False, out: Any = None,
                           rope_keys: str = "rotate", precision: str = "float32",
                           ctx: Any = None, **scheme_args: Any) -> Union[Any, Tuple[Any, Any]]:
    """Decode: 1 to 16 new query tokens per sequence against a KV cache, on
    the split-K kernel (flash-decoding; the results do not depend on the
    thread count). q [B, Sq, H, D] in `layout`; arguments as flash_attention.

    Dense cache (block_table and seq_lens None): k [B, Sk, Hkv, D] and
    v [B, Sk, Hkv, Dv] in `layout`, e.g. a view of the first Sk rows of a
    preallocated cache; queries at Sk - Sq + i unless query_positions says
    otherwise.

    Paged cache (vLLM's block table): k and v are the page pools
    [num_pages, page_size, Hkv, D|Dv] (any strides), block_table [B, max_pages]
    the page ids of each sequence in order and seq_lens [B] its length
    (>= Sq); token j of sequence b is at slot j % page_size of page
    block_table[b, j // page_size]; queries at seq_lens[b] - Sq + i.

    With RoPE, pass q unrotated; rope_keys "pre_rotated" takes the cached
    keys as rotated when they were written. precision "bfloat16" rounds P
    to bfloat16 before P . V (bfloat16 q and cache only). Returns out [B, Sq, H, Dv]
    (and the row log-sum-exp, float32 [B, H, Sq], with return_lse)."""
    if out is None:
        b, sq, h = (q.shape[0], q.shape[1], q.shape[2]) if layout == "bshd" \
            else (q.shape[0], q.shape[2], q.shape[1])
        dv = v.shape[3]
        shape = (b, sq, h, dv) if layout == "bshd" else (b, h, sq, dv)
        out = empty(shape, _dtype(q), like=q)
    lse = None
    if return_lse:
        b, h, sq = (q.shape[0], q.shape[2], q.shape[1]) if layout == "bshd" \
            else (q.shape[0], q.shape[1], q.shape[2])
        lse = empty((b, h, sq), "float32", like=q)
    _posenc.flash_attention_decode(q, k, v, out, lse, block_table, seq_lens, layout, mask,
                                   _window(sliding_window), scale, query_positions,
                                   key_positions, scheme, scheme_args, rope_keys, precision, ctx)
    return (out, lse) if return_lse else out


def _grads_of(scheme: str, scheme_args: Dict[str, Any],
              grads: Optional[Iterable[str]]) -> Dict[str, Any]:
    """Gradient buffers for the requested trainable tensor arguments (default:
    every trainable argument given), shaped like the argument."""
    names = trainable_args(scheme)
    wanted = [n for n in names if scheme_args.get(n) is not None] if grads is None \
        else list(grads)
    for n in wanted:
        if n not in names:
            raise ValueError(f"grads: got {n!r}, expected trainable tensor arguments of scheme "
                             f"{scheme!r}: {', '.join(names) or '(none)'}")
        if scheme_args.get(n) is None:
            raise ValueError(f"grads: got {n!r}, expected an argument given to this call")
    return {n: empty_like(scheme_args[n]) for n in wanted}


def attention_backward(q: Any, k: Any, v: Any, dout: Any, *, scheme: str = "none",
                       layout: str = "bshd", mask: str = "causal",
                       sliding_window: Optional[int] = None, scale: Optional[float] = None,
                       query_positions: Any = None, key_positions: Any = None,
                       grads: Optional[Iterable[str]] = None,
                       **scheme_args: Any) -> Dict[str, Any]:
    """Gradients of attention() (the exact float64 reference) given dout:
    {"dq", "dk", "dv"} plus one entry per trainable scheme argument in
    `grads` (default: every trainable tensor argument given), each shaped
    like its input."""
    out = {"dq": empty_like(q), "dk": empty_like(k), "dv": empty_like(v)}
    table = _grads_of(scheme, scheme_args, grads)
    _posenc.attention_backward(q, k, v, dout, out["dq"], out["dk"], out["dv"], table, layout,
                               mask, _window(sliding_window),
                               scale, query_positions, key_positions, scheme, scheme_args)
    out.update(table)
    return out


def flash_attention_backward(q: Any, k: Any, v: Any, out: Any, dout: Any, lse: Any = None, *,
                             scheme: str = "none", layout: str = "bshd", mask: str = "causal",
                             sliding_window: Optional[int] = None,
                             scale: Optional[float] = None, query_positions: Any = None,
                             key_positions: Any = None, grads: Optional[Iterable[str]] = None,
                             query_tile: int = 64, key_tile: int = 64,
                             rope_keys: str = "rotate", precision: str = "float32",
                             ctx: Any = None, **scheme_args: Any) -> Dict[str, Any]:
    """Gradients of flash_attention() by recomputation (FlashAttention-2's
    backward): out and lse as the forward returned them (lse None recomputes
    it). Returns {"dq", "dk", "dv"} plus the trainable scheme arguments in
    `grads` (default: every trainable tensor argument given). For a ring or
    other split of the keys, pass the final out and lse of the whole row:
    the result is then this block's share of the gradients. precision: as
    given to the forward ("bfloat16" rounds P and dS to bfloat16 before
    P^T dO, dS K and dS^T Q; bfloat16 q, k, v, dout only)."""
    result = {"dq": empty_like(q), "dk": empty_like(k), "dv": empty_like(v)}
    table = _grads_of(scheme, scheme_args, grads)
    _posenc.flash_attention_backward(
        q, k, v, out, dout, lse, result["dq"], result["dk"], result["dv"], table, layout, mask,
        _window(sliding_window), scale, query_positions,
        key_positions, scheme, scheme_args, query_tile, key_tile, rope_keys, precision, ctx)
    result.update(table)
    return result


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


__all__ = ["attention", "attention_backward", "flash_attention", "flash_attention_backward",
           "flash_attention_decode",
           "flash_attention_varlen", "scheme_info", "schemes", "trainable_args", "SCHEMES",
           "FLASH_SCHEMES"]
