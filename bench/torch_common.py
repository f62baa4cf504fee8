"""Helpers shared by the PyTorch baselines of `posenc bench` (torch_baseline.py,
torch_attention.py): Hugging Face's reference formulas, copied verbatim so that
both scripts time the same code.

The scripts are run by path (`/usr/bin/python3 /abs/path/bench/torch_*.py`):
each puts its own directory first on sys.path before importing this module.
"""
import math

import torch


def rotate_half(x):
    """HF transformers rotate_half (Llama): the half-split RoPE partner."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def relative_position_bucket(relative_position, bidirectional, num_buckets=32, max_distance=128):
    """HF transformers T5Attention._relative_position_bucket (verbatim)."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets
