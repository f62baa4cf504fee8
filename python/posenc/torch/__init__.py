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

from typing import Any, Dict, Optional, Tuple

import torch
from torch import nn

import posenc as _pe
from ._attention import FLASH_SCHEMES, KERNELS, PRECISIONS, attention  # noqa: F401 (public)
from ._context import LAYOUTS, MASKS, ReferenceFallbackWarning, _positions, _torch_ctx
from ._rope import RotaryEmbedding, apply_rope

# Defined in private modules, documented here.
for _obj in (apply_rope, attention, RotaryEmbedding, ReferenceFallbackWarning):
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
