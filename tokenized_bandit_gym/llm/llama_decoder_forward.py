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
from tokenized_bandit_gym.llm.native_decoder_forward import (
    FrozenLinear,
    FrozenLinears,
    NativeDecoderForward,
    ScratchColumns,
    with_past,
)

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
        self._rotary = RotaryTable(self._base.rotary_emb)

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
        in_range = isinstance(past, ScratchColumns)  # a static step keeps its positions in the table
        cos, signed_sin = self._rotary.of(hidden, position_ids, checked=not in_range)  # (N, T, 1, hd) each
        cache = []
        for index, (layer, projection) in enumerate(zip(base.layers, self._projections, strict=True)):
            attention, mlp = layer.self_attn, layer.mlp
            normed = _rms_norm(hidden, layer.input_layernorm)
            head_dim = attention.head_dim
            queries_keys, values = projection.qkv(normed)  # (N, T, (hq + hkv) * hd), (N, T, hkv * hd)
            # q and k rotated as one tensor: (N, T, hq + hkv, hd)
            rotated = _rotated(queries_keys.view(batch, new_tokens, -1, head_dim), cos, signed_sin)
            query_heads = rotated.shape[2] - values.shape[2] // head_dim
            queries = rotated[:, :, :query_heads].transpose(1, 2)  # (N, hq, T, hd)
            keys = rotated[:, :, query_heads:].transpose(1, 2)  # (N, hkv, T, hd)
            values = values.view(batch, new_tokens, -1, head_dim).transpose(1, 2)  # (N, hkv, T, hd)
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
    """A decoder layer's projections: q, k, v together (q and k as one output), o; the MLP's gate and up, down."""

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
            FrozenLinears([(linear.weight, linear.bias) for linear in qkv], outputs=(2, 1)),  # q and k together
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


def _rotated(states: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding ``x * cos + rotate_half(x) * sin`` of ``(N, T, heads, hd)``, ``cos`` ``(N, T, 1, hd)``.

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


STATIC_ROPE_TYPES = ("default", "linear", "llama3")
"""Rotary embeddings whose cos and sin depend on the position alone (not on the sequence's length)."""
ROTARY_TABLE_POSITIONS = 8192
"""Most positions :class:`RotaryTable` tabulates (a 64-wide head: 4 MiB in float32)."""


class RotaryTable:
    """The rotary embedding's ``cos`` and signed ``sin`` at given positions, looked up in a table on the CPU.

    The model's ``rotary_emb`` computes ``cos(position * inv_freq)`` and ``sin(...)`` (times its scaling)
    elementwise for every position of every forward: about ten torch calls, and the sign of
    ``rotate_half`` takes four more. For a static rope type on the CPU those are computed once, by
    ``rotary_emb`` itself, for positions ``0 .. max_position_embeddings - 1`` (at most
    :data:`ROTARY_TABLE_POSITIONS`); a forward then gathers its positions from the table (the same values
    to float32 rounding). Positions past the table, dynamic rope types (``dynamic``, ``longrope``: they
    depend on the length) and other devices call ``rotary_emb`` as before.

    Args:
        rotary_emb: the base model's rotary embedding module.
    """

    def __init__(self, rotary_emb: Any) -> None:
        self.rotary_emb = rotary_emb
        self._tables: dict[torch.dtype, torch.Tensor] = {}  # per dtype: [cos, signed_sin] (P, 2 * hd)
        positions = getattr(getattr(rotary_emb, "config", None), "max_position_embeddings", None)
        static = getattr(rotary_emb, "rope_type", None) in STATIC_ROPE_TYPES
        self.positions = min(int(positions), ROTARY_TABLE_POSITIONS) if static and positions else 0
        """Positions tabulated (0 when the embedding is dynamic or has no known range)."""

    def of(
        self, hidden: torch.Tensor, position_ids: torch.Tensor, checked: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``cos`` and ``signed_sin = [-sin1, sin2]`` ``(N, T, 1, hd)`` at ``position_ids`` ``(N, T)``.

        ``checked=False``: the positions are known to lie in the table, which is then read without reading them
        back (no host synchronisation).
        """
        if hidden.device.type == "cpu" and self.positions > 0 and position_ids.numel() > 0:
            in_table = not checked
            if checked:
                low, high = torch.aminmax(position_ids)
                in_table = int(low) >= 0 and int(high) < self.positions
            if in_table:
                looked_up = F.embedding(position_ids, self._table(hidden))[:, :, None]  # (N, T, 1, 2 * hd)
                cos, signed_sin = looked_up.chunk(2, dim=-1)  # (N, T, 1, hd) views
                return cos, signed_sin
        cos, sin = self.rotary_emb(hidden, position_ids)  # (N, T, hd) each
        return cos[:, :, None], _signed(sin)[:, :, None]

    def _table(self, hidden: torch.Tensor) -> torch.Tensor:
        """``[cos, signed_sin]`` ``(P, 2 * hd)`` of positions ``0 .. P - 1`` in ``hidden``'s dtype (made once)."""
        table = self._tables.get(hidden.dtype)
        if table is None:
            positions = torch.arange(self.positions, device=hidden.device)[None]  # (1, P)
            cos, sin = self.rotary_emb(hidden[:1, :1], positions)  # (1, P, hd) each
            table = self._tables[hidden.dtype] = torch.cat([cos[0], _signed(sin)[0]], dim=-1)
        return table


def _signed(sin: torch.Tensor) -> torch.Tensor:
    """``[-sin1, sin2]`` of ``sin`` ``(..., hd)``: ``rotate_half(x) * sin`` is ``roll(x, hd / 2) * signed_sin``."""
    half = sin.shape[-1] // 2
    return torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)
