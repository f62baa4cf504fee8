"""Train short, test long: what each positional encoding does past the length
it was trained at, measured in small trained models on real text.

One small byte-level decoder-only transformer per scheme (schemes.py: none,
sinusoidal, learned, rope, alibi, t5, shaw, and fire where posenc has it),
identical except for its positional part (model.py), trained at length L on
the Brown corpus (data.py) with posenc.torch.attention, the fused kernel,
forward and backward (train.py); then bits per byte on held-out test text at
L, 2L, 4L, 8L, 16L, the loss by position at the longest length, and the
trained RoPE model with PI / NTK / YaRN frequencies from posenc's scaling code
(rows rope+pi, rope+ntk, rope+yarn, no training) and the same model fine-tuned
at a target length T = 4L with each of them and without scaling (rows
rope+pi+ft, rope+ntk+ft, rope+yarn+ft, rope+ft: finetune.py). Anchors: Press
et al. 2022 (ALiBi, Figure 1), Chen et al. 2023 (PI), Peng et al. 2023 (YaRN).

Run: `posenc experiment extrapolation -o DIR [--quick]` or
`python3 -m posenc.experiments.extrapolation -o DIR`; `posenc report
--experiment DIR` draws the results. Files: output.py.
"""
import os
import sys

# OpenMP threads that spin while waiting steal the cores from each other and
# from other jobs on a shared machine (docs/PERFORMANCE.md, "Design figures"). Set before
# torch loads libgomp; an explicit OMP_WAIT_POLICY wins.
if "torch" not in sys.modules:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .cli import main, options  # noqa: E402
from .errors import ExperimentError  # noqa: E402
from .options import Options  # noqa: E402

# The experiment itself: posenc.experiments.extrapolation.run.run(options)
# (importing it loads torch; the command line checks its arguments first).
__all__ = ["ExperimentError", "Options", "main", "options"]
