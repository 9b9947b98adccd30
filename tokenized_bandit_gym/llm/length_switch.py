"""Rotary embeddings whose frequencies switch with the sequence's length, and how the core stays right across it.

Two rotary scalings of transformers pick their frequencies per forward call from the longest
position in it (``dynamic_rope_update``): ``"longrope"`` (Phi-3, Phi-3.5, Phi-4-mini, PhiMoE, Llama
with longrope) runs its short factors while a sequence has at most ``original_max_position_embeddings``
tokens and its long factors past that, for every position of the sequence; ``"dynamic"`` (dynamic
NTK) rescales its frequencies to the longest sequence it has run so far. A KV cache built before
the switch holds entries of the other frequencies, so a cached step past it is not what the
model's own no-cache forward of ``x:y:tau`` gives.

The core handles longrope as ``generate()`` does (:class:`LengthSwitch`): rows on either side of
the switch are run in separate forward calls (a batch mixing them would run every row with the
long factors), and when a row's candidates first cross it (``|x:y| = original_max_position_embeddings``)
its prefix is recomputed with the long factors (:func:`recomputed_prefix`). Dynamic NTK depends on
the calls the model has run, not only on the sequence, so an episode that can cross its switch is
refused at construction (:func:`length_switch`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from tokenized_bandit_gym.llm.language_model_state import KeyValues

DecoderCall = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, KeyValues], tuple[torch.Tensor, KeyValues]]
"""A :data:`~tokenized_bandit_gym.llm.decoder_forward.DecoderForward` (repeated here to avoid an import cycle)."""


@dataclass(frozen=True)
class LengthSwitch:
    """Longrope's switch: sequences of more than ``threshold`` tokens run the long factors at every position.

    Attributes:
        model_type: the config's ``model_type`` (for messages).
        threshold: ``original_max_position_embeddings``.
    """

    model_type: str
    threshold: int

    def long_rows(self, position_ids: torch.Tensor) -> torch.Tensor:
        """``(N,)`` bool: rows whose call ``position_ids`` ``(N, T)`` runs the long factors."""
        return position_ids.max(dim=1).values + 1 > self.threshold

    def split_forward(self, forward: DecoderCall) -> DecoderCall:
        """``forward`` run separately on the rows before and past the switch, results in the rows' order."""

        def split(
            input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor, past: KeyValues
        ) -> tuple[torch.Tensor, KeyValues]:
            long = self.long_rows(position_ids)  # (N,)
            if bool(long.all()) or not bool(long.any()):
                return forward(input_ids, attention_mask, position_ids, past)
            groups = (torch.nonzero(long)[:, 0], torch.nonzero(~long)[:, 0])
            results = [
                forward(
                    input_ids[rows],
                    attention_mask[rows],
                    position_ids[rows],
                    tuple((keys[rows], values[rows]) for keys, values in past),
                )
                for rows in groups
            ]
            order = torch.cat(groups).argsort()  # (N,) row i of the call sits at order[i] of the concatenation
            hidden = torch.cat([hidden for hidden, _ in results])[order]  # (N, T, H)
            layers = zip(*(cache for _, cache in results), strict=True)
            cache = tuple(
                (torch.cat([keys for keys, _ in layer])[order], torch.cat([values for _, values in layer])[order])
                for layer in layers
            )
            return hidden, cache

        return split


def recomputed_prefix(
    forward: DecoderCall,
    log_probs: Callable[[torch.Tensor], torch.Tensor],
    sequences: list[torch.Tensor],
    query_lengths: list[int],
    attention_mask: torch.Tensor,
    pool_query: bool,
    filler_id: int,
) -> tuple[torch.Tensor, KeyValues, torch.Tensor, torch.Tensor]:
    """The prefixes ``x:y`` of R rows recomputed with the long factors, in the state's cache columns.

    One no-cache forward of each row's ``x:y`` laid out in its cache columns (``attention_mask``
    ``(R, P)``), with one more token after it so that the call's longest sequence is past the
    switch (a causal model's prefix does not depend on a token after it; that column is dropped).

    Args:
        forward: the core's forward.
        log_probs: the core's head, hidden ``(n, H)`` to log-probs ``(n, V)``.
        sequences: per row the ids of ``x:y`` ``(|x| + |y|,)``.
        query_lengths: per row ``|x|``.
        attention_mask: ``(R, P)`` the rows' cache columns (1 where a column holds one of their tokens).
        pool_query: the pooled span is ``x:y`` (else ``y``).
        filler_id: the id of the dropped token after the prefix.

    Returns:
        ``(hidden_sum (R, H) float32, past (R, h, P, hd) per layer, sequence_logprob (R,) float64,
        last_hidden (R, H))``.
    """
    rows, width = attention_mask.shape
    valid = attention_mask.bool()
    ids = torch.full((rows, width + 1), filler_id, dtype=torch.int64, device=attention_mask.device)
    for row, sequence in enumerate(sequences):
        ids[row, :width][valid[row]] = sequence
    mask = torch.cat([attention_mask, torch.ones_like(attention_mask[:, :1])], dim=1)  # (R, P + 1)
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)  # (R, P + 1)
    hidden, cache = forward(ids, mask, positions, ())  # (R, P + 1, H)
    past = tuple((keys[:, :, :width], values[:, :, :width]) for keys, values in cache)
    sums, logprobs, lasts = [], [], []
    for row, (sequence, query_length) in enumerate(zip(sequences, query_lengths, strict=True)):
        states = hidden[row, :width][valid[row]]  # (|x| + |y|, H)
        pooled = states if pool_query else states[query_length:]
        sums.append(pooled.float().sum(dim=0))
        predicted = log_probs(states[query_length - 1 : -1])  # (|y|, V): each response token's distribution
        logprobs.append(predicted.gather(1, sequence[query_length:, None]).double().sum())
        lasts.append(states[-1])
    return torch.stack(sums), past, torch.stack(logprobs), torch.stack(lasts)


def length_switch(model: Any, longest_sequence: int) -> LengthSwitch | None:
    """The model's length switch that an episode of up to ``longest_sequence`` tokens crosses (None if none).

    Raises:
        ValueError: the model's rotary scaling is dynamic NTK and an episode can cross its switch
            (its frequencies then depend on the calls the model has run); the message names the
            model type, the scaling and the lengths.
    """
    config = model.config.get_text_config()
    model_type = str(getattr(config, "model_type", type(model).__name__))
    parameters = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if not isinstance(parameters, dict):
        return None
    per_layer_type = [value for value in parameters.values() if isinstance(value, dict)]
    switch = None
    for rope in per_layer_type or [parameters]:
        rope_type = str(rope.get("rope_type", rope.get("type", "default")))
        if rope_type not in ("longrope",) and "dynamic" not in rope_type:
            continue
        threshold = rope.get("original_max_position_embeddings") or getattr(config, "max_position_embeddings", None)
        if not isinstance(threshold, int) or longest_sequence <= threshold:
            continue
        if rope_type != "longrope":
            raise ValueError(
                f"model_type={model_type!r} uses dynamic NTK rotary scaling (rope_type={rope_type!r}): past "
                f"{threshold} tokens its frequencies follow the longest sequence the model has run so far, so neither "
                f"a KV cache nor its own forward gives fixed numbers there, and an episode here reaches "
                f"{longest_sequence} tokens (the longest query plus max_length): keep queries plus max_length within "
                f"{threshold} tokens"
            )
        switch = LengthSwitch(model_type, threshold)
    return switch
