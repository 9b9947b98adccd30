"""GreedyETC: greedy decoding with explore-then-commit per level (paper Algorithm 2)."""

from __future__ import annotations

from typing import Any

from tokenized_bandit_gym.agents.candidates import allowed_tokens
from tokenized_bandit_gym.agents.explore_then_commit import LevelByLevelETC, commit_block, default_exploration_rounds

__all__ = ["GreedyETC", "default_exploration_rounds"]


class GreedyETC(LevelByLevelETC):
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

    Its arguments are :class:`~tokenized_bandit_gym.agents.explore_then_commit.LevelByLevelETC`'s:
    ``exploration_rounds``, N, submissions of each ``y:t:EOS`` (None means :func:`default_exploration_rounds` of
    the horizon), and ``completion_token``, the token id that pads submissions under ``fixed_length`` (see above;
    not EOS).
    """

    name = "greedy_etc"
    explores = "stopped sequences y:t:EOS (paper Algorithm 2)"
    block_notation = "y:t"
    level_tokens: list[int] | None
    """The level's tokens (the allowed candidates at ``y``), None until the level is observed."""

    def _explored_token(self, observation: dict[str, Any], position: int) -> int | None:
        """The level's explored token right after ``y`` (the level read on its first visit), else None."""
        if position == len(self.prefix) and not self.committed:
            return self.observe_level(observation)[self._arm]
        return None

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Credit the reward to the token explored this round; commit once all had N rounds."""
        self._require_task()
        if self.committed or self.level_tokens is None:
            return
        if self._credit_explored_arm(reward, len(self.level_tokens)):
            self.commit()

    # ------------------------------------------------------------------ level statistics (shared with BatchedGreedyETC)
    def observe_level(self, observation: dict[str, Any]) -> list[int]:
        """The level's tokens (the allowed candidates at ``y``), read from ``observation`` on the first visit."""
        if self.level_tokens is None:
            self.level_tokens = allowed_tokens(observation)
            self._new_level(len(self.level_tokens))
        return self.level_tokens

    def commit(self) -> None:
        """Commit to ``tau* = argmax_t r_bar(y:t)`` (ties: first in candidate order) and start the next level."""
        task = self._require_task()
        if self.level_tokens is None:
            raise ValueError("GreedyETC.commit() before the level's tokens were observed")
        best = self.level_tokens[self._best_arm()]  # ties: first in candidate order
        self.committed = commit_block(self.prefix, [best], task)
        self._start_level()

    def _start_level(self) -> None:
        """Forget the level's tokens and statistics; its tokens are read at the next visit of ``y``."""
        self.level_tokens = None
        super()._start_level()
