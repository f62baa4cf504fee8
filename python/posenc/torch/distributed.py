"""posenc.torch.distributed: context parallelism (ring attention) over torch.distributed.

One sequence is split along the token axis across the W ranks of a process
group; every rank holds S/W tokens of q, k, v and computes the attention of
its own queries against all keys, the key/value blocks travelling around the
ring (Liu et al. 2023, "Ring Attention with Blockwise Transformers for
Near-Infinite Context"; the load-balanced "zigzag" / dual-chunk sharding of
Megatron-LM and TransformerEngine context parallelism and of the
ring-flash-attention project). Algorithm, communication volume and measured
figures: docs/DISTRIBUTED.md.

  shard(x, dim, sharding, group)    the rank's part of a full tensor
  unshard(x_local, dim, ...)        the inverse (all-gather, reordered)
  positions(seq_len, sharding, ...) global position ids of the rank's tokens
  ring_attention(q, k, v, *, layout, scheme, mask, sharding, group, ...)
      the rank's output shard, equal to shard(posenc.torch.attention(full
      q, k, v)); differentiable in q, k, v and the scheme's trainable tensors

Shardings (the sequence of length S in equal chunks): "contiguous": W chunks,
rank r holds chunk r; "zigzag": 2W chunks, rank r holds chunks r and
2W - 1 - r, so under a causal mask every rank has the same work.

Every step is one call of the fused kernel (posenc.flash_attention, float32
inside) on (local queries, visiting keys) with their GLOBAL positions
(query_positions / key_positions): the causal mask, the ALiBi distances, the
T5 buckets and the Shaw indices are those of the whole sequence. RoPE: the
kernel rotates the q tile and the visiting k tile by the global positions we
pass (rope_keys "rotate"); keys travel unrotated. Rotating a visiting block
costs O((S/W) D) per step against O((S/W)^2 D) for its attention, keeps the
rotation the single-process kernel applies (same code, same rounding), and
the backward's dk comes back unrotated without an inverse rotation at home.
Partial results merge by the log-sum-exp rule (out = sum_b exp(lse_b - lse)
out_b, lse = logsumexp_b lse_b; a block no key of which is visible has
lse_b = -inf and weight 0). Blocks the mask hides entirely are skipped: the
rank's queries and a visiting block are cut into their chunks, and only the
chunks with a visible (query, key) pair are passed to the kernel (which in
turn skips fully masked tiles).

Backward (FlashAttention-2 by recomputation per block, given the final out
and lse of the whole row): the ring runs in reverse. The forward ends with
rank r holding the block of rank r + 1, which it keeps; the backward starts
there and passes blocks to rank r - 1, each block's dK/dV accumulator
(float32) travelling with it, so after W - 1 hops every block and its
complete dK/dV are back home. dq stays local. Gradients of trainable scheme
tensors (T5 table, Shaw a_key / a_value, any "trainable" argument of
posenc.scheme_info) are summed over the steps and all-reduced (sum) over the
group: every rank gets the full gradient of the group's total loss.

Hand-written here (no library offers it on torch.distributed for CPU
kernels): the ring schedule and the merge, about 150 lines; the transport
is torch.distributed point-to-point (batch_isend_irecv), the kernel posenc's.

Requirements: an initialised process group whose backend carries CPU tensors
(gloo; for a NCCL default group pass group=torch.distributed.new_group(
backend="gloo")); every rank calls ring_attention with the same arguments
and shard shapes (checked: one small all_gather_object per call) and, in
training, every rank runs the backward.
"""
from __future__ import annotations

import zlib
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

import posenc as _pe
from ._context import _torch_ctx, check_dtypes, t5_direction

__all__ = ["shard", "unshard", "positions", "ring_attention", "ring_stats", "SHARDINGS",
           "MASKS"]

SHARDINGS = ("contiguous", "zigzag")
MASKS = ("causal", "bidirectional")
LAYOUTS = ("bshd", "bhsd")

# Counters of this process's ring traffic and work (ring_stats()).
_STATS = {"bytes_sent": 0, "bytes_received": 0, "blocks_computed": 0, "blocks_skipped": 0}


def ring_stats(reset: bool = False) -> Dict[str, int]:
    """This process's ring counters since the last reset: bytes_sent and
    bytes_received by the point-to-point transfers (forward and backward),
    blocks_computed / blocks_skipped (kernel calls made and ring steps the
    mask hid entirely). reset=True zeroes them after reading."""
    out = dict(_STATS)
    if reset:
        for key in _STATS:
            _STATS[key] = 0
    return out


# --------------------------------------------------------------------------- the group

def _rank_world(group: Any) -> Tuple[int, int]:
    if not dist.is_available():
        raise ValueError("group: torch.distributed is not available in this torch build")
    if not dist.is_initialized():
        raise ValueError("group: the default process group is not initialised, expected "
                         "torch.distributed.init_process_group(...) to have been called")
    rank = dist.get_rank(group)
    if rank < 0:
        raise ValueError("group: this process is not a member of the group")
    return rank, dist.get_world_size(group)


def _check_backend(group: Any) -> None:
    """The transfers carry CPU tensors: a NCCL-only group cannot."""
    backend = str(dist.get_backend(group))
    if backend == "nccl":
        raise ValueError(f"group: got a process group with backend {backend!r}, expected one that "
                         "carries CPU tensors (gloo), e.g. torch.distributed.new_group("
                         "backend='gloo')")


def _global_rank(group: Any, rank: int) -> int:
    return rank if group is None else dist.get_global_rank(group, rank)


def _check_choice(arg: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{arg}: got {value!r}, expected one of {', '.join(allowed)}")


def _chunks(sharding: str, rank: int, world: int) -> Tuple[int, ...]:
    """Indices of the global chunks rank holds, in local order."""
    return (rank,) if sharding == "contiguous" else (rank, 2 * world - 1 - rank)


def _num_chunks(sharding: str, world: int) -> int:
    return world if sharding == "contiguous" else 2 * world


def _chunk_len(seq_len: int, sharding: str, world: int, arg: str) -> int:
    n = _num_chunks(sharding, world)
    if seq_len <= 0 or seq_len % n:
        what = "W" if sharding == "contiguous" else "2W"
        raise ValueError(f"{arg}: got {seq_len}, expected a positive multiple of {what} = {n} "
                         f"with sharding={sharding!r} and {world} ranks")
    return seq_len // n


# --------------------------------------------------------------------------- shard / unshard

def positions(seq_len: int, sharding: str = "zigzag", group: Any = None) -> torch.Tensor:
    """Global position ids (int64 [seq_len / W]) of this rank's tokens: what
    shard(torch.arange(seq_len)) returns."""
    _check_choice("sharding", sharding, SHARDINGS)
    rank, world = _rank_world(group)
    return _positions_of(rank, world, sharding, _chunk_len(int(seq_len), sharding, world,
                                                           "seq_len"))


def _positions_of(rank: int, world: int, sharding: str, chunk_len: int) -> torch.Tensor:
    return torch.cat([torch.arange(c * chunk_len, (c + 1) * chunk_len, dtype=torch.int64)
                      for c in _chunks(sharding, rank, world)])


def shard(x: torch.Tensor, dim: int = 1, sharding: str = "zigzag",
          group: Any = None) -> torch.Tensor:
    """This rank's part of the full tensor x along dim (a new contiguous
    tensor, differentiable like indexing): chunk r of W ("contiguous") or
    chunks r and 2W - 1 - r of 2W ("zigzag")."""
    _check_choice("sharding", sharding, SHARDINGS)
    rank, world = _rank_world(group)
    dim = _dim(x, dim)
    n = _chunk_len(int(x.shape[dim]), sharding, world, f"x.shape[{dim}]")
    return torch.cat([x.narrow(dim, c * n, n) for c in _chunks(sharding, rank, world)],
                     dim).contiguous()


def unshard(x_local: torch.Tensor, dim: int = 1, sharding: str = "zigzag",
            group: Any = None) -> torch.Tensor:
    """The full tensor from every rank's shard (an all-gather, then the
    chunks put back in sequence order); the inverse of shard. Every rank
    gets the result. Not differentiable (the result is detached)."""
    _check_choice("sharding", sharding, SHARDINGS)
    rank, world = _rank_world(group)
    _check_backend(group)
    dim = _dim(x_local, dim)
    shapes: List[Any] = [None] * world
    dist.all_gather_object(shapes, (tuple(x_local.shape), str(x_local.dtype)), group=group)
    for r, s in enumerate(shapes):
        if s != shapes[0]:
            raise ValueError(f"x_local: shape/dtype {s} on rank {r} but {shapes[0]} on rank 0, "
                             "expected the same shard shape on every rank")
    per = 1 if sharding == "contiguous" else 2
    if x_local.shape[dim] % per:
        raise ValueError(f"x_local.shape[{dim}]: got {x_local.shape[dim]}, expected a multiple "
                         f"of 2 with sharding='zigzag' (two equal chunks per rank)")
    x = x_local.detach().contiguous()
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x, group=group)
    n = x.shape[dim] // per
    ordered: List[Optional[torch.Tensor]] = [None] * _num_chunks(sharding, world)
    for r, part in enumerate(parts):
        for i, c in enumerate(_chunks(sharding, r, world)):
            ordered[c] = part.narrow(dim, i * n, n)
    return torch.cat(ordered, dim)  # type: ignore[arg-type]


def _dim(x: torch.Tensor, dim: int) -> int:
    if not -x.dim() <= dim < x.dim():
        raise ValueError(f"dim: got {dim}, expected a dimension of a rank-{x.dim()} tensor")
    return dim % x.dim()


# --------------------------------------------------------------------------- the ring plan

class _Ring:
    """Who holds which tokens, and which part of a (queries, visiting keys)
    pair of blocks the mask lets through."""

    def __init__(self, group: Any, rank: int, world: int, sharding: str, local_len: int,
                 mask: str, window: Optional[int]) -> None:
        self.group, self.rank, self.world, self.sharding = group, rank, world, sharding
        self.chunk_len = local_len // len(_chunks(sharding, 0, world))
        self.mask, self.window = mask, window
        self.next = _global_rank(group, (rank + 1) % world)
        self.prev = _global_rank(group, (rank - 1) % world)
        self._pos: Dict[int, torch.Tensor] = {}

    def positions(self, rank: int) -> torch.Tensor:
        if rank not in self._pos:
            self._pos[rank] = _positions_of(rank, self.world, self.sharding, self.chunk_len)
        return self._pos[rank]

    def _visible(self, qc: int, kc: int) -> bool:
        """Whether some query of global chunk qc sees some key of chunk kc."""
        n = self.chunk_len
        d_lo, d_hi = qc * n - ((kc + 1) * n - 1), (qc + 1) * n - 1 - kc * n  # p - r range
        lo = 0 if self.mask == "causal" else -(1 << 62)
        hi = 1 << 62
        if self.window is not None:
            lo, hi = max(lo, 1 - self.window), self.window - 1
        return max(d_lo, lo) <= min(d_hi, hi)

    def select(self, src: int) -> Optional[Tuple[Tuple[int, int], Tuple[int, int]]]:
        """((q start, q len), (k start, k len)) in local token indices of the
        rows and keys worth computing for the block of rank src, or None
        when the mask hides it entirely."""
        qcs, kcs = _chunks(self.sharding, self.rank, self.world), \
            _chunks(self.sharding, src, self.world)
        qi = [i for i, qc in enumerate(qcs) if any(self._visible(qc, kc) for kc in kcs)]
        if not qi:
            return None
        ki = [j for j, kc in enumerate(kcs) if any(self._visible(qcs[i], kc) for i in qi)]
        n = self.chunk_len
        return (qi[0] * n, (qi[-1] - qi[0] + 1) * n), (ki[0] * n, (ki[-1] - ki[0] + 1) * n)

    def exchange(self, send: Sequence[torch.Tensor], recv: Sequence[torch.Tensor],
                 to: int, frm: int, tag: int) -> List[Any]:
        """Posts the sends to global rank `to` and the receives from `frm`."""
        ops = [dist.P2POp(dist.isend, t, to, self.group, tag + i) for i, t in enumerate(send)]
        ops += [dist.P2POp(dist.irecv, t, frm, self.group, tag + i) for i, t in enumerate(recv)]
        _STATS["bytes_sent"] += sum(t.numel() * t.element_size() for t in send)
        _STATS["bytes_received"] += sum(t.numel() * t.element_size() for t in recv)
        return dist.batch_isend_irecv(ops)


def _wait(reqs: Optional[List[Any]]) -> None:
    for req in reqs or ():
        req.wait()


# --------------------------------------------------------------------------- forward / backward

_KV_TAG, _DKV_TAG = 0x5E10, 0x5E20  # gloo matches messages by (peer, tag)


def _rows(x: torch.Tensor, dim: int, sel: Tuple[int, int]) -> torch.Tensor:
    return x.narrow(dim, sel[0], sel[1])


def _merge(acc: torch.Tensor, acc_lse: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
           layout: str) -> None:
    """acc, acc_lse <- the log-sum-exp merge of (acc, acc_lse) and (out, lse),
    in place; rows with lse = -inf on both sides stay 0 / -inf."""
    new = torch.logaddexp(acc_lse, lse)  # -inf only when both are -inf
    safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
    w_old, w_new = torch.exp(acc_lse - safe), torch.exp(lse - safe)  # [B, H, s]
    if layout == "bshd":
        w_old, w_new = w_old.transpose(1, 2), w_new.transpose(1, 2)
    w_old, w_new = w_old.unsqueeze(-1).to(acc.dtype), w_new.unsqueeze(-1).to(acc.dtype)
    acc.mul_(w_old).addcmul_(out, w_new)
    acc_lse.copy_(new)


def _ring_forward(ring: _Ring, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  kw: Dict[str, Any], ctx: Any) -> Tuple[torch.Tensor, ...]:
    sdim = 1 if kw["layout"] == "bshd" else 2
    acc_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    b, h, sq = (q.shape[0], q.shape[2], q.shape[1]) if sdim == 1 else q.shape[:3]
    acc = torch.zeros(*q.shape[:3], v.shape[3], dtype=acc_dtype)
    acc_lse = torch.full((b, h, sq), float("-inf"), dtype=torch.float32)
    cur = (k.contiguous(), v.contiguous())
    for step in range(ring.world):
        src = (ring.rank - step) % ring.world
        reqs, nxt = None, cur
        if step < ring.world - 1:  # the next block travels while this one is computed
            nxt = (torch.empty_like(cur[0]), torch.empty_like(cur[1]))
            reqs = ring.exchange(cur, nxt, ring.next, ring.prev, _KV_TAG)
        try:
            sel = ring.select(src)
            if sel is None:
                _STATS["blocks_skipped"] += 1
            else:
                qs, ks = sel
                first = step == 0 and qs == (0, sq)  # the own block: straight into acc
                # Partial outputs in acc's dtype: 16-bit inputs are rounded once, at the end.
                out, lse = _pe.flash_attention(
                    _rows(q, sdim, qs), _rows(cur[0], sdim, ks), _rows(cur[1], sdim, ks),
                    query_positions=_rows(ring.positions(ring.rank), 0, qs),
                    key_positions=_rows(ring.positions(src), 0, ks), return_lse=True,
                    out=acc if first else torch.empty_like(_rows(acc, sdim, qs)), ctx=ctx,
                    **kw)
                if first:
                    acc_lse = lse
                else:
                    _merge(_rows(acc, sdim, qs), _rows(acc_lse, 2, qs), out, lse, kw["layout"])
                del out
                _STATS["blocks_computed"] += 1
        finally:
            _wait(reqs)  # an error on every rank still completes the posted transfers
        cur = nxt
    # cur is now the block of rank + 1: the backward starts from it.
    return acc.to(q.dtype), acc_lse, cur[0], cur[1]


def _ring_backward(ring: _Ring, saved: Sequence[torch.Tensor], dout: torch.Tensor,
                   kw: Dict[str, Any], names: Sequence[str], ctx: Any) -> Tuple[Any, ...]:
    q, k, v, out, lse, last_k, last_v = saved
    sdim = 1 if kw["layout"] == "bshd" else 2
    acc_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    dq = torch.zeros(q.shape, dtype=acc_dtype)
    tables = {n: torch.zeros(kw[n].shape, dtype=torch.float64) for n in names}
    cur = (last_k, last_v)  # the forward's last block: that of rank + 1
    dkv = incoming = (torch.zeros(0), torch.zeros(0))  # this block's dK/dV; the next one's
    dkv_reqs: Optional[List[Any]] = None
    try:
        for step in range(ring.world):
            src = (ring.rank + 1 + step) % ring.world  # the ring in reverse: blocks go to rank - 1
            reqs, nxt = None, cur
            if step < ring.world - 1:
                nxt = (torch.empty_like(cur[0]), torch.empty_like(cur[1]))
                reqs = ring.exchange(cur, nxt, ring.prev, ring.next, _KV_TAG)
            try:
                sel = ring.select(src)
                g = None
                if sel is None:
                    _STATS["blocks_skipped"] += 1
                else:
                    qs, ks = sel
                    g = _pe.flash_attention_backward(
                        _rows(q, sdim, qs), _rows(cur[0], sdim, ks), _rows(cur[1], sdim, ks),
                        _rows(out, sdim, qs), _rows(dout, sdim, qs), _rows(lse, 2, qs),
                        query_positions=_rows(ring.positions(ring.rank), 0, qs),
                        key_positions=_rows(ring.positions(src), 0, ks), grads=tuple(names),
                        ctx=ctx, **kw)
                    _rows(dq, sdim, qs).add_(g["dq"])
                    for n in names:
                        tables[n].add_(g[n])
                    _STATS["blocks_computed"] += 1
                # This block's dK/dV accumulator: new at step 0, else sent by rank + 1.
                if step == 0:
                    dkv = (torch.zeros(k.shape, dtype=acc_dtype),
                           torch.zeros(v.shape, dtype=acc_dtype))
                else:
                    _wait(dkv_reqs)
                    dkv, dkv_reqs = incoming, None
                if g is not None:
                    _rows(dkv[0], sdim, ks).add_(g["dk"])
                    _rows(dkv[1], sdim, ks).add_(g["dv"])
                if step < ring.world - 1:  # it follows its block to rank - 1
                    incoming = (torch.empty_like(dkv[0]), torch.empty_like(dkv[1]))
                    dkv_reqs = ring.exchange(dkv, incoming, ring.prev, ring.next, _DKV_TAG)
            finally:
                _wait(reqs)
            cur = nxt
    finally:
        _wait(dkv_reqs)
    # After W - 1 hops the accumulator in hand is that of this rank's own block.
    return dq, dkv[0], dkv[1], tables


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(fctx: Any, ring: _Ring, kw: Dict[str, Any], names: Tuple[str, ...], pctx: Any,
                q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                *tensors: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        kw = dict(kw)
        kw.update({n: t.detach() for n, t in zip(names, tensors)})
        out, lse, last_k, last_v = _ring_forward(ring, q.detach(), k.detach(), v.detach(), kw,
                                                 pctx)
        fctx.ring, fctx.kw, fctx.names, fctx.pctx = ring, kw, names, pctx
        fctx.dtypes = tuple(t.dtype for t in tensors)
        fctx.last = (last_k, last_v)
        fctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(fctx: Any, dout: torch.Tensor) -> Tuple[Any, ...]:  # type: ignore[override]
        q, k, v, out, lse = fctx.saved_tensors
        ring, names = fctx.ring, fctx.names
        wanted = tuple(n for i, n in enumerate(names) if fctx.needs_input_grad[7 + i])
        dq, dk, dv, tables = _ring_backward(
            ring, (q.detach(), k.detach(), v.detach(), out.detach(), lse, *fctx.last),
            dout.detach().contiguous(), fctx.kw, wanted, fctx.pctx)
        fctx.last = None
        for n in wanted:  # every rank's queries saw every key: sum the shares
            dist.all_reduce(tables[n], group=ring.group)
        grads = [tables[n].to(dt) if n in tables else None
                 for n, dt in zip(names, fctx.dtypes)]
        return (None, None, None, None, dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype),
                *grads)


_NOT_ACCEPTED = ("query_positions", "key_positions", "kernel", "out", "return_lse",
                 "rope_keys")


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, layout: str,
                   scheme: str = "none", mask: str = "causal", sharding: str = "zigzag",
                   group: Any = None, sliding_window: Optional[int] = None,
                   scale: Optional[float] = None, ctx: Any = None,
                   **scheme_args: Any) -> torch.Tensor:
    """Context-parallel attention: q, k, v are this rank's shards (q [B, S/W,
    H, D], k [B, S/W, Hkv, D], v [B, S/W, Hkv, Dv] in layout "bshd", or
    "bhsd"; layout is required, as everywhere in posenc.torch; H a multiple
    of Hkv; one dtype) of one sequence of S tokens sharded by `sharding`
    (shard()); returns this rank's output shard, equal within the flash
    tolerance to shard(posenc.torch.attention(full q, k, v, same keywords)).
    scheme: one of posenc.schemes(fused=True), its keyword arguments as in
    posenc.torch.attention (trainable tensors, e.g. the T5 table or the Shaw
    tables, get gradients summed over the group; T5's `bidirectional`
    follows the mask unless given); mask "causal" or
    "bidirectional"; sliding_window, scale as there. Positions follow from
    the sharding (query_positions / key_positions are not accepted).
    ctx: the posenc.Context of the kernel calls (None: torch.get_num_threads()).
    Every rank of `group` (None: the default group) must call it with the
    same arguments; a mismatch raises ValueError on every rank."""
    rank, world = _rank_world(group)
    _check_backend(group)
    scheme_args = t5_direction(scheme, mask, scheme_args)
    names = _trainable(scheme, scheme_args)
    pctx = _torch_ctx() if ctx is None else ctx
    error = None
    try:
        _check_local(q, k, v, scheme, mask, layout, sharding, world, sliding_window, scale,
                     scheme_args, rank, pctx)
    except (ValueError, TypeError) as e:
        error = str(e)
    meta = None if error else _metadata(q, k, v, scheme, mask, layout, sharding, sliding_window,
                                         scale, scheme_args)
    gathered: List[Any] = [None] * world
    dist.all_gather_object(gathered, (error, meta), group=group)
    _check_agreement(gathered)
    sdim = 1 if layout == "bshd" else 2
    ring = _Ring(group, rank, world, sharding, int(q.shape[sdim]), mask, sliding_window)
    tensors = [scheme_args.pop(n) for n in names]
    kw = dict(scheme=scheme, layout=layout, mask=mask, sliding_window=sliding_window,
              scale=scale, **scheme_args)
    return _RingAttention.apply(ring, kw, names, pctx, q, k, v, *tensors)


def _trainable(scheme: Any, scheme_args: Dict[str, Any]) -> Tuple[str, ...]:
    try:
        info = _pe.scheme_info(scheme)
    except (ValueError, TypeError):
        return ()  # reported by _check_local
    trainable = {a["name"] for a in info["args"] if a["trainable"]}
    return tuple(n for n, val in scheme_args.items() if n in trainable and torch.is_tensor(val))


def _check_local(q: Any, k: Any, v: Any, scheme: Any, mask: Any, layout: Any, sharding: Any,
                 world: int, window: Any, scale: Any, scheme_args: Dict[str, Any],
                 rank: int, pctx: Any) -> None:
    """This rank's arguments: raises ValueError naming the argument."""
    _check_choice("mask", mask, MASKS)
    _check_choice("layout", layout, LAYOUTS)
    _check_choice("sharding", sharding, SHARDINGS)
    if not _pe.scheme_info(scheme)["fused"]:  # also rejects an unknown name
        raise ValueError(f"scheme: got {scheme!r}, expected one of "
                         f"{', '.join(_pe.schemes(fused=True))} (the fused kernel's schemes)")
    for name in _NOT_ACCEPTED:
        if name in scheme_args:
            raise ValueError(f"{name}: not accepted by ring_attention (positions follow from "
                             "the sharding: posenc.torch.distributed.positions)")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not torch.is_tensor(x) or x.dim() != 4 or x.device.type != "cpu":
            got = tuple(x.shape) if torch.is_tensor(x) else type(x).__name__
            raise ValueError(f"{name}: got {got}, expected a rank-4 CPU tensor in layout "
                             f"{layout!r}")
    check_dtypes(q, k, v)
    sdim = 1 if layout == "bshd" else 2
    n = int(q.shape[sdim])
    for name, x in (("k", k), ("v", v)):
        if int(x.shape[sdim]) != n:
            raise ValueError(f"{name}.shape[{sdim}]: got {int(x.shape[sdim])}, expected q's "
                             f"shard length {n} (q, k and v hold the same tokens)")
    per = len(_chunks(sharding, 0, world))
    if n < per or n % per:
        raise ValueError(f"q.shape[{sdim}]: got {n}, expected a positive multiple of {per} "
                         f"with sharding={sharding!r} (the rank's tokens are {per} equal "
                         "chunks)")
    if n * world > _pe.MAX_POSITION + 1:
        raise ValueError(f"q.shape[{sdim}]: got {n} tokens x {world} ranks = {n * world}, "
                         f"expected a sequence of at most {_pe.MAX_POSITION + 1} positions")
    # The kernel's own checks (heads, head dims, dtypes, scheme arguments) on one token,
    # before any transfer, so that every rank learns of an error through the all-gather.
    pos = _positions_of(rank, world, sharding, n // per)[:1]
    one = [x.narrow(sdim, 0, 1) for x in (q, k, v)]
    _pe.flash_attention(*one, scheme=scheme, layout=layout, mask=mask,
                        sliding_window=window, scale=scale, query_positions=pos,
                        key_positions=pos, ctx=pctx,
                        **{a: (t.detach() if torch.is_tensor(t) else t)
                           for a, t in scheme_args.items()})


def _describe(value: Any) -> Any:
    if torch.is_tensor(value):
        data = value.detach().to(device="cpu", dtype=torch.float64).contiguous().numpy()
        return ("tensor", tuple(value.shape), str(value.dtype), bool(value.requires_grad),
                zlib.crc32(data.tobytes()))
    return repr(value)


def _metadata(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scheme: str, mask: str,
              layout: str, sharding: str, window: Any, scale: Any,
              scheme_args: Dict[str, Any]) -> List[Tuple[str, Any]]:
    meta: List[Tuple[str, Any]] = [
        ("q.shape", tuple(q.shape)), ("k.shape", tuple(k.shape)), ("v.shape", tuple(v.shape)),
        ("dtypes", (str(q.dtype), str(k.dtype), str(v.dtype))), ("scheme", scheme),
        ("mask", mask), ("layout", layout), ("sharding", sharding),
        ("sliding_window", window), ("scale", scale)]
    meta += [(n, _describe(scheme_args[n])) for n in sorted(scheme_args)]
    return meta


def _check_agreement(gathered: Sequence[Any]) -> None:
    """Raises the same ValueError on every rank when a rank's arguments were
    invalid or differ from rank 0's."""
    for r, (error, _) in enumerate(gathered):
        if error:
            raise ValueError(f"{error} (on rank {r})" if len(gathered) > 1 else error)
    base = dict(gathered[0][1])
    sdim = 1 if base["layout"] == "bshd" else 2
    for r, (_, meta) in enumerate(gathered[1:], start=1):
        mine = dict(meta)
        for field in list(base) + [f for f in mine if f not in base]:
            got, want = mine.get(field, "(not given)"), base.get(field, "(not given)")
            if got == want:
                continue
            if field == "q.shape" and len(got) == len(want) and \
                    all(a == b for i, (a, b) in enumerate(zip(got, want)) if i != sdim):
                raise ValueError(f"q: shard length {got[sdim]} on rank {r} but {want[sdim]} on "
                                 "rank 0, expected shards of the same length (S/W tokens) on "
                                 "every rank")
            raise ValueError(f"{field}: got {got!r} on rank {r} but {want!r} on rank 0, "
                             "expected the same on every rank of the group")
