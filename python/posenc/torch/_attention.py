"""posenc.torch.attention: the fused kernel (or the float64 reference) as a
differentiable torch function, and the argument sets it keeps prepared.
Documented in posenc.torch (its __init__), which re-exports attention."""
from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

import torch

import posenc as _pe
from posenc._attention import _cached_scheme_info, _flash_call
from ._context import (_positions, _torch_ctx, check_qkv, t5_direction,
                       warn_reference_fallback)

# Schemes the fused flash kernel evaluates, from the registry (posenc.schemes).
FLASH_SCHEMES = _pe.schemes(fused=True)
KERNELS = ("auto", "flash", "reference")
PRECISIONS = ("float32", "bfloat16")  # attention(precision=...)


class _Calls(NamedTuple):
    """The parsed kernel calls of one argument set: the forward's and the
    backward's, with their own tiles (_FORWARD_TILES)."""
    forward: Any
    backward: Any


# The forward's tiles: 64 query rows x 128 key rows, the backward's the
# kernel's default 64 x 64. Each is the faster for its pass: key tiles of
# 128 took the forward 3-5 % less time at B 32 S 128 H 4 D 32, S 512 and
# S 4096 (fewer online-softmax rescales and tile setups), and the backward
# 2-4 % more (docs/PERFORMANCE.md, "The training shape, eighth pass").
_FORWARD_TILES = {"query_tile": 64, "key_tile": 128}


def _calls(**kw: Any) -> _Calls:
    """The forward's and the backward's parsed calls for these keywords."""
    return _Calls(_flash_call(**kw, **_FORWARD_TILES), _flash_call(**kw))


class _Prepared(NamedTuple):
    """What attention() derives from its keywords (and q's dtype) alone."""
    flash: bool
    layout: str
    names: Tuple[str, ...]  # trainable scheme tensors, passed per call
    kw: Dict[str, Any]  # the kernel's keywords, without those tensors and ctx
    calls: Optional[_Calls]  # flash without scheme tensors: the parsed kernel calls, else None
    wide: bool  # with calls: the forward keeps a float32 O for the backward's D (_Attention)


# Prepared keywords per argument set. A model calls attention with the same
# keywords every step; parsing and checking them again each time was a
# visible share of a training step (docs/PERFORMANCE.md, "The training shape, sixth
# pass"). Argument sets of plain values and scheme tensors are kept (no
# position ids; each value's type is part of the key, a tensor's identity and
# version: _plain_key), at most _PREPARED_MAX.
_PREPARED: Dict[Tuple[Any, ...], _Prepared] = {}
_PREPARED_MAX = 64
_PLAIN = (str, int, float, bool, type(None))


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, prepared: _Prepared, kctx: Any, q: torch.Tensor, k: torch.Tensor,
                v: torch.Tensor, *tensors: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.prepared, ctx.kctx = prepared, kctx
        detached = {n: t.detach() for n, t in zip(prepared.names, tensors)} if tensors else {}
        if not prepared.flash:
            ctx.kw = dict(prepared.kw, **detached)
            ctx.save_for_backward(q, k, v, *tensors)
            return _pe.attention(q.detach(), k.detach(), v.detach(), ctx=kctx, **ctx.kw)
        ctx.calls = prepared.calls or _calls(**prepared.kw, **detached)
        # The backward's D_i = dO_i . O_i, from which O:
        #  - precision="bfloat16" with no scheme tensor to differentiate: from
        #    the O returned (q's dtype), as FlashAttention-2 and torch's CPU
        #    flash kernel do. Its rounding enters dS = P (dP - D) as a per-row
        #    offset of ~2^-9 |D|, within the error rule for O, dQ, dK and dV
        #    (tests/test_attention_precision.py), and the forward writes no
        #    float32 O (docs/PERFORMANCE.md, "The training shape, fifth pass").
        #  - otherwise, for 16-bit inputs, from a float32 O kept for the
        #    backward: a learned bias's gradient sums dS over the keys, where
        #    that offset does not cancel (the gradient of a per-head bias,
        #    exactly 0, came out ~10x torch's error), and precision="float32"
        #    keeps D exact. The kernel writes the returned O in q's dtype in
        #    the same pass (out_copy: no .to() pass over the float32 O).
        if prepared.calls is not None:  # kept: no scheme tensor to differentiate
            wide = prepared.wide
        else:
            wide = q.dtype in (torch.bfloat16, torch.float16) and (
                prepared.kw["precision"] != "bfloat16" or any(ctx.needs_input_grad[5:]))
        qs = q.shape
        shape = (qs[0], qs[1], qs[2], v.shape[3])
        out = torch.empty(shape, dtype=torch.float32 if wide else q.dtype)
        copy = torch.empty(shape, dtype=q.dtype) if wide else None
        lse = torch.empty((qs[0], qs[2], qs[1]) if prepared.layout == "bshd" else qs[:3],
                          dtype=torch.float32)
        ctx.calls.forward.forward(q.detach(), k.detach(), v.detach(), out, lse, copy, kctx)
        ctx.save_for_backward(q, k, v, out, lse, *tensors)
        return copy if wide else out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Any, ...]:  # type: ignore[override]
        p = ctx.prepared
        saved = ctx.saved_tensors
        q, k, v = saved[:3]
        # A plain contiguous grad (the usual case) as it is: each torch op
        # here runs with cold caches in a training step.
        if grad.requires_grad:
            grad = grad.detach()
        if not grad.is_contiguous():
            grad = grad.contiguous()
        if p.flash:
            out, lse = saved[3:5]
            tensors = saved[5:]
            contiguous = torch.contiguous_format
            dq = torch.empty_like(q, memory_format=contiguous)
            dk = torch.empty_like(k, memory_format=contiguous)
            dv = torch.empty_like(v, memory_format=contiguous)
            table = {n: torch.empty_like(t, memory_format=contiguous)
                     for i, (n, t) in enumerate(zip(p.names, tensors))
                     if ctx.needs_input_grad[5 + i]} if tensors else {}
            ctx.calls.backward.backward(q.detach(), k.detach(), v.detach(), out, grad, lse, dq,
                                        dk, dv, table, ctx.kctx)
            return (None, None, dq, dk, dv, *[table.get(name) for name in p.names])
        wanted = tuple(n for i, n in enumerate(p.names) if ctx.needs_input_grad[5 + i])
        g = _pe.attention_backward(q.detach(), k.detach(), v.detach(), grad, grads=wanted,
                                   **ctx.kw)
        return (None, None, g["dq"], g["dk"], g["dv"], *[g.get(name) for name in p.names])


def _check_kernel_and_precision(kernel: str, precision: str) -> None:
    """Raises ValueError unless kernel is in KERNELS and precision in PRECISIONS."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel: got {kernel!r}, expected one of {', '.join(KERNELS)}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision: got {precision!r}, expected one of "
                         f"{', '.join(PRECISIONS)}")


def _use_flash(kernel: str, precision: str, scheme: str, info: Dict[str, Any],
               q: torch.Tensor) -> bool:
    """Whether attention runs the fused kernel. Raises ValueError for a
    precision other than float32 on the reference; warns once when "auto"
    falls back to the reference for 32/16-bit inputs."""
    flash = kernel == "flash" or (kernel == "auto" and info["fused"]
                                  and q.dtype != torch.float64)
    if precision != "float32" and not flash:
        why = "kernel='reference'" if kernel == "reference" else \
            f"scheme {scheme!r} with {q.dtype} inputs under kernel='auto'"
        raise ValueError(f"precision: got {precision!r} with the float64 reference ({why}), "
                         "expected 'float32', or the fused kernel (kernel='flash' with a scheme "
                         f"in {', '.join(FLASH_SCHEMES)} and bfloat16 q, k, v)")
    if kernel == "auto" and not flash and q.dtype != torch.float64:
        warn_reference_fallback(scheme, q.dtype)
    return flash


def _drop_rope_keys(kernel: str, q: torch.Tensor, scheme_args: Dict[str, Any]) -> None:
    """Removes rope_keys from scheme_args for the reference kernel, which
    always rotates k itself; raises ValueError for any value but "rotate"."""
    rope_keys = scheme_args.pop("rope_keys", "rotate")
    if rope_keys != "rotate":
        why = "kernel='reference'" if kernel == "reference" else \
            f"{q.dtype} inputs under kernel='auto'"
        raise ValueError(f"rope_keys: got {rope_keys!r} with the reference kernel ({why}), "
                         "expected 'rotate', or kernel='flash' (only the fused kernel takes "
                         "pre-rotated keys)")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, layout: str,
              scheme: str = "none", mask: str = "causal", sliding_window: Optional[int] = None,
              scale: Optional[float] = None, query_positions: Any = None,
              key_positions: Any = None, kernel: str = "auto", precision: str = "float32",
              ctx: Any = None, **scheme_args: Any) -> torch.Tensor:
    """softmax(scale q k^T + position terms) v, differentiable: gradients for
    q, k, v and for every trainable tensor argument of the scheme
    (posenc.scheme_info(scheme): t5 table, shaw a_key / a_value,
    transformer_xl r_w_bias / r_r_bias / rw, deberta pos_key / pos_query, fire
    w1 / b1 / w2 / b2 / c / threshold). Keywords as posenc.attention (no out /
    return_probs), with these rules and defaults:
      layout: required, "bhsd" (q [B, H, Sq, D], k [B, Hkv, Sk, D], v [B,
              Hkv, Sk, Dv]) or "bshd" ([B, S, H, D]); H a multiple of Hkv
              (grouped-query attention without repeating k, v). q, k, v
              share one dtype (no promotion: a mix raises ValueError). The
              output has q's layout and dtype and v's head dim.
      mask: "causal" (default: decoders) or "bidirectional"; sliding_window W.
      scale: None means 1/sqrt(D), D = q's head dim (deberta: its own
              1/sqrt(D (1 + #terms))). T5 uses no scaling: pass scale=1.0
              when porting a T5 checkpoint.
      query_positions / key_positions: integer ids [Sq] / [Sk] or [B, Sq] /
              [B, Sk]; None puts key j at j and query i at Sk - Sq + i (the
              last Sq positions: a KV cache decoding step needs no ids).
      t5: `bidirectional` follows the mask when not given (one-sided buckets
              under "causal", like HF's T5 decoder; two-sided under
              "bidirectional", like its encoder); T5RelativeBias.scheme_args()
              passes a module's table and settings.
      rope: scheme="rope" rotates q and k inside the kernel (theta,
              rotary_dim, pairing, numerics, inv_freq, attention_factor);
              rope_keys="pre_rotated" (fused kernel only) takes k as already
              rotated (a KV cache of rotated keys) and rotates q only. For q
              and k already rotated by RotaryEmbedding use scheme="none".
      kernel: "flash": the fused kernel (float32 arithmetic, O(N) memory, key
              tiles of 128 forward and 64 backward, which recomputes P from
              the saved row log-sum-exp); the schemes in FLASH_SCHEMES;
              "reference": the exact float64 reference (every scheme);
              "auto": flash for those schemes unless q is float64 (kept
              exact, e.g. for gradcheck), else the reference; a 32/16-bit
              call that falls back (transformer_xl, deberta) issues a
              ReferenceFallbackWarning once per scheme and dtype.
      precision: "float32" (default) or "bfloat16", the precision of the
              probabilities P and of dS where they enter the fused kernel's
              matrix products (not the kernel choice): "bfloat16" rounds P
              before P . V and dS before dQ = dS K and dK = dS^T Q, with
              float32 accumulation and float32 softmax statistics, as
              FlashAttention-2 and torch's bfloat16 path do. It needs
              bfloat16 q, k, v and the fused kernel (a scheme in
              FLASH_SCHEMES, kernel "flash" or "auto"). The backward's
              D = rowsum(dO * O) then uses the bfloat16 O returned, as
              FlashAttention-2 does, unless a scheme tensor is
              differentiated: then a float32 O kept from the forward.
      ctx: a posenc.Context; None follows torch.get_num_threads()."""
    key = _plain_key(q, layout, scheme, mask, sliding_window, scale, query_positions,
                     key_positions, kernel, precision, scheme_args)
    prepared = _PREPARED.get(key) if key is not None else None
    if prepared is None:
        prepared = _prepare(q, k, v, layout, scheme, mask, sliding_window, scale,
                            query_positions, key_positions, kernel, precision, scheme_args)
        if key is not None and prepared.calls is not None:
            if len(_PREPARED) >= _PREPARED_MAX:
                _PREPARED.clear()
            _PREPARED[key] = prepared
    elif not _same_tensors(q, k, v):  # the keywords were checked when prepared
        check_qkv(q, k, v, layout)
    tensors = [scheme_args[n] for n in prepared.names]
    kctx = _torch_ctx() if ctx is None else ctx
    if prepared.flash and not (torch.is_grad_enabled() and (
            q.requires_grad or k.requires_grad or v.requires_grad
            or any(t.requires_grad for t in tensors))):
        # Nothing to differentiate (inference, torch.no_grad()): the kernel
        # writes O in q's dtype directly, without the float32 O and the row
        # log-sum-exp the backward would need. The same values: the float32
        # O rounds to q's dtype the way .to() does.
        call = prepared.calls.forward if prepared.calls else _flash_call(
            **prepared.kw, **{n: t.detach() for n, t in zip(prepared.names, tensors)},
            **_FORWARD_TILES)
        out = torch.empty((*q.shape[:3], v.shape[3]), dtype=q.dtype)
        call.forward(q.detach(), k.detach(), v.detach(), out, None, None, kctx)
        return out
    return _Attention.apply(prepared, kctx, q, k, v, *tensors)


def _same_tensors(q: Any, k: Any, v: Any) -> bool:
    """q, k, v are rank-4 tensors of one shape and dtype: what check_qkv
    accepts for any layout once q's dtype is known to be valid (a prepared
    set's key holds it), without its per-layout checks (cold, they were a
    visible share of the step's Python time)."""
    return (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor)
            and isinstance(v, torch.Tensor) and len(q.shape) == 4
            and q.shape == k.shape == v.shape and q.dtype == k.dtype == v.dtype)


def _plain_key(q: Any, layout: Any, scheme: Any, mask: Any, sliding_window: Any, scale: Any,
               query_positions: Any, key_positions: Any, kernel: Any, precision: Any,
               scheme_args: Dict[str, Any]) -> Optional[Tuple[Any, ...]]:
    """attention()'s arguments as a key of _PREPARED, with q's dtype and
    every number's type; None when a value is neither plain (_PLAIN) nor a
    torch tensor, a name is not a str, or position ids are given. A scheme
    tensor (ALiBi's slopes, RoPE's inv_freq) enters as the object and its
    version counter, which torch bumps on every in-place change: the kept set
    holds the tensor (its keywords), so the id stays its own while the set is
    kept, and a changed tensor is a new set. One tuple built at once, the
    scheme's arguments in a loop: this runs on every call, cold (the
    list-and-append form took ~28 µs after torch's step)."""
    if query_positions is not None or key_positions is not None:
        return None
    if not (type(layout) is str and type(scheme) is str and type(mask) is str
            and type(kernel) is str and type(precision) is str
            and isinstance(sliding_window, _PLAIN) and isinstance(scale, _PLAIN)):
        return None
    key = (getattr(q, "dtype", None), layout, scheme, mask, kernel, precision,
           type(sliding_window), sliding_window, type(scale), scale)
    for name, x in scheme_args.items():
        if isinstance(x, torch.Tensor):
            key += (name, torch.Tensor, id(x), x._version)
        elif isinstance(x, _PLAIN):
            key += (name, type(x), x)
        else:
            return None
    return key


def _prepare(q: Any, k: Any, v: Any, layout: Any, scheme: str, mask: str,
             sliding_window: Optional[int], scale: Optional[float], query_positions: Any,
             key_positions: Any, kernel: str, precision: str,
             scheme_args: Dict[str, Any]) -> _Prepared:
    """Checks attention()'s arguments (all of them: q, k, v too) and derives
    what the kernel call needs from the keywords."""
    _check_kernel_and_precision(kernel, precision)
    info = _cached_scheme_info(scheme)  # validates the name
    if kernel == "flash" and not info["fused"]:
        raise ValueError(f"kernel: got 'flash' with scheme {scheme!r}, expected a scheme in "
                         f"{', '.join(FLASH_SCHEMES)} (or kernel='reference')")
    check_qkv(q, k, v, layout, query_positions=query_positions)
    flash = _use_flash(kernel, precision, scheme, info, q)
    scheme_args = t5_direction(scheme, mask, scheme_args)
    if flash:
        scheme_args["precision"] = precision
    else:  # the reference always rotates k itself
        scheme_args = dict(scheme_args)
        _drop_rope_keys(kernel, q, scheme_args)
    trainable = {a["name"] for a in info["args"] if a["trainable"]}
    names = tuple(n for n, val in scheme_args.items() if n in trainable and torch.is_tensor(val))
    kw = dict(scheme=scheme, layout=layout, mask=mask, sliding_window=sliding_window,
              scale=scale, query_positions=_positions(query_positions),
              key_positions=_positions(key_positions),
              **{n: val for n, val in scheme_args.items() if n not in names})
    calls = _calls(**kw) if flash and not names else None
    wide = q.dtype in (torch.bfloat16, torch.float16) and precision != "bfloat16"
    return _Prepared(flash, layout, names, kw, calls, wide)
