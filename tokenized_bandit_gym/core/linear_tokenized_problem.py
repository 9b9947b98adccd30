"""Tokenized linear bandit (TLB) instances: u(x, y) = <theta, e(x, y)> (paper section 3)."""

from __future__ import annotations

from abc import abstractmethod

import numpy as np
import torch

from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.tokenized_problem import TokenizedProblem


class LinearTokenizedProblem(TokenizedProblem):
    """A TLB instance: linear realizability (paper Assumption 2).

    ``||theta|| <= 1`` and ``||e(x, y)|| <= 1`` hold by construction.

    Subclasses give :meth:`embedding_of_states`; the utility is its inner product with
    :attr:`theta`. The embedding oracle :meth:`embed` answers arbitrary batched queries, as the
    paper's decision maker has "query access to the embedding function".
    """

    theta: torch.Tensor  # (d,)

    @property
    def embedding_dim(self) -> int:
        """d, the dimension of ``e(x, y)``."""
        return int(self.theta.shape[0])

    @abstractmethod
    def embedding_of_states(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        lengths: torch.Tensor,
    ) -> torch.Tensor:
        """Embeddings ``(*N, d)`` of a batch of sequences.

        Args:
            queries: ``(*N,)`` query indices (broadcastable against ``lengths``).
            carry: ``(*N, *c)`` carries.
            lengths: ``(*N,)`` response lengths.
        """

    def utility_of_states(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        lengths: torch.Tensor,
        finished: torch.Tensor,
    ) -> torch.Tensor:
        """``<theta, e(x, y)>`` for N sequences, ``(N,)``."""
        # A row-wise product and sum, not a matrix-vector product: the value of a response must not
        # depend on the batch it is computed in (BLAS picks kernels by size).
        return (self.embedding_of_states(queries, carry, lengths) * self.theta).sum(dim=-1)  # (N,)

    def embedding_of(self, state: DecodingState) -> torch.Tensor:
        """``e(x, y)`` of the responses in ``state``, ``(B, d)``."""
        return self.embedding_of_states(state.queries, state.carry, state.lengths)

    def candidate_embeddings(self, state: DecodingState, carries: torch.Tensor | None = None) -> torch.Tensor:
        """``e(x, y:tau)`` for every token tau, ``(B, n, d)``.

        Args:
            state: the current state.
            carries: ``(B, n, *c)`` from :meth:`candidate_carries`, if already computed.
        """
        if carries is None:
            carries = self.candidate_carries(state)  # (B, n, *c)
        return self.embedding_of_states(state.queries[:, None], carries, (state.lengths + 1)[:, None])  # (B, n, d)

    def host_candidate_carries(self, query: int, length: int, carry: np.ndarray) -> np.ndarray | None:
        """:meth:`candidate_carries` of one CPU state in NumPy, ``(n, *c)``, where the family can; else None.

        For the batch-of-one env's prefix memo, whose new prefixes would otherwise cost a dozen
        torch dispatches each. A family that gives it computes the same float operations as
        :meth:`candidate_carries`, so the values are equal bit for bit.

        Args:
            query: the state's query index.
            length: ``|y|``.
            carry: ``(*c,)`` the state's carry (its NumPy view).
        """
        return None

    def observed_candidate_embeddings(
        self, state: DecodingState, carries_out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """:meth:`candidate_embeddings` rounded to float32, ``(B, n, d)``, a new tensor (what the envs observe).

        Families override it with fewer passes over ``(B, n, d)`` where they can.

        Args:
            state: the current state.
            carries_out: ``(B, n, *c)`` of the carries' dtype, or None; when given, receives
                :meth:`candidate_carries` of ``state`` (the caller's buffer, reused step after step).
        """
        carries = self.candidate_carries(state)  # (B, n, *c)
        if carries_out is not None:
            carries_out.copy_(carries)
        return self.candidate_embeddings(state, carries).to(torch.float32, copy=True)

    def embed(
        self,
        queries: torch.Tensor,
        responses: torch.Tensor,
        lengths: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The embedding oracle: ``e(x, y)`` for arbitrary responses, ``(B, d)``.

        Args:
            queries: ``(B,)`` query indices into the pool.
            responses: ``(B, T)`` token ids, ``T <= L``; tokens after the first EOS (and at or
                past ``lengths``) are ignored.
            lengths: ``(B,)`` number of tokens to read per row (default: all T).
        """
        return self.embedding_of(self.state_for(queries, responses, lengths))
