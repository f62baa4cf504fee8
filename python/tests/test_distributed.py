"""posenc.torch.distributed (context parallelism) across real processes.

W = 2 and W = 4 ranks are spawned once each (torch.multiprocessing, gloo over
tcp://127.0.0.1 on a free port, GLOO_SOCKET_IFNAME=lo), one thread each, with
a process-group timeout and a hard deadline after which every rank is
terminated, so a hung collective fails instead of hanging. Every rank runs
the whole case list and saves what it computed; the tests here (the parent
process) compare it with the single-process posenc.torch.attention on the
full sequence, through an independent statement of the shardings
(expected_positions): outputs and gradients of q, k, v and of the T5 / Shaw
tables within the flash tolerance, for every fused scheme, both shardings,
both masks, sliding windows, odd head dims, GQA / MQA, both layouts, 16- and
64-bit inputs, a subgroup of 3 ranks; shard / unshard / positions round
trips; the traffic counters against 2 B (S/W) Hkv D elements per hop; and a
ValueError for each bad input, raised on every rank.
"""
import datetime
import multiprocessing
import os
import socket
import tempfile
import time
import zlib

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import posenc
import posenc.torch as pt
from posenc.torch import distributed as cp

CHUNK = 20  # tokens per chunk: a zigzag rank holds 2, a contiguous rank 1 chunk of 2 * CHUNK

# Keyword arguments of each fused scheme (tables made per case in make_case).
SCHEME_ARGS = {"none": {}, "absolute": {}, "rope": {"rotary_dim": 6}, "alibi": {},
               "t5": {"max_distance": 16}, "shaw": {"clip": 3}, "fire": {"eps": 1e-6}}


def case_list(world):
    """(name, options) of every ring case; options override base()."""
    cases = []
    for scheme in SCHEME_ARGS:
        causal_only = posenc.scheme_info(scheme)["causal_only"]
        for sharding in cp.SHARDINGS:
            for mask in ("causal",) if causal_only else cp.MASKS:
                cases.append((f"{scheme}-{sharding}-{mask}",
                              dict(scheme=scheme, sharding=sharding, mask=mask)))
    for sharding in cp.SHARDINGS:
        for mask in cp.MASKS:
            cases.append((f"window-{sharding}-{mask}",
                          dict(scheme="alibi", sharding=sharding, mask=mask, window=9)))
    cases += [
        ("rope-bhsd-mha-even", dict(scheme="rope", layout="bhsd", h=2, hkv=2, d=8, dv=8)),
        ("alibi-mqa", dict(scheme="alibi", hkv=1, sharding="contiguous")),
        ("t5-scale-b1", dict(scheme="t5", b=1, scale=0.3, mask="bidirectional")),
        ("shaw-bhsd-contiguous", dict(scheme="shaw", layout="bhsd", sharding="contiguous")),
        ("alibi-bfloat16", dict(scheme="alibi", dtype=torch.bfloat16)),
        ("t5-float64", dict(scheme="t5", dtype=torch.float64, sharding="contiguous")),
        ("fire-bhsd-mqa", dict(scheme="fire", layout="bhsd", hkv=1)),
    ]
    return cases


def base():
    return dict(scheme="none", sharding="zigzag", mask="causal", layout="bshd", b=2, h=4,
                hkv=2, d=7, dv=5, dtype=torch.float32, window=None, scale=None)


def make_case(name, options, world):
    """Full-sequence inputs of a case (the same on every process): q, k, v,
    dout in the case's layout and dtype, the scheme keywords, the options."""
    o = base()
    o.update(options)
    if o["scheme"] == "shaw":
        o["dv"] = o["d"]  # keep a_value's width = v's
    g = torch.Generator().manual_seed(zlib.crc32(f"{name}/{world}".encode()))
    s = 2 * CHUNK * world
    shapes = dict(q=(o["b"], s, o["h"], o["d"]), k=(o["b"], s, o["hkv"], o["d"]),
                  v=(o["b"], s, o["hkv"], o["dv"]), dout=(o["b"], s, o["h"], o["dv"]))
    t = {n: torch.randn(*shape, generator=g, dtype=torch.float64) for n, shape in shapes.items()}
    if o["layout"] == "bhsd":
        t = {n: x.transpose(1, 2).contiguous() for n, x in t.items()}
    t = {n: x.to(o["dtype"]) for n, x in t.items()}
    kw = dict(SCHEME_ARGS[o["scheme"]])
    if o["scheme"] == "t5":
        kw["table"] = torch.randn(8, o["h"], generator=g, dtype=torch.float64).to(o["dtype"])
    if o["scheme"] == "shaw":
        kw["a_key"] = torch.randn(7, o["d"], generator=g, dtype=torch.float64).to(o["dtype"])
        kw["a_value"] = torch.randn(7, o["dv"], generator=g, dtype=torch.float64).to(o["dtype"])
    if o["scheme"] == "fire":  # threshold L = 30: queries on both sides of it
        hidden = 6
        fire = dict(w1=torch.randn(hidden, generator=g, dtype=torch.float64),
                    b1=torch.randn(hidden, generator=g, dtype=torch.float64),
                    w2=torch.randn(o["h"], hidden, generator=g, dtype=torch.float64),
                    b2=torch.randn(o["h"], generator=g, dtype=torch.float64),
                    c=torch.tensor(0.1, dtype=torch.float64),
                    threshold=torch.tensor(30.0, dtype=torch.float64))
        kw.update({n: x.to(o["dtype"]) for n, x in fire.items()})
    return t, kw, o


def expected_positions(seq_len, sharding, rank, world):
    """The shardings as the issue states them, written independently."""
    if sharding == "contiguous":
        n = seq_len // world
        return list(range(rank * n, (rank + 1) * n))
    n = seq_len // (2 * world)
    return list(range(rank * n, (rank + 1) * n)) + \
        list(range((2 * world - 1 - rank) * n, (2 * world - rank) * n))


def tensors_of(kw):
    return {n: x for n, x in kw.items() if torch.is_tensor(x)}


# --------------------------------------------------------------------------- the worlds

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, fn, world, port, pg_timeout, args):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world,
                            timeout=datetime.timedelta(seconds=pg_timeout))
    try:
        fn(rank, world, *args)
    finally:
        dist.destroy_process_group()


def run_world(fn, world, args=(), deadline_s=240.0, pg_timeout_s=120.0):
    """Runs fn(rank, world, *args) on `world` spawned ranks; raises the first
    rank's exception, or TimeoutError (every rank terminated) after deadline_s."""
    context = mp.start_processes(_entry, args=(fn, world, free_port(), pg_timeout_s, args),
                                 nprocs=world, join=False, start_method="spawn")
    end = time.monotonic() + deadline_s
    try:
        while not context.join(timeout=max(0.05, min(1.0, end - time.monotonic()))):
            if time.monotonic() >= end:
                raise TimeoutError(f"{world} ranks still running after {deadline_s} s "
                                   "(a hung collective?); terminated")
    finally:
        for p in context.processes:  # only the processes started here, by pid
            if p.is_alive():
                p.terminate()
        for p in context.processes:
            p.join(10)


def _worker(rank, world, outdir):
    """Every case on this rank; saves {name: {...}} to outdir/rank<r>.pt."""
    results = {"bad": _bad_inputs(rank, world), "roundtrip": _roundtrips(rank, world),
               "stats": _stats(rank, world)}
    for name, options in case_list(world):
        results[name] = _ring_case(name, options, world)
    if world == 4:
        results["subgroup"] = _subgroup(rank)
    torch.save(results, os.path.join(outdir, f"rank{rank}.pt"))


def _ring_case(name, options, world, group=None):
    t, kw, o = make_case(name, options, world)
    sdim = 1 if o["layout"] == "bshd" else 2
    local = {n: cp.shard(x, sdim, o["sharding"], group) for n, x in t.items()}
    leaves = {n: local[n].requires_grad_() for n in ("q", "k", "v")}
    for n, x in tensors_of(kw).items():
        leaves[n] = kw[n] = x.clone().requires_grad_()
    out = cp.ring_attention(local["q"], local["k"], local["v"], scheme=o["scheme"],
                            mask=o["mask"], layout=o["layout"], sharding=o["sharding"],
                            group=group, sliding_window=o["window"], scale=o["scale"], **kw)
    out.backward(local["dout"])
    return {"out": out.detach(), **{f"d{n}": x.grad for n, x in leaves.items()}}


def _subgroup(rank):
    """Ranks 1..3 of the 4 as a ring of 3 (global ranks != group ranks)."""
    group = dist.new_group([1, 2, 3])
    if rank == 0:
        return None
    return _ring_case("t5-zigzag-causal", dict(scheme="t5"), 3, group)


def _roundtrips(rank, world):
    s = 4 * world
    x = torch.arange(3 * s * 2, dtype=torch.float32).reshape(3, s, 2)
    res = {}
    for sharding in cp.SHARDINGS:
        part = cp.shard(x, 1, sharding)
        res[sharding] = {"positions": cp.positions(s, sharding), "shard": part,
                         "unshard": cp.unshard(part, 1, sharding),
                         "unshard_dim_neg": cp.unshard(cp.shard(x.transpose(1, 2), -1,
                                                                sharding), -1, sharding)}
    return res


def _stats(rank, world):
    res = {}
    for sharding in cp.SHARDINGS:
        t, kw, o = make_case("stats", dict(sharding=sharding), world)
        q, k, v, dout = (cp.shard(t[n], 1, sharding).requires_grad_(n != "dout")
                         for n in ("q", "k", "v", "dout"))
        cp.ring_stats(reset=True)
        out = cp.ring_attention(q, k, v, layout="bshd", sharding=sharding)
        fwd = cp.ring_stats(reset=True)
        out.backward(dout)
        res[sharding] = {"forward": fwd, "backward": cp.ring_stats(reset=True),
                         "kv_bytes": (k.numel() + v.numel()) * k.element_size()}
    return res


def _bad_inputs(rank, world):
    """Each bad call on every rank: the message (or None when nothing was raised)."""
    g = torch.Generator().manual_seed(1)

    def qkv(n=4, h=2, hkv=2):
        return (torch.randn(1, n, h, 4, generator=g), torch.randn(1, n, hkv, 4, generator=g),
                torch.randn(1, n, hkv, 4, generator=g))

    def ring(*args, **kwargs):
        return cp.ring_attention(*args, layout="bshd", **kwargs)

    q, k, v = qkv()
    table = torch.ones(8, 2)
    calls = {
        "positions_len": lambda: cp.positions(2 * world * 3 + 2, "zigzag"),
        "shard_len": lambda: cp.shard(torch.zeros(2, world + 1), 1, "contiguous"),
        "sharding": lambda: ring(q, k, v, sharding="striped"),
        "mask": lambda: ring(q, k, v, mask="sliding"),
        "scheme_not_fused": lambda: ring(q, k, v, scheme="deberta"),
        "odd_zigzag_shard": lambda: ring(*qkv(5)),
        "kv_len": lambda: ring(q, k[:, :2], v[:, :2]),
        "query_positions": lambda: ring(q, k, v, query_positions=[0, 1, 2, 3]),
        "heads": lambda: ring(*qkv(h=3)),
        "shard_lengths_differ": lambda: ring(*qkv(6 if rank == 1 else 4)),
        "schemes_differ": lambda: ring(q, k, v, scheme="alibi" if rank == 0 else "rope"),
        "tables_differ": lambda: ring(q, k, v, scheme="t5", table=table + (rank == world - 1)),
        "one_rank_bad": lambda: ring(q if rank != 1 else q[0], k, v),
        "dtypes": lambda: ring(q.half(), k, v),
        "layout": lambda: cp.ring_attention(q, k, v, layout="nhsd"),
        "unshard_shapes_differ": lambda: cp.unshard(torch.zeros(2, 4 + 2 * (rank == 1))),
        "dim": lambda: cp.shard(torch.zeros(2, 4 * world), 2),
        "causal_only_scheme": lambda: ring(
            q, k, v, scheme="fire", mask="bidirectional", w1=torch.ones(3), b1=torch.ones(3),
            w2=torch.ones(2, 3), b2=torch.ones(2), c=torch.tensor(0.1),
            threshold=torch.tensor(5.0)),
    }
    res = {}
    for name, call in calls.items():
        try:
            call()
            res[name] = None
        except ValueError as e:
            res[name] = str(e)
    return res


@pytest.fixture(scope="module", params=[2, 4], ids=lambda w: f"W{w}")
def world(request):
    """(W, [per-rank results]) of one spawned world."""
    w = request.param
    with tempfile.TemporaryDirectory() as outdir:
        run_world(_worker, w, (outdir,))
        return w, [torch.load(os.path.join(outdir, f"rank{r}.pt")) for r in range(w)]


# --------------------------------------------------------------------------- the tests

def _close(got, want, what):
    tol = 2e-5 * max(1.0, want.abs().max().item())
    if got.dtype == torch.bfloat16 or want.dtype == torch.bfloat16:
        tol = 2e-2 * max(1.0, want.abs().max().item())
    err = (got.double() - want.double()).abs().max().item()
    assert err <= tol, f"{what}: max |ring - single process| = {err:.3g} > {tol:.3g}"


def _reference(name, options, world):
    t, kw, o = make_case(name, options, world)
    leaves = {n: t[n].clone().requires_grad_() for n in ("q", "k", "v")}
    for n, x in tensors_of(kw).items():
        leaves[n] = kw[n] = x.clone().requires_grad_()
    out = pt.attention(leaves["q"], leaves["k"], leaves["v"], scheme=o["scheme"], mask=o["mask"],
                       layout=o["layout"], sliding_window=o["window"], scale=o["scale"], **kw)
    out.backward(t["dout"])
    return {"out": out.detach(), **{f"d{n}": x.grad for n, x in leaves.items()}}, o


def _check_case(name, options, world, per_rank):
    want, o = _reference(name, options, world)
    sdim = 1 if o["layout"] == "bshd" else 2
    s = 2 * CHUNK * world
    for rank, got in enumerate(per_rank):
        idx = torch.tensor(expected_positions(s, o["sharding"], rank, world))
        assert set(got) == set(want)
        for key, value in want.items():
            if key in ("out", "dq", "dk", "dv"):
                value = value.index_select(sdim, idx)
            assert got[key].shape == value.shape and got[key].dtype == value.dtype, key
            _close(got[key], value, f"{name} W={world} rank {rank} {key}")


@pytest.mark.parametrize("case", [c for c, _ in case_list(2)])
def test_ring_matches_single_process_attention(world, case):
    w, results = world
    options = dict(case_list(w))[case]
    _check_case(case, options, w, [r[case] for r in results])


def test_every_fused_scheme_is_covered():
    assert set(posenc.schemes(fused=True)) <= set(SCHEME_ARGS)


def test_ring_on_a_subgroup_of_three_ranks(world):
    w, results = world
    if w != 4:
        assert all("subgroup" not in r for r in results)
        return
    assert results[0]["subgroup"] is None
    _check_case("t5-zigzag-causal", dict(scheme="t5"), 3, [r["subgroup"] for r in results[1:]])


def test_shard_unshard_positions_round_trips(world):
    w, results = world
    s = 4 * w
    x = torch.arange(3 * s * 2, dtype=torch.float32).reshape(3, s, 2)
    for rank, r in enumerate(results):
        for sharding in cp.SHARDINGS:
            got = r["roundtrip"][sharding]
            pos = expected_positions(s, sharding, rank, w)
            assert got["positions"].tolist() == pos and got["positions"].dtype == torch.int64
            assert torch.equal(got["shard"], x[:, pos])
            assert torch.equal(got["unshard"], x)
            assert torch.equal(got["unshard_dim_neg"], x.transpose(1, 2))
    # Every position is held by exactly one rank.
    for sharding in cp.SHARDINGS:
        held = sorted(p for r in results for p in r["roundtrip"][sharding]["positions"].tolist())
        assert held == list(range(s))


def test_traffic_and_skipped_blocks(world):
    """Forward: W - 1 hops of one K/V block (2 B (S/W) Hkv D elements);
    backward: W - 1 hops of K/V plus their float32 dK/dV. Contiguous causal:
    rank r computes the blocks of ranks 0..r and skips the rest; zigzag
    causal and the backward walk every block with some visible pair."""
    w, results = world
    for rank, r in enumerate(results):
        for sharding in cp.SHARDINGS:
            st = r["stats"][sharding]
            kv = st["kv_bytes"]
            assert st["forward"]["bytes_sent"] == st["forward"]["bytes_received"] == (w - 1) * kv
            assert st["backward"]["bytes_sent"] == (w - 1) * 2 * kv  # float32: dK/dV = K/V
            computed = rank + 1 if sharding == "contiguous" else w
            for phase in ("forward", "backward"):
                assert st[phase]["blocks_computed"] == computed, (sharding, phase, rank)
                assert st[phase]["blocks_skipped"] == w - computed


BAD = {
    "positions_len": "seq_len: got {n}, expected a positive multiple of 2W",
    "shard_len": "x.shape[1]: got {w1}, expected a positive multiple of W",
    "sharding": "sharding: got 'striped', expected one of contiguous, zigzag",
    "mask": "mask: got 'sliding', expected one of causal, bidirectional",
    "scheme_not_fused": "scheme: got 'deberta', expected one of none",
    "odd_zigzag_shard": "q.shape[1]: got 5, expected a positive multiple of 2",
    "kv_len": "k.shape[1]: got 2, expected q's shard length 4",
    "query_positions": "query_positions: not accepted by ring_attention",
    "heads": "k heads: got 2, expected a divisor of q's heads (3",
    "causal_only_scheme": "mask: got bidirectional, expected causal (scheme fire",
    "shard_lengths_differ": "q: shard length 6 on rank 1 but 4 on rank 0",
    "schemes_differ": "scheme: got 'rope' on rank 1 but 'alibi' on rank 0",
    "tables_differ": "table: got ",
    "one_rank_bad": "q: got (4, 2, 4), expected a rank-4 CPU tensor",
    "dtypes": "k.dtype: got torch.float32, expected q.dtype torch.float16",
    "layout": "layout: got 'nhsd', expected one of bshd, bhsd",
    "unshard_shapes_differ": "x_local: shape/dtype ((2, 6), 'torch.float32') on rank 1",
    "dim": "dim: got 2, expected a dimension of a rank-2 tensor",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_value_error_on_every_rank(world, name):
    w, results = world
    want = BAD[name].format(n=2 * w * 3 + 2, w1=w + 1)
    messages = [r["bad"][name] for r in results]
    assert all(m is not None and want in m for m in messages), messages
    if name in ("one_rank_bad", "heads", "causal_only_scheme"):
        assert all("(on rank" in m for m in messages), messages
    if name == "tables_differ":
        assert f"on rank {w - 1} but" in messages[0]


def test_without_a_process_group_every_entry_raises():
    assert not dist.is_initialized()
    q = torch.zeros(1, 4, 1, 2)
    with pytest.raises(TypeError, match="layout"):  # required, as everywhere in posenc.torch
        cp.ring_attention(q, q, q)
    for call in (lambda: cp.positions(8), lambda: cp.shard(q), lambda: cp.unshard(q),
                 lambda: cp.ring_attention(q, q, q, layout="bshd")):
        with pytest.raises(ValueError, match="process group is not initialised"):
            call()


def test_a_nccl_group_is_refused_before_any_transfer(monkeypatch):
    """posenc's tensors are CPU tensors: a NCCL group cannot carry them (no
    CUDA here, so the group's answers are stubbed; nothing is sent)."""
    for name, value in (("is_initialized", True), ("get_rank", 0), ("get_world_size", 2),
                        ("get_backend", "nccl")):
        monkeypatch.setattr(dist, name, lambda *a, value=value, **k: value)
    q = torch.zeros(1, 4, 1, 2)
    for call in (lambda: cp.unshard(q), lambda: cp.ring_attention(q, q, q, layout="bshd")):
        with pytest.raises(ValueError, match="backend 'nccl', expected one that carries CPU"):
            call()


def test_import_paths():
    import posenc.torch.distributed as by_import
    from posenc.torch import distributed as by_attribute
    assert by_import is cp is by_attribute is pt.distributed


def _hang(rank, world):
    # A group with a 2 s timeout (the default group's stays long, for the rendezvous).
    group = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=2))
    if rank == 0:
        time.sleep(120)  # never joins the collective
    else:
        q = torch.zeros(1, 4, 1, 2)
        cp.ring_attention(q, q, q, layout="bshd", group=group)


def test_a_hung_collective_fails_instead_of_hanging():
    """Rank 1 waits in ring_attention's all-gather for a rank that never
    comes: the group's timeout fails it, the harness reports it and
    terminates the sleeping rank."""
    start = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException, match="(?s)all_gather.*Timed out"):
        run_world(_hang, 2, deadline_s=60.0)
    assert time.monotonic() - start < 45
    assert not multiprocessing.active_children()


def _sleep(rank, world):
    time.sleep(120)


def test_the_deadline_terminates_a_world_that_never_ends():
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="still running after 3.0 s"):
        run_world(_sleep, 1, deadline_s=3.0)
    assert time.monotonic() - start < 20
    assert not multiprocessing.active_children()
