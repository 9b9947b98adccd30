"""A TMAB instance without structure: every complete response is an independent arm."""

from __future__ import annotations

import torch

from tokenized_bandit_gym.core.enumeration import MAX_ENUMERATED_RESPONSES
from tokenized_bandit_gym.core.instance_sizes import InstanceSizes
from tokenized_bandit_gym.core.tokenized_problem import DecodedResponses, TokenizedProblem
from tokenized_bandit_gym.core.validation import check_dtype, check_int, seeded_generator


class RandomTableProblem(TokenizedProblem):
    """TMAB with i.i.d. uniform utilities per complete response (Proposition 4.1's instance).

    The responses form an (n-1)-ary tree of non-EOS prefixes (the bandit-tree-search view of
    appendix C); node ``v`` has children ``v (n - 1) + 1 + tau`` and the utility of stopping
    at ``v`` (the response ``v:EOS``) is an independent ``U[0, 1)`` draw. Nothing links a
    prefix to its extensions, so DDMC and DDMC' fail and learning needs about ``n^L`` arms
    (regret ``Omega(min(sqrt(n^L T), T))``). The optimum is read off the table exactly.

    Args:
        sizes: n >= 3 (EOS is id ``n - 1``), L >= 1 (the tree has ``sum_{m < L} (n-1)^m``
            nodes, at most 2,000,000), the instance seed (the table), ``fixed_length``, device
            and dtype; one fixed query of one token (the pool's sizes and d are not read).
    """

    def __init__(self, sizes: InstanceSizes) -> None:
        n = check_int("vocab_size", sizes.vocab_size, minimum=3)
        length = check_int("max_length", sizes.max_length, minimum=1)
        nodes = sum((n - 1) ** m for m in range(length))
        if nodes > MAX_ENUMERATED_RESPONSES:
            raise ValueError(
                f"random_table needs {nodes} utilities for vocab_size={sizes.vocab_size}, "
                f"max_length={sizes.max_length}; at most {MAX_ENUMERATED_RESPONSES} are allowed"
            )
        generator = seeded_generator(sizes.instance_seed)
        query = torch.zeros(1, 1, dtype=torch.int64)
        one = torch.ones(1, dtype=torch.int64)
        super().__init__(n, length, n - 1, query, one, sizes.fixed_length, torch.device(sizes.device))
        self.dtype = dtype = check_dtype(sizes.dtype)
        self.values = torch.rand(nodes, generator=generator, dtype=torch.float64).to(self.device, dtype)  # (nodes,)
        first_at_depth = [sum((n - 1) ** m for m in range(depth)) for depth in range(length + 1)]
        self._depth_starts = first_at_depth

    def initial_carry(self, queries: torch.Tensor) -> torch.Tensor:
        """The root node, ``(B,)`` int64."""
        return torch.zeros(queries.shape[0], dtype=torch.int64, device=self.device)

    def append(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        last_tokens: torch.Tensor,
        tokens: torch.Tensor,
        positions: torch.Tensor,
    ) -> torch.Tensor:
        """Child nodes (EOS stays at the node), ``(B, m)`` int64; clamped past depth L - 1."""
        child = carry[:, None] * (self.vocab_size - 1) + 1 + tokens  # (B, m)
        inside = child < self.values.shape[0]
        child = torch.where(inside, child, carry[:, None])
        return torch.where(tokens == self.eos_token_id, carry[:, None], child)

    def utility_of_states(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        lengths: torch.Tensor,
        finished: torch.Tensor,
    ) -> torch.Tensor:
        """The utility of stopping at each node, ``(N,)``."""
        return self.values[carry]

    def _exact_optimum(self, queries: torch.Tensor) -> DecodedResponses:
        """Best allowed node (depth L - 1 only under ``fixed_length``), its path rebuilt."""
        low = self._depth_starts[self.max_length - 1] if self.fixed_length else 0
        index = int(self.values[low:].argmax()) + low
        value = self.values[index]
        path = []
        node = index
        while node > 0:
            path.append((node - 1) % (self.vocab_size - 1))
            node = (node - 1) // (self.vocab_size - 1)
        tokens = list(reversed(path)) + [self.eos_token_id] * (self.max_length - len(path))
        response = torch.tensor(tokens, dtype=torch.int64, device=self.device)
        batch = queries.shape[0]
        return DecodedResponses(value.expand(batch).clone(), response.expand(batch, -1).clone())
