"""Training and evaluation of one model (extrapolation experiment).

Training: AdamW (betas 0.9/0.95, weight decay 0.1 on the block matrices),
linear warm-up over the first 5 % of the steps then cosine decay to 10 % of
the peak rate, gradient norm clipped at 1; batches of random train windows of
L + 1 bytes whose start offsets are drawn once from the seed, so every scheme
sees the same data in the same order. bfloat16 autocast (oneDNN matmuls and
bfloat16 inputs to the fused attention) unless --dtype float32.

Evaluation: bits per byte = mean cross-entropy in nats / ln 2 over every
predicted byte of the windows. The training-time validation and the final
evaluation both go through evaluate(); only the batching differs, so the
value at L on the validation windows is the same (tests check it).
"""
from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import torch

from .model import TransformerLM, losses

LN2 = math.log(2.0)


def autocast_for(dtype: str) -> Callable[[], Any]:
    if dtype == "bfloat16":
        return lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext


@dataclass
class Evaluation:
    """Per-position sums of one length: nats[p] summed over the windows."""
    length: int
    windows: int
    nats: np.ndarray  # float64 [length]

    @property
    def tokens(self) -> int:
        return self.windows * self.length

    @property
    def bits_per_byte(self) -> float:
        return float(self.nats.sum() / self.tokens / LN2)

    def binned(self, bins: int) -> List[Dict[str, Any]]:
        """[{start, end, bits_per_byte, tokens}] over `bins` equal ranges of
        positions (end exclusive)."""
        bins = max(1, min(bins, self.length))
        edges = np.linspace(0, self.length, bins + 1).round().astype(int)
        out = []
        for a, b in zip(edges[:-1], edges[1:]):
            if b > a:
                out.append({"start": int(a), "end": int(b),
                            "bits_per_byte": float(self.nats[a:b].sum() / (self.windows * (b - a))
                                                   / LN2),
                            "tokens": int(self.windows * (b - a))})
        return out


@torch.no_grad()
def evaluate(model: TransformerLM, windows: np.ndarray, batch_tokens: int,
             dtype: str) -> Evaluation:
    """Loss of every predicted byte of windows [n, T + 1] (uint8), summed per
    position in float64; batches of about batch_tokens predicted bytes."""
    n, length = windows.shape[0], windows.shape[1] - 1
    model.eval()
    nats = np.zeros(length, dtype=np.float64)
    per_batch = max(1, batch_tokens // length)
    autocast = autocast_for(dtype)
    for start in range(0, n, per_batch):
        chunk = torch.from_numpy(windows[start:start + per_batch].astype(np.int64))
        nats += losses(model, chunk, autocast).double().sum(0).numpy()
    model.train()
    return Evaluation(length, n, nats)


@dataclass
class TrainOptions:
    steps: int
    batch: int
    train_length: int
    lr: float
    dtype: str
    eval_every: int
    weight_decay: float = 0.1
    clip: float = 1.0


@dataclass
class TrainResult:
    curve: List[Dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0         # training steps only (validation excluded)
    tokens: int = 0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def learning_rate(step: int, o: TrainOptions) -> float:
    warmup = max(1, o.steps // 20)
    if step < warmup:
        return o.lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, o.steps - warmup)
    return o.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def optimizer(model: TransformerLM, o: TrainOptions) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.param_groups(o.weight_decay), lr=o.lr, betas=(0.9, 0.95))


def train_step(model: TransformerLM, opt: torch.optim.Optimizer, train_data: np.ndarray,
               starts: np.ndarray, step: int, o: TrainOptions) -> float:
    """One optimiser step on the windows starting at `starts`; the mean loss
    in nats."""
    for group in opt.param_groups:
        group["lr"] = learning_rate(step, o)
    batch = torch.from_numpy(train_data[starts[:, None] + np.arange(o.train_length + 1)]
                             .astype(np.int64))
    loss = losses(model, batch, autocast_for(o.dtype)).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), o.clip)
    opt.step()
    return float(loss)


def train(model: TransformerLM, train_data: np.ndarray, offsets: np.ndarray,
          val_windows: np.ndarray, o: TrainOptions,
          on_step: Optional[Callable[[int, Optional[Dict[str, Any]]], None]] = None
          ) -> TrainResult:
    """Trains in place. offsets [steps, batch]: window starts. on_step(step,
    point) is called after every step (point: the curve entry when one was
    just measured, else None)."""
    opt = optimizer(model, o)
    result = TrainResult()
    val_batch = o.batch * o.train_length

    def validate(step: int, train_nats: Optional[float]) -> Dict[str, Any]:
        ev = evaluate(model, val_windows, val_batch, o.dtype)
        point = {"step": step, "tokens": step * o.batch * o.train_length,
                 "train_bits_per_byte": None if train_nats is None else train_nats / LN2,
                 "val_bits_per_byte": ev.bits_per_byte, "val_tokens": ev.tokens}
        result.curve.append(point)
        return point

    validate(0, None)
    model.train()
    since, nats_sum = 0, 0.0
    for step in range(o.steps):
        t0 = time.perf_counter()
        nats = train_step(model, opt, train_data, offsets[step], step, o)
        result.seconds += time.perf_counter() - t0
        result.tokens += offsets.shape[1] * o.train_length
        if not math.isfinite(nats):
            raise FloatingPointError(f"training diverged at step {step + 1} (loss {nats}); "
                                     "try a lower --lr")
        nats_sum += nats
        since += 1
        point = None
        if (step + 1) % o.eval_every == 0 or step + 1 == o.steps:
            point = validate(step + 1, nats_sum / since)
            since, nats_sum = 0, 0.0
        if on_step is not None:
            on_step(step + 1, point)
    return result


def draw_offsets(train_bytes: int, length: int, steps: int, batch: int, seed: int) -> np.ndarray:
    """[steps, batch] random window starts in [0, train_bytes - length - 1]."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, train_bytes - length, size=(steps, batch), dtype=np.int64)
