"""The embedding before the decoder's final norm (``embedding_layer="pre_norm"``, issue 48).

Section 6 of the paper pools "last-layer hidden states" without saying whether before or after the final norm
(RMSNorm or LayerNorm). The LLM core pools after it by default: the LM head's input, which transformers returns
as the last hidden state. With ``"pre_norm"`` the forward returns the last decoder layer's output (the final
norm's input) instead, the state carries those, and the norm is applied before the LM head
(:class:`PreNormForward`): the log-probs are the model's, only ``e`` changes. It runs transformers' own
forward (a hook on the final norm module, held only during each call, makes the norm return its input), so any
model whose decoder stack has a final norm module works; a model without one is refused by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from tokenized_bandit_gym.llm.language_model_state import KeyValues
from tokenized_bandit_gym.llm.transformers_decoder_forward import TransformersDecoderForward, decoder_of

EMBEDDING_LAYERS = ("final_norm", "pre_norm")
"""Where ``e`` is pooled: the last hidden state after the decoder's final norm (the default), or before it."""
FINAL_NORM_NAMES = ("norm", "ln_f", "final_layernorm", "final_layer_norm")
"""The attribute of the decoder stack that holds its final norm, by family (Llama, GPT-2, Phi/OPT, ...)."""


def final_norm_of(model: Any) -> torch.nn.Module:
    """The final norm module of ``model``'s decoder stack.

    Raises:
        ValueError: the decoder has none of :data:`FINAL_NORM_NAMES`.
    """
    base = decoder_of(model)
    for name in FINAL_NORM_NAMES:
        module = getattr(base, name, None)
        if isinstance(module, torch.nn.Module):
            return module
    model_type = getattr(model.config, "model_type", None)
    raise ValueError(
        f"embedding_layer='pre_norm' needs the decoder's final norm, but model_type={model_type!r} has none of "
        f"{FINAL_NORM_NAMES}"
    )


@contextmanager
def norm_bypassed(norm: torch.nn.Module) -> Iterator[None]:
    """While inside, ``norm`` returns its input unchanged (a forward hook, removed on exit)."""
    handle = norm.register_forward_hook(lambda module, inputs, output: inputs[0])
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def norm_inputs_recorded(norm: torch.nn.Module) -> Iterator[list[torch.Tensor]]:
    """While inside, every input of ``norm`` is appended to the yielded list (its output is unchanged)."""
    recorded: list[torch.Tensor] = []
    handle = norm.register_forward_hook(lambda module, inputs, output: recorded.append(inputs[0]))
    try:
        yield recorded
    finally:
        handle.remove()


class PreNormForward(TransformersDecoderForward):
    """Transformers' forward returning the final norm's input ``(N, T, H)``: the last layer's hidden states."""

    def __init__(self, model: Any) -> None:
        super().__init__(model)
        self.norm = final_norm_of(model)

    def __call__(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor, past: KeyValues
    ) -> tuple[torch.Tensor, KeyValues]:
        """Pre-norm hidden ``(N, T, H)`` of ``input_ids`` ``(N, T)`` over ``past``, and the cache with their entries."""
        with norm_bypassed(self.norm):
            return super().__call__(input_ids, attention_mask, position_ids, past)
