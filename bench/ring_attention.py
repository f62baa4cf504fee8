#!/usr/bin/python3
"""Ring attention (posenc.torch.distributed) against one process: time, traffic, memory.

Usage, from the repository root after building the release preset:
  PYTHONPATH=build/release/python /usr/bin/python3 bench/ring_attention.py \\
      [--seq 8192] [--world 2] [--scheme alibi] [--mask causal] [--heads 8] \\
      [--kv-heads 8] [--head-dim 64] [--dtype float32] [--reps 3] [--backward] \\
      [--shardings zigzag,contiguous] [--no-single] [--json]
Defaults: the issue's case, S = 8192, ALiBi, causal, batch 1, 8 heads of 64
(the shape of `posenc bench attention`), float32.

Cases, each in fresh processes (torch.multiprocessing spawn, gloo over
tcp://127.0.0.1, GLOO_SOCKET_IFNAME=lo):
  single  1 process x W threads: posenc.torch.attention (the fused kernel) on
          the whole sequence;
  ring    W processes x 1 thread: posenc.torch.distributed.ring_attention on
          S/W tokens each, per sharding (zigzag, contiguous).
What is measured, per process (the ring: every rank; the table shows the
maximum over ranks):
  ms      median of --reps calls after one warm-up call; ring calls start
          after a barrier and a call's time is its slowest rank's;
          --backward adds the forward + backward time;
  cpu ms  CPU time of the call, all threads of all processes (time.process_time;
          median): the work done, less sensitive than ms to other load;
  sent    bytes this rank sent per call (ring_stats(): the K/V blocks, and
          in the backward the K/V blocks again plus their float32 dK/dV);
  extra   peak extra memory: the largest resident set during the calls
          (/proc/self/statm sampled every millisecond by a thread; the
          kernels release the GIL) minus the resident set just before
          them, with the inputs already
          allocated and filled, the thread pool and the gloo connections
          started by a small call of the same kind: everything the calls
          allocate (accumulators, the visiting block and its receive
          buffer, the kernel's packed K/V tiles, saved tensors), measured;
  xfer    the ring alone: one K/V block sent to the next rank and one
          received (no compute), median of 5: what compute must hide;
  GFLOP/s the attention's 4 B H S^2 D (x 1/2 causal) flops over ms (all ranks
          together; forward only);
  step/xfer  (ms / W) / xfer: the time of one ring step against one
          transfer; above 1 the transfer can hide behind the compute;
  max|d|  the largest |ring - single| over the output (both are float32 math).
Every process runs with Debian's jemalloc preloaded (LD_PRELOAD=
libjemalloc.so.2, MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1), like
bench/torch_attention.py: freed pages stay with the process and are reused,
so the timed calls do not pay first-touch page faults (~15 us per 4 KiB page
on this machine: ~60 ms per 16 MiB buffer) for buffers a warm-up call already
had; the resident set then keeps the high-water of the warm-up call, so
"extra" is the peak of pages touched (an upper bound of the live bytes).
Inputs are generated chunk by chunk (one seed per chunk of S / (2W) tokens)
so a rank allocates only its own tokens and every case sees the same data.

Under torchrun (RANK / WORLD_SIZE set) the script runs the ring case only, as
the rank torchrun made it, with init_method env:// (docs/DISTRIBUTED.md):
  LD_PRELOAD=libjemalloc.so.2 MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 \\
      torchrun --nnodes 2 --nproc_per_node 1 --node_rank R \\
      --master_addr HOST0 --master_port 29500 --redirects 1 --tee 1 \\
      bench/ring_attention.py --seq 65536
"""
import argparse
import datetime
import json
import os
import resource
import socket
import statistics
import sys
import tempfile
import threading
import time
import zlib

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import posenc.torch as pt
from posenc.torch import distributed as cp


JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"


def rss_mib():
    """The current resident set (/proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2 ** 20


class PeakRss:
    """Samples the resident set every millisecond on a thread (the kernels
    release the GIL) and keeps the maximum."""

    def __init__(self):
        self.peak, self._stop = rss_mib(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.001):
            self.peak = max(self.peak, rss_mib())

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mib())
        return self.peak


def chunk(c, n, cfg, name):
    """Chunk c (n tokens) of the full tensor `name` ([1, S, heads, D])."""
    g = torch.Generator().manual_seed(1000003 * c + zlib.crc32(name.encode()))
    heads = cfg["kv_heads"] if name in ("k", "v") else cfg["heads"]
    return torch.randn(1, n, heads, cfg["head_dim"], generator=g).to(getattr(torch, cfg["dtype"]))


def inputs(cfg, chunks, n):
    return {name: torch.cat([chunk(c, n, cfg, name) for c in chunks], 1).contiguous()
            for name in ("q", "k", "v", "dout")}


def call(cfg, t, ring):
    """One forward (and backward with --backward) of the case."""
    q, k, v = (t[n].requires_grad_(cfg["backward"]) for n in ("q", "k", "v"))
    kw = dict(scheme=cfg["scheme"], mask=cfg["mask"], layout="bshd")
    if ring:
        out = cp.ring_attention(q, k, v, sharding=cfg["sharding"], **kw)
    else:
        out = pt.attention(q, k, v, **kw)
    if cfg["backward"]:
        out.backward(t["dout"])
        for x in (q, k, v):
            x.grad = None
    return out.detach()


def measure(rank, world, cfg, outdir):
    """Runs in every process of a case; writes rank<r>.json (+ out<r>.pt)."""
    ring = cfg["case"] == "ring"
    torch.set_num_threads(1 if ring else cfg["world"])
    s, w2 = cfg["seq"], 2 * cfg["world"]
    n = s // w2
    if ring:
        mine = [rank, w2 - 1 - rank] if cfg["sharding"] == "zigzag" else \
            [2 * rank, 2 * rank + 1]
    else:
        mine = list(range(w2))
    t = inputs(cfg, mine, n)
    small = inputs(cfg, mine, 2)  # starts the pool, the gloo pairs, the kernels' first use
    call(cfg, small, ring)
    before = rss_mib()
    sampler = PeakRss()
    times, cpu, stats = [], [], []
    for rep in range(cfg["reps"] + 1):
        if ring:
            dist.barrier()
            cp.ring_stats(reset=True)
        start, start_cpu = time.perf_counter(), time.process_time()
        out = call(cfg, t, ring)
        elapsed, used = time.perf_counter() - start, time.process_time() - start_cpu
        if ring:
            stats.append(cp.ring_stats(reset=True))
        if rep:
            times.append(elapsed)
            cpu.append(used)
    extra = sampler.stop() - before
    res = {"rank": rank, "ms": [1e3 * x for x in times], "cpu_ms": [1e3 * x for x in cpu],
           "extra_mib": extra,
           "bytes_sent": stats[-1]["bytes_sent"] if stats else 0,
           "blocks_computed": stats[-1]["blocks_computed"] if stats else 0,
           "input_mib": sum(x.numel() * x.element_size() for x in t.values()) / 2 ** 20}
    if ring:
        res["xfer_ms"] = transfer_ms(t["k"], t["v"], rank, world)
    torch.save(out, os.path.join(outdir, f"out{rank}.pt"))
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)


def transfer_ms(k, v, rank, world):
    send = [k.detach().contiguous(), v.detach().contiguous()]
    recv = [torch.empty_like(x) for x in send]
    times = []
    for _ in range(5):
        dist.barrier()
        start = time.perf_counter()
        ops = [dist.P2POp(dist.isend, x, (rank + 1) % world) for x in send] + \
              [dist.P2POp(dist.irecv, x, (rank - 1) % world) for x in recv]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def _entry(rank, world, port, cfg, outdir):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=1800))
    try:
        measure(rank, world, cfg, outdir)
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_case(cfg):
    procs = cfg["world"] if cfg["case"] == "ring" else 1
    with tempfile.TemporaryDirectory() as outdir:
        mp.start_processes(_entry, args=(procs, free_port(), cfg, outdir), nprocs=procs,
                           join=True, start_method="spawn")
        ranks = []
        for r in range(procs):
            with open(os.path.join(outdir, f"rank{r}.json")) as f:
                ranks.append(json.load(f))
        outs = [torch.load(os.path.join(outdir, f"out{r}.pt")) for r in range(procs)]
    reps = len(ranks[0]["ms"])
    per_call = [max(r["ms"][i] for r in ranks) for i in range(reps)]
    cpu_call = [sum(r["cpu_ms"][i] for r in ranks) for i in range(reps)]
    return {**{k: cfg[k] for k in ("case", "sharding")}, "procs": procs,
            "threads": 1 if procs > 1 else cfg["world"], "ms": statistics.median(per_call),
            "cpu_ms": statistics.median(cpu_call),
            "bytes_sent_per_rank": max(r["bytes_sent"] for r in ranks),
            "peak_extra_mib_per_rank": max(r["extra_mib"] for r in ranks),
            "xfer_ms": max(r.get("xfer_ms", 0.0) for r in ranks),
            "blocks_computed": [r["blocks_computed"] for r in ranks],
            "input_mib_per_rank": max(r["input_mib"] for r in ranks), "ranks": ranks}, outs


def positions(cfg, sharding, rank):
    s, w = cfg["seq"], cfg["world"]
    n = s // (2 * w)
    chunks = [rank, 2 * w - 1 - rank] if sharding == "zigzag" else [2 * rank, 2 * rank + 1]
    return torch.cat([torch.arange(c * n, (c + 1) * n) for c in chunks])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--scheme", default="alibi")
    ap.add_argument("--mask", default="causal")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--backward", action="store_true")
    ap.add_argument("--shardings", default="zigzag,contiguous")
    ap.add_argument("--no-single", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if os.path.exists(JEMALLOC) and "LD_PRELOAD" not in os.environ:  # for the spawned processes
        os.environ["LD_PRELOAD"] = JEMALLOC
        os.environ["MALLOC_CONF"] = "dirty_decay_ms:-1,muzzy_decay_ms:-1"
    cfg = dict(seq=a.seq, world=a.world, scheme=a.scheme, mask=a.mask, heads=a.heads,
               kv_heads=a.kv_heads, head_dim=a.head_dim, dtype=a.dtype, reps=a.reps,
               backward=a.backward, sharding=None)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # launched by torchrun
        a.world = int(os.environ["WORLD_SIZE"])
    if a.seq % (2 * a.world):
        sys.exit(f"--seq: got {a.seq}, expected a multiple of 2 x world = {2 * a.world}")
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        dist.init_process_group("gloo")
        cfg["world"] = dist.get_world_size()
        with tempfile.TemporaryDirectory() as outdir:
            for sharding in a.shardings.split(","):
                measure(dist.get_rank(), dist.get_world_size(),
                        dict(cfg, case="ring", sharding=sharding), outdir)
                with open(os.path.join(outdir, f"rank{dist.get_rank()}.json")) as f:
                    print(sharding, f.read(), flush=True)
        dist.destroy_process_group()
        return
    results, single = [], None
    if not a.no_single:
        res, outs = run_case(dict(cfg, case="single"))
        results.append(res)
        single = outs[0]
    for sharding in a.shardings.split(","):
        res, outs = run_case(dict(cfg, case="ring", sharding=sharding))
        if single is not None:
            res["max_abs_diff"] = max(
                (o.double() - single[:, positions(cfg, sharding, r)].double()).abs().max().item()
                for r, o in enumerate(outs))
        results.append(res)
    block = 2 * (a.seq // a.world) * a.kv_heads * a.head_dim  # elements per hop
    info = {"config": {k: v for k, v in cfg.items() if k != "sharding"},
            "block_elements": block, "block_mib": block * torch.tensor([], dtype=getattr(
                torch, a.dtype)).element_size() / 2 ** 20,
            "host": socket.gethostname(), "torch": torch.__version__,
            "allocator": os.environ.get("LD_PRELOAD", "glibc"),
            "load_avg": os.getloadavg(), "results": results}
    if a.json:
        print(json.dumps(info, indent=1))
        return
    print(f"S={a.seq} {a.scheme} {a.mask} B=1 H={a.heads} Hkv={a.kv_heads} D={a.head_dim} "
          f"{a.dtype}{' forward+backward' if a.backward else ' forward'}; one hop = "
          f"2*B*(S/W)*Hkv*D = {block} elements ({info['block_mib']:.1f} MiB); "
          f"load {os.getloadavg()[0]:.1f}")
    flops = 4 * a.heads * a.seq ** 2 * a.head_dim * (0.5 if a.mask == "causal" else 1.0)
    print(f"{'case':<20}{'procs x thr':>12}{'ms':>10}{'speedup':>9}{'cpu ms':>9}{'GFLOP/s':>9}"
          f"{'sent/rank MiB':>15}{'extra/rank MiB':>16}{'xfer ms':>9}{'step/xfer':>10}"
          f"{'max|d|':>10}")
    base = results[0]["ms"] if not a.no_single else None
    for r in results:
        name = r["case"] + (f" {r['sharding']}" if r["sharding"] else "")
        speed = f"{base / r['ms']:.2f}x" if base else "-"
        diff = f"{r['max_abs_diff']:.1e}" if "max_abs_diff" in r else "-"
        gflops = "-" if a.backward else f"{flops / r['ms'] / 1e6:.1f}"
        ratio = f"{r['ms'] / a.world / r['xfer_ms']:.0f}" if r["xfer_ms"] else "-"
        print(f"{name:<20}{r['procs']:>6} x {r['threads']:<4}{r['ms']:>10.1f}{speed:>9}"
              f"{r['cpu_ms']:>9.0f}{gflops:>9}{r['bytes_sent_per_rank'] / 2 ** 20:>15.1f}"
              f"{r['peak_extra_mib_per_rank']:>16.1f}{r['xfer_ms']:>9.1f}{ratio:>10}{diff:>10}")


if __name__ == "__main__":
    main()
