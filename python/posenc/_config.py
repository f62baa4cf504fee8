"""Model RoPE from a Hugging Face config.json or a llama.cpp GGUF file:
frequencies and attention factor of every rope type (default, linear,
dynamic, ntk, yarn, llama3, longrope, proportional), read as HF's
RotaryEmbeddingConfigMixin standardises them (posenc/model_config.h,
posenc/rope_scaling.h); GGUF metadata as llama.cpp reads it (posenc/gguf.h:
header and metadata only, plus the small rope_freqs tensor)."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import _posenc


def _source(config: Any) -> Tuple[str, bool, str]:
    """(path or JSON text, is_text, name for messages)."""
    if isinstance(config, dict):
        return json.dumps(config), True, "<config dict>"
    if isinstance(config, (str, os.PathLike)):
        return os.fspath(config), False, os.fspath(config)
    raise ValueError(f"config: got {type(config).__name__}, expected a dict or a path to "
                     "config.json or a .gguf file")


def _seq_len(seq_len: Optional[int]) -> int:
    return 0 if seq_len is None else int(seq_len)


def rope_inv_freq(config: Any, seq_len: Optional[int] = None, *, layer_type: str = "",
                  numerics: str = "hf") -> Tuple[np.ndarray, float]:
    """(inv_freq, attention_factor) of a model's RoPE.

    config: a HF config dict, the path of a config.json or of a llama.cpp
    .gguf file (same frequencies as its config.json). seq_len: None for
    the table at initialisation, else max(position_ids) + 1 of a call (dynamic
    NTK and longrope depend on it). layer_type: e.g. "sliding_attention" for
    models with one rope per layer type ("" = full attention / the only one).
    numerics "hf" reproduces transformers' float32 values; "accurate" is the
    float64 formula. inv_freq is float64 [rotary_dim / 2]. posenc.ConfigError
    (a ValueError) names the file, the JSON key and what is expected.
    """
    text, is_text, source = _source(config)
    return _posenc.rope_inv_freq(text, is_text, source, _seq_len(seq_len), layer_type, numerics)


def rope_config(config: Any, seq_len: Optional[int] = None, *, layer_type: str = "",
                numerics: str = "hf") -> Dict[str, Any]:
    """Everything posenc reads from a config for one layer type: rope_type,
    head_dim, rotary_dim, theta, pairing, factor, attention_factor, inv_freq,
    yarn range, DeepSeek softmax factor, warnings, format ("config.json" or
    "gguf"), freq_factors (a GGUF rope_freqs tensor), and per-pair details
    (`pairs`: wavelength, ratio to the default frequency, region). An ALiBi
    model (BLOOM, MPT, ...) raises posenc.ConfigError: see inspect."""
    text, is_text, source = _source(config)
    return _posenc.rope_config(text, is_text, source, _seq_len(seq_len), layer_type, numerics)


def inspect(config_path: Any, seq_len: Optional[int] = None, *, layer_type: str = "",
            numerics: str = "hf") -> Dict[str, Any]:
    """The position encoding of a config.json or .gguf (path or dict) as a
    dict: rope_config's for RoPE models; for ALiBi models position_encoding
    "alibi", num_heads, max_bias and slopes."""
    text, is_text, source = _source(config_path)
    alibi = _posenc.model_alibi(text, is_text, source)
    if alibi is not None:
        return alibi
    return rope_config(config_path, seq_len, layer_type=layer_type, numerics=numerics)
