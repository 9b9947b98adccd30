"""The base of the native forwards: each computes one architecture family and refuses any other model."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import torch

from tokenized_bandit_gym.llm.additive_attention_mask import additive_attention_mask
from tokenized_bandit_gym.llm.language_model_state import KeyValues


class NativeDecoderForward(ABC):
    """A :data:`~tokenized_bandit_gym.llm.decoder_forward.DecoderForward` over the model's own weights.

    The call turns a 0/1 ``(N, S)`` mask into the additive ``(N, 1, T, S)`` one, then runs the
    family's layers (:meth:`_layers`).

    Args:
        model: a loaded causal LM for which :meth:`unsupported_reason` is None.

    Raises:
        ValueError: the model is not one this forward computes exactly (the reason is named).
    """

    architecture: ClassVar[str]
    """The family's name, for messages."""

    def __init__(self, model: Any) -> None:
        reason = self.unsupported_reason(model)
        if reason is not None:
            raise ValueError(f"no native {self.architecture} forward for this model: {reason}")
        self._base = model.base_model
        self._dtype = model.get_input_embeddings().weight.dtype  # of the hidden states, hence of the mask

    @staticmethod
    @abstractmethod
    def unsupported_reason(model: Any) -> str | None:
        """None when this forward computes exactly ``model``, else why not."""

    def __call__(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        past: KeyValues,
    ) -> tuple[torch.Tensor, KeyValues]:
        """Hidden ``(N, T, H)`` of ``input_ids`` ``(N, T)`` over ``past``, and the cache with their entries."""
        if attention_mask.dim() == 2:
            attention_mask = additive_attention_mask(attention_mask, input_ids.shape[1], self._dtype)
        return self._layers(input_ids, attention_mask, position_ids, past)

    @abstractmethod
    def _layers(
        self, input_ids: torch.Tensor, additive_mask: torch.Tensor, position_ids: torch.Tensor, past: KeyValues
    ) -> tuple[torch.Tensor, KeyValues]:
        """The family's forward with the additive mask ``(N, 1, T, S)``: hidden ``(N, T, H)`` and cache."""


def with_past(
    past: KeyValues, layer: int, keys: torch.Tensor, values: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer ``layer``'s cache ``(N, h, S, hd)``: the new entries ``(N, h, T, hd)`` after its past, if any."""
    if not past:
        return keys, values
    return torch.cat([past[layer][0], keys], dim=2), torch.cat([past[layer][1], values], dim=2)
