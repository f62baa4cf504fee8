"""The options of one extrapolation run (defaults = the full run: 15:50
measured on 2 cores shared with other work (load average 2-3), 11:47 before
the +ft rows on an idle machine; the 4 x 200 fine-tuning steps of the +ft rows
took 70 s of it; cli.QUICK overrides some for --quick)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

# Default fine-tuning peak rate relative to --lr (finetune.py says why).
FINETUNE_LR_RATIO = 0.3


@dataclass
class Options:
    output: str
    corpus: Optional[str] = None
    quick: bool = False
    steps: int = 1000
    train_length: int = 128
    eval_lengths: List[int] = field(default_factory=list)  # empty: L x 1, 2, 4, 8, 16
    schemes: Optional[List[str]] = None   # None: every available scheme (schemes.default_names)
    seed: int = 0
    threads: int = 2
    batch: int = 32
    dim: int = 128
    heads: int = 4
    layers: int = 2
    lr: float = 5e-3
    dtype: str = "bfloat16"
    # precision of P and dS in posenc's fused attention (posenc.torch.attention
    # precision=): "bfloat16" needs dtype "bfloat16".
    precision: str = "float32"
    eval_tokens: int = 65536    # test bytes predicted at every length
    val_tokens: int = 8192      # validation bytes of the training curve
    curve_points: int = 16
    speed_check: bool = True
    speed_steps: int = 8        # timed steps per attention and dtype (alternating)
    # Fine-tuned rows (finetune.py): target length T (None: 4 x train_length),
    # optimiser steps at T, peak learning rate (None: FINETUNE_LR_RATIO x lr).
    finetune_length: Optional[int] = None
    finetune_steps: int = 200
    finetune_lr: Optional[float] = None

    def resolved_finetune_length(self) -> int:
        return self.finetune_length or 4 * self.train_length

    def resolved_finetune_lr(self) -> float:
        return self.finetune_lr if self.finetune_lr is not None else \
            FINETUNE_LR_RATIO * self.lr
