"""The state of B LLM decoding rounds: KV cache, pooled hidden states and scored candidates."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

KeyValues = tuple[tuple[torch.Tensor, torch.Tensor], ...]
"""Per layer ``(keys, values)``, each ``(B, heads, P, head_dim)``."""

_ROW_FIELDS = (
    "queries",
    "tokens",
    "lengths",
    "finished",
    "next_positions",
    "hidden_sum",
    "pooled_count",
    "sequence_logprob",
    "last_hidden",
    "candidate_tokens",
    "candidate_logprobs",
    "candidate_hidden",
)
"""The fields that are one tensor with the batch first (the caches and the mask need more care)."""


@dataclass(frozen=True)
class LanguageModelState:
    """B partial responses, with everything needed to score the next token without re-encoding.

    Rows have different prefix lengths: the cache is left-padded and ``attention_mask`` marks the
    columns each row attends to (a row that did not grow in a step gets a masked column).

    Attributes:
        queries: ``(B,)`` int64 indices into the query pool.
        tokens: ``(B, L)`` int64 response ids, padded with EOS past ``lengths``.
        lengths: ``(B,)`` int64 tokens chosen so far.
        finished: ``(B,)`` bool, the response ended with EOS.
        past: KV cache of ``x:y``, per layer ``(B, heads, P, head_dim)``.
        attention_mask: ``(B, P)`` int64, 1 where a cache column belongs to the row.
        next_positions: ``(B,)`` int64 position id of the next token.
        hidden_sum: ``(B, H)`` float32 running sum of last-layer hidden states over the pooling span.
        pooled_count: ``(B,)`` int64 number of tokens in that sum.
        sequence_logprob: ``(B,)`` float64 ``log p(y | x)`` (without a forced EOS's term when the problem
            has ``score_forced_eos=False``).
        last_hidden: ``(B, H)`` last-layer hidden state of the last token of ``x:y`` (its LM head
            output is the next-token distribution).
        candidate_tokens: ``(B, k)`` int64 the top-k candidates tau (EOS inserted when required).
        candidate_logprobs: ``(B, k)`` float32 ``log p(tau | x, y)``.
        candidate_hidden: ``(B, k, H)`` last-layer hidden state of each tau after ``x:y``, or None
            when the problem computes no embeddings.
        candidate_past: per layer ``(keys, values)`` of each tau, ``(B, heads, k, head_dim)``, or None.
    """

    queries: torch.Tensor
    tokens: torch.Tensor
    lengths: torch.Tensor
    finished: torch.Tensor
    past: KeyValues
    attention_mask: torch.Tensor
    next_positions: torch.Tensor
    hidden_sum: torch.Tensor
    pooled_count: torch.Tensor
    sequence_logprob: torch.Tensor
    last_hidden: torch.Tensor
    candidate_tokens: torch.Tensor
    candidate_logprobs: torch.Tensor
    candidate_hidden: torch.Tensor | None
    candidate_past: KeyValues | None

    @property
    def batch_size(self) -> int:
        """Number of rounds B."""
        return int(self.queries.shape[0])

    def select(self, rows: torch.Tensor | slice) -> LanguageModelState:
        """The sub-batch (or reordering, repeats allowed) at ``rows`` ``(B',)`` int64 (a copy), or a slice (views)."""
        fields: dict[str, Any] = {
            name: None if (value := getattr(self, name)) is None else value[rows] for name in _ROW_FIELDS
        }
        candidate_past = None
        if self.candidate_past is not None:
            candidate_past = tuple((keys[rows], values[rows]) for keys, values in self.candidate_past)
        return LanguageModelState(
            **fields,
            past=tuple((keys[rows], values[rows]) for keys, values in self.past),
            attention_mask=self.attention_mask[rows],
            candidate_past=candidate_past,
        )

    def with_new_rows(self, rows: torch.Tensor, fresh: LanguageModelState) -> LanguageModelState:
        """This state with rows ``rows`` ``(R,)`` int64 replaced by the R rows of ``fresh``.

        The two KV caches have different widths (``P`` here, ``F`` in ``fresh``, each left-padded
        on its own): both are left-padded to ``max(P, F)`` with masked zero columns, the fresh
        rows are copied in, and the leading columns that no row attends to any more (the cache of
        the rounds just replaced) are trimmed (:meth:`trimmed`), so the cache stays as wide as the
        longest live prefix.
        """
        rows = torch.as_tensor(rows, dtype=torch.int64, device=self.queries.device)
        if fresh.batch_size != rows.shape[0]:
            raise ValueError(f"fresh has {fresh.batch_size} rows but {rows.shape[0]} rows are replaced")
        if rows.numel() == 0:
            return self
        width = max(self.attention_mask.shape[1], fresh.attention_mask.shape[1])
        mask = _left_pad(self.attention_mask, 1, width).index_copy(
            0, rows, _left_pad(fresh.attention_mask, 1, width)
        )  # (B, W)
        past = tuple(
            (
                _left_pad(keys, 2, width).index_copy(0, rows, _left_pad(new_keys, 2, width)),
                _left_pad(values, 2, width).index_copy(0, rows, _left_pad(new_values, 2, width)),
            )  # (B, h, W, hd)
            for (keys, values), (new_keys, new_values) in zip(self.past, fresh.past, strict=True)
        )
        candidate_past = None
        if self.candidate_past is not None and fresh.candidate_past is not None:
            layers = zip(self.candidate_past, fresh.candidate_past, strict=True)
            candidate_past = tuple(
                (keys.index_copy(0, rows, new_keys), values.index_copy(0, rows, new_values))  # (B, h, k, hd)
                for (keys, values), (new_keys, new_values) in layers
            )
        fields: dict[str, Any] = {}
        for name in _ROW_FIELDS:  # None (candidate_hidden) unless both states hold it
            mine, theirs = getattr(self, name), getattr(fresh, name)
            fields[name] = None if mine is None or theirs is None else mine.index_copy(0, rows, theirs)
        merged = LanguageModelState(**fields, past=past, attention_mask=mask, candidate_past=candidate_past)
        return merged.trimmed()

    def trimmed(self) -> LanguageModelState:
        """This state without the leading cache columns that no row attends to (reads one integer from the device)."""
        first = int(self.attention_mask.any(dim=0).int().argmax())  # first column some row attends to
        if first == 0:
            return self
        past = tuple((keys[:, :, first:], values[:, :, first:]) for keys, values in self.past)  # (B, h, P', hd)
        return replace(self, past=past, attention_mask=self.attention_mask[:, first:])


def _left_pad(tensor: torch.Tensor, dim: int, width: int) -> torch.Tensor:
    """``tensor`` with zero columns prepended along ``dim`` up to size ``width``."""
    missing = width - tensor.shape[dim]
    if missing == 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([tensor.new_zeros(shape), tensor], dim=dim)
