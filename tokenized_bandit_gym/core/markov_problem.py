"""The Markov TLB family: the discounted family plus a bigram term with a tunable DDMC violation."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.discounted_problem import DiscountedProblem
from tokenized_bandit_gym.core.instance_sizes import InstanceSizes
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.tokenized_problem import DecodedResponses
from tokenized_bandit_gym.core.validation import check_real


class MarkovProblem(DiscountedProblem):
    """TLB family whose token feature also depends on the previous token.

    ::

        e(x, y:tau) = alpha * e(x, y) + c * (phi(x, tau, j) + w * psi(prev, tau)) / (1 + w)

    with ``prev`` the last token of ``x:y``, ``psi(prev, tau) = normalize(b_prev * b'_tau)``
    (elementwise product, unit norm) and ``w = ddmc_violation >= 0``. With ``w = 0`` this is
    exactly :class:`DiscountedProblem` (exact DDMC). With ``w > 0`` two same-length responses
    with equal utility but different last tokens get different utilities after a common token,
    so DDMC fails by an amount that grows with ``w``. ``||e|| <= 1`` still holds.

    The exact optimum is a dynamic program over (position, previous token) for each response
    length m, O(L^2 n^2) per query.

    Args:
        sizes: as for :class:`DiscountedProblem`.
        ddmc_violation: w >= 0, the weight of the bigram term.
        **discounted_options: ``alpha`` and ``theta_norm``, as for :class:`DiscountedProblem`.
    """

    previous_vectors: torch.Tensor  # (n, d) b, drawn by _init_extra_parameters
    next_vectors: torch.Tensor  # (n, d) b'

    def __init__(self, sizes: InstanceSizes, ddmc_violation: float = 0.5, **discounted_options: float) -> None:
        self.ddmc_violation = check_real("ddmc_violation", ddmc_violation, low=0.0)
        super().__init__(sizes, **discounted_options)
        to: dict[str, Any] = {"device": self.device, "dtype": self.dtype}
        self.previous_vectors = self.previous_vectors.to(**to)
        self.next_vectors = self.next_vectors.to(**to)

    def _init_extra_parameters(self, generator: torch.Generator, dimension: int) -> None:
        """Draw the bigram vectors b (previous token) and b' (next token), on the CPU."""
        self.previous_vectors = torch.randn(self.vocab_size, dimension, generator=generator, dtype=torch.float64)
        self.next_vectors = torch.randn(self.vocab_size, dimension, generator=generator, dtype=torch.float64)

    @property
    def ddmc(self) -> bool:
        """Exact DDMC only without the bigram term."""
        return self.ddmc_violation == 0.0

    def bigram_features(self, previous: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """``psi(prev, tau)`` for ``(B,)`` previous tokens and ``(B, m)`` candidates, ``(B, m, d)``."""
        raw = self.previous_vectors[previous][:, None, :] * self.next_vectors[tokens]  # (B, m, d)
        return raw / raw.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    def _next_carries(
        self,
        carry: torch.Tensor,
        last_tokens: torch.Tensor,
        tokens: torch.Tensor | None,
        features: torch.Tensor,
    ) -> torch.Tensor:
        """``alpha * e + c (phi + w psi) / (1 + w)`` per candidate, ``(B, m, d)``."""
        weight = self.ddmc_violation
        feature = features  # (B, m, d)
        if weight > 0.0:
            if tokens is None:
                tokens = self.vocabulary.expand(carry.shape[0], -1)  # (B, n)
            feature = (feature + weight * self.bigram_features(last_tokens, tokens)) / (1.0 + weight)
        return self.alpha * carry[:, None, :] + self.scale * feature

    def _carries_from_scaled_rows(self) -> bool:
        """False: the bigram term reads the last token (:meth:`_next_carries`)."""
        return False

    def host_carry_rows(self) -> tuple[float, np.ndarray] | None:
        """None: the bigram term reads the last token (the host batch takes the core's way)."""
        return None

    def host_candidate_carries(self, query: int, length: int, carry: np.ndarray) -> np.ndarray | None:
        """None: the bigram term reads the last token (the memo takes the torch way)."""
        return None

    def observed_candidate_embeddings(
        self, state: DecodingState, carries_out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The candidates' embeddings rounded to float32, ``(B, n, d)`` (the bigram term: the generic way)."""
        return LinearTokenizedProblem.observed_candidate_embeddings(self, state, carries_out)

    def _exact_optimum(self, queries: torch.Tensor) -> DecodedResponses:
        """Viterbi-style DP per response length m over (position, previous token)."""
        weight = self.ddmc_violation
        n, eos = self.vocab_size, self.eos_token_id
        batch = queries.shape[0]
        unary = self.position_scores(queries) / (1.0 + weight)  # (B, n, L), c * <theta, phi> / (1 + w)
        everything = torch.arange(n, device=self.device)
        pair = (
            self.scale
            * weight
            / (1.0 + weight)
            * (self.bigram_features(everything, everything.expand(n, -1)) @ self.theta)
        )  # (n_prev, n_next)
        start = self.initial_state(queries).last_tokens  # (B,)
        lengths = [self.max_length] if self.fixed_length else list(range(1, self.max_length + 1))
        best_values, best_responses = [], []
        for m in lengths:
            allowed = torch.ones(m, n, dtype=torch.bool, device=self.device)  # (m, n)
            allowed[: m - 1, eos] = False
            allowed[m - 1] = False
            allowed[m - 1, eos] = True
            value = self.alpha ** (m - 1) * (unary[:, :, 0] + pair[start])  # (B, n)
            value = value.masked_fill(~allowed[0], float("-inf"))
            pointers = []
            for j in range(2, m + 1):
                step = self.alpha ** (m - j) * (unary[:, None, :, j - 1] + pair[None, :, :])  # (B, n, n)
                total = value[:, :, None] + step  # (B, prev, next)
                value, pointer = total.max(dim=1)  # (B, n)
                value = value.masked_fill(~allowed[j - 1], float("-inf"))
                pointers.append(pointer)
            tokens = torch.full((batch, self.max_length), eos, dtype=torch.int64, device=self.device)
            current = torch.full((batch,), eos, dtype=torch.int64, device=self.device)
            for j in range(m, 1, -1):
                previous = pointers[j - 2].gather(1, current[:, None])[:, 0]  # (B,)
                tokens[:, j - 2] = previous
                current = previous
            best_values.append(value[:, eos])
            best_responses.append(tokens)
        values = torch.stack(best_values, dim=1)  # (B, |lengths|)
        best_value, best_index = values.max(dim=1)
        responses = torch.stack(best_responses, dim=1)[torch.arange(batch, device=self.device), best_index]
        return DecodedResponses(best_value, responses)
