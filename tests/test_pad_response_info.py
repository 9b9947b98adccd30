"""PadResponseInfo: Gymnasium's SyncVectorEnv over single envs stacks ragged responses like the native env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import tokenized_bandit_gym
from tokenized_bandit_gym.registration import SYNTHETIC_ENVS
from tokenized_bandit_gym.wrappers import PadResponseInfo

ENV_IDS = [env_id for env_id in tokenized_bandit_gym.registered_ids() if env_id in SYNTHETIC_ENVS]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sync_vector_env_with_padding_equals_native_vector_env(env_id: str) -> None:
    num_envs, seeds = 4, [3, 5, 7, 11]
    sync = gym.make_vec(env_id, num_envs, vectorization_mode="sync", wrappers=[PadResponseInfo])
    native = gym.make_vec(env_id, num_envs)
    sync_observation, _ = sync.reset(seed=seeds)
    native_observation, _ = native.reset(seed=seeds)
    rng = np.random.default_rng(0)
    ragged_steps = 0
    for _ in range(60):
        masks = native_observation["action_mask"].astype(bool)  # (N, n)
        np.testing.assert_array_equal(sync_observation["action_mask"].astype(bool), masks)
        actions = np.where(masks, rng.random(masks.shape), -1.0).argmax(axis=1)  # a random allowed token per row
        sync_observation, sync_rewards, _, _, sync_infos = sync.step(actions)
        native_observation, native_rewards, _, _, native_infos = native.step(actions)
        np.testing.assert_allclose(sync_rewards, native_rewards, rtol=0, atol=1e-12)
        ended = native_infos.get("_response", np.zeros(num_envs, dtype=bool))
        np.testing.assert_array_equal(sync_infos.get("_response", np.zeros(num_envs, dtype=bool)), ended)
        if ended.any():
            np.testing.assert_array_equal(sync_infos["response"][ended], np.asarray(native_infos["response"])[ended])
            lengths = np.asarray(native_observation["length"])[ended]  # the terminal observations
            np.testing.assert_array_equal(np.asarray(sync_observation["length"])[ended], lengths)
            ragged_steps += int(len(set(lengths.tolist())) > 1)
    assert ragged_steps > 0, "no step ended two rounds of different lengths: the test did not exercise padding"


def test_pads_with_eos_to_max_length() -> None:
    env = PadResponseInfo(gym.make("TokenizedLinearBandit-v0"))
    env.reset(seed=0)
    eos = env.unwrapped.eos_token_id
    observation, _, terminated, _, info = env.step(eos)
    assert terminated and observation["length"] == 1
    assert info["response"].shape == (env.unwrapped.problem.max_length,)
    assert info["response"].dtype == np.int64 and np.all(info["response"] == eos)
