"""A native forward of the Llama family (Llama, Mistral, Qwen2) over a KV cache.

The same weights and operations as transformers' ``LlamaModel`` (RMSNorm, rotary position
embedding from the model's own ``rotary_emb``, grouped-query attention, SwiGLU MLP), written as
plain tensor calls: no mask or cache objects, no per-layer module dispatch. On a small model that
machinery is most of a forward's time. Tested equal to the transformers forward.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from packaging.version import Version

from tokenized_bandit_gym.llm.language_model_state import KeyValues
from tokenized_bandit_gym.llm.native_decoder_forward import FrozenLinear, FrozenLinears, NativeDecoderForward, with_past

LLAMA_FAMILY = ("llama", "mistral", "qwen2")
_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
_MLP = ("gate_proj", "up_proj", "down_proj")
TORCH_HAS_GQA_ATTENTION = Version(torch.__version__).release[:2] >= (2, 5)
"""torch >= 2.5: ``F.rms_norm`` and grouped-query SDPA (``enable_gqa``), which this forward uses."""


class LlamaDecoderForward(NativeDecoderForward):
    """Native :data:`~tokenized_bandit_gym.llm.decoder_forward.DecoderForward` of a Llama-family model.

    Args:
        model: a loaded causal LM for which :meth:`unsupported_reason` is None.
    """

    architecture = "Llama"

    def __init__(self, model: Any) -> None:
        super().__init__(model)
        self._silu = getattr(model.config, "hidden_act", None) == "silu"
        self._projections = [_LayerProjections.of(layer) for layer in self._base.layers]

    @staticmethod
    def unsupported_reason(model: Any) -> str | None:
        """None when this forward computes exactly ``model``, else why not."""
        if not TORCH_HAS_GQA_ATTENTION:
            return f"torch {torch.__version__} lacks F.rms_norm and SDPA's enable_gqa (torch >= 2.5 has them)"
        config = model.config
        model_type = getattr(config, "model_type", None)
        if model_type not in LLAMA_FAMILY:
            return f"model_type={model_type!r} is not one of {LLAMA_FAMILY}"
        if getattr(config, "pretraining_tp", 1) not in (None, 1):
            return f"pretraining_tp={config.pretraining_tp}"
        if getattr(config, "sliding_window", None) is not None and getattr(config, "use_sliding_window", True):
            return f"sliding-window attention (sliding_window={config.sliding_window})"
        layer_types = getattr(config, "layer_types", None) or ()
        if any(kind != "full_attention" for kind in layer_types):
            return f"layer types {sorted(set(layer_types))} (only full attention)"
        base = model.base_model
        if not all(hasattr(base, name) for name in ("embed_tokens", "layers", "norm", "rotary_emb")):
            return "the base model lacks embed_tokens, layers, norm or rotary_emb"
        for layer in base.layers:
            attention, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
            if attention is None or mlp is None or hasattr(attention, "q_norm"):
                return "a decoder layer is not Llama-shaped (self_attn without q_norm, mlp)"
            if any(type(linear) is not torch.nn.Linear for linear in _projection_modules(layer).values()):
                return "a projection is not a plain torch.nn.Linear (quantized or adapted weights)"
        return None

    def _layers(
        self, input_ids: torch.Tensor, additive_mask: torch.Tensor, position_ids: torch.Tensor, past: KeyValues
    ) -> tuple[torch.Tensor, KeyValues]:
        """The family's forward with the additive mask ``(N, 1, T, S)``: hidden ``(N, T, H)`` and cache."""
        base = self._base
        batch, new_tokens = input_ids.shape
        hidden = base.embed_tokens(input_ids)  # (N, T, H)
        cos, sin = base.rotary_emb(hidden, position_ids)  # (N, T, hd) each
        half = cos.shape[-1] // 2
        cos = cos[:, None]  # (N, 1, T, hd)
        signed_sin = torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)[:, None]  # rotate_half = roll * sign
        cache = []
        for index, (layer, projection) in enumerate(zip(base.layers, self._projections, strict=True)):
            attention, mlp = layer.self_attn, layer.mlp
            normed = _rms_norm(hidden, layer.input_layernorm)
            head_dim = attention.head_dim
            queries, keys, values = projection.qkv(normed)  # (N, T, hq * hd), (N, T, hkv * hd) twice
            queries = _rotated(_heads(queries, head_dim), cos, signed_sin)  # (N, hq, T, hd)
            keys = _rotated(_heads(keys, head_dim), cos, signed_sin)  # (N, hkv, T, hd)
            values = _heads(values, head_dim)  # (N, hkv, T, hd)
            keys, values = with_past(past, index, keys, values)  # (N, hkv, S, hd)
            cache.append((keys, values))
            attended = F.scaled_dot_product_attention(
                queries,
                keys,
                values,
                attn_mask=additive_mask,
                scale=attention.scaling,
                enable_gqa=queries.shape[1] != keys.shape[1],
            )  # (N, hq, T, hd)
            hidden = hidden + projection.o(attended.transpose(1, 2).reshape(batch, new_tokens, -1))
            normed = _rms_norm(hidden, layer.post_attention_layernorm)
            gate, up = projection.gate_up(normed)  # (N, T, I) each
            gate = F.silu(gate) if self._silu else mlp.act_fn(gate)
            hidden = hidden + projection.down(gate * up)
        return _rms_norm(hidden, base.norm), tuple(cache)


class _LayerProjections(NamedTuple):
    """A decoder layer's projections: q, k, v together, o; the MLP's gate and up together, down."""

    qkv: FrozenLinears
    o: FrozenLinear
    gate_up: FrozenLinears
    down: FrozenLinear

    @classmethod
    def of(cls, layer: Any) -> _LayerProjections:
        """The projections of a Llama-shaped decoder ``layer``."""
        attention, mlp = layer.self_attn, layer.mlp
        qkv = (attention.q_proj, attention.k_proj, attention.v_proj)
        return cls(
            FrozenLinears([(linear.weight, linear.bias) for linear in qkv]),
            FrozenLinear(attention.o_proj.weight, attention.o_proj.bias),
            FrozenLinears([(linear.weight, linear.bias) for linear in (mlp.gate_proj, mlp.up_proj)]),
            FrozenLinear(mlp.down_proj.weight, mlp.down_proj.bias),
        )


def _projection_modules(layer: Any) -> dict[str, Any]:
    """A decoder layer's projections by name (None where one is missing): attention q, k, v, o; MLP gate, up, down."""
    attention, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
    return {name: getattr(attention, name, None) for name in _PROJECTIONS} | {
        name: getattr(mlp, name, None) for name in _MLP
    }


def _heads(projected: torch.Tensor, head_dim: int) -> torch.Tensor:
    """``(N, T, heads * hd)`` as ``(N, heads, T, hd)``."""
    batch, tokens, _ = projected.shape
    return projected.view(batch, tokens, -1, head_dim).transpose(1, 2)


def _rotated(states: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding ``x * cos + rotate_half(x) * sin`` of ``(N, heads, T, hd)``.

    ``rotate_half(x) = [-x2, x1]`` is ``roll(x, hd / 2) * [-1, 1]``; the sign is folded into
    ``signed_sin = [-sin1, sin2]``, so the rotation is three ops.
    """
    return torch.addcmul(states * cos, torch.roll(states, states.shape[-1] // 2, dims=-1), signed_sin)


def _rms_norm(hidden: torch.Tensor, norm: Any) -> torch.Tensor:
    """The Llama RMSNorm of transformers: normalise in float32, cast back, scale by the weight."""
    if hidden.dtype == torch.float32:
        return F.rms_norm(hidden, norm.weight.shape, norm.weight, norm.variance_epsilon)  # one op, same formula
    normalised = hidden.float()
    normalised = normalised * torch.rsqrt(normalised.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * normalised.to(hidden.dtype)
