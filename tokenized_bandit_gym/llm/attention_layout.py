"""Which attention each layer of a causal LM runs (full or a sliding window), and the masks that say so.

The LLM core hands the model its own attention masks: a 4-D mask that lets each of the k candidates
see the row's prefix and itself only, or a 0/1 mask over a KV cache with masked columns (left
padding, rows that did not grow in a step). A 4-D mask replaces the model's own masking, windows
included, and a 0/1 mask makes transformers measure windows in cache columns, not in tokens. So
for a model with sliding-window layers (Mistral, Phi-3, Qwen2 with ``use_sliding_window``,
Gemma-2/3's alternating local and global layers, ...) the core builds every mask itself, with the
window measured in positions: key j is visible to query i when the base mask allows it and
``position_i - position_j < window`` (transformers' ``sliding_window_overlay``: a token sees
itself and the ``window - 1`` before it). Models whose forward takes one mask per layer type get
``{"full_attention": ..., "sliding_attention": ...}``; models with one window for every layer
get the windowed mask. Anything else this cannot express is refused, naming the model type and
the feature (:func:`attention_layout`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch

from tokenized_bandit_gym.llm.additive_attention_mask import additive_attention_mask

LAYER_TYPES = ("full_attention", "sliding_attention")
"""The per-layer attention kinds the core reproduces."""

MASKED_KERNELS = ("eager", "sdpa")
"""Attention kernels that take the core's additive 4-D masks."""


@dataclass(frozen=True)
class AttentionLayout:
    """The attention of every layer of one model, and how its forward takes masks.

    Attributes:
        model_type: the config's ``model_type`` (for messages).
        layer_windows: per layer, None (full attention) or the sliding window in tokens.
        mask_per_layer_type: the base model's forward takes a dict of masks keyed by layer type.
    """

    model_type: str
    layer_windows: tuple[int | None, ...]
    mask_per_layer_type: bool

    @property
    def window(self) -> int | None:
        """The sliding window shared by the windowed layers (None when every layer attends fully)."""
        return next((window for window in self.layer_windows if window is not None), None)

    def masks(
        self, attention_mask: torch.Tensor, position_ids: torch.Tensor, dtype: torch.dtype
    ) -> torch.Tensor | dict[str, torch.Tensor]:
        """The masks to hand the model's forward for T new tokens over S cache columns.

        Args:
            attention_mask: ``(N, S)`` 0/1 (causal among the new tokens) or additive ``(N, 1, T, S)``.
            position_ids: ``(N, T)`` positions of the new tokens (the last T columns).
            dtype: dtype of the additive masks.

        Returns:
            ``attention_mask`` itself when no layer has a window; else the additive ``(N, 1, T, S)``
            windowed mask, or ``{"full_attention": (N, 1, T, S), "sliding_attention": (N, 1, T, S)}``.
        """
        window = self.window
        if window is None:
            return attention_mask
        new_tokens = position_ids.shape[1]
        if attention_mask.dim() == 2:
            full = additive_attention_mask(attention_mask, new_tokens, dtype)  # (N, 1, T, S)
        else:
            full = attention_mask.to(dtype)
        allowed = full == 0  # (N, 1, T, S)
        prefix_valid = allowed[:, 0, :, : allowed.shape[-1] - new_tokens].any(dim=1)  # (N, P) cache columns in use
        prefix_positions = prefix_valid.long().cumsum(dim=1) - 1  # (N, P) a row's cached tokens sit at 0, 1, ...
        key_positions = torch.cat([prefix_positions, position_ids], dim=1)  # (N, S)
        distance = position_ids[:, None, :, None] - key_positions[:, None, None, :]  # (N, 1, T, S)
        windowed = full.masked_fill(distance >= window, torch.finfo(dtype).min)  # (N, 1, T, S)
        if self.mask_per_layer_type:
            return {"full_attention": full, "sliding_attention": windowed}
        return windowed


def attention_layout(model: Any) -> AttentionLayout:
    """The :class:`AttentionLayout` of ``model``.

    Raises:
        ValueError: the model uses an attention feature the core cannot reproduce (chunked or
            linear attention layers, windows of different sizes, full and windowed layers under a
            forward that takes one mask, windows or attention softcapping with a kernel that
            ignores them); the message names the model type and the feature.
    """
    config = model.config.get_text_config()
    model_type = str(getattr(config, "model_type", type(model).__name__))
    layers = int(getattr(config, "num_hidden_layers", 0) or 0)
    window = getattr(config, "sliding_window", None)
    if getattr(config, "use_sliding_window", True) is False:
        window = None
    layer_types = getattr(config, "layer_types", None)
    chunk = getattr(config, "attention_chunk_size", None)
    if chunk is not None:
        raise ValueError(f"model_type={model_type!r} uses chunked attention (attention_chunk_size={chunk})")
    if layer_types is not None:
        unknown = sorted(set(layer_types) - set(LAYER_TYPES))
        if unknown:
            raise ValueError(
                f"model_type={model_type!r} has {unknown} layers; candidates are scored over {LAYER_TYPES} only"
            )
        if "sliding_attention" in layer_types and not isinstance(window, int):
            raise ValueError(f"model_type={model_type!r} has sliding-attention layers but sliding_window={window!r}")
        windows = tuple(window if kind == "sliding_attention" else None for kind in layer_types)
    else:
        windows = (window if isinstance(window, int) else None,) * layers
    per_type = _takes_masks_per_layer_type(model.base_model)
    layout = AttentionLayout(model_type, windows, per_type)
    kernel = getattr(model.config, "_attn_implementation", None)
    if layout.window is not None:
        if not per_type and len(set(windows)) > 1:
            raise ValueError(
                f"model_type={model_type!r} mixes full-attention and sliding-window layers (window {layout.window}) "
                "and its forward takes one attention mask for every layer: the windows cannot be honoured"
            )
        if kernel not in MASKED_KERNELS:
            raise ValueError(
                f"model_type={model_type!r} has sliding-window layers (window {layout.window}) and runs the "
                f"{kernel!r} attention kernel, which takes no 4-D masks: load it with attn_implementation "
                "'auto', 'sdpa' or 'eager'"
            )
    softcap = getattr(config, "attn_logit_softcapping", None)
    if softcap is not None and kernel not in ("eager", "flex_attention"):
        raise ValueError(
            f"model_type={model_type!r} uses attention softcapping (attn_logit_softcapping={softcap}), which the "
            f"{kernel!r} attention kernel does not apply: load it with attn_implementation='auto' or 'eager'"
        )
    return layout


def _takes_masks_per_layer_type(base_model: Any) -> bool:
    """Whether the base model's forward accepts a dict of masks keyed by layer type (transformers 5)."""
    try:
        source = inspect.getsource(type(base_model).forward)
    except (OSError, TypeError):
        return False
    return "causal_mask_mapping := attention_mask, dict" in source
