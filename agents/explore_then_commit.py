"""What GreedyETC and k-LookaheadETC share: arguments, the start at ``y = ()``, a commit, the level's statistics.

:class:`LevelByLevelETC` holds the state and the steps that are the same in both.

Both explore level by level from the empty prefix ``y`` and commit to the best explored block
(one token for GreedyETC, k tokens for LookaheadETC); the arms of a level are their own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from tokenized_bandit_gym.agents.candidates import candidate_index, is_allowed
from tokenized_bandit_gym.core.validation import check_int
from tokenized_bandit_gym.task import Task


def default_exploration_rounds(horizon: int) -> int:
    """The paper's exploration parameter ``N = T^(2/3) (log T)^(1/3)``, rounded up, at least 1.

    Theorem 4.2's proof plugs ``N = T^{2/3} (log T)^{1/3}`` (natural log) into
    ``nLN + 2LT sqrt(2 log T / N)``. ``N`` counts submissions, so it is rounded up to an
    integer; ``T = 1`` gives ``log T = 0`` and hence ``N = 1``.

    Args:
        horizon: T >= 1, the number of rounds.

    Raises:
        ValueError: ``horizon`` < 1.
    """
    horizon = check_int("horizon", horizon, minimum=1)
    return max(1, math.ceil(horizon ** (2.0 / 3.0) * math.log(horizon) ** (1.0 / 3.0)))


def check_etc_arguments(exploration_rounds: int | None, completion_token: int | None) -> None:
    """Refuse an ``exploration_rounds`` below 1 or a negative ``completion_token`` (None is allowed for both)."""
    if exploration_rounds is not None:
        check_int("exploration_rounds", exploration_rounds, minimum=1)
    if completion_token is not None:
        check_int("completion_token", completion_token, minimum=0)


def start_exploration(
    task: Task, exploration_rounds: int | None, completion_token: int | None, explores: str, block: str
) -> tuple[int, list[int]]:
    """Check that ``task`` can be explored, and return ``N`` and the starting prefix.

    Args:
        task: the task of the agent's ``reset``.
        exploration_rounds: N, or None for :func:`default_exploration_rounds` of ``task.horizon``.
        completion_token: the padding token under ``fixed_length``, or None.
        explores: what the agent explores, for the error (``"GreedyETC explores stopped sequences y:t:EOS"``).
        block: the explored prefix in the paper's notation (``"y:t"``, ``"y:z"``): the error names
            ``block:c...c:EOS``, what a ``completion_token`` submits instead.

    Returns:
        ``(N, prefix)``: ``prefix`` is ``[EOS]`` (already complete) when ``L = 1``, else empty.

    Raises:
        ValueError: the env has ``fixed_length=True`` and no ``completion_token`` was given, or
            ``completion_token`` is EOS or out of the vocabulary.
    """
    if getattr(task.problem, "fixed_length", False) and completion_token is None:
        raise ValueError(
            f"{explores}, but this env has fixed_length=True (EOS only at position L); "
            f"pass completion_token=c to submit {block}:c...c:EOS instead"
        )
    if completion_token is not None and not (
        0 <= completion_token < task.vocab_size and completion_token != task.eos_token_id
    ):
        raise ValueError(
            f"completion_token must be a non-EOS token id below {task.vocab_size}, got {completion_token!r}"
        )
    rounds = exploration_rounds if exploration_rounds is not None else default_exploration_rounds(task.horizon)
    return rounds, [task.eos_token_id] if task.max_length == 1 else []


def commit_block(prefix: list[int], block: Sequence[int], task: Task) -> bool:
    """``y <- y:z``; whether the response is now complete (``z`` ends with EOS, or ``y:EOS`` fills L, appended).

    Args:
        prefix: ``y``, extended in place.
        block: ``z``, the committed token or block.
        task: the agent's task (EOS and L).
    """
    prefix.extend(block)
    if block and block[-1] == task.eos_token_id:
        return True
    if len(prefix) == task.max_length - 1:
        prefix.append(task.eos_token_id)
        return True
    return False


class LevelByLevelETC:
    """The state and steps GreedyETC and k-LookaheadETC share; the arms of a level are each one's own.

    Both hold the committed prefix ``y``, ``N``, and the running sums and counts of the level's arms
    (``r_bar``, one arm explored at a time in order); a subclass says what it explores (``explores``,
    ``block_notation``, for :func:`start_exploration`'s error), builds a level's arms, and forgets them in
    :meth:`_start_level`.

    Args:
        exploration_rounds: N, submissions of each arm; None means :func:`default_exploration_rounds` of the
            horizon.
        completion_token: token id that pads submissions under ``fixed_length``; must not be EOS.
    """

    explores: ClassVar[str]
    """What the agent explores, after its name in :meth:`reset`'s error (``"stopped sequences y:t:EOS"``)."""
    block_notation: ClassVar[str]
    """The explored prefix in the paper's notation (``"y:t"``), see :func:`start_exploration`."""

    def __init__(self, exploration_rounds: int | None = None, completion_token: int | None = None) -> None:
        check_etc_arguments(exploration_rounds, completion_token)
        self.exploration_rounds_override = exploration_rounds
        self.completion_token = completion_token
        self._task: Task | None = None
        self.exploration_rounds = 0
        self.prefix: list[int] = []
        self.committed: bool = False
        self._start_level()

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
            f"{type(self).__name__} explores {self.explores}",
            self.block_notation,
        )
        self._task = task
        self.committed = bool(self.prefix)
        self._start_level()

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The next token of this round's submission, as a candidate index: ``y``'s, the explored arm's, then EOS.

        After ``y`` and this round's arm (:meth:`_explored_token`), EOS when it is an allowed candidate, else
        the padding ``completion_token``.

        Raises:
            ValueError: before :meth:`reset`, or when the planned token is not an allowed candidate.
        """
        task = self._require_task()
        position = int(observation["length"])
        if position < len(self.prefix):
            return candidate_index(observation, self.prefix[position])
        explored = self._explored_token(observation, position)
        if explored is not None:
            return candidate_index(observation, explored)
        if is_allowed(observation, task.eos_token_id):
            return candidate_index(observation, task.eos_token_id)
        return candidate_index(observation, self.completion())

    def _explored_token(self, observation: dict[str, Any], position: int) -> int | None:
        """The token of this round's arm at ``position`` (past ``y``), or None past the arm or once committed."""
        raise NotImplementedError

    @property
    def committed_response(self) -> tuple[int, ...] | None:
        """The committed response (ending with EOS) once exploration is over, else None."""
        return tuple(self.prefix) if self.committed else None

    @property
    def counts(self) -> np.ndarray:
        """``(A,)`` rewards credited to each of the level's A arms (empty before the level is observed)."""
        return self._counts

    def credit(self, arm: int, reward: float) -> None:
        """Add the reward of one submission of the level's arm ``arm`` to its ``r_bar``."""
        self._sums[arm] += reward
        self._counts[arm] += 1

    def _credit_explored_arm(self, reward: float, arms: int) -> bool:
        """Credit this round's arm; after its N rounds move to the next. Whether all ``arms`` arms had N rounds."""
        self.credit(self._arm, reward)
        if self._counts[self._arm] < self.exploration_rounds:
            return False
        self._arm += 1
        return self._arm >= arms

    def _best_arm(self) -> int:
        """The index of the arm with the best average reward (ties: the first)."""
        return int(np.argmax(self._sums / self._counts))

    def _start_level(self) -> None:
        """Forget the level's statistics (a subclass forgets its arms too)."""
        self._arm = 0
        self._sums = np.zeros(0)
        self._counts = np.zeros(0, dtype=np.int64)

    def _new_level(self, arms: int) -> None:
        """Zero sums and counts for a level of ``arms`` arms."""
        self._sums = np.zeros(arms)
        self._counts = np.zeros(arms, dtype=np.int64)

    def completion(self) -> int:
        """The padding token under ``fixed_length``.

        Raises:
            ValueError: no ``completion_token`` was given.
        """
        if self.completion_token is None:
            raise ValueError(
                f"EOS (id {self._require_task().eos_token_id}) is not an allowed candidate here and no "
                f"completion_token was given: {type(self).__name__} submits stopped sequences and needs EOS among "
                "the candidates"
            )
        return self.completion_token

    def _require_task(self) -> Task:
        """The task from :meth:`reset`."""
        if self._task is None:
            raise ValueError(f"{type(self).__name__}.act()/update() called before reset(task)")
        return self._task
