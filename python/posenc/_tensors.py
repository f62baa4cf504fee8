"""Allocation and dtype helpers shared by the posenc Python API.

The compiled module (posenc._posenc) never allocates tensors: it writes into
`out` arrays it is given. These helpers allocate them with numpy, or with
torch when the caller works with torch (a torch input, a torch dtype, or
bfloat16, which numpy lacks). torch is imported only in those cases, so
`import posenc` stays fast and works without torch.
"""
from __future__ import annotations

import functools
import math
import os
import sys
from typing import Any, Optional, Sequence

import numpy as np

DTYPE_NAMES = ("float32", "float64", "bfloat16", "float16")
_ALIASES = {"f32": "float32", "f64": "float64", "bf16": "bfloat16", "f16": "float16",
            "float": "float32", "double": "float64", "half": "float16"}


def is_torch(obj: Any) -> bool:
    """True for a torch.Tensor (without importing torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def dtype_name(dtype: Any) -> str:
    """Normalises "float32"/"f32"/np.float32/torch.float32/... to a posenc name."""
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
    elif type(dtype).__module__ == "torch":  # torch.dtype
        name = str(dtype).replace("torch.", "")
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = repr(dtype)
    if name not in DTYPE_NAMES:
        raise ValueError(f"dtype: got {dtype!r}, expected one of {', '.join(DTYPE_NAMES)}")
    return name


def wants_torch(dtype: Optional[Any], like: Any = None) -> bool:
    if like is not None and is_torch(like):
        return True
    if dtype is None:
        return False
    if type(dtype).__module__ == "torch":
        return True
    return dtype_name(dtype) == "bfloat16"


def empty(shape: Sequence[int], dtype: Any = "float32", like: Any = None) -> Any:
    """An uninitialised float array: torch when `like` is a tensor, the dtype is
    a torch dtype or bfloat16, numpy otherwise. Zero-size requests are passed
    on (the library rejects them with a message naming the argument)."""
    name = dtype_name(dtype)
    _check_allocation(shape, name)
    if wants_torch(dtype, like):
        import torch
        device = like.device if like is not None and is_torch(like) else "cpu"
        return torch.empty(tuple(int(s) for s in shape), dtype=getattr(torch, name),
                           device=device)
    return np.empty(tuple(int(s) for s in shape), dtype=np.dtype(name))


@functools.lru_cache(maxsize=1)
def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not POSIX: no ceiling
        return 1 << 62


def _check_allocation(shape: Sequence[int], name: str) -> None:
    """ValueError for a negative size or an array larger than this machine's
    memory, before numpy / torch try (they would raise MemoryError or
    RuntimeError, or start swapping)."""
    sizes = tuple(int(s) for s in shape)
    if any(s < 0 for s in sizes):
        raise ValueError(f"shape: got {sizes}, expected sizes >= 0")
    nbytes = math.prod(sizes) * _ITEMSIZE.get(name, 8)
    limit = _physical_memory()
    if nbytes > limit:
        raise ValueError(f"shape: got {sizes} {name} ({nbytes / 2**30:.3g} GiB), expected an "
                         f"array that fits in this machine's memory ({limit / 2**30:.3g} GiB)")


_ITEMSIZE = {"float32": 4, "float64": 8, "bfloat16": 2, "float16": 2}


def empty_like(x: Any) -> Any:
    if is_torch(x):
        import torch
        return torch.empty_like(x, memory_format=torch.contiguous_format)
    return np.empty(x.shape, dtype=x.dtype)


def dtype_of(x: Any) -> str:
    return dtype_name(x.dtype)
