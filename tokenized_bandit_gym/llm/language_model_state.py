"""The state of B LLM decoding rounds: KV cache, pooled hidden states and scored candidates."""

from __future__ import annotations

from dataclasses import dataclass

import torch

KeyValues = tuple[tuple[torch.Tensor, torch.Tensor], ...]
"""Per layer ``(keys, values)``, each ``(B, heads, P, head_dim)``."""


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
        sequence_logprob: ``(B,)`` float64 ``log p(y | x)``.
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

    def select(self, rows: torch.Tensor) -> LanguageModelState:
        """The sub-batch (or reordering, repeats allowed) at ``rows`` ``(B',)`` int64."""
        candidate_past = None
        if self.candidate_past is not None:
            candidate_past = tuple((keys[rows], values[rows]) for keys, values in self.candidate_past)
        return LanguageModelState(
            queries=self.queries[rows],
            tokens=self.tokens[rows],
            lengths=self.lengths[rows],
            finished=self.finished[rows],
            past=tuple((keys[rows], values[rows]) for keys, values in self.past),
            attention_mask=self.attention_mask[rows],
            next_positions=self.next_positions[rows],
            hidden_sum=self.hidden_sum[rows],
            pooled_count=self.pooled_count[rows],
            sequence_logprob=self.sequence_logprob[rows],
            last_hidden=self.last_hidden[rows],
            candidate_tokens=self.candidate_tokens[rows],
            candidate_logprobs=self.candidate_logprobs[rows],
            candidate_hidden=None if self.candidate_hidden is None else self.candidate_hidden[rows],
            candidate_past=candidate_past,
        )
