"""A native forward of GPT-2 over a KV cache.

The same weights and operations as transformers' ``GPT2Model`` (learned position embeddings,
pre-LayerNorm blocks, fused QKV ``Conv1D``), written as plain tensor calls, with one fused
``gelu(approximate="tanh")`` where transformers' ``gelu_new`` runs five elementwise ops (the same
function). Tested equal to the transformers forward.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from tokenized_bandit_gym.llm.language_model_state import KeyValues
from tokenized_bandit_gym.llm.native_decoder_forward import NativeDecoderForward, with_past

_TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh")


class GPT2DecoderForward(NativeDecoderForward):
    """Native :data:`~tokenized_bandit_gym.llm.decoder_forward.DecoderForward` of a GPT-2 model.

    Args:
        model: a loaded causal LM for which :meth:`unsupported_reason` is None.
    """

    architecture = "GPT-2"

    def __init__(self, model: Any) -> None:
        super().__init__(model)
        self._tanh_gelu = model.config.activation_function in _TANH_GELUS

    @staticmethod
    def unsupported_reason(model: Any) -> str | None:
        """None when this forward computes exactly ``model``, else why not."""
        config = model.config
        model_type = getattr(config, "model_type", None)
        if model_type != "gpt2":
            return f"model_type={model_type!r} is not 'gpt2'"
        if getattr(config, "reorder_and_upcast_attn", False):
            return "reorder_and_upcast_attn=True"
        if getattr(config, "add_cross_attention", False):
            return "add_cross_attention=True"
        for block in model.base_model.h:
            convolutions = (block.attn.c_attn, block.attn.c_proj, block.mlp.c_fc, block.mlp.c_proj)
            if any(type(convolution).__name__ != "Conv1D" for convolution in convolutions):
                return "a projection is not transformers' Conv1D (quantized or adapted weights)"
        return None

    def _layers(
        self, input_ids: torch.Tensor, additive_mask: torch.Tensor, position_ids: torch.Tensor, past: KeyValues
    ) -> tuple[torch.Tensor, KeyValues]:
        """The family's forward with the additive mask ``(N, 1, T, S)``: hidden ``(N, T, H)`` and cache."""
        base = self._base
        batch, new_tokens = input_ids.shape
        hidden = base.wte(input_ids) + base.wpe(position_ids)  # (N, T, H)
        cache = []
        for index, block in enumerate(base.h):
            attention, mlp = block.attn, block.mlp
            fused = _conv1d(block.ln_1(hidden), attention.c_attn)  # (N, T, 3 * H)
            fused = fused.view(batch, new_tokens, 3, -1, attention.head_dim).permute(2, 0, 3, 1, 4)
            queries, keys, values = fused.unbind(0)  # (N, h, T, hd) each
            keys, values = with_past(past, index, keys, values)  # (N, h, S, hd)
            cache.append((keys, values))
            attended = F.scaled_dot_product_attention(
                queries, keys, values, attn_mask=additive_mask, scale=attention.scaling
            )  # (N, h, T, hd)
            hidden = hidden + _conv1d(attended.transpose(1, 2).reshape(batch, new_tokens, -1), attention.c_proj)
            inner = _conv1d(block.ln_2(hidden), mlp.c_fc)  # (N, T, 4H)
            inner = F.gelu(inner, approximate="tanh") if self._tanh_gelu else mlp.act(inner)
            hidden = hidden + _conv1d(inner, mlp.c_proj)
        return base.ln_f(hidden), tuple(cache)


def _conv1d(inputs: torch.Tensor, convolution: Any) -> torch.Tensor:
    """The ``Conv1D`` of transformers: ``inputs @ W + b`` with ``W`` stored ``(in, out)``."""
    flat = torch.addmm(convolution.bias, inputs.reshape(-1, inputs.shape[-1]), convolution.weight)
    return flat.view(*inputs.shape[:-1], -1)
