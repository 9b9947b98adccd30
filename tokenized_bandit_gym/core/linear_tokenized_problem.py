"""Tokenized linear bandit (TLB) instances: u(x, y) = <theta, e(x, y)> (paper section 3)."""

from __future__ import annotations

from abc import abstractmethod

import numpy as np
import torch

from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.instance_sizes import InstanceSizes
from tokenized_bandit_gym.core.query_pool import random_query_pool
from tokenized_bandit_gym.core.tokenized_problem import TokenizedProblem
from tokenized_bandit_gym.core.validation import check_dtype, check_int, check_real, seeded_generator


def check_theta_norm(theta_norm: object) -> float:
    """``||theta||`` in ``(0, 1]`` as a float, or raise naming it.

    Raises:
        TypeError: not a real number.
        ValueError: NaN, infinite, or outside ``(0, 1]``.
    """
    checked = check_real("theta_norm", theta_norm, low=0.0, high=1.0)
    if checked == 0.0:
        raise ValueError(f"theta_norm must be > 0, got {theta_norm!r}")
    return checked


class LinearTokenizedProblem(TokenizedProblem):
    """A TLB instance: linear realizability (paper Assumption 2).

    ``||theta|| <= 1`` and ``||e(x, y)|| <= 1`` hold by construction.

    Subclasses give :meth:`embedding_of_states`; the utility is its inner product with
    :attr:`theta`. The embedding oracle :meth:`embed` answers arbitrary batched queries, as the
    paper's decision maker has "query access to the embedding function".
    """

    theta: torch.Tensor  # (d,)
    dtype: torch.dtype

    def _start_query_pool_instance(
        self, sizes: InstanceSizes, min_vocab_size: int = 2, min_max_length: int = 1
    ) -> torch.Generator:
        """The constructor preamble every family over a random query pool shares; returns the instance generator.

        Checks the sizes (with the family's own minimums), seeds the generator from ``instance_seed``,
        draws the query pool ``(Q, Lq)`` from it (EOS is ``n - 1``) and sets the base class's fields
        and :attr:`dtype`. The family then draws its own parameters from the returned generator, in
        its own order, so an instance depends on its seed only.

        Raises:
            TypeError: a size is not an integer.
            ValueError: a size is below its minimum (``vocab_size >= min_vocab_size``,
                ``max_length >= min_max_length``, ``embedding_dim >= 1``) or the seed is out of range.
        """
        vocab_size = check_int("vocab_size", sizes.vocab_size, minimum=min_vocab_size)
        max_length = check_int("max_length", sizes.max_length, minimum=min_max_length)
        check_int("embedding_dim", sizes.embedding_dim, minimum=1)
        generator = seeded_generator(sizes.instance_seed)
        eos = vocab_size - 1
        query_tokens, query_lengths = random_query_pool(
            generator, sizes.num_queries, sizes.query_length, vocab_size, eos
        )
        TokenizedProblem.__init__(
            self,
            vocab_size,
            max_length,
            eos,
            query_tokens,
            query_lengths,
            sizes.fixed_length,
            torch.device(sizes.device),
        )
        self.dtype = check_dtype(sizes.dtype)
        return generator

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
