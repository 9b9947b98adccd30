"""The one model call of the LLM core: a decoder's forward over a KV cache, and how it is picked.

Every forward the LLM envs run (query prefill, the k candidates of a step, forced tokens) goes
through one :data:`DecoderForward`: ``(input_ids (N, T), attention_mask, position_ids (N, T),
past) -> (last-layer hidden (N, T, H), cache (N, h, P + T, hd) per layer)``. ``attention_mask`` is
either ``(N, P + T)`` of 0/1 (causal among the T new tokens, padding masked) or an additive
``(N, 1, T, P + T)`` mask used as it is (the candidates' "prefix and itself only" mask).

Two implementations, numerically the same model (tested against each other):

* :class:`~tokenized_bandit_gym.llm.transformers_decoder_forward.TransformersDecoderForward`:
  the model's own ``base_model`` forward; any causal LM transformers loads.
* a native forward for the Llama family (Llama, Mistral, Qwen2) and GPT-2: the same weights and
  the same operations without transformers' per-call machinery (mask and cache objects,
  per-layer dispatch), which is most of a small model's forward time; one fused
  ``gelu(approximate="tanh")`` in place of GPT-2's five-op GELU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tokenized_bandit_gym.core.validation import check_choice
from tokenized_bandit_gym.llm.gpt2_decoder_forward import GPT2DecoderForward
from tokenized_bandit_gym.llm.language_model_state import KeyValues
from tokenized_bandit_gym.llm.llama_decoder_forward import LlamaDecoderForward
from tokenized_bandit_gym.llm.transformers_decoder_forward import TransformersDecoderForward

DecoderForward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, KeyValues], tuple[torch.Tensor, KeyValues]]
"""``(input_ids (N, T), attention_mask, position_ids (N, T), past) -> (hidden (N, T, H), cache)``."""

FORWARD_IMPLEMENTATIONS = ("auto", "native", "transformers")


def has_native_forward(model: Any) -> bool:
    """Whether a native forward computes ``model`` exactly (``forward_implementation="auto"`` tries it first)."""
    return any(native.unsupported_reason(model) is None for native in (LlamaDecoderForward, GPT2DecoderForward))


def select_decoder_forward(model: Any, implementation: str = "auto") -> DecoderForward:
    """The forward the LLM core runs on ``model``.

    Args:
        model: a loaded causal LM (``transformers`` ``PreTrainedModel``).
        implementation: ``"native"`` (the native forward; ValueError when the architecture has
            none), ``"transformers"`` (the model's own forward) or ``"auto"`` (native when the
            architecture has one, else transformers).
    """
    check_choice("forward_implementation", implementation, FORWARD_IMPLEMENTATIONS)
    if implementation == "transformers":
        return TransformersDecoderForward(model)
    reasons = []
    for native in (LlamaDecoderForward, GPT2DecoderForward):
        reason = native.unsupported_reason(model)
        if reason is None:
            return native(model)
        reasons.append(f"{native.__name__}: {reason}")
    if implementation == "native":
        model_type = getattr(model.config, "model_type", None)
        raise ValueError(
            f"forward_implementation='native' has no native forward for model_type={model_type!r} "
            f"({'; '.join(reasons)}); use 'auto' or 'transformers'"
        )
    return TransformersDecoderForward(model)
