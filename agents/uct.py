"""UCT: bandit tree search over the token tree (paper appendix C; Kocsis & Szepesvari 2006)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tokenized_bandit_gym.agents.candidates import allowed_tokens, candidate_index
from tokenized_bandit_gym.core.validation import check_real
from tokenized_bandit_gym.task import Task


class UCT:
    """Upper confidence bounds applied to trees, over response prefixes: a DDMC-free baseline.

    Appendix C of the paper relates TMAB to bandit tree search (BTS, Coquelin & Munos 2007):
    the responses form a tree whose nodes are prefixes ``y`` and whose leaves are complete
    responses. UCT (Kocsis & Szepesvari 2006, "Bandit based Monte-Carlo planning") treats
    every node as a bandit over its children. Here, in every round (one episode):

    * at the current prefix ``y`` (the response so far) the children are the allowed tokens;
      a child never tried at ``y`` is taken first (uniformly among them, seeded), otherwise
      the UCB1 index ``mean(y, t) + c sqrt(log N(y) / N(y, t))``, where ``N(y, t)`` counts the
      rounds that went through edge ``y -> y:t``, ``N(y) = sum_t N(y, t)``, and ``mean(y, t)``
      averages their rewards (ties go to the first in candidate order);
    * choosing EOS (or reaching position L) ends the response;
    * the round's reward (``u(y_t) + eta_t`` of the complete response) is backed up to every
      edge on its path, so ``mean(y, t)`` estimates the value of the current policy below
      ``y:t`` (UCT's average backup).

    Every visited edge is stored (no separate rollout policy: the unvisited-first rule
    expands one new edge per level per round until the level is full). No structure such as
    DDMC is assumed, so with enough rounds UCT finds the exact optimum of any TMAB instance,
    including ``TokenizedMultiArmedBanditRandomTable-v0``, but it explores up to ``n^L``
    responses (Proposition 4.1), and its worst case is far worse (Coquelin & Munos 2007).
    Nodes are keyed by token ids only: the query and any features are ignored (on a TLB env
    with a query pool it learns the query-averaged utility). Actions are mapped through
    ``observation["candidate_tokens"]``, so LLM envs (k < n) work too.

    Args:
        exploration: c > 0, the UCB1 constant; ``sqrt(2)`` is UCB1's for rewards in [0, 1].
    """

    name = "uct"

    def __init__(self, exploration: float = math.sqrt(2.0)) -> None:
        self.exploration = check_real("exploration", exploration, low=0.0)
        if self.exploration <= 0.0:
            raise ValueError(f"exploration must be > 0, got {exploration!r}")
        self._task: Task | None = None
        self._rng = np.random.default_rng()
        self.counts: dict[tuple[int, ...], dict[int, int]] = {}
        self.sums: dict[tuple[int, ...], dict[int, float]] = {}
        self._path: list[tuple[tuple[int, ...], int]] = []

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Forget the tree and reseed the tie-breaking generator."""
        self._task = task
        self._rng = np.random.default_rng(seed)
        self.counts = {}
        self.sums = {}
        self._path = []

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The child of the current prefix chosen by the unvisited-first / UCB1 rule."""
        if self._task is None:
            raise ValueError("UCT.act() called before reset(task)")
        length = int(observation["length"])
        if length == 0:
            self._path = []
        node = tuple(int(token) for token in np.asarray(observation["response"])[:length])
        children = allowed_tokens(observation)
        counts = self.counts.setdefault(node, {})
        sums = self.sums.setdefault(node, {})
        unvisited = [token for token in children if counts.get(token, 0) == 0]
        if unvisited:
            token = unvisited[int(self._rng.integers(len(unvisited)))]
        else:
            visits = np.array([counts[token] for token in children], dtype=np.float64)  # (children,)
            means = np.array([sums[token] for token in children]) / visits  # (children,)
            index = means + self.exploration * np.sqrt(math.log(visits.sum()) / visits)  # (children,)
            token = children[int(np.argmax(index))]
        self._path.append((node, token))
        return candidate_index(observation, token)

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Back the reward up along the round's path."""
        for node, token in self._path:
            self.counts[node][token] = self.counts[node].get(token, 0) + 1
            self.sums[node][token] = self.sums[node].get(token, 0.0) + reward
        self._path = []

    def best_response(self) -> tuple[int, ...]:
        """The most-visited path from the root (UCT's recommendation), ending with EOS or at depth L."""
        if self._task is None:
            raise ValueError("UCT.best_response() called before reset(task)")
        response: list[int] = []
        while tuple(response) in self.counts and self.counts[tuple(response)]:
            counts = self.counts[tuple(response)]
            token = max(counts, key=lambda child: (counts[child], -child))
            response.append(token)
            if token == self._task.eos_token_id:
                break
        return tuple(response)
