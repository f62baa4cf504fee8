"""posenc.choose: which positional encoding for this model, answered from
posenc's own measurements (the C++ posenc/choose.h, the same answer as `posenc
choose --json`). The evidence is docs/evidence/choose.json, written by
scripts/make_evidence.py; the package carries it as choose_evidence.json."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, Optional

from . import _posenc

_HERE = os.path.dirname(os.path.abspath(__file__))


def default_evidence_path() -> str:
    """The evidence file: $POSENC_EVIDENCE, else the package's copy
    (choose_evidence.json beside this file: installed, or a link to the
    source tree's docs/evidence/choose.json in a build tree)."""
    env = os.environ.get("POSENC_EVIDENCE")
    if env:
        return env
    return os.path.join(_HERE, "choose_evidence.json")


def _length(name: str, value: Optional[int]) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name}: got {value!r}, expected a positive integer or None")
    return value


def choose(architecture: Optional[str] = None, *, train_length: Optional[int] = None,
           target_length: Optional[int] = None, finetune: str = "none",
           from_path: Optional[str] = None, engines: Iterable[str] = (),
           evidence: Optional[str] = None) -> Dict[str, Any]:
    """Ranked positional-encoding candidates for a model, best first, as the
    dict `posenc choose --json` prints: {"constraints", "candidates": [{"scheme",
    "verdict" ("recommended" | "possible" | "ruled out"), "reasons": [{"text",
    "evidence": {"source", "field", "value"} | {"citation"}}], "config"?}],
    "evidence": {"files"}}.

    architecture: "decoder" (default), "encoder", "encoder-decoder", "vision",
    "video". train_length / target_length: positive ints (defaults: the
    from_path model's original and maximum lengths, else 4096 and the train
    length). finetune: "none", "short" (up to ~1 % of the pre-training tokens)
    or "full". from_path: an existing model's config.json or .gguf (its
    answer includes the exact config change, checked by posenc's loader).
    engines: where the model must run ("transformers", "vllm", "llama.cpp",
    "flash-attention", "sdpa"). Raises ValueError for bad arguments,
    posenc.ConfigError for an invalid config, posenc.IoError for an unreadable
    file or a missing or malformed evidence file."""
    if isinstance(engines, str):
        engines = [engines]
    text = _posenc.choose_json(architecture, _length("train_length", train_length),
                               _length("target_length", target_length), finetune,
                               from_path or "", list(engines),
                               evidence or default_evidence_path())
    return json.loads(text)
