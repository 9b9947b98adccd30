"""The state of B rounds being decoded in parallel."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch


@dataclass(frozen=True)
class DecodingState:
    """B partial responses, one per round, and what the utility family carries along.

    Attributes:
        queries: ``(B,)`` int64 indices into the problem's query pool.
        tokens: ``(B, L)`` int64 response token ids, padded with EOS past ``lengths``.
        lengths: ``(B,)`` int64 number of tokens chosen so far (EOS included once chosen).
        finished: ``(B,)`` bool, True once the response is complete (ends with EOS).
        carry: ``(B, *c)`` the family's running summary of ``x:y`` (e.g. the embedding
            ``e(x, y)`` for the discounted family, a running sum for mean pooling), from
            which the utility of ``y`` and of every one-token extension ``y:tau`` follows
            without re-reading ``y``.
        last_tokens: ``(B,)`` int64 the last token of ``x:y`` (the last query token while
            ``y`` is empty); families with a bigram term read it.
    """

    queries: torch.Tensor
    tokens: torch.Tensor
    lengths: torch.Tensor
    finished: torch.Tensor
    carry: torch.Tensor
    last_tokens: torch.Tensor

    @property
    def batch_size(self) -> int:
        """Number of rounds B."""
        return int(self.queries.shape[0])

    def select(self, rows: torch.Tensor) -> DecodingState:
        """Return the sub-batch at ``rows`` (``(B',)`` int64 or ``(B,)`` bool)."""
        return DecodingState(
            queries=self.queries[rows],
            tokens=self.tokens[rows],
            lengths=self.lengths[rows],
            finished=self.finished[rows],
            carry=self.carry[rows],
            last_tokens=self.last_tokens[rows],
        )

    def with_rows(self, rows: torch.Tensor, other: DecodingState) -> DecodingState:
        """Return a copy whose ``rows`` (``(B,)`` bool) are taken from ``other`` (same B)."""
        carry_rows = rows.view(-1, *([1] * (self.carry.dim() - 1)))
        return replace(
            self,
            tokens=torch.where(rows[:, None], other.tokens, self.tokens),
            lengths=torch.where(rows, other.lengths, self.lengths),
            finished=torch.where(rows, other.finished, self.finished),
            carry=torch.where(carry_rows, other.carry, self.carry),
            last_tokens=torch.where(rows, other.last_tokens, self.last_tokens),
        )
