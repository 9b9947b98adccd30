"""The mean-pooling TLB family: ``e(x, y)`` is the mean of non-contextual token vectors."""

from __future__ import annotations

import torch

from tokenized_bandit_gym.core.instance_sizes import InstanceSizes
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem, check_theta_norm
from tokenized_bandit_gym.core.tokenized_problem import DecodedResponses


class MeanPoolProblem(LinearTokenizedProblem):
    """TLB family with exact DDMC, shaped like an LLM's mean-pooled embedding.

    ``e(x, y) = (sum_{t in x:y} v_t) / (|x| + |y|)``, the mean over query and response tokens
    of fixed token vectors ``v_t`` with ``||v_t|| <= 1`` (so ``||e|| <= 1``). For two
    different responses of the same length m, appending tau scales their utility gap by
    ``(|x| + m) / (|x| + m + 1) < 1``: DDMC holds exactly (same-length pairs, no interior EOS;
    see :class:`~tokenized_bandit_gym.core.discounted_problem.DiscountedProblem` on why early
    EOS escapes DDMC).

    Exact optimum: for a complete response of length m the utility is
    ``(S_x + (m - 1) s* + s_EOS) / (|x| + m)`` with ``s*`` the best non-EOS token score, so the
    best m is found in O(L).

    Args:
        sizes: n (EOS is id ``n - 1``), L, d, the query pool, the instance seed (every
            parameter), ``fixed_length``, device and dtype.
        theta_norm: ``||theta||`` in ``(0, 1]``.
    """

    def __init__(self, sizes: InstanceSizes, theta_norm: float = 1.0) -> None:
        theta_norm = check_theta_norm(theta_norm)
        generator = self._start_query_pool_instance(sizes)
        vocab_size, dimension, dtype = self.vocab_size, int(sizes.embedding_dim), self.dtype
        raw = torch.randn(vocab_size, dimension, generator=generator, dtype=torch.float64)  # (n, d)
        gains = 0.5 + 0.5 * torch.rand(vocab_size, 1, generator=generator, dtype=torch.float64)  # (n, 1)
        theta = torch.randn(dimension, generator=generator, dtype=torch.float64)  # (d,)
        to = {"device": self.device, "dtype": dtype}
        self.token_vectors = (raw / raw.norm(dim=1, keepdim=True) * gains).to(**to)  # (n, d)
        self.theta = (theta / theta.norm() * theta_norm).to(**to)

    @property
    def ddmc(self) -> bool:
        """Exact DDMC on same-length pairs without an interior EOS."""
        return True

    def initial_carry(self, queries: torch.Tensor) -> torch.Tensor:
        """The sum of the query's token vectors, ``(B, d)``."""
        tokens = self.query_tokens[queries]  # (B, Lq)
        padding = torch.arange(tokens.shape[1], device=self.device)[None, :] >= self.query_lengths[queries][:, None]
        return self.token_vectors[tokens].masked_fill(padding[..., None], 0.0).sum(1)  # (B, d)

    def append(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        last_tokens: torch.Tensor,
        tokens: torch.Tensor,
        positions: torch.Tensor,
    ) -> torch.Tensor:
        """Running sums with each candidate's vector added, ``(B, m, d)``."""
        return carry[:, None, :] + self.token_vectors[tokens]

    def append_every_token(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        last_tokens: torch.Tensor,
        lengths: torch.Tensor,
    ) -> torch.Tensor:
        """Running sums with every token's vector added, ``(B, n, d)``."""
        return carry[:, None, :] + self.token_vectors

    def embedding_of_states(self, queries: torch.Tensor, carry: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Mean over ``|x| + |y|`` tokens, ``(N, d)``."""
        count = (self.query_lengths[queries] + lengths).to(carry.dtype)  # (N,)
        return carry / count[:, None]

    def _exact_optimum(self, queries: torch.Tensor) -> DecodedResponses:
        """Closed form over the response length m (see the class docstring)."""
        scores = self.token_vectors @ self.theta  # (n,)
        eos = self.eos_token_id
        body = scores.clone()
        body[eos] = float("-inf")
        best_score, best_token = body.max(dim=0)
        query_sum = self.initial_carry(queries) @ self.theta  # (B,)
        query_length = self.query_lengths[queries].to(self.dtype)  # (B,)
        lengths = [self.max_length] if self.fixed_length else list(range(1, self.max_length + 1))
        values = torch.stack(
            [(query_sum + (m - 1) * best_score + scores[eos]) / (query_length + m) for m in lengths], dim=1
        )  # (B, |lengths|)
        best_value, best_index = values.max(dim=1)
        best_length = torch.tensor(lengths, device=self.device)[best_index]  # (B,)
        positions = torch.arange(self.max_length, device=self.device)[None, :]  # (1, L)
        responses = torch.where(positions < best_length[:, None] - 1, best_token, eos)  # (B, L)
        return DecodedResponses(best_value, responses)
