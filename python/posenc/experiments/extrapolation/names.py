"""Names of the extrapolation experiment's rows, importable without torch (the
command line checks them before loading torch). schemes.py builds the table
behind them and checks it matches."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

# The trained schemes, in report order.
TRAINED: Tuple[str, ...] = ("none", "sinusoidal", "learned", "rope", "alibi", "t5", "shaw",
                            "fire")
# Evaluation-only rows: name -> (trained scheme, rope_type of posenc's scaling code).
EXTENSIONS: Dict[str, Tuple[str, str]] = {
    "rope+pi": ("rope", "linear"),
    "rope+ntk": ("rope", "dynamic"),
    "rope+yarn": ("rope", "yarn"),
}
# Fine-tuned rows (finetune.py): name -> (trained scheme, rope_type of posenc's
# scaling code with the fixed factor T / L, or None: plain RoPE, the control).
FINETUNED: Dict[str, Tuple[str, Optional[str]]] = {
    "rope+ft": ("rope", None),
    "rope+pi+ft": ("rope", "linear"),
    "rope+ntk+ft": ("rope", "ntk"),
    "rope+yarn+ft": ("rope", "yarn"),
}


def base_of(name: str) -> str:
    """The trained scheme a row comes from ("rope+yarn+ft" -> "rope")."""
    if name in EXTENSIONS:
        return EXTENSIONS[name][0]
    if name in FINETUNED:
        return FINETUNED[name][0]
    return name


def known_names() -> List[str]:
    return list(TRAINED) + list(EXTENSIONS) + list(FINETUNED)
