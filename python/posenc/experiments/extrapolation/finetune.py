"""Fine-tuned context extension (extrapolation experiment): the rows
rope+ft, rope+pi+ft, rope+ntk+ft and rope+yarn+ft.

After training, the rope model trains on at a target length T (default 4L,
--finetune-length) for --finetune-steps steps, once per frequency scheme of
posenc's scaling code, each with the FIXED scaling factor s = T / L and
original_max_position_embeddings = L at every length it later runs at
(schemes.Rope.fixed; the training-free rope+pi / rope+ntk / rope+yarn rows
instead use factor = evaluation length / L):

| row          | rope_type | frequencies (s = T / L)                                 |
| ------------ | --------- | ------------------------------------------------------- |
| rope+ft      | (none)    | plain RoPE: the control, long windows without scaling   |
| rope+pi+ft   | linear    | positions / s (Chen et al. 2023, PI, arXiv 2306.15595)  |
| rope+ntk+ft  | ntk       | base theta * s^(d/(d-2)) (bloc97's NTK-aware scaling)   |
| rope+yarn+ft | yarn      | NTK-by-parts, attention factor 0.1 ln s + 1 (Peng et    |
|              |           | al. 2023, YaRN, arXiv 2309.00071)                       |

The control separates what comes from the scaling from what comes from
having seen windows of length T at all. Every row starts from the same
snapshot of the trained weights (taken right after training) and uses the
same optimiser (a fresh AdamW, train.py's settings), the same schedule, the
same seed and the same data order: start offsets drawn once from seed + 1
and shared by every row. A step holds as many tokens as a training step
(batch x L / T windows of T, at least one), so --finetune-steps steps are
steps x batch x L tokens at most, and the fraction of pre-training is
fine-tuning tokens / (steps x batch x L).

Peak learning rate: 0.3 x --lr by default (FINETUNE_LR_RATIO), with the same
5 % warm-up and cosine decay to 10 % as training. Pre-training ends its
cosine at 0.1 x --lr; restarting at the full peak would undo part of the
pre-training within a few hundred steps. The papers' ratios (PI fine-tunes
LLaMA at 2e-5 against a pre-training peak of 3e-4, about 0.07 x; YaRN also
at 2e-5) belong to models trained on about a trillion tokens, not 4M.
Measured here (default model, 1,000 training steps, 100 fine-tuning steps at
T = 512, bits/byte on the test text at T): 0.3 x (1.5e-3) ended rope+ft at
2.531 against 2.570 with 0.1 x, and rope+yarn+ft at 2.509 against 2.508,
with smooth curves at both rates: no worse anywhere, better for the control.

Steps: 200 by default (with the default batch 819,200 tokens, 20 % of
pre-training), chosen so that the default run stays under 20 minutes on 2
cores (the run of 2026-12-04, machine shared with other work: 16-19 s of
training per row, 15:50 for the whole run); --quick runs 12. The validation
curve of each row is measured at T on held-out validation windows of length
T, and its drop over the last quarter is the row's val_drop_last_quarter.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

import numpy as np

from . import data as data_mod
from .model import TransformerLM
from .names import FINETUNED
from .options import Options
from .schemes import SCHEMES, ModelShape
from .train import TrainOptions, TrainResult, draw_offsets, train


@dataclass
class FinetunePlan:
    """What every fine-tuned row shares."""
    length: int                 # T
    steps: int
    batch: int                  # windows of T per step
    lr: float
    offsets: np.ndarray         # [steps, batch] window starts (seed + 1)
    val_windows: np.ndarray     # [n, T + 1] validation windows
    eval_every: int
    train_length: int           # L
    pretraining_tokens: int     # steps x batch x L of the trained model

    @property
    def factor(self) -> float:
        return self.length / self.train_length

    @property
    def tokens(self) -> int:
        return self.steps * self.batch * self.length


def batch_at(o: Options, length: int) -> int:
    """Windows of `length` holding a training step's tokens (at least 1)."""
    return max(1, o.batch * o.train_length // length)


def make_plan(o: Options, corpus: data_mod.Corpus) -> FinetunePlan:
    T = o.resolved_finetune_length()
    batch = batch_at(o, T)
    span = data_mod.eval_span(corpus.val.data, T, max(o.val_tokens, T))
    return FinetunePlan(
        length=T, steps=o.finetune_steps, batch=batch, lr=o.resolved_finetune_lr(),
        offsets=draw_offsets(corpus.train.data.size, T, o.finetune_steps, batch, o.seed + 1),
        val_windows=data_mod.windows(corpus.val.data, T, max(span, T)),
        eval_every=max(1, o.finetune_steps // max(1, o.curve_points)),
        train_length=o.train_length, pretraining_tokens=o.steps * o.batch * o.train_length)


def work_units(o: Options, rows: int) -> float:
    """Progress units of `rows` fine-tuned rows (training and validation at T;
    their evaluation is counted with the other rows'): a token at T costs
    its attention share (1 + T / 4L) relative to one at L."""
    if rows == 0:
        return 0.0
    L, T = o.train_length, o.resolved_finetune_length()
    share = (1 + T / (4 * L)) / 1.25
    points = o.finetune_steps // max(1, o.finetune_steps // max(1, o.curve_points)) + 1
    per_row = (3.0 * o.finetune_steps * batch_at(o, T) * T * share
               + points * max(o.val_tokens, T) * share)
    return rows * per_row


def snapshot(model: TransformerLM) -> Dict[str, Any]:
    """The trained weights every fine-tuned row starts from."""
    return copy.deepcopy(model.state_dict())


def build(shape: ModelShape, weights: Dict[str, Any], name: str, plan: FinetunePlan,
          seed: int, precision: str = "float32") -> TransformerLM:
    """A fresh rope model with the snapshot's weights and the row's fixed scaling."""
    model = TransformerLM(shape, SCHEMES[FINETUNED[name][0]], seed, precision)
    model.load_state_dict(weights)
    rope_type = FINETUNED[name][1]
    model.position.fixed = None if rope_type is None else (rope_type, plan.factor)
    return model


def finetune(model: TransformerLM, plan: FinetunePlan, train_data: np.ndarray, dtype: str,
             on_step: Optional[Callable[[int, Optional[Dict[str, Any]]], None]] = None
             ) -> TrainResult:
    """Trains the row's model in place at T (a fresh AdamW; curve at T)."""
    topt = TrainOptions(steps=plan.steps, batch=plan.batch, train_length=plan.length,
                        lr=plan.lr, dtype=dtype, eval_every=plan.eval_every)
    return train(model, train_data, plan.offsets, plan.val_windows, topt, on_step)


def record(name: str, plan: FinetunePlan, result: Optional[TrainResult]) -> Dict[str, Any]:
    """The row's "finetune" entry of results.json."""
    rope_type = FINETUNED[name][1]
    return {"length": plan.length, "steps": plan.steps, "tokens": plan.tokens,
            "fraction_of_pretraining": plan.tokens / plan.pretraining_tokens,
            "batch": plan.batch, "lr": plan.lr, "rope_type": rope_type,
            "factor": None if rope_type is None else plan.factor,
            "original_max_position_embeddings": plan.train_length,
            "seconds": result.seconds if result is not None else 0.0,
            "tokens_per_s": result.tokens_per_s if result is not None else 0.0}
