"""GreedyETC: greedy decoding with explore-then-commit per level (paper Algorithm 2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tokenized_bandit_gym.agents.candidates import allowed_tokens, candidate_index, is_allowed
from tokenized_bandit_gym.agents.explore_then_commit import (
    check_etc_arguments,
    commit_block,
    default_exploration_rounds,
    start_exploration,
)
from tokenized_bandit_gym.task import Task

__all__ = ["GreedyETC", "default_exploration_rounds"]


class GreedyETC:
    """Greedy decoding with explore-then-commit at each level (paper Algorithm 2, Theorem 4.2).

    For the tokenized multi-armed bandit (section 4). Starting from ``y = ()``, level by level:
    if ``|y| = L - 1`` the response is ``y:EOS``; otherwise every allowed token ``t`` (EOS
    included, whose submission is ``y:EOS``) is submitted as ``y:t:EOS`` for ``N`` consecutive
    rounds, in candidate order, the rewards are averaged into ``r_bar(y:t)``, and the agent
    commits to ``tau* = argmax_t r_bar(y:t)`` (ties go to the first in candidate order): ``y <-
    y:tau*``, and exploration stops if ``tau* = EOS``. For the rest of the rounds the committed
    ``y`` is submitted. Exploration takes at most ``(L - 1) n N`` rounds. With DDMC' (appendix
    assumption "DDMC'") the regret is ``O(n L T^(2/3) (log T)^(1/3))`` for
    ``N = T^(2/3) (log T)^(1/3)`` (:func:`default_exploration_rounds` of ``task.horizon``).

    "Submitting" a sequence means playing it token by token across one episode. The agent
    ignores features and the query, so it also runs on TLB envs (as a TMAB learner of the
    query-averaged utility). Actions are indices into ``observation["candidate_tokens"]``; the
    tokens explored at a level are the allowed candidates observed at ``y``, so on LLM envs
    (k < n) it needs the candidates at ``y`` to stay the same across rounds (a fixed query).

    ``fixed_length=True`` (EOS only at position L) forbids the stopped sequences ``y:t:EOS`` that
    Algorithm 2 learns from, so by default :meth:`reset` raises ``ValueError``. With
    ``completion_token=c`` the agent instead submits ``y:t:c...c:EOS`` (padded with ``c`` up
    to length L): a heuristic outside Theorem 4.2, which compares stopped values; it ranks the
    level's tokens correctly when the completion shifts every ``u(y:t:...)`` by the same
    increasing map (the discounted family, for instance).

    Args:
        exploration_rounds: N, submissions of each ``y:t:EOS``; None means
            :func:`default_exploration_rounds` of the horizon.
        completion_token: token id that pads submissions under ``fixed_length`` (see above);
            must not be EOS.
    """

    name = "greedy_etc"

    def __init__(self, exploration_rounds: int | None = None, completion_token: int | None = None) -> None:
        check_etc_arguments(exploration_rounds, completion_token)
        self.exploration_rounds_override = exploration_rounds
        self.completion_token = completion_token
        self._task: Task | None = None
        self.exploration_rounds = 0
        self.prefix: list[int] = []
        self.committed = False
        self.level_tokens: list[int] | None = None
        self._sums = np.zeros(0)
        self._counts = np.zeros(0, dtype=np.int64)
        self._arm = 0

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Start over with ``y = ()`` and ``N`` from ``task.horizon`` (the seed is unused: no randomness).

        Raises:
            ValueError: the env has ``fixed_length=True`` and no ``completion_token`` was
                given, or ``completion_token`` is EOS or out of the vocabulary.
        """
        self.exploration_rounds, self.prefix = start_exploration(
            task,
            self.exploration_rounds_override,
            self.completion_token,
            f"{type(self).__name__} explores stopped sequences y:t:EOS (paper Algorithm 2)",
            "y:t",
        )
        self._task = task
        self.committed = bool(self.prefix)
        self._start_level()

    @property
    def committed_response(self) -> tuple[int, ...] | None:
        """The committed response (ending with EOS) once exploration is over, else None."""
        return tuple(self.prefix) if self.committed else None

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The next token of this round's submission, as a candidate index.

        Raises:
            ValueError: before :meth:`reset`, or when the planned token is not an allowed candidate.
        """
        task = self._require_task()
        position = int(observation["length"])
        if position < len(self.prefix):
            return candidate_index(observation, self.prefix[position])
        if position == len(self.prefix) and not self.committed:
            level_tokens = self.observe_level(observation)
            return candidate_index(observation, level_tokens[self._arm])
        if is_allowed(observation, task.eos_token_id):
            return candidate_index(observation, task.eos_token_id)
        return candidate_index(observation, self.completion())

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Credit the reward to the token explored this round; commit once all had N rounds."""
        self._require_task()
        if self.committed or self.level_tokens is None:
            return
        self.credit(self._arm, reward)
        if self._counts[self._arm] < self.exploration_rounds:
            return
        self._arm += 1
        if self._arm < len(self.level_tokens):
            return
        self.commit()

    # ------------------------------------------------------------------ level statistics (shared with BatchedGreedyETC)
    def observe_level(self, observation: dict[str, Any]) -> list[int]:
        """The level's tokens (the allowed candidates at ``y``), read from ``observation`` on the first visit."""
        if self.level_tokens is None:
            self.level_tokens = allowed_tokens(observation)
            self._sums = np.zeros(len(self.level_tokens))
            self._counts = np.zeros(len(self.level_tokens), dtype=np.int64)
        return self.level_tokens

    @property
    def counts(self) -> np.ndarray:
        """``(A,)`` rewards credited to each of the level's A tokens (empty before the level is observed)."""
        return self._counts

    def credit(self, arm: int, reward: float) -> None:
        """Add the reward of one submission of ``y:t:EOS``, ``t = level_tokens[arm]``, to ``r_bar(y:t)``."""
        self._sums[arm] += reward
        self._counts[arm] += 1

    def commit(self) -> None:
        """Commit to ``tau* = argmax_t r_bar(y:t)`` (ties: first in candidate order) and start the next level."""
        task = self._require_task()
        if self.level_tokens is None:
            raise ValueError("GreedyETC.commit() before the level's tokens were observed")
        best = self.level_tokens[int(np.argmax(self._sums / self._counts))]  # ties: first in candidate order
        self.committed = commit_block(self.prefix, [best], task)
        self._start_level()

    def _start_level(self) -> None:
        """Forget the level's statistics; its tokens are read at the next visit of ``y``."""
        self.level_tokens = None
        self._arm = 0
        self._sums = np.zeros(0)
        self._counts = np.zeros(0, dtype=np.int64)

    def completion(self) -> int:
        """The padding token under ``fixed_length``."""
        if self.completion_token is None:
            raise ValueError(
                f"EOS (id {self._require_task().eos_token_id}) is not an allowed candidate here and no "
                "completion_token was given: GreedyETC submits stopped sequences and needs EOS among the candidates"
            )
        return self.completion_token

    def _require_task(self) -> Task:
        """The task from :meth:`reset`."""
        if self._task is None:
            raise ValueError(f"{type(self).__name__}.act()/update() called before reset(task)")
        return self._task
