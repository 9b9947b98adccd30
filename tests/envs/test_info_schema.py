"""One info schema over the episode: every step's info, reset included, has the same keys, types, dtypes and shapes.

What replay buffers and dataset recorders (Tianshou, Minari) need, since they store every step's
info. Before the round ends the round's entries hold the documented fill values (0, -1 for
tokens, False); nothing is a string. Checked on every id, for the single env and the native
vector env (both backends), by :mod:`tokenized_bandit_gym.testing`'s checks.
"""

from __future__ import annotations

from typing import Any

import pytest

import tokenized_bandit_gym
from tokenized_bandit_gym import testing
from tokenized_bandit_gym.registration import LLM_ENVS

ENV_IDS = tokenized_bandit_gym.registered_ids()
SMALL_LLM = {"max_length": 4, "top_k": 3}


def env_kwargs(env_id: str) -> dict[str, Any]:
    return dict(SMALL_LLM) if env_id in LLM_ENVS else {}


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_single_env_step_reports_the_same_schema(env_id: str) -> None:
    testing.check_info_schema(env_id, **env_kwargs(env_id))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_vector_env_step_reports_the_same_schema(env_id: str, backend: str) -> None:
    testing.check_vector_info_schema(env_id, array_backend=backend, **env_kwargs(env_id))
