"""One info schema over the episode: every step's info, reset included, has the same keys, types, dtypes and shapes.

What replay buffers and dataset recorders (Tianshou, Minari) need, since they store every step's
info. Before the round ends the round's entries hold the documented fill values (0, -1 for
tokens, False); nothing is a string. Checked on every id, for the single env and the native
vector env (both backends).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym
from tokenized_bandit_gym.registration import LLM_ENVS

ENV_IDS = tokenized_bandit_gym.registered_ids()
SMALL_LLM = {"max_length": 4, "top_k": 3}
TOKEN_ENTRIES = ("response", "optimal_response")


def env_kwargs(env_id: str) -> dict[str, Any]:
    return dict(SMALL_LLM) if env_id in LLM_ENVS else {}


def signature(info: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """Each entry's type, dtype and shape."""
    return {key: (type(value), getattr(value, "dtype", None), np.shape(value)) for key, value in info.items()}


def assert_fill_values(info: dict[str, Any], rows: Any = ...) -> None:
    """The round's entries of ``info`` (on ``rows``) hold the schema's fill values."""
    for key, value in info.items():
        if key.startswith("_") or key in ("query_index", "final_obs", "final_info"):
            continue
        entry = np.asarray(value)[rows]
        expected = -1 if key in TOKEN_ENTRIES else 0
        assert (entry == expected).all(), key


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_single_env_step_reports_the_same_schema(env_id: str) -> None:
    env = gym.make(env_id, **env_kwargs(env_id))
    rng = np.random.default_rng(0)
    observation, info = env.reset(seed=0)
    expected = signature(info)
    assert not any(isinstance(value, str) for value in info.values())
    assert_fill_values(info)
    for _ in range(3):
        terminated = False
        while not terminated:
            observation, _, terminated, _, info = env.step(int(rng.choice(np.flatnonzero(observation["action_mask"]))))
            assert signature(info) == expected
            assert info["round_ended"] is terminated
            if not terminated:
                assert_fill_values({key: value for key, value in info.items() if key != "forced_eos"})
        assert info["regret"] == pytest.approx(info["optimal_utility"] - info["utility"])
        assert (info["response"] >= 0).all() and info["response_length"] >= 1
        observation, info = env.reset()
        assert signature(info) == expected


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_vector_env_step_reports_the_same_schema(env_id: str, backend: str) -> None:
    envs = gym.make_vec(env_id, 3, array_backend=backend, **env_kwargs(env_id))
    rng = np.random.default_rng(1)
    observation, infos = envs.reset(seed=0)
    expected = signature(infos)
    assert_fill_values(infos)
    ended = 0
    for _ in range(12):
        masks = np.asarray(observation["action_mask"]).astype(bool)
        actions = np.array([rng.choice(np.flatnonzero(mask)) for mask in masks])
        observation, _, terminated, _, infos = envs.step(torch.as_tensor(actions) if backend == "torch" else actions)
        assert signature(infos) == expected
        assert all(bool(np.asarray(infos[f"_{key}"]).all()) for key in infos if not key.startswith("_"))
        terminated = np.asarray(terminated)
        np.testing.assert_array_equal(np.asarray(infos["round_ended"]), terminated)
        assert_fill_values({key: value for key, value in infos.items() if key != "forced_eos"}, ~terminated)
        ended += int(terminated.sum())
    assert ended > 0
