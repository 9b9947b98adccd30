"""The lower-bound ("needle") TLB instance of Proposition 3.1: no DDMC, regret linear in T."""

from __future__ import annotations

import torch

from tokenized_bandit_gym.core.instance_sizes import InstanceSizes
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.tokenized_problem import DecodedResponses
from tokenized_bandit_gym.core.validation import check_real

# Carry codes: where the response stands relative to the query's needle path.
ON_PATH, ON_SIBLING, OFF_PATH, NEEDLE_LEAF, SIBLING_LEAF, OFF_LEAF = range(6)


class NeedleProblem(LinearTokenizedProblem):
    """The hard instance from the proof of Proposition 3.1 (appendix "Proofs").

    Each query hides a path ``p_1 .. p_{L-1}`` of non-EOS tokens. With ``theta = o`` (the first
    unit vector), the complete response ``p_1 .. p_{L-1} : EOS`` has ``e = o`` (utility 1), its
    sibling ``p_1 .. p_{L-2} : q : EOS`` (``q != p_{L-1}``) has ``e = (1 - eps) o`` (utility
    ``1 - eps``, the SLD eps), and every other response, incomplete prefixes included, has
    ``e = 0``. Nothing before the last token reveals the path, so no algorithm can find it
    better than by guessing: regret ``Omega(T (1 - 1/(n-1)^(L-2)))``. DDMC fails (a pair of
    zero-utility prefixes can be separated by a common token). Paths are drawn per query from
    the instance seed, as the proof draws the needle per query.

    Args:
        sizes: n >= 3 (two non-EOS tokens at least; EOS is id ``n - 1``), L >= 2, d >= 1, the
            query pool, the instance seed (the paths and queries), ``fixed_length`` (the needle
            has length L either way), device and dtype.
        needle_gap: eps in ``[0, 1]``, the sibling's utility gap.
    """

    def __init__(self, sizes: InstanceSizes, needle_gap: float = 0.1) -> None:
        self.needle_gap = check_real("needle_gap", needle_gap, low=0.0, high=1.0)
        generator = self._start_query_pool_instance(sizes, min_vocab_size=3, min_max_length=2)
        vocab_size, length, dimension, dtype = self.vocab_size, self.max_length, int(sizes.embedding_dim), self.dtype
        num_queries = self.num_queries
        paths = torch.randint(0, vocab_size - 1, (num_queries, length - 1), generator=generator)  # (Q, L-1)
        offsets = torch.randint(1, vocab_size - 1, (num_queries,), generator=generator)  # (Q,)
        siblings = (paths[:, -1] + offsets) % (vocab_size - 1)  # (Q,), != p_{L-1}
        self.paths = paths.to(self.device)
        self.siblings = siblings.to(self.device)
        theta = torch.zeros(dimension, dtype=dtype)
        theta[0] = 1.0
        self.theta = theta.to(self.device)
        table = torch.zeros(6, dimension, dtype=dtype)  # embedding of each carry code
        table[NEEDLE_LEAF, 0] = 1.0
        table[SIBLING_LEAF, 0] = 1.0 - self.needle_gap
        self.code_embeddings = table.to(self.device)

    def initial_carry(self, queries: torch.Tensor) -> torch.Tensor:
        """Every response starts on the path, ``(B,)`` int64 codes."""
        return torch.full((queries.shape[0],), ON_PATH, dtype=torch.int64, device=self.device)

    def append(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        last_tokens: torch.Tensor,
        tokens: torch.Tensor,
        positions: torch.Tensor,
    ) -> torch.Tensor:
        """Codes after each candidate, ``(B, m)`` int64."""
        length, eos = self.max_length, self.eos_token_id
        index = self._position_index(positions).clamp(max=length - 2)  # (B,)
        on_path_token = self.paths[queries, index][:, None]  # (B, 1)
        position = positions[:, None]  # (B, 1)
        code = carry[:, None]  # (B, 1)
        is_eos = tokens == eos  # (B, m)
        at_last = position == length  # (B, 1)
        follows = (code == ON_PATH) & (position <= length - 1) & (tokens == on_path_token)
        branches = (code == ON_PATH) & (position == length - 1) & (tokens == self.siblings[queries][:, None])
        new = torch.full_like(tokens, OFF_PATH)
        new = torch.where(follows, ON_PATH, new)
        new = torch.where(branches, ON_SIBLING, new)
        leaf = torch.where(
            at_last & (code == ON_PATH),
            NEEDLE_LEAF,
            torch.where(at_last & (code == ON_SIBLING), SIBLING_LEAF, OFF_LEAF),
        )  # (B, 1)
        return torch.where(is_eos, leaf.expand_as(tokens), new)

    def embedding_of_states(self, queries: torch.Tensor, carry: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """``o``, ``(1 - eps) o`` or 0 by code, ``(N, d)``."""
        return self.code_embeddings[carry]

    def _exact_optimum(self, queries: torch.Tensor) -> DecodedResponses:
        """The needle itself: utility 1 (``eps <= 1`` keeps the sibling at or below it)."""
        eos_column = torch.full((queries.shape[0], 1), self.eos_token_id, dtype=torch.int64, device=self.device)
        responses = torch.cat([self.paths[queries], eos_column], dim=1)  # (B, L)
        return DecodedResponses(torch.ones(queries.shape[0], dtype=self.dtype, device=self.device), responses)
