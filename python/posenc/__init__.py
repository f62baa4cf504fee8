"""posenc: positional encodings for transformer models.

The C++ library's API for numpy arrays and torch tensors (zero-copy: the
buffer protocol for numpy, DLPack for torch, float32/float64/bfloat16/
float16), with the GIL released inside kernels. `posenc.torch` adds autograd
Functions and nn.Modules. Errors: ValueError for invalid arguments
(posenc.ConfigError, a ValueError, for bad model configs), posenc.IoError (an
OSError) for files, RuntimeError otherwise; the message names the argument,
the value and what is allowed.

Threads: a call with ctx=None runs on the process-wide default Context,
posenc.set_num_threads(n) (initially one thread per core available, or the
POSENC_NUM_THREADS environment variable); posenc.torch follows
torch.get_num_threads() instead, on torch's own OpenMP threads where it can
(workers="openmp"). Pass ctx=posenc.Context(threads, backend, workers) to
choose per call.

Usage notes: python/README.md. Formulas and conventions: the C++ headers in
include/posenc/ (each family's docblock).
"""
from __future__ import annotations

from . import _posenc
from ._posenc import (MAX_POSITION, ConfigError, Context, IoError, __version__,
                      get_num_threads, openmp_available, set_num_threads, simd_target)
from ._absolute import LearnedTable, add_sinusoidal, sinusoidal_inv_freq, sinusoidal_table
from ._attention import (attention, attention_backward, flash_attention,
                         flash_attention_backward, flash_attention_decode,
                         flash_attention_varlen, scheme_info,
                         schemes)
from ._bias import (alibi_bias, alibi_slopes, bloom_alibi_tensor, deberta_bucket,
                    deberta_relative_position, relative_matrix, t5_bias, t5_bias_grad,
                    t5_bucket)
from ._choose import choose
from ._config import inspect, rope_config, rope_inv_freq
from ._rope import apply_mrope, apply_rope, apply_rope_qk, rope_cos_sin, rope_default_inv_freq

__all__ = [
    "__version__", "MAX_POSITION", "ConfigError", "Context", "IoError", "simd_target",
    "set_num_threads", "get_num_threads", "openmp_available",
    "LearnedTable", "add_sinusoidal", "sinusoidal_inv_freq", "sinusoidal_table",
    "apply_mrope", "apply_rope", "apply_rope_qk", "rope_cos_sin", "rope_default_inv_freq",
    "choose", "inspect", "rope_config", "rope_inv_freq", "attention", "attention_backward",
    "flash_attention", "flash_attention_backward", "flash_attention_decode",
    "flash_attention_varlen", "scheme_info",
    "schemes",
    "alibi_bias", "alibi_slopes", "bloom_alibi_tensor", "deberta_bucket",
    "deberta_relative_position", "relative_matrix", "t5_bias", "t5_bias_grad", "t5_bucket",
]
