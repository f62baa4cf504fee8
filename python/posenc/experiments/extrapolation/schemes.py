"""The positional schemes of the extrapolation experiment: one table entry per
scheme, saying how it adds position (to the token embeddings, or inside
attention) and which posenc.torch.attention scheme and arguments it uses.
Everything else in the model is shared (model.py).

| name       | adds position                          | attention scheme, arguments           |
| ---------- | -------------------------------------- | ------------------------------------- |
| none       | nothing (NoPE: causal masking only)    | none                                  |
| sinusoidal | + PE(pos) (Vaswani et al. 2017)        | none                                  |
| learned    | + E[pos], E: L x d rows (GPT-2 wpe)    | none                                  |
| rope       | rotates q, k (Su et al. 2021)          | rope: inv_freq, attention_factor      |
| alibi      | -slope_h * (i - j) (Press et al. 2022) | alibi (slopes from the head count)    |
| t5         | learned bucket bias, causal buckets    | t5: table [32, H] shared by layers    |
| shaw       | a^K, a^V clipped at k = 16 per layer   | shaw: clip, a_key, a_value            |
| fire       | FIRE (Li et al. 2024) MLP of log dist. | fire: posenc.torch.FIRE.scheme_args() |

Context extension without training (evaluation rows of the trained rope
model, Peng et al. 2023 "YaRN" section 3): `rope+pi` (rope_type linear),
`rope+ntk` (dynamic) and `rope+yarn` (yarn) frequencies from posenc's
scaling code through posenc.rope_config with a dict config, factor = eval
length / train length, original length = train length (HF semantics: the
dynamic base at seq_len = factor * L is theta * (factor^2 - factor + 1)^(d/(d-2))).

Context extension with fine-tuning (finetune.py): the rows rope+ft (plain
RoPE), rope+pi+ft (linear), rope+ntk+ft (static NTK-aware base, rope_type
ntk) and rope+yarn+ft (yarn) copy the trained rope weights and train on at a
target length T with a FIXED scaling (Rope.fixed: factor T / L, original
length L) that also holds at every evaluation length.

fire is in the table now and runs wherever posenc.torch has FIRE (its
`available` check); without it, it is left out of the default list and
`--schemes fire` says what is missing. transformer_xl and deberta are not
trained (NOT_TRAINED says why).

The learned table has exactly L rows: positions past it reach posenc's
lookup, which raises; the experiment reports that error, never a clamp.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

import posenc
import posenc.torch as pt

from .names import EXTENSIONS, FINETUNED, TRAINED

T5_BUCKETS = 32
T5_MAX_DISTANCE = 128
SHAW_CLIP = 16
ROPE_THETA = 10000.0


@dataclass(frozen=True)
class ModelShape:
    dim: int
    heads: int
    layers: int
    train_length: int

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


class Positional(nn.Module):
    """The positional part of the model. add() changes the token embeddings
    [B, T, d]; attention(layer, T) gives (attention scheme, keyword
    arguments) for posenc.torch.attention. Subclasses own their parameters."""

    attention_scheme = "none"

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.shape = shape

    def add(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def attention(self, layer: int, length: int) -> Tuple[str, Dict[str, Any]]:
        return self.attention_scheme, {}


class Sinusoidal(Positional):
    def __init__(self, shape: ModelShape) -> None:
        super().__init__(shape)
        self.pe = pt.SinusoidalPositionalEncoding(shape.dim)

    def add(self, x: torch.Tensor) -> torch.Tensor:
        return self.pe(x)


class Learned(Positional):
    def __init__(self, shape: ModelShape, seed: int) -> None:
        super().__init__(shape)
        self.table = pt.LearnedPositionalEmbedding(shape.train_length, shape.dim, seed=seed)

    def add(self, x: torch.Tensor) -> torch.Tensor:
        # Positions 0 .. T-1 straight to posenc's lookup: past the table's
        # rows it raises (ValueError naming the position and the range).
        return x + self.table(torch.arange(x.shape[1]))


class Rope(Positional):
    """RoPE inside the fused kernel. `extension` (None, "linear", "dynamic",
    "yarn") switches the frequencies for evaluation past the train length
    (factor = evaluation length / L, never below 1); `fixed` = (rope_type,
    factor) holds one scaling at every length instead (the fine-tuned rows:
    factor T / L). Both keep original_max_position_embeddings = L."""

    attention_scheme = "rope"

    def __init__(self, shape: ModelShape) -> None:
        super().__init__(shape)
        self.extension: Optional[str] = None
        self.fixed: Optional[Tuple[str, float]] = None
        self._cache: Dict[Tuple[Any, ...], Tuple[torch.Tensor, float]] = {}

    def config(self, length: int) -> Dict[str, Any]:
        """The HF-style config dict given to posenc.rope_config."""
        cfg: Dict[str, Any] = {"hidden_size": self.shape.dim,
                               "num_attention_heads": self.shape.heads,
                               "rope_theta": ROPE_THETA,
                               "max_position_embeddings": self.shape.train_length}
        if self.fixed is not None and self.extension is not None:
            raise ValueError("Rope: set `extension` or `fixed`, not both")
        if self.fixed is not None:
            rope_type, factor = self.fixed
            cfg["max_position_embeddings"] = int(round(factor * self.shape.train_length))
            cfg["rope_scaling"] = {"rope_type": rope_type, "factor": float(factor),
                                   "original_max_position_embeddings": self.shape.train_length}
        elif self.extension is not None:
            factor = max(1.0, length / self.shape.train_length)
            cfg["rope_scaling"] = {"rope_type": self.extension, "factor": factor,
                                   "original_max_position_embeddings": self.shape.train_length}
        return cfg

    def frequencies(self, length: int) -> Tuple[torch.Tensor, float]:
        # A fixed scaling does not depend on the length: one entry for all.
        key = ("fixed", self.fixed) if self.fixed is not None else (self.extension, length)
        if key not in self._cache:
            info = posenc.rope_config(self.config(length), length, numerics="accurate")
            self._cache[key] = (torch.from_numpy(info["inv_freq"]),
                                float(info["attention_factor"]))
        return self._cache[key]

    def attention(self, layer: int, length: int) -> Tuple[str, Dict[str, Any]]:
        inv_freq, factor = self.frequencies(length)
        return "rope", {"inv_freq": inv_freq, "attention_factor": factor}


class Alibi(Positional):
    attention_scheme = "alibi"


class T5(Positional):
    """One causal bucket table [32, H] for every layer (T5 computes the bias
    in the first layer and reuses it), HF's init N(0, d^-1/2)."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__(shape)
        self.table = nn.Parameter(torch.randn(T5_BUCKETS, shape.heads) * shape.dim ** -0.5)

    def attention(self, layer: int, length: int) -> Tuple[str, Dict[str, Any]]:
        return "t5", {"table": self.table, "bidirectional": False,
                      "max_distance": T5_MAX_DISTANCE}


class Shaw(Positional):
    """Per layer a^K, a^V [2k + 1, head_dim] shared by the heads (Shaw et al.
    2018), N(0, 0.02^2)."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__(shape)
        rows = 2 * SHAW_CLIP + 1
        self.a_key = nn.ParameterList(nn.Parameter(torch.randn(rows, shape.head_dim) * 0.02)
                                      for _ in range(shape.layers))
        self.a_value = nn.ParameterList(nn.Parameter(torch.randn(rows, shape.head_dim) * 0.02)
                                        for _ in range(shape.layers))

    def attention(self, layer: int, length: int) -> Tuple[str, Dict[str, Any]]:
        return "shaw", {"clip": SHAW_CLIP, "a_key": self.a_key[layer],
                        "a_value": self.a_value[layer]}


class Fire(Positional):
    """FIRE (Li et al. 2024): per layer a posenc.torch.FIRE module."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__(shape)
        self.fire = nn.ModuleList(pt.FIRE(shape.heads)  # type: ignore[attr-defined]
                                  for _ in range(shape.layers))

    def attention(self, layer: int, length: int) -> Tuple[str, Dict[str, Any]]:
        return "fire", self.fire[layer].scheme_args()


@dataclass(frozen=True)
class Scheme:
    name: str
    adds: str           # how position enters: "nothing", "embeddings" or "attention"
    attention: str      # the posenc.torch.attention scheme it trains with
    build: Callable[[ModelShape, int], Positional]
    available: Callable[[], bool] = lambda: True
    needs: str = ""     # what is missing when not available


# The trained schemes, in report order. Adding a scheme = one entry here.
SCHEMES: Dict[str, Scheme] = {s.name: s for s in [
    Scheme("none", "nothing", "none", lambda shape, seed: Positional(shape)),
    Scheme("sinusoidal", "embeddings", "none", lambda shape, seed: Sinusoidal(shape)),
    Scheme("learned", "embeddings", "none", lambda shape, seed: Learned(shape, seed)),
    Scheme("rope", "attention", "rope", lambda shape, seed: Rope(shape)),
    Scheme("alibi", "attention", "alibi", lambda shape, seed: Alibi(shape)),
    Scheme("t5", "attention", "t5", lambda shape, seed: T5(shape)),
    Scheme("shaw", "attention", "shaw", lambda shape, seed: Shaw(shape)),
    Scheme("fire", "attention", "fire", lambda shape, seed: Fire(shape),
           available=lambda: hasattr(pt, "FIRE"),
           needs="posenc.torch.FIRE (not in this build of posenc)"),
]}

assert tuple(SCHEMES) == TRAINED, "names.TRAINED must list the SCHEMES table"

# Not trained: no fused kernel (the float64 reference is far too slow to train with).
NOT_TRAINED = {"transformer_xl": "no fused kernel (posenc.torch.attention would run the "
                                 "float64 reference, far too slow to train)",
               "deberta": "no fused kernel, and it is an encoder (bidirectional) scheme"}


def default_names() -> List[str]:
    """Every available trained scheme followed by the rope extension rows
    (training-free, then fine-tuned)."""
    names = [n for n, s in SCHEMES.items() if s.available()]
    return names + (list(EXTENSIONS) + list(FINETUNED) if "rope" in names else [])
