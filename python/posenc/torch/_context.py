"""Private helpers of posenc.torch (and posenc.torch.distributed): the
kernel Context, position ids, the layout convention, the checks that run
before a kernel sees a tensor, the T5 bucket direction and the warning for
the slow reference path. Not public API: import from posenc.torch."""
from __future__ import annotations

import warnings
from typing import Any, Dict, Optional, Set, Tuple

import torch

import posenc as _pe

_CONTEXTS: Dict[int, Any] = {}


def _torch_workers() -> str:
    """"openmp" when torch's intra-op threads are an OpenMP team and posenc
    has OpenMP, else "pool". On OpenMP, posenc's tasks run on torch's own
    threads (the process has one libgomp); a separate pool would share the
    cores with them while they spin after each torch op (GOMP_SPINCOUNT;
    docs/PERFORMANCE.md, "Sharing torch's OpenMP threads")."""
    aten_openmp = "ATen parallel backend: OpenMP" in torch.__config__.parallel_info()
    return "openmp" if aten_openmp and _pe.openmp_available() else "pool"


WORKERS = _torch_workers()


def _torch_ctx() -> Any:
    """The posenc.Context matching torch.get_num_threads() (cached per
    count), on WORKERS."""
    threads = max(1, int(torch.get_num_threads()))
    ctx = _CONTEXTS.get(threads)
    if ctx is None:
        ctx = _CONTEXTS.setdefault(threads, _pe.Context(threads, workers=WORKERS))
    return ctx


def _positions(positions: Any) -> Optional[torch.Tensor]:
    """Integer position ids as a CPU int64 tensor (None stays None)."""
    if positions is None:
        return None
    if not torch.is_tensor(positions):
        positions = torch.as_tensor(positions)
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise ValueError(f"positions.dtype: got {positions.dtype}, expected an integer dtype")
    return positions.detach().to(device="cpu", dtype=torch.int64)


# posenc.torch never guesses the layout: every function and module that takes
# q / k / v tensors requires `layout` (no default). Both conventions are common
# (torch's scaled_dot_product_attention and HF's eager attention use [B, H, S, D];
# flash-attn and `Linear(x).view(B, S, H, D)` give [B, S, H, D]), and with equal
# head counts a wrong guess runs without error with heads and positions swapped.
LAYOUTS = ("bhsd", "bshd")
AXES = {"bhsd": "[batch, heads, seq, head_dim]", "bshd": "[batch, seq, heads, head_dim]"}
MASKS = ("causal", "bidirectional")


def check_layout(layout: Any) -> str:
    """layout itself: "bhsd" or "bshd", else a ValueError naming both."""
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"layout: got {layout!r}, expected 'bhsd' {AXES['bhsd']} "
                         f"(torch's scaled_dot_product_attention) or 'bshd' {AXES['bshd']}")
    return layout


def axes(x: torch.Tensor, layout: str) -> Tuple[int, int, int, int]:
    """(batch, heads, seq, head_dim) of a rank-4 tensor in `layout`."""
    b, a1, a2, d = x.shape  # torch.Size: ints
    return (b, a1, a2, d) if layout == "bhsd" else (b, a2, a1, d)


def _other(layout: str) -> str:
    return "bshd" if layout == "bhsd" else "bhsd"


def _shapes(**tensors: torch.Tensor) -> str:
    return ", ".join(f"{n}.shape {tuple(t.shape)}" for n, t in tensors.items())


def check_dtypes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """One dtype for q, k and v: no silent promotion or demotion."""
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise ValueError(f"{name}.dtype: got {t.dtype}, expected q.dtype {q.dtype} (q, k "
                             f"and v must share one dtype; cast first, e.g. "
                             f"{name}.to(q.dtype))")


def _qkv_problem(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: str,
                 unplaced: bool) -> Optional[str]:
    """What the shapes of q, k, v contradict when read in `layout` (None: nothing)."""
    b, h, sq, d = axes(q, layout)
    kb, kh, sk, kd = axes(k, layout)
    vb, vh, sv, _ = axes(v, layout)
    if kb != b or vb != b:
        return f"batch sizes differ (q {b}, k {kb}, v {vb})"
    if (kh, sk) != (vh, sv):
        return f"k has {kh} heads x {sk} keys but v has {vh} heads x {sv} keys"
    if kd != d:
        return f"q's head_dim {d} differs from k's {kd}"
    if h % kh:
        return f"k's {kh} heads do not divide q's {h} heads (grouped-query attention)"
    if unplaced and sq > sk:
        return (f"{sq} queries but only {sk} keys (queries sit at the last Sq key positions "
                "unless query_positions is given)")
    return None


def check_qkv(q: Any, k: Any, v: Any, layout: Any, *, query_positions: Any = None) -> None:
    """q, k, v for attention in `layout`: rank-4 tensors of one dtype whose
    shapes agree. A disagreement names the layout, and says when the shapes
    fit the other layout instead."""
    check_layout(layout)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not torch.is_tensor(t):
            raise ValueError(f"{name}: got {type(t).__name__}, expected a torch.Tensor")
        if t.dim() != 4:
            raise ValueError(f"{name}.shape: got {tuple(t.shape)}, expected rank 4 "
                             f"{AXES[layout]} (layout={layout!r})")
    check_dtypes(q, k, v)
    unplaced = query_positions is None
    problem = _qkv_problem(q, k, v, layout, unplaced)
    if problem is None:
        return
    msg = (f"layout: got {layout!r} {AXES[layout]}, but then {problem} ("
           f"{_shapes(q=q, k=k, v=v)})")
    other = _other(layout)
    if _qkv_problem(q, k, v, other, unplaced) is None:
        msg += f"; these shapes fit layout={other!r} {AXES[other]}: pass the layout your " \
               "tensors have"
    raise ValueError(msg)


def check_rope_inputs(q: Any, k: Any, layout: str, head_dim: int) -> None:
    """RotaryEmbedding's q, k: rank 4, last dimension head_dim, the same batch
    and sequence length in `layout` (head counts may differ: GQA)."""
    for name, t in (("q", q), ("k", k)):
        if not torch.is_tensor(t):
            raise ValueError(f"{name}: got {type(t).__name__}, expected a torch.Tensor")
        if t.dim() != 4:
            raise ValueError(f"{name}.shape: got {tuple(t.shape)}, expected rank 4 "
                             f"{AXES[layout]} (layout={layout!r})")
        if int(t.shape[-1]) != head_dim:
            raise ValueError(f"{name}.shape[-1]: got {int(t.shape[-1])} ({name}.shape "
                             f"{tuple(t.shape)}), expected head_dim={head_dim} (the module's "
                             "head_dim)")

    def fits(lay: str) -> bool:
        qb, _, qs, _ = axes(q, lay)
        kb, _, ks, _ = axes(k, lay)
        return qb == kb and qs == ks

    if not fits(layout):
        msg = (f"layout: got {layout!r} {AXES[layout]}, but then q and k differ in batch or "
               f"sequence length ({_shapes(q=q, k=k)}; RoPE rotates the same tokens of q and k)")
        if fits(_other(layout)):
            msg += f"; these shapes fit layout={_other(layout)!r} {AXES[_other(layout)]}"
        raise ValueError(msg)


def t5_direction(scheme: str, mask: str, scheme_args: Dict[str, Any]) -> Dict[str, Any]:
    """T5's buckets follow the mask unless `bidirectional` is given: one-sided
    (HF's decoder, is_decoder=True) under mask="causal", two-sided (HF's
    encoder) under mask="bidirectional"."""
    if scheme == "t5" and scheme_args.get("bidirectional") is None:
        scheme_args = dict(scheme_args)
        scheme_args["bidirectional"] = mask == "bidirectional"
    return scheme_args


class ReferenceFallbackWarning(UserWarning):
    """posenc.torch.attention (kernel="auto") ran the exact float64 reference
    for 32- or 16-bit inputs because the scheme has no fused kernel
    (transformer_xl, deberta): correct, but slow and O(Sq Sk) memory.
    Issued once per (scheme, dtype) per process; kernel="reference" states
    the choice and silences it."""


_WARNED: Set[Tuple[str, str]] = set()


def warn_reference_fallback(scheme: str, dtype: torch.dtype) -> None:
    key = (scheme, str(dtype))
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(
        f"posenc.torch.attention: scheme {scheme!r} has no fused kernel, so these {dtype} "
        "inputs run the exact float64 reference (slow, O(Sq Sk) memory); pass "
        "kernel='reference' to choose it explicitly (this warning is shown once per scheme "
        "and dtype)", ReferenceFallbackWarning, stacklevel=3)
