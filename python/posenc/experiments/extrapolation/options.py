"""The options of one extrapolation run (defaults = the full run: about 12
minutes on 2 idle cores, at most 20; cli.QUICK overrides some for --quick)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional


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
    eval_tokens: int = 65536    # test bytes predicted at every length
    val_tokens: int = 8192      # validation bytes of the training curve
    curve_points: int = 16
    speed_check: bool = True
    speed_steps: int = 8        # timed steps per attention and dtype (alternating)
