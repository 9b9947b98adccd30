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
from tokenized_bandit_gym.llm.native_decoder_forward import FrozenLinear, NativeDecoderForward, with_past

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
        self._projections = [
            {name: _conv1d(convolution) for name, convolution in _convolutions(block).items()} for block in self._base.h
        ]  # per block, by name: the fused QKV, the attention output, the MLP's two

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
            if any(type(convolution).__name__ != "Conv1D" for convolution in _convolutions(block).values()):
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
        for index, (block, projection) in enumerate(zip(base.h, self._projections, strict=True)):
            attention, mlp = block.attn, block.mlp
            fused = projection["c_attn"](block.ln_1(hidden))  # (N, T, 3 * H)
            fused = fused.view(batch, new_tokens, 3, -1, attention.head_dim).permute(2, 0, 3, 1, 4)
            queries, keys, values = fused.unbind(0)  # (N, h, T, hd) each
            keys, values = with_past(past, index, keys, values)  # (N, h, S, hd)
            cache.append((keys, values))
            attended = F.scaled_dot_product_attention(
                queries, keys, values, attn_mask=additive_mask, scale=attention.scaling
            )  # (N, h, T, hd)
            hidden = hidden + projection["attn.c_proj"](attended.transpose(1, 2).reshape(batch, new_tokens, -1))
            inner = projection["c_fc"](block.ln_2(hidden))  # (N, T, 4H)
            inner = F.gelu(inner, approximate="tanh") if self._tanh_gelu else mlp.act(inner)
            hidden = hidden + projection["mlp.c_proj"](inner)
        return base.ln_f(hidden), tuple(cache)


def _convolutions(block: Any) -> dict[str, Any]:
    """A GPT-2 block's four projections by name: ``c_attn``, ``attn.c_proj``, ``c_fc``, ``mlp.c_proj``."""
    return {
        "c_attn": block.attn.c_attn,
        "attn.c_proj": block.attn.c_proj,
        "c_fc": block.mlp.c_fc,
        "mlp.c_proj": block.mlp.c_proj,
    }


def _conv1d(convolution: Any) -> FrozenLinear:
    """The ``Conv1D`` of transformers, ``inputs @ W + b`` with ``W`` stored ``(in, out)``, as a linear of ``W.T``."""
    return FrozenLinear(convolution.weight, convolution.bias, transposed=True)
