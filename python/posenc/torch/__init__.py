"""posenc.torch: autograd Functions and nn.Modules on top of posenc.

Layout convention (one rule for the whole of posenc.torch): q, k, v and
their rotated forms are rank-4 tensors in `layout` "bhsd" ([batch, heads,
seq, head_dim], torch's scaled_dot_product_attention and HF eager) or "bshd"
([batch, seq, heads, head_dim], flash-attn; what Linear(x).view(B, S, H, D)
gives), and `layout` is REQUIRED, never defaulted: by apply_rope, attention,
RotaryEmbedding (+ from_config), FIRE.forward and
posenc.torch.distributed.ring_attention. Both conventions are common, and with
equal head counts a wrong guess runs without an error, heads and positions
swapped; an explicit layout makes that impossible, and shapes that contradict
it (batch, GQA head counts, sequence lengths) raise a ValueError naming the
layout and, when they fit the other one, saying so.

Works with any torch from 1.10 on without a build against it: tensors reach
the C++ kernels through DLPack (CPU tensors; float32, float64, bfloat16,
float16), with the GIL released.

Functions (differentiable):
  apply_rope(q, positions, layout=...)  backward = the transposed rotation
                                        (ApplyRope with direction "inverse")
  learned_lookup(weight, positions)     backward = scatter-add (LearnedTable.Backward)
  t5_bias(table, query_len, key_len)    backward = table gradient (T5BiasTable.AccumulateGrad)
  attention(q, k, v, layout=..., scheme=...)
                                        fused flash attention (float32 inside) for the
                                        fused schemes (the registry's list:
                                        posenc.schemes(fused=True)), 32/16-bit inputs:
                                        forward = FlashAttentionWithLse, backward =
                                        FlashAttentionBackward by recomputation; the exact
                                        reference (float64 inside, AttentionReferenceBackward)
                                        for float64 inputs, transformer_xl and deberta, or
                                        kernel="reference"
Modules: SinusoidalPositionalEncoding, LearnedPositionalEmbedding,
RotaryEmbedding (+ RotaryEmbedding.from_config), ALiBi, T5RelativeBias, FIRE.
The reference is exact and slow: use it for checking and small models. A
32/16-bit call that falls back to it (transformer_xl, deberta under
kernel="auto") issues a ReferenceFallbackWarning (a UserWarning) once per
scheme and dtype.

Threads: every kernel call runs on a posenc.Context of torch.get_num_threads()
threads (one cached Context per count), so posenc follows
torch.set_num_threads; pass ctx= to apply_rope / attention to choose.
"""
from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

import torch
from torch import nn

import posenc as _pe
from posenc._attention import _cached_scheme_info, _flash_call
from ._context import (LAYOUTS, MASKS, ReferenceFallbackWarning, _positions, _torch_ctx, axes,
                            check_qkv, t5_direction, warn_reference_fallback)
from ._rope import RotaryEmbedding, apply_rope

# Defined in private modules, documented here.
for _obj in (apply_rope, RotaryEmbedding, ReferenceFallbackWarning):
    _obj.__module__ = __name__
del _obj

__all__ = [
    "apply_rope", "learned_lookup", "t5_bias", "attention",
    "SinusoidalPositionalEncoding", "LearnedPositionalEmbedding", "RotaryEmbedding", "ALiBi",
    "T5RelativeBias", "FIRE", "ReferenceFallbackWarning", "LAYOUTS",
]


# --------------------------------------------------------------------------- learned

class _LearnedLookup(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, weight: torch.Tensor, positions: torch.Tensor,
                table: Any) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(positions)
        ctx.shape = tuple(weight.shape)
        ctx.table = table
        flat = positions.reshape(-1)
        if table is not None and weight.dtype == torch.float32:
            out = table.lookup(flat, dtype=torch.float32)  # the C++ table shares weight's memory
        else:  # posenc tables store float32; other dtypes gather here (exact)
            _check_rows(flat, weight.shape[0])
            out = weight.detach().index_select(0, flat)
        return out.reshape(*positions.shape, weight.shape[1])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Any, ...]:  # type: ignore[override]
        (positions,) = ctx.saved_tensors
        rows, dim = ctx.shape
        table = ctx.table if ctx.table is not None else _pe.LearnedTable(rows, dim)
        d_table = torch.zeros(rows, dim, dtype=grad.dtype)
        table.backward(grad.detach().reshape(-1, dim).contiguous(), positions.reshape(-1),
                       grad=d_table)
        return d_table, None, None


def _check_rows(flat: torch.Tensor, rows: int) -> None:
    if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= rows):
        bad = flat[(flat < 0) | (flat >= rows)][0]
        raise ValueError(f"positions: got {int(bad)}, expected a position in [0, {rows})")


def learned_lookup(weight: torch.Tensor, positions: Any, table: Any = None) -> torch.Tensor:
    """E[positions] with the gradient scatter-added into weight
    [max_positions, dim]; positions of any shape. `table`: the
    posenc.LearnedTable whose values `weight` shares (float32 fast path)."""
    return _LearnedLookup.apply(weight, _positions(positions), table)


# --------------------------------------------------------------------------- T5

class _T5Bias(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, table: torch.Tensor, query_len: int, key_len: int, max_distance: int,
                bidirectional: bool, query_offset: int) -> torch.Tensor:  # type: ignore[override]
        ctx.args = (int(table.shape[0]), int(table.shape[1]), max_distance, bidirectional,
                    query_offset, table.dtype)
        t = table.detach()
        if t.dtype == torch.float64:  # the C++ table is float32: gather exactly instead
            rel = torch.from_numpy(_pe.relative_matrix(query_len, key_len,
                                                       query_offset=query_offset,
                                                       sign="key_minus_query"))
            buckets = _pe.t5_bucket(rel, num_buckets=t.shape[0], max_distance=max_distance,
                                    bidirectional=bidirectional)
            return t[buckets].permute(2, 0, 1).contiguous()
        return _pe.t5_bias(t.contiguous(), query_len, key_len, max_distance=max_distance,
                           bidirectional=bidirectional, query_offset=query_offset,
                           ctx=_torch_ctx())

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Any, ...]:  # type: ignore[override]
        num_buckets, heads, max_distance, bidirectional, query_offset, dtype = ctx.args
        acc = torch.float64 if dtype == torch.float64 else torch.float32
        d_table = torch.zeros(num_buckets, heads, dtype=acc)
        _pe.t5_bias_grad(grad.detach().contiguous(), num_buckets, max_distance=max_distance,
                         bidirectional=bidirectional, query_offset=query_offset, out=d_table)
        return d_table.to(dtype), None, None, None, None, None


def t5_bias(table: torch.Tensor, query_len: int, key_len: Optional[int] = None, *,
            max_distance: int = 128, bidirectional: bool = True,
            query_offset: int = 0) -> torch.Tensor:
    """HF T5 compute_bias without the leading batch axis: [heads, query_len,
    key_len] from the table [num_buckets, heads], differentiable in the table."""
    key_len = query_len if key_len is None else key_len
    return _T5Bias.apply(table, int(query_len), int(key_len), int(max_distance),
                         bool(bidirectional), int(query_offset))


# --------------------------------------------------------------------------- attention

# Schemes the fused flash kernel evaluates, from the registry (posenc.schemes).
FLASH_SCHEMES = _pe.schemes(fused=True)
KERNELS = ("auto", "flash", "reference")
PRECISIONS = ("float32", "bfloat16")  # attention(precision=...)


class _Prepared(NamedTuple):
    """What attention() derives from its keywords (and q's dtype) alone."""
    flash: bool
    layout: str
    names: Tuple[str, ...]  # trainable scheme tensors, passed per call
    kw: Dict[str, Any]  # the kernel's keywords, without those tensors and ctx
    call: Any  # flash without scheme tensors: the parsed kernel call, else None


# Prepared keywords per argument set. A model calls attention with the same
# keywords every step; parsing and checking them again each time was a
# visible share of a training step (docs/PERFORMANCE.md, "The training shape, sixth
# pass"). Only plain-valued argument sets are kept (no position ids, no
# tensors; each value's type is part of the key), at most _PREPARED_MAX.
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
        ctx.call = prepared.call or _flash_call(**prepared.kw, **detached)
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
        wide = q.dtype in (torch.bfloat16, torch.float16) and (
            prepared.kw["precision"] != "bfloat16" or any(ctx.needs_input_grad[5:]))
        shape = (*q.shape[:3], v.shape[3])
        out = torch.empty(shape, dtype=torch.float32 if wide else q.dtype)
        copy = torch.empty(shape, dtype=q.dtype) if wide else None
        b, h, sq, _ = axes(q, prepared.layout)
        lse = torch.empty((b, h, sq), dtype=torch.float32)
        ctx.call.forward(q.detach(), k.detach(), v.detach(), out, lse, copy, kctx)
        ctx.save_for_backward(q, k, v, out, lse, *tensors)
        return copy if wide else out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Any, ...]:  # type: ignore[override]
        p = ctx.prepared
        saved = ctx.saved_tensors
        q, k, v = saved[:3]
        grad = grad.detach().contiguous()
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
            ctx.call.backward(q.detach(), k.detach(), v.detach(), out, grad, lse, dq, dk, dv,
                              table, ctx.kctx)
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
      kernel: "flash": the fused kernel (float32 arithmetic, O(N) memory; the
              backward recomputes the probabilities from the saved row
              log-sum-exp); the schemes in FLASH_SCHEMES;
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
        if key is not None and prepared.call is not None:
            if len(_PREPARED) >= _PREPARED_MAX:
                _PREPARED.clear()
            _PREPARED[key] = prepared
    else:  # the keywords were checked when prepared; the tensors are new
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
        call = prepared.call or _flash_call(**prepared.kw,
                                            **{n: t.detach() for n, t in
                                               zip(prepared.names, tensors)})
        out = torch.empty((*q.shape[:3], v.shape[3]), dtype=q.dtype)
        call.forward(q.detach(), k.detach(), v.detach(), out, None, None, kctx)
        return out
    return _Attention.apply(prepared, kctx, q, k, v, *tensors)


def _plain_key(q: Any, layout: Any, scheme: Any, mask: Any, sliding_window: Any, scale: Any,
               query_positions: Any, key_positions: Any, kernel: Any, precision: Any,
               scheme_args: Dict[str, Any]) -> Optional[Tuple[Any, ...]]:
    """attention()'s arguments as a key of _PREPARED, with q's dtype and
    every value's type; None when one is not plain (_PLAIN), e.g. position
    ids or a tensor. Loops, not generators: this runs on every call, cold."""
    if query_positions is not None or key_positions is not None:
        return None
    key = [getattr(q, "dtype", None)]
    for x in (layout, scheme, mask, sliding_window, scale, kernel, precision,
              *scheme_args.values()):
        if not isinstance(x, _PLAIN):
            return None
        key.append(type(x))
        key.append(x)
    key.extend(scheme_args)
    return tuple(key)


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
    call = _flash_call(**kw) if flash and not names else None
    return _Prepared(flash, layout, names, kw, call)


# --------------------------------------------------------------------------- modules

class SinusoidalPositionalEncoding(nn.Module):
    """x + PE(positions) with the fixed table of Vaswani et al. (no parameters).

    forward(x [batch, seq, dim], positions=None, offset=0): positions None
    means offset .. offset + seq - 1; else ids [seq] or [batch, seq].
    """

    def __init__(self, dim: int, *, base: float = 10000.0, layout: str = "interleaved") -> None:
        super().__init__()
        self.dim, self.base, self.layout = int(dim), float(base), layout
        _pe.sinusoidal_inv_freq(self.dim, base=self.base, layout=layout)  # validates now

    def forward(self, x: torch.Tensor, positions: Any = None, offset: int = 0) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"x.shape: got {tuple(x.shape)}, expected [batch, seq, {self.dim}]")
        pos = _positions(positions)
        if pos is None:
            pe = _pe.sinusoidal_table(x.shape[1], self.dim, base=self.base, layout=self.layout,
                                      offset=offset, dtype=x.dtype)
            return x + pe.to(x.device)
        flat = pos.reshape(-1)
        pe = _pe.sinusoidal_table(None, self.dim, base=self.base, layout=self.layout,
                                  positions=flat, dtype=x.dtype)
        return x + pe.reshape(*pos.shape, self.dim).to(x.device)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, base={self.base}, layout={self.layout!r}"


class LearnedPositionalEmbedding(nn.Module):
    """A learned table (BERT/GPT-2 wpe): forward(positions) -> [*positions.shape, dim].

    `weight` (float32 [max_positions, dim]) shares memory with a
    posenc.LearnedTable (`self.table`), so optimisers update the table the C++
    lookup reads. Initialised N(0, stddev^2) from `seed`.
    """

    def __init__(self, max_positions: int, dim: int, *, stddev: float = 0.02,
                 seed: int = 0) -> None:
        super().__init__()
        self.table = _pe.LearnedTable.random_normal(max_positions, dim, stddev=stddev, seed=seed)
        self.weight = nn.Parameter(torch.from_numpy(self.table.values))

    def forward(self, positions: Any) -> torch.Tensor:
        shares = (self.weight.dtype == torch.float32 and
                  self.weight.data_ptr() == self.table.values.ctypes.data)
        return learned_lookup(self.weight, positions, self.table if shares else None)

    def extra_repr(self) -> str:
        return f"max_positions={self.table.max_positions}, dim={self.table.dim}"


class ALiBi(nn.Module):
    """Adds the ALiBi bias to attention scores [batch, heads, Sq, Sk] (no
    parameters; queries bottom-right aligned). form "causal" masks the
    future with -inf; "symmetric" is the encoder form -slope * |i - j|."""

    def __init__(self, num_heads: int, *, max_bias: float = 8.0, convention: str = "reference",
                 form: str = "causal") -> None:
        super().__init__()
        self.num_heads, self.max_bias, self.convention, self.form = \
            int(num_heads), float(max_bias), convention, form
        self.register_buffer("slopes", torch.from_numpy(
            _pe.alibi_slopes(self.num_heads, max_bias=self.max_bias, convention=convention)),
            persistent=False)

    def bias(self, query_len: int, key_len: Optional[int] = None,
             dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """[heads, query_len, key_len]."""
        return _pe.alibi_bias(self.num_heads, query_len, key_len, form=self.form,
                              max_bias=self.max_bias, convention=self.convention, dtype=dtype)

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        if scores.dim() != 4 or scores.shape[1] != self.num_heads:
            raise ValueError(f"scores.shape: got {tuple(scores.shape)}, expected "
                             f"[batch, {self.num_heads}, query_len, key_len]")
        return scores + self.bias(scores.shape[2], scores.shape[3], scores.dtype).to(scores.device)


class T5RelativeBias(nn.Module):
    """T5's learned relative bias: weight [num_buckets, heads] (HF's
    relative_attention_bias.weight). forward(query_len, key_len,
    query_offset, mask="causal") -> [1, heads, query_len, key_len] like HF
    compute_bias, differentiable; scheme_args() gives the keywords of
    posenc.torch.attention(q, k, v, scheme="t5", ...), so the fused kernel
    uses this module's table and settings.

    bidirectional: None (default) follows the attention mask: one-sided
    buckets under mask="causal" (HF's decoder, is_decoder=True), two-sided
    under "bidirectional" (HF's encoder); True / False fix it. T5 itself
    uses no score scaling: pass scale=1.0 to attention when porting it.
    """

    def __init__(self, num_heads: int, *, num_buckets: int = 32, max_distance: int = 128,
                 bidirectional: Optional[bool] = None, stddev: float = 1.0,
                 seed: int = 0) -> None:
        super().__init__()
        self.num_buckets, self.max_distance = int(num_buckets), int(max_distance)
        self.bidirectional = None if bidirectional is None else bool(bidirectional)
        _pe.t5_bucket([0], num_buckets=self.num_buckets, max_distance=self.max_distance,
                      bidirectional=self.bidirectional is not False)  # validates them now
        gen = torch.Generator().manual_seed(seed)
        self.weight = nn.Parameter(torch.randn(self.num_buckets, int(num_heads), generator=gen)
                                   * stddev)

    def direction(self, mask: str) -> bool:
        """The bucket direction used under `mask` (True: two-sided)."""
        if mask not in MASKS:
            raise ValueError(f"mask: got {mask!r}, expected one of {', '.join(MASKS)}")
        return mask == "bidirectional" if self.bidirectional is None else self.bidirectional

    def scheme_args(self) -> Dict[str, Any]:
        """Keywords of posenc.torch.attention(q, k, v, scheme="t5", ...): the
        table, max_distance, and bidirectional when the module fixes it
        (else attention derives it from its mask, as forward does)."""
        args: Dict[str, Any] = dict(table=self.weight, max_distance=self.max_distance)
        if self.bidirectional is not None:
            args["bidirectional"] = self.bidirectional
        return args

    def forward(self, query_len: int, key_len: Optional[int] = None, query_offset: int = 0,
                *, mask: str = "causal") -> torch.Tensor:
        return t5_bias(self.weight, query_len, key_len, max_distance=self.max_distance,
                       bidirectional=self.direction(mask),
                       query_offset=query_offset).unsqueeze(0)

    def extra_repr(self) -> str:
        direction = "follows the mask" if self.bidirectional is None else self.bidirectional
        return (f"num_buckets={self.num_buckets}, heads={self.weight.shape[1]}, "
                f"max_distance={self.max_distance}, bidirectional={direction}")


class FIRE(nn.Module):
    """FIRE, Functional Interpolation for Relative Positions (Li et al. 2024,
    ICLR; posenc/fire.h): a learned bias b_h(p, r) = f(psi(p - r) /
    (psi(max(p, |L|)) + eps)) with psi(d) = log(|c d| + 1) and f = Linear(1,
    hidden) -> ReLU -> Linear(hidden, heads), for causal attention.

    The paper's module and initialisation: torch.nn.Linear defaults for f,
    c = init_c (0.1), and the threshold L learned as a multiplier of
    init_threshold (512). forward(q, k, v, layout=..., **attention keywords)
    runs posenc.torch.attention(..., scheme="fire") — the fused kernel with the
    bias computed per tile and gradients for every parameter; scheme_args()
    gives the keywords for calling attention yourself; bias(query_len,
    key_len) evaluates the same bias in plain torch (the paper's code), e.g.
    to check or plot it.
    """

    def __init__(self, num_heads: int, hidden: int = 32, *, init_c: float = 0.1,
                 init_threshold: float = 512.0, eps: float = 1e-6) -> None:
        super().__init__()
        self.num_heads, self.hidden, self.eps = int(num_heads), int(hidden), float(eps)
        self.mlp_in = nn.Linear(1, self.hidden)
        self.mlp_out = nn.Linear(self.hidden, self.num_heads)
        self.c = nn.Parameter(torch.tensor(float(init_c)))
        self.threshold_multiplier = nn.Parameter(torch.tensor(1.0))
        self.register_buffer("init_threshold", torch.tensor(float(init_threshold)),
                             persistent=False)

    def threshold(self) -> torch.Tensor:
        return self.threshold_multiplier * self.init_threshold

    def scheme_args(self) -> Dict[str, Any]:
        """Keywords of posenc.torch.attention(q, k, v, scheme="fire", ...)."""
        return dict(w1=self.mlp_in.weight.reshape(-1), b1=self.mlp_in.bias,
                    w2=self.mlp_out.weight, b2=self.mlp_out.bias, c=self.c,
                    threshold=self.threshold(), eps=self.eps)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, layout: str,
                **kwargs: Any) -> torch.Tensor:
        return attention(q, k, v, layout=layout, scheme="fire", **kwargs, **self.scheme_args())

    def bias(self, query_len: int, key_len: Optional[int] = None,
             query_offset: int = 0) -> torch.Tensor:
        """[heads, query_len, key_len]: queries at query_offset + i, keys at j
        (every pair evaluated; attention masks r > p)."""
        key_len = query_len if key_len is None else key_len
        p = torch.arange(query_len, dtype=torch.float64) + query_offset
        r = torch.arange(key_len, dtype=torch.float64)
        c = self.c.to(torch.float64)
        rel = torch.log(torch.abs(c * (p[:, None] - r[None, :])) + 1)
        norm = torch.maximum(p, torch.abs(self.threshold().to(torch.float64)))
        norm = torch.log(torch.abs(c * norm) + 1) + self.eps
        x = (rel / norm[:, None]).unsqueeze(-1).to(self.mlp_in.weight.dtype)
        return self.mlp_out(torch.relu(self.mlp_in(x))).permute(2, 0, 1)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, hidden={self.hidden}, eps={self.eps}"


# --------------------------------------------------------------------------- distributed

# posenc.torch.distributed (context parallelism, ring attention): a submodule of this package
# that imports only the private modules beside it, so that no two modules import each other.
from . import distributed  # noqa: E402
