"""RoPE for posenc.torch: the differentiable apply_rope and the
RotaryEmbedding module (a private module: import both from posenc.torch)."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch
from torch import nn

import posenc as _pe
from ._context import _positions, _torch_ctx, check_layout, check_rope_inputs


class _ApplyRope(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, positions: Optional[torch.Tensor],
                kwargs: Dict[str, Any]) -> torch.Tensor:  # type: ignore[override]
        ctx.positions = positions
        ctx.kwargs = kwargs
        return _pe.apply_rope(q.detach(), positions, **kwargs)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Any, ...]:  # type: ignore[override]
        # y = a R(p) x  =>  dL/dx = a R(p)^T dL/dy = a R(-p) dL/dy.
        kwargs = dict(ctx.kwargs)
        kwargs["direction"] = "inverse" if kwargs.get("direction", "forward") == "forward" \
            else "forward"
        return _pe.apply_rope(grad.detach().contiguous(), ctx.positions, **kwargs), None, None


def apply_rope(q: torch.Tensor, positions: Any = None, *, layout: str,
               **kwargs: Any) -> torch.Tensor:
    """Differentiable posenc.apply_rope (out of place): same keywords
    (rotary_dim, pairing, theta, config, inv_freq, attention_factor,
    numerics, direction, offset, ctx); `layout` ("bhsd" or "bshd") is
    required, as everywhere in posenc.torch. positions: None (token s at
    offset + s), integer ids [seq] (every sequence of the batch) or
    [batch, seq]."""
    if "inplace" in kwargs or "out" in kwargs:
        raise ValueError("posenc.torch.apply_rope is out of place: inplace/out are not accepted")
    check_layout(layout)
    if kwargs.get("config") is not None:  # resolve once: backward must use the same table
        info = _pe.rope_config(kwargs.pop("config"),
                               _seq_len_of(positions, q, layout, kwargs.get("offset", 0)),
                               numerics=kwargs.get("numerics", "accurate"))
        kwargs["inv_freq"], kwargs["attention_factor"] = info["inv_freq"], info["attention_factor"]
        kwargs.setdefault("pairing", info["pairing"])
    kwargs["layout"] = layout
    if kwargs.get("ctx") is None:
        kwargs["ctx"] = _torch_ctx()
    return _ApplyRope.apply(q, _positions(positions), kwargs)


def _seq_len_of(positions: Any, q: torch.Tensor, layout: str, offset: int) -> int:
    if positions is None:
        return int(offset) + int(q.shape[2 if layout == "bhsd" else 1])
    return int(_positions(positions).max()) + 1


class RotaryEmbedding(nn.Module):
    """Rotary position embedding for q and k (differentiable).

    forward(q, k, positions=None, offset=0) -> (q_rot, k_rot) in the module's
    `layout` (required: "bhsd" [batch, heads, seq, head_dim] or "bshd"
    [batch, seq, heads, head_dim]; give attention the same layout, with
    scheme="none" since q and k are rotated already). q and k: rank 4, last
    dimension head_dim, the same batch and sequence length (head counts may
    differ: GQA). positions: None (token s at offset + s; offset = the KV
    cache length when decoding), integer ids [seq] (every sequence of the
    batch) or [batch, seq].

    Frequencies: the theta table over rotary_dim dims (0: head_dim, or
    2 len(inv_freq) when inv_freq is given), explicit inv_freq /
    attention_factor, or a HF config (from_config), whose
    dynamic and longrope tables follow seq_len = max(position_ids) + 1 per
    call, as HF does. They are the buffers inv_freq (float64 [rotary_dim /
    2]) and attention_factor (float64 scalar): non-persistent (left out of
    state_dict, like HF's inv_freq) when derived from theta or a config,
    persistent when inv_freq is given explicitly. .to(device) moves them;
    .half() / .to(dtype) keep them float64, the precision the kernels take.
    For dynamic and longrope they hold the table at initialisation and each
    call uses the table of its seq_len.

    numerics: "accurate" (the constructor's default: float64 angles, error
    independent of the position, for models trained with posenc) or "hf"
    (transformers' float32 recipe; from_config's default, so that a HF
    checkpoint sees the rotation it was trained with). Arguments are checked
    here (layout, rotary_dim against head_dim, pairing, numerics, inv_freq's
    length) and in every forward (q and k against head_dim and the layout).
    """

    def __init__(self, head_dim: int, *, layout: str, rotary_dim: int = 0,
                 theta: float = 10000.0, pairing: str = "half_split",
                 numerics: str = "accurate", inv_freq: Any = None,
                 attention_factor: float = 1.0) -> None:
        super().__init__()
        self.layout = check_layout(layout)
        self.head_dim, self.rotary_dim, self.theta = int(head_dim), int(rotary_dim), float(theta)
        self.pairing, self.numerics = pairing, numerics
        if self.head_dim < 2:
            raise ValueError(f"head_dim: got {head_dim}, expected an integer >= 2")
        explicit = inv_freq is not None
        if not explicit:
            _pe.rope_default_inv_freq(2, theta=self.theta, numerics=numerics)  # names theta
            _check_rope(self.head_dim, self.rotary_dim, pairing, numerics, None, 1.0)
            inv_freq, _ = _pe.rope_default_inv_freq(self.rotary_dim or self.head_dim,
                                                    theta=self.theta, numerics=numerics)
        inv = torch.as_tensor(inv_freq).detach().to("cpu", torch.float64).reshape(-1).clone()
        if self.rotary_dim == 0:  # the rotated dims: head_dim, or what inv_freq covers
            if not 1 <= inv.numel() <= self.head_dim // 2:
                raise ValueError(f"inv_freq: got {inv.numel()} frequencies, expected 1 to "
                                 f"head_dim/2 = {self.head_dim // 2} (one per rotated pair)")
            self.rotary_dim = 2 * int(inv.numel())
        _check_rope(self.head_dim, self.rotary_dim, pairing, numerics, inv.numpy(),
                    float(attention_factor))
        self.register_buffer("inv_freq", inv, persistent=explicit)
        self.register_buffer("attention_factor",
                             torch.tensor(float(attention_factor), dtype=torch.float64),
                             persistent=explicit)
        self.rope_type = "custom" if explicit else "default"
        self.rope_parameters: Dict[str, Any] = {} if explicit else {"theta": self.theta}
        self._config: Any = None
        self._per_call = False
        self._cache: Dict[int, Tuple[Any, float]] = {}

    @classmethod
    def from_config(cls, config: Any, *, layout: str, layer_type: str = "",
                    numerics: str = "hf") -> "RotaryEmbedding":
        """From a HF config.json (path or dict) or a llama.cpp .gguf file:
        head_dim, rotary dim, pairing and every rope type posenc.rope_config
        knows. numerics defaults to "hf" (see the class docstring). A
        malformed file raises posenc.IoError (text that is not JSON, an
        unreadable or broken file) or posenc.ConfigError (JSON that is not
        a usable model config)."""
        check_layout(layout)
        info = _pe.rope_config(config, None, layer_type=layer_type, numerics=numerics)
        module = cls(info["head_dim"], layout=layout, rotary_dim=info["rotary_dim"],
                     theta=info["theta"], pairing=info["pairing"], numerics=numerics,
                     inv_freq=info["inv_freq"], attention_factor=info["attention_factor"])
        for name in ("inv_freq", "attention_factor"):  # derived from the config
            module.register_buffer(name, getattr(module, name), persistent=False)
        module._config = (config, layer_type)
        module._per_call = info["rope_type"] in ("dynamic", "longrope")
        module.rope_type = info["rope_type"]
        module.rope_parameters = _rope_parameters(info)
        return module

    def _apply(self, fn: Any, *args: Any, **kwargs: Any) -> "RotaryEmbedding":
        # nn.Module.half() / .to(dtype) cast floating buffers: keep the frequencies float64.
        exact = {n: getattr(self, n) for n in ("inv_freq", "attention_factor")}
        super()._apply(fn, *args, **kwargs)
        for name, old in exact.items():
            new = getattr(self, name)
            if new.dtype != torch.float64:
                self._buffers[name] = old.to(device=new.device)
        return self

    def _frequencies(self, seq_len: int) -> Tuple[Any, float]:
        if not self._per_call:
            return (self.inv_freq.detach().to(device="cpu", dtype=torch.float64).numpy(),
                    float(self.attention_factor))
        if seq_len not in self._cache:
            config, layer_type = self._config
            info = _pe.rope_config(config, seq_len, layer_type=layer_type,
                                   numerics=self.numerics)
            self._cache[seq_len] = (info["inv_freq"], info["attention_factor"])
        return self._cache[seq_len]

    def forward(self, q: torch.Tensor, k: torch.Tensor, positions: Any = None,
                offset: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
        check_rope_inputs(q, k, self.layout, self.head_dim)
        pos = _positions(positions)
        inv_freq, factor = self._frequencies(_seq_len_of(pos, q, self.layout, offset))
        kw = dict(layout=self.layout, rotary_dim=self.rotary_dim, pairing=self.pairing,
                  numerics=self.numerics, offset=offset, inv_freq=inv_freq,
                  attention_factor=factor)
        return apply_rope(q, pos, **kw), apply_rope(k, pos, **kw)

    def extra_repr(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.rope_parameters.items())
        return (f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, "
                f"rope_type={self.rope_type!r}, rope_parameters={{{params}}}, "
                f"attention_factor={float(self.attention_factor):g}, "
                f"pairing={self.pairing!r}, numerics={self.numerics!r}, layout={self.layout!r}")


def _check_rope(head_dim: int, rotary_dim: int, pairing: str, numerics: str, inv_freq: Any,
                attention_factor: float) -> None:
    """The rope arguments as the kernel checks them (on one zero vector), so a
    bad combination fails at construction, not at the first forward."""
    _pe.apply_rope(torch.zeros(1, 1, 1, head_dim), layout="bhsd", rotary_dim=rotary_dim,
                   pairing=pairing, numerics=numerics, inv_freq=inv_freq,
                   attention_factor=attention_factor)


def _rope_parameters(info: Dict[str, Any]) -> Dict[str, Any]:
    """What RotaryEmbedding's repr shows of posenc.rope_config's answer."""
    out: Dict[str, Any] = {"theta": info["theta"]}
    if info["rope_type"] != "default":
        out["factor"] = info["factor"]
        out["original_max_position_embeddings"] = info["original_max_position_embeddings"]
    if info["partial_rotary_factor"] != 1.0:
        out["partial_rotary_factor"] = info["partial_rotary_factor"]
    if info["rope_type"] == "yarn":
        out["yarn_low"], out["yarn_high"] = info["yarn_low"], info["yarn_high"]
    if info["longrope_factors"] != "none":
        out["longrope_factors"] = info["longrope_factors"]
    if info["mrope_section"]:
        out["mrope_section"] = list(info["mrope_section"])
    return out
