"""Every registered agent passes :func:`tokenized_bandit_gym.testing.check_agent` on a task it plays.

The protocol (``reset``/``act``/``update``, or the batched one), same seed same actions, and every
action an index the action mask allows; the task is the first kind :data:`BUILT_IN_UNSUPPORTED` does
not rule out (the pairwise agents play the TLB with ``feedback="pairwise"``).
"""

from __future__ import annotations

from typing import Any

import pytest

from tokenized_bandit_gym import testing
from tokenized_bandit_gym.evaluation.agent_support import BUILT_IN_UNSUPPORTED, TASK_KINDS
from tokenized_bandit_gym.registration import AGENT_ENTRY_POINTS

pytestmark = pytest.mark.usefixtures("small_work_threads")

KIND_KWARGS: dict[str, dict[str, Any]] = {
    "linear": {"vocab_size": 6, "max_length": 4, "embedding_dim": 4},
    "TMAB": {"vocab_size": 4, "max_length": 3},
    "LLM": {"max_length": 4, "top_k": 3},
}


def played_task(name: str) -> tuple[str, dict[str, Any]]:
    """The id and kwargs of the first kind of task the agent ``name`` plays."""
    unsupported = BUILT_IN_UNSUPPORTED.get(name, {})
    kinds = [kind for kind in TASK_KINDS if kind not in unsupported]
    if not kinds:  # the pairwise agents: every kind plays them with feedback="pairwise"
        return TASK_KINDS["linear"], {**KIND_KWARGS["linear"], "feedback": "pairwise"}
    return TASK_KINDS[kinds[0]], dict(KIND_KWARGS[kinds[0]])


@pytest.mark.parametrize("name", sorted(AGENT_ENTRY_POINTS))
def test_every_registered_agent_passes_the_agent_checks(name: str) -> None:
    env_id, env_kwargs = played_task(name)
    testing.check_agent(name, env_id, rounds=3, env_kwargs=env_kwargs)
