"""GreedyUCB: GreedyETC with UCB sampling and a confident early commit at each level."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from tokenized_bandit_gym.agents.candidates import allowed_tokens, candidate_index
from tokenized_bandit_gym.agents.explore_then_commit import default_exploration_rounds
from tokenized_bandit_gym.core.validation import check_int, check_real
from tokenized_bandit_gym.task import Task


class GreedyUCB:
    """Greedy decoding that learns each level with UCB1 instead of uniform exploration.

    Beyond the paper (issue "GreedyUCB for TMAB"). The design keeps what makes GreedyETC (paper
    Algorithm 2) sound and changes only how a level is explored:

    * **What a reward measures.** The reward of a round is ``u(y_t) + eta_t`` for the complete
      response submitted; it says nothing about other prefixes or their extensions. So, as in
      GreedyETC, the arms of a level with committed prefix ``y`` are the stopped responses
      ``y:t:EOS`` for every allowed token ``t`` (``t = EOS`` is ``y:EOS``), and a round's reward
      is credited only to the arm it submitted. DDMC' (appendix "DDMC'") is what makes the
      best stopped value ``u(y:t:EOS)`` the right greedy choice, exactly as for GreedyETC.
    * **Sampling.** Within a level each round submits the arm maximising the UCB index
      ``mean_a + c sqrt(2 log T / n_a)`` (unplayed arms first, in candidate order), with ``T``
      the horizon: the paper's clean-event radius ``sqrt(2 log T / N)`` (proof of Theorem 4.2)
      scaled by ``c`` (``exploration``). Good arms get most of the level's rounds, so the level
      costs less regret than uniform exploration.
    * **Commit.** The agent commits to the level's leader ``tau*`` (``y <- y:tau*``, stopping if
      ``tau* = EOS``, appending EOS at ``|y| = L - 1``) as soon as its lower confidence bound
      reaches every other arm's upper bound (then, on the clean event, ``tau*`` is the exact
      best arm), or at the latest after ``n N`` rounds at the level, GreedyETC's budget (then
      it takes the most-played arm: UCB1 plays an arm ``m`` times only if its gap is at most
      about ``sqrt(8 log T / m)``, and the most-played arm has ``m >= N``, the same order as
      GreedyETC's error ``sqrt(2 log T / N)``). Levels are never revisited, as in GreedyETC,
      because later rounds submit longer responses that carry no information on ``y:t:EOS``.

    So each level costs at most GreedyETC's ``n N`` rounds and the ``O(n L T^(2/3) (log
    T)^(1/3))`` argument carries over, while easy levels (large gaps) commit after
    ``O(sum_a log T / gap_a^2)`` rounds. Compared with DDMC'-free tree search
    (:class:`~tokenized_bandit_gym.agents.uct.UCT`) it explores only ``O(n L)`` arms and relies on DDMC'.
    Deterministic (ties go to the first arm in candidate order). Like GreedyETC it ignores
    the query and features and reads a level's tokens from the candidates observed at ``y``.

    Args:
        exploration: c > 0, the scale of the confidence radius (rewards in [0, 1] with small
            noise can take c < 1).
        exploration_rounds: N in the per-level cap ``n N``; None means ``T^(2/3) (log T)^(1/3)``.
    """

    name = "greedy_ucb"

    def __init__(self, exploration: float = 1.0, exploration_rounds: int | None = None) -> None:
        self.exploration = check_real("exploration", exploration, low=0.0)
        if self.exploration <= 0.0:
            raise ValueError(f"exploration must be > 0, got {exploration!r}")
        if exploration_rounds is not None:
            check_int("exploration_rounds", exploration_rounds, minimum=1)
        self.exploration_rounds_override = exploration_rounds
        self._task: Task | None = None
        self.exploration_rounds = 0
        self._log_horizon = 0.0
        self.prefix: list[int] = []
        self.committed = False
        self.level_tokens: list[int] | None = None
        self._arm = 0
        self._clear_statistics(0)

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Start over with ``y = ()`` (the seed is unused: no randomness).

        Raises:
            ValueError: the env has ``fixed_length=True`` (no stopped sequences to learn from).
        """
        if getattr(task.problem, "fixed_length", False):
            raise ValueError(
                "GreedyUCB learns from stopped sequences y:t:EOS, but this env has fixed_length=True "
                "(EOS only at position L); use UCT instead"
            )
        self._task = task
        self.exploration_rounds = (
            self.exploration_rounds_override
            if self.exploration_rounds_override is not None
            else default_exploration_rounds(task.horizon)
        )
        self._log_horizon = math.log(max(task.horizon, 2))
        self.prefix = [] if task.max_length > 1 else [task.eos_token_id]
        self.committed = task.max_length == 1
        self._start_level()

    @property
    def committed_response(self) -> tuple[int, ...] | None:
        """The committed response (ending with EOS) once every level is decided, else None."""
        return tuple(self.prefix) if self.committed else None

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The next token of this round's submission ``y:t:EOS`` (or of the committed y)."""
        task = self._require_task()
        position = int(observation["length"])
        if position < len(self.prefix):
            return candidate_index(observation, self.prefix[position])
        if position == len(self.prefix) and not self.committed:
            if self.level_tokens is None:
                self._open_level(allowed_tokens(observation))
            self._arm = self._choose_arm()
            return candidate_index(observation, cast("list[int]", self.level_tokens)[self._arm])  # _open_level's
        return candidate_index(observation, task.eos_token_id)

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Credit the reward to the arm submitted; commit when confident or at the cap."""
        task = self._require_task()
        if self.committed or self.level_tokens is None:
            return
        arm = self._arm
        self._sums[arm] += reward
        self._counts[arm] += 1
        self._level_rounds += 1
        count = int(self._counts[arm])
        if count == 1:
            self._played_arms += 1
        # Only this arm's statistics changed: its mean, radius and upper bound, with the formulas' float operations.
        self._means[arm] = self._sums[arm] / count
        self._radii[arm] = self.exploration * math.sqrt(2.0 * self._log_horizon / count)
        self._upper[arm] = self._means[arm] + self._radii[arm]
        if self._played_arms < len(self.level_tokens):
            return
        leader = int(self._means.argmax())
        confident = len(self.level_tokens) == 1 or self._means[leader] - self._radii[leader] >= self._best_other(leader)
        if not confident and self._level_rounds < len(self.level_tokens) * self.exploration_rounds:
            return
        best = self.level_tokens[leader if confident else int(np.argmax(self._counts))]
        self.prefix.append(best)
        if best == task.eos_token_id:
            self.committed = True
        elif len(self.prefix) == task.max_length - 1:
            self.prefix.append(task.eos_token_id)
            self.committed = True
        self._start_level()

    def _choose_arm(self) -> int:
        """The first unplayed arm, else the UCB1 argmax (first on ties).

        Arms are first played in candidate order, so the first unplayed one is the count of played ones.
        """
        if self._played_arms < len(self._counts):
            return self._played_arms
        return int(self._upper.argmax())

    def _best_other(self, leader: int) -> float:
        """The highest upper bound ``mean_a + radius_a`` among the arms other than ``leader``."""
        upper = self._upper
        return float(max(upper[:leader].max(initial=-math.inf), upper[leader + 1 :].max(initial=-math.inf)))

    def _open_level(self, tokens: list[int]) -> None:
        """Start the statistics of the level whose arms are ``tokens`` (in candidate order)."""
        self.level_tokens = tokens
        self._clear_statistics(len(tokens))

    def _start_level(self) -> None:
        """Forget the level's statistics; its tokens are read at the next visit of ``y``."""
        self.level_tokens = None
        self._arm = 0
        self._clear_statistics(0)

    def _clear_statistics(self, arms: int) -> None:
        """Zero sums, counts, means, radii and upper bounds ``(arms,)``, and the level's round counters."""
        self._sums, self._means, self._radii, self._upper = np.zeros((4, arms))
        self._counts = np.zeros(arms, dtype=np.int64)
        self._played_arms = 0
        self._level_rounds = 0

    def _require_task(self) -> Task:
        """The task from :meth:`reset`."""
        if self._task is None:
            raise ValueError("GreedyUCB.act()/update() called before reset(task)")
        return self._task
