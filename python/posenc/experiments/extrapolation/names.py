"""Names of the extrapolation experiment's rows, importable without torch (the
command line checks them before loading torch). schemes.py builds the table
behind them and checks it matches."""
from __future__ import annotations

from typing import Dict, List, Tuple

# The trained schemes, in report order.
TRAINED: Tuple[str, ...] = ("none", "sinusoidal", "learned", "rope", "alibi", "t5", "shaw",
                            "fire")
# Evaluation-only rows: name -> (trained scheme, rope_type of posenc's scaling code).
EXTENSIONS: Dict[str, Tuple[str, str]] = {
    "rope+pi": ("rope", "linear"),
    "rope+ntk": ("rope", "dynamic"),
    "rope+yarn": ("rope", "yarn"),
}


def known_names() -> List[str]:
    return list(TRAINED) + list(EXTENSIONS)
