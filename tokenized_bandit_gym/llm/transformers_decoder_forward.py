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
        self._base = decoder_of(model)
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
            layer.dtype, layer.device = keys.dtype, keys.device  # type: ignore[attr-defined]  # lazy_initialization's
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
        returned = output.get("cache", output.get("past_key_values"))  # transformers 5.2x names it cache
        model_type = self.layout.model_type
        if returned is None:
            raise ValueError(
                f"model_type={model_type!r} returns no key/value cache ({type(output).__name__} holds "
                f"{list(output.keys())}): it is a recurrent or cache-less architecture, and the LLM envs step "
                "each token over a cache of one key and value per layer"
            )
        if type(returned) is not DynamicCache:  # e.g. an encoder-decoder or recurrent cache
            raise ValueError(
                f"model_type={model_type!r} returns a {type(returned).__name__}, not a DynamicCache of one key and "
                "value per layer (a recurrent, hybrid or encoder-decoder cache), which the LLM envs cannot step"
            )
        # transformers types the layers of any cache kind (keys may be None); a DynamicCache's hold both tensors
        layers: KeyValues = tuple((layer.keys, layer.values) for layer in returned.layers)  # type: ignore[misc,union-attr]
        return output.last_hidden_state, layers


def decoder_of(model: Any) -> Any:
    """The decoder stack of a causal LM, whose output is the last hidden state (``model.base_model`` in general).

    Some causal-LM classes are their own base model (Llama-4's text model, whose
    ``base_model_prefix`` names no child); their decoder is ``get_decoder()``, else the ``model`` child.
    """
    base = model.base_model
    if base is model and callable(getattr(model, "get_decoder", None)):
        base = model.get_decoder()
    if base is model and isinstance(getattr(model, "model", None), torch.nn.Module):
        base = model.model
    return base
