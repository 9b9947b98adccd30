"""What GreedyETC and k-LookaheadETC share: their arguments, the start of a run at ``y = ()``, and a commit.

Both explore level by level from the empty prefix ``y`` and commit to the best explored block
(one token for GreedyETC, k tokens for LookaheadETC); the block statistics are their own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
