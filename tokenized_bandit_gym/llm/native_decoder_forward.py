"""The base of the native forwards: each computes one architecture family and refuses any other model."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import torch

from tokenized_bandit_gym.llm.language_model_state import KeyValues


class NativeDecoderForward(ABC):
    """A :data:`~tokenized_bandit_gym.llm.decoder_forward.DecoderForward` over the model's own weights.

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

    @staticmethod
    @abstractmethod
    def unsupported_reason(model: Any) -> str | None:
        """None when this forward computes exactly ``model``, else why not."""

    @abstractmethod
    def __call__(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        past: KeyValues,
    ) -> tuple[torch.Tensor, KeyValues]:
        """Hidden ``(N, T, H)`` of ``input_ids`` ``(N, T)`` over ``past``, and the cache with their entries."""
