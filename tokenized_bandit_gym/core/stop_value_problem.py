"""TMAB instances built from a hidden TLB: the utility of stopping now, mapped into [0, 1]."""

from __future__ import annotations

import numpy as np
import torch

from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.tokenized_problem import DecodedResponses, TokenizedProblem


class StopValueProblem(TokenizedProblem):
    """A tokenized multi-armed bandit (paper section 4) with DDMC' when the base has DDMC.

    The query is fixed and the utility is an arbitrary-looking function of the response in
    ``[0, 1]``, known to no agent: ``u(y) = 0.5 + 0.5 * u_base(y:EOS)`` for an incomplete y and
    ``0.5 + 0.5 * u_base(y)`` for a complete one, where ``u_base`` is a hidden TLB utility in
    ``[-1, 1]`` with a one-query pool. No features are exposed.

    DDMC' (appendix "Appendix for TMAB") compares ``u(y:tau:EOS)`` with ``u(y:EOS)``. For the
    discounted base, ``u_base(y:tau:EOS) - u_base(z:tau:EOS) = alpha (u_base(y:EOS) -
    u_base(z:EOS))``, so DDMC' holds exactly; for the mean-pooled base the factor is
    ``(|x| + m + 1) / (|x| + m + 2)``. Affine maps keep both.

    Args:
        base: the hidden TLB instance (its query pool should have one query); its token
            features must not depend on the previous token (no bigram term).
        offset: added to ``scale * u_base``; the defaults map ``[-1, 1]`` onto ``[0, 1]``.
        scale: multiplies ``u_base``; must be > 0 to keep the argmax.
    """

    def __init__(self, base: LinearTokenizedProblem, offset: float = 0.5, scale: float = 0.5) -> None:
        if scale <= 0:
            raise ValueError(f"scale must be > 0, got {scale!r}")
        if getattr(base, "ddmc_violation", 0.0) != 0.0:
            raise ValueError("StopValueProblem needs a base without a bigram term (ddmc_violation=0)")
        super().__init__(
            base.vocab_size,
            base.max_length,
            base.eos_token_id,
            base.query_tokens,
            base.query_lengths,
            base.fixed_length,
            base.device,
        )
        self.base = base
        self.offset = offset
        self.scale = scale

    @property
    def ddmc(self) -> bool:
        """DDMC' holds exactly when the hidden base has exact DDMC."""
        return self.base.ddmc

    def initial_carry(self, queries: torch.Tensor) -> torch.Tensor:
        """The base's carry, ``(B, *c)``."""
        return self.base.initial_carry(queries)

    def append(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        last_tokens: torch.Tensor,
        tokens: torch.Tensor,
        positions: torch.Tensor,
    ) -> torch.Tensor:
        """The base's carries, ``(B, m, *c)``."""
        return self.base.append(queries, carry, last_tokens, tokens, positions)

    def append_every_token(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        last_tokens: torch.Tensor,
        lengths: torch.Tensor,
    ) -> torch.Tensor:
        """The base's carries for every token, ``(B, n, *c)``."""
        return self.base.append_every_token(queries, carry, last_tokens, lengths)

    def host_carry_rows(self) -> tuple[float, np.ndarray] | None:
        """The base's (the carries are the base's)."""
        return self.base.host_carry_rows()

    def utility_of_states(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        lengths: torch.Tensor,
        finished: torch.Tensor,
    ) -> torch.Tensor:
        """``0.5 + 0.5 u_base(y:EOS)`` (or of y when complete), ``(N,)``.

        EOS is appended to every unfinished row at position ``|y| + 1`` (clamped to L for
        masked candidates); the base ignores the previous token, so the query's stands in.
        """
        count = queries.shape[0]
        eos = torch.full((count, 1), self.eos_token_id, dtype=torch.int64, device=self.device)
        last = self.base.query_last_tokens[queries]  # (N,) query's last token
        stopped = self.base.append(queries, carry, last, eos, (lengths + 1).clamp(max=self.max_length))[:, 0]
        rows = (~finished).view(-1, *([1] * (carry.dim() - 1)))
        final_carry = torch.where(rows, stopped, carry)  # (N, *c)
        final_length = torch.where(finished, lengths, lengths + 1)  # (N,)
        value = self.base.utility_of_states(queries, final_carry, final_length, torch.ones_like(finished))
        return self.offset + self.scale * value

    def utility_of_complete(self, state: DecodingState) -> torch.Tensor:
        """``0.5 + 0.5 u_base(y)`` of complete responses, ``(B,)`` (nothing to append)."""
        value = self.base.utility_of_states(state.queries, state.carry, state.lengths, state.finished)
        return self.offset + self.scale * value

    def _exact_optimum(self, queries: torch.Tensor) -> DecodedResponses:
        """The base's exact optimum, mapped (an increasing affine map keeps the argmax)."""
        best = self.base.optimal(queries)
        return DecodedResponses(self.offset + self.scale * best.utility, best.responses)
