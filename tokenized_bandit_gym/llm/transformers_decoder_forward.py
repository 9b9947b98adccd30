"""The model's own transformers forward as a :data:`~tokenized_bandit_gym.llm.decoder_forward.DecoderForward`."""

from __future__ import annotations

import inspect
from typing import Any

import torch

from tokenized_bandit_gym.llm.attention_layout import attention_layout
from tokenized_bandit_gym.llm.language_model_state import KeyValues


class TransformersDecoderForward:
    """Runs ``model.base_model`` over the cache ``past``, with the model's own attention per layer.

    Masks of models with sliding-window layers are built here, windows measured in positions
    (:class:`~tokenized_bandit_gym.llm.attention_layout.AttentionLayout`); other models get the
    core's mask as it is.

    Args:
        model: a loaded causal LM.

    Raises:
        ValueError: the model's attention cannot be reproduced
            (:func:`~tokenized_bandit_gym.llm.attention_layout.attention_layout` names the feature).
    """

    def __init__(self, model: Any) -> None:
        self._base = model.base_model
        self.layout = attention_layout(model)
        self._dtype = model.get_input_embeddings().weight.dtype  # of the hidden states, hence of the masks
        # transformers renamed the forward's ``past_key_values`` to ``cache`` (the old name warns, and goes in 5.40).
        parameters = inspect.signature(self._base.forward).parameters
        self._cache_keyword = "cache" if "cache" in parameters else "past_key_values"

    def __call__(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        past: KeyValues,
    ) -> tuple[torch.Tensor, KeyValues]:
        """Hidden ``(N, T, H)`` of ``input_ids`` ``(N, T)`` over ``past``, and the cache with their entries."""
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        cache = DynamicCache()
        for keys, values in past:  # the layers take the state's tensors as they are (DynamicCache(data) copies them)
            layer = DynamicLayer()
            layer.dtype, layer.device = keys.dtype, keys.device
            layer.keys, layer.values = keys, values
            layer.is_initialized = True  # what DynamicLayer.lazy_initialization sets, without its empty tensors
            cache.layers.append(layer)
        output = self._base(
            input_ids=input_ids,
            attention_mask=self.layout.masks(attention_mask, position_ids, self._dtype),
            position_ids=position_ids,
            use_cache=True,
            **{self._cache_keyword: cache},
        )
        returned = getattr(output, self._cache_keyword)
        if type(returned) is not DynamicCache:  # e.g. an encoder-decoder or recurrent cache
            kind = type(returned).__name__
            raise ValueError(f"the model returns a {kind} cache, not a DynamicCache of one key and value per layer")
        layers = returned.layers
        return output.last_hidden_state, tuple((layer.keys, layer.values) for layer in layers)
