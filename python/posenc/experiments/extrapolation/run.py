"""The extrapolation experiment from start to end: data, one model per scheme
trained at L, evaluation at every length, the training-free and fine-tuned
RoPE extension rows (finetune.py), results (see __init__.py)."""
from __future__ import annotations

import datetime
import os
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch

import posenc

from . import data as data_mod
from . import finetune as ft
from .errors import ExperimentError
from .machine import blas_library, cpu_model
from .model import TransformerLM
from .names import FINETUNED, base_of
from .options import Options
from .progress import Progress
from .schemes import EXTENSIONS, NOT_TRAINED, SCHEMES, ModelShape, default_names
from .train import (Evaluation, TrainOptions, TrainResult, draw_offsets, evaluate, optimizer,
                    train, train_step)

LOSS_BINS = 64


def set_threads(n: int) -> str:
    """torch and posenc threads; returns what posenc runs on (for the record)."""
    torch.set_num_threads(n)
    if hasattr(posenc, "set_num_threads"):
        posenc.set_num_threads(n)
        return f"{n} (posenc.set_num_threads)"
    return "1 (this posenc.torch runs its kernels on one thread)"


def check_sizes(o: Options, corpus: data_mod.Corpus, finetuned: bool = False) -> int:
    """Raises when a split is too small for the configuration; returns the
    test span (predicted bytes shared by every evaluation length)."""
    L = o.train_length
    where = "--corpus" if o.corpus else "corpus"
    if corpus.train.data.size < L + 2:
        raise ExperimentError(f"{where}: the train split has {corpus.train.data.size} bytes, "
                              f"expected at least {L + 2} (one window of --train-length {L})")
    if corpus.val.data.size < L + 1:
        raise ExperimentError(f"{where}: the validation split has {corpus.val.data.size} bytes, "
                              f"expected at least {L + 1} (one window of --train-length {L})")
    longest = max(o.eval_lengths)
    span = data_mod.eval_span(corpus.test.data, longest, o.eval_tokens)
    if span == 0:
        raise ExperimentError(
            f"{where}: the test split has {corpus.test.data.size} bytes, expected at least "
            f"{longest + 1} (one window of the longest --eval-lengths {longest})")
    if finetuned:
        T = o.resolved_finetune_length()
        for split, need in ((corpus.train, T + 2), (corpus.val, T + 1)):
            if split.data.size < need:
                name = "train" if split is corpus.train else "validation"
                raise ExperimentError(
                    f"--finetune-length: got {T}, but the {name} split has {split.data.size} "
                    f"bytes, expected at least {need} (one window of T for the +ft rows)")
    return span


def work_units(o: Options, trained: List[str], rows: int, finetuned: int = 0) -> float:
    L = o.train_length
    train = 3.0 * o.steps * o.batch * L * len(trained)
    val = (o.curve_points + 1) * o.val_tokens * len(trained)
    evals = (rows + finetuned) * sum(o.eval_tokens * (1 + n / (4 * L)) for n in o.eval_lengths)
    return train + val + evals + ft.work_units(o, finetuned)


def speed_check(o: Options, shape: ModelShape, train_data: np.ndarray,
                progress: Progress) -> List[Dict[str, Any]]:
    """Training tokens/s of the alibi model with the fused attention and with
    torch's own attention (bias materialised), bfloat16 autocast and float32.
    The two attentions alternate step by step (after one untimed step each)
    so that both see the same machine load; the median step time counts."""
    rows = []
    steps = o.speed_steps
    offsets = draw_offsets(train_data.size, o.train_length, steps + 1, o.batch, o.seed)
    tokens = o.batch * o.train_length
    for dtype in ("bfloat16", "float32"):
        topt = TrainOptions(steps=steps + 1, batch=o.batch, train_length=o.train_length, lr=o.lr,
                            dtype=dtype, eval_every=steps + 1)
        runs = {}
        for impl in ("posenc", "torch"):
            model = TransformerLM(shape, SCHEMES["alibi"], o.seed,
                                  o.precision if dtype == "bfloat16" else "float32")
            model.attention_impl = impl
            runs[impl] = (model, optimizer(model, topt), [])
            train_step(model, runs[impl][1], train_data, offsets[0], 0, topt)
        for step in range(1, steps + 1):
            for impl, (model, opt, times) in runs.items():
                t0 = time.perf_counter()
                train_step(model, opt, train_data, offsets[step], step, topt)
                times.append(time.perf_counter() - t0)
        for impl, (_, _, times) in runs.items():
            tok_s = tokens / float(np.median(times))
            rows.append({"scheme": "alibi", "attention": impl, "dtype": dtype,
                         "tokens_per_s": tok_s, "steps": steps})
            progress.line(f"speed check: alibi, {impl} attention, {dtype}: "
                          f"{tok_s:,.0f} training tokens/s (median of {steps} steps)")
    return rows


def evaluate_all(model: TransformerLM, windows: Dict[int, np.ndarray], o: Options,
                 progress: Progress, label: str
                 ) -> Tuple[List[Dict[str, Any]], Optional[Evaluation]]:
    """One eval row per length ({length, bits_per_byte, tokens[, error]});
    the Evaluation of the longest length that ran."""
    rows, longest = [], None
    for n in o.eval_lengths:
        try:
            ev = evaluate(model, windows[n], max(o.batch * o.train_length, n), o.dtype)
            rows.append({"length": n, "bits_per_byte": ev.bits_per_byte, "tokens": ev.tokens})
            longest = ev
            status = f"{ev.bits_per_byte:.4f} bits/byte over {ev.tokens:,} bytes"
        except ValueError as e:  # posenc's own message (e.g. past the learned table)
            rows.append({"length": n, "bits_per_byte": None, "tokens": 0, "error": str(e)})
            status = f"error: {e}"
        progress.advance(o.eval_tokens * (1 + n / (4 * o.train_length)), f"{label} eval {n}")
        progress.line(f"{label}: eval at {n}: {status}")
    return rows, longest


def _config(o: Options, corpus: data_mod.Corpus, shape: ModelShape, span: int,
            val_windows: np.ndarray, plan: Optional[ft.FinetunePlan], finetuned: List[str],
            posenc_threads: str, speed: List[Dict[str, Any]], started: float,
            load_before: Tuple[float, float, float], complete: bool) -> Dict[str, Any]:
    """The results' "config": the run's settings, data, machine and timing so far."""
    L = o.train_length
    return {
        "experiment": "extrapolation", "quick": o.quick, "complete": complete,
        "corpus": corpus.summary(), "model": model_summary(shape),
        "train_length": L, "eval_lengths": o.eval_lengths, "steps": o.steps,
        "batch": o.batch, "lr": o.lr, "dtype": o.dtype, "precision": o.precision,
        "seed": o.seed, "threads": o.threads,
        "posenc_threads": posenc_threads, "eval_tokens": span,
        "val_tokens": int(val_windows.shape[0] * L),
        "tokens_per_scheme": o.steps * o.batch * L,
        "finetune": None if plan is None else {
            "length": plan.length, "steps": plan.steps, "batch": plan.batch,
            "lr": plan.lr, "tokens": plan.tokens,
            "fraction_of_pretraining": plan.tokens / plan.pretraining_tokens,
            "offsets_seed": o.seed + 1, "val_tokens": int(plan.val_windows.shape[0]
                                                          * plan.length),
            "rows": finetuned},
        "seconds": time.monotonic() - started,
        "load_average": {"before": load_before[0], "after": os.getloadavg()[0]},
        "not_trained": {k: v for k, v in NOT_TRAINED.items()},
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                    "simd_target": posenc.simd_target(),
                    "torch": torch.__version__, "blas": blas_library()},
        "speed": speed,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _train_progress(name: str, o: Options,
                    progress: Progress) -> Callable[[int, Optional[Dict[str, Any]]], None]:
    """The on_step callback of training scheme `name`: advances the progress
    and prints each curve point."""
    units_per_step = 3.0 * o.batch * o.train_length

    def on_step(step: int, point: Optional[Dict[str, Any]]) -> None:
        progress.advance(units_per_step + (o.val_tokens if point else 0),
                         f"{name} step {step}/{o.steps}")
        if point is not None:
            progress.line(f"{name} step {step}/{o.steps}: train "
                          f"{point['train_bits_per_byte']:.4f}, validation "
                          f"{point['val_bits_per_byte']:.4f} bits/byte")
    return on_step


def _trained_entry(name: str, model: TransformerLM, counts: Dict[str, int], result: TrainResult,
                   test_windows: Dict[int, np.ndarray], val_windows: np.ndarray, o: Options,
                   progress: Progress) -> Dict[str, Any]:
    """The row of a trained scheme: evaluated at every length, with its
    training curve and a recheck of the validation windows."""
    L = o.train_length
    rows, longest = evaluate_all(model, test_windows, o, progress, name)
    entry = scheme_entry(name, name, counts, result.tokens_per_s, rows, longest)
    entry.update({"adds": SCHEMES[name].adds, "attention": SCHEMES[name].attention,
                  "train_seconds": result.seconds, "curve": result.curve,
                  "curve_length": L, "val_bits_per_byte": result.curve[-1]["val_bits_per_byte"],
                  "val_drop_last_quarter": last_quarter_drop(result.curve)})
    # The same validation windows through the evaluation path (other batching).
    recheck = evaluate(model, val_windows, 4 * o.batch * L + L, o.dtype)
    entry["val_recheck_bits_per_byte"] = recheck.bits_per_byte
    return entry


def _add_extensions(schemes: Dict[str, Dict[str, Any]], name: str, model: TransformerLM,
                    extensions: List[str], counts: Dict[str, int], tok_s: float,
                    test_windows: Dict[int, np.ndarray], o: Options, progress: Progress) -> None:
    """Evaluates the training-free extension rows of trained scheme `name`
    into `schemes`, in order; the model is left without an extension."""
    for ext in extensions:
        if EXTENSIONS[ext][0] != name:
            continue
        model.position.extension = EXTENSIONS[ext][1]
        rows, longest = evaluate_all(model, test_windows, o, progress, ext)
        e = scheme_entry(ext, name, counts, tok_s, rows, longest)
        e["extension"] = {"rope_type": EXTENSIONS[ext][1],
                          "factor": "eval length / train length",
                          "original_max_position_embeddings": o.train_length}
        schemes[ext] = e
        model.position.extension = None


def run(o: Options, progress: Optional[Progress] = None,
        on_scheme: Optional[Callable[[Dict[str, Any]], None]] = None,
        corpus: Optional[data_mod.Corpus] = None) -> Dict[str, Any]:
    """Runs the experiment; returns the results dict. on_scheme(results so
    far, config["complete"] false) is called after every trained scheme (the
    CLI writes them, so a long run that stops keeps what it measured)."""
    started = time.monotonic()
    load_before = os.getloadavg()
    posenc_threads = set_threads(o.threads)
    corpus = corpus or data_mod.load_corpus(o.corpus)
    if o.schemes is None:
        o.schemes = default_names()
    finetuned = [f for f in FINETUNED if f in o.schemes]
    span = check_sizes(o, corpus, bool(finetuned))
    L = o.train_length
    shape = ModelShape(o.dim, o.heads, o.layers, L)
    trained = [n for n in SCHEMES if any(base_of(s) == n for s in o.schemes)]
    extensions = [e for e in EXTENSIONS if e in o.schemes]
    progress = progress or Progress(0)
    progress.total = work_units(o, trained, len(trained) + len(extensions), len(finetuned))
    progress.line(f"corpus: {corpus.description}; split (documents / bytes): "
                  + ", ".join(f"{k} {v['documents']} / {v['bytes']:,}"
                              for k, v in corpus.summary().items() if isinstance(v, dict)))
    test_windows = {n: data_mod.windows(corpus.test.data, n, span) for n in o.eval_lengths}
    val_span = data_mod.eval_span(corpus.val.data, L, o.val_tokens)
    val_windows = data_mod.windows(corpus.val.data, L, max(val_span, L))
    offsets = draw_offsets(corpus.train.data.size, L, o.steps, o.batch, o.seed)
    plan = ft.make_plan(o, corpus) if finetuned else None
    speed = speed_check(o, shape, corpus.train.data, progress) if o.speed_check else []

    def config_of(complete: bool) -> Dict[str, Any]:
        return _config(o, corpus, shape, span, val_windows, plan, finetuned, posenc_threads,
                       speed, started, load_before, complete)

    schemes: Dict[str, Dict[str, Any]] = {}
    eval_every = max(1, o.steps // max(1, o.curve_points))
    for name in trained:
        model = TransformerLM(shape, SCHEMES[name], o.seed, o.precision)
        counts = model.counts()
        progress.line(f"{name}: training {counts['params']:,} parameters "
                      f"({counts['positional_params']:,} positional), {o.steps} steps")
        on_step = _train_progress(name, o, progress)
        topt = TrainOptions(steps=o.steps, batch=o.batch, train_length=L, lr=o.lr,
                            dtype=o.dtype, eval_every=eval_every)
        try:
            result = train(model, corpus.train.data, offsets, val_windows, topt, on_step)
        except FloatingPointError as e:  # reported as the scheme's rows, the run goes on
            progress.line(f"{name}: {e}")
            rows = [{"length": n, "bits_per_byte": None, "tokens": 0, "error": str(e)}
                    for n in o.eval_lengths]
            schemes[name] = scheme_entry(name, name, counts, 0.0, rows, None)
            continue
        progress.line(f"{name}: {result.tokens_per_s:,.0f} training tokens/s "
                      f"({result.seconds:.0f} s)")
        weights = ft.snapshot(model) if plan is not None and name == "rope" else None
        schemes[name] = _trained_entry(name, model, counts, result, test_windows, val_windows, o,
                                       progress)
        _add_extensions(schemes, name, model, extensions, counts, result.tokens_per_s,
                        test_windows, o, progress)
        if weights is not None and plan is not None:
            for row in finetuned:
                schemes[row] = finetune_row(row, weights, shape, plan, o, corpus, test_windows,
                                            counts, progress)
        if on_scheme is not None:
            on_scheme({"config": config_of(False), "schemes": schemes})
    progress.finish()
    return {"config": config_of(True), "schemes": schemes}


def finetune_row(name: str, weights: Dict[str, Any], shape: ModelShape, plan: ft.FinetunePlan,
                 o: Options, corpus: data_mod.Corpus, test_windows: Dict[int, np.ndarray],
                 counts: Dict[str, int], progress: Progress) -> Dict[str, Any]:
    """One fine-tuned row: the trained rope weights trained on at T with the
    row's fixed scaling (finetune.py), then evaluated at every length."""
    model = ft.build(shape, weights, name, plan, o.seed, o.precision)
    L, T = o.train_length, plan.length
    share = (1 + T / (4 * L)) / 1.25
    units_per_step = 3.0 * plan.batch * T * share
    val_units = plan.val_windows.shape[0] * T * share
    progress.line(f"{name}: fine-tuning the trained rope model at T = {T} "
                  f"({FINETUNED[name][1] or 'plain RoPE, no'} scaling"
                  f"{'' if FINETUNED[name][1] is None else f', factor {plan.factor:g}'}), "
                  f"{plan.steps} steps of {plan.batch} windows, peak lr {plan.lr:g}")

    def on_step(step: int, point: Optional[Dict[str, Any]]) -> None:
        progress.advance(units_per_step + (val_units if point else 0),
                         f"{name} step {step}/{plan.steps}")
        if point is not None:
            progress.line(f"{name} step {step}/{plan.steps}: train "
                          f"{point['train_bits_per_byte']:.4f}, validation at {T} "
                          f"{point['val_bits_per_byte']:.4f} bits/byte")
    try:
        result = ft.finetune(model, plan, corpus.train.data, o.dtype, on_step)
    except FloatingPointError as e:
        progress.line(f"{name}: {e}")
        rows = [{"length": n, "bits_per_byte": None, "tokens": 0, "error": str(e)}
                for n in o.eval_lengths]
        entry = scheme_entry(name, "rope", counts, 0.0, rows, None)
        entry["finetune"] = ft.record(name, plan, None)
        return entry
    progress.line(f"{name}: {result.tokens_per_s:,.0f} fine-tuning tokens/s at {T} "
                  f"({result.seconds:.0f} s)")
    rows, longest = evaluate_all(model, test_windows, o, progress, name)
    entry = scheme_entry(name, "rope", counts, result.tokens_per_s, rows, longest)
    entry.update({"finetune": ft.record(name, plan, result), "train_seconds": result.seconds,
                  "curve": result.curve, "curve_length": T,
                  "val_bits_per_byte": result.curve[-1]["val_bits_per_byte"],
                  "val_drop_last_quarter": last_quarter_drop(result.curve)})
    return entry


def scheme_entry(name: str, trained_as: str, counts: Dict[str, int], tok_s: float,
                 rows: List[Dict[str, Any]], longest: Optional[Evaluation]) -> Dict[str, Any]:
    return {"trained_as": trained_as, "params": counts["params"],
            "positional_params": counts["positional_params"], "train_tokens_per_s": tok_s,
            "eval": rows,
            "loss_by_position": longest.binned(LOSS_BINS) if longest is not None else [],
            "loss_by_position_length": longest.length if longest is not None else None}


def last_quarter_drop(curve: List[Dict[str, Any]]) -> Optional[float]:
    """Validation bits/byte at 3/4 of the steps minus at the end (how flat
    the curve ended)."""
    if len(curve) < 3:
        return None
    last = curve[-1]["step"]
    at = min(curve, key=lambda p: abs(p["step"] - 0.75 * last))
    return at["val_bits_per_byte"] - curve[-1]["val_bits_per_byte"]


def model_summary(shape: ModelShape) -> Dict[str, Any]:
    return {"type": "decoder-only transformer, pre-LayerNorm, GELU MLP (4d), tied byte "
                    "embeddings, linear layers without bias",
            "vocab": 256, "dim": shape.dim, "heads": shape.heads, "head_dim": shape.head_dim,
            "layers": shape.layers,
            "attention": "posenc.torch.attention (fused kernel, forward and backward)"}

