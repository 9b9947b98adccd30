"""Every registered id runs under Gymnasium's own Sync/Async vector envs and SB3's vec envs, with no wrapper.

Every info entry has a fixed shape per env (``response`` padded to L, ``response_length`` beside
it), so the vectorizers stack steps where rounds of different lengths end together; what they
stack equals the native vector env's infos, row by row.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import tokenized_bandit_gym
from tokenized_bandit_gym.registration import LLM_ENVS

ENV_IDS = tokenized_bandit_gym.registered_ids()
# the LLM ids at a test size (the default model, fewer steps), with free lengths: ragged rounds exercise the padding
SMALL_LLM = {"max_length": 5, "top_k": 4, "fixed_length": False}
ROUND_KEYS = ("utility", "optimal_utility", "regret", "oracle_greedy_utility", "noise", "response", "response_length")

pytestmark = pytest.mark.usefixtures("small_work_threads")


def env_kwargs(env_id: str) -> dict[str, Any]:
    return dict(SMALL_LLM) if env_id in LLM_ENVS else {}


def eos_biased_actions(observation: dict[str, Any], eos: int, rng: np.random.Generator) -> np.ndarray:
    """A random allowed action per row, EOS with probability 1/2 where it is allowed (ragged round lengths)."""
    masks = np.asarray(observation["action_mask"]).astype(bool)  # (N, k)
    is_eos = (np.asarray(observation["candidate_tokens"]) == eos) & masks  # (N, k)
    scores = np.where(masks, rng.random(masks.shape), -1.0) + np.where(is_eos, rng.random((len(masks), 1)), 0.0)
    return scores.argmax(axis=1)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_vectorizers_stack_infos_like_the_native_vector_env(env_id: str, mode: str) -> None:
    num_envs, seeds = 4, [3, 5, 7, 11]
    kwargs = env_kwargs(env_id)
    atol = 1e-4 if env_id in LLM_ENVS else 1e-12  # the batched float32 LLM forward agrees to rounding
    vectorized = gym.make_vec(env_id, num_envs, vectorization_mode=mode, **kwargs)
    native = gym.make_vec(env_id, num_envs, **kwargs)
    eos = native.unwrapped.eos_token_id
    length = native.unwrapped.problem.max_length
    try:
        observation, _ = vectorized.reset(seed=seeds)
        native_observation, _ = native.reset(seed=seeds)
        rng = np.random.default_rng(0)
        ragged_steps = 0
        for _ in range(40):
            for key in ("response", "length", "candidate_tokens", "action_mask"):
                np.testing.assert_array_equal(observation[key], np.asarray(native_observation[key]))
            actions = eos_biased_actions(native_observation, eos, rng)
            observation, rewards, terminated, _, infos = vectorized.step(actions)
            native_observation, native_rewards, native_terminated, _, native_infos = native.step(actions)
            np.testing.assert_allclose(rewards, native_rewards, rtol=0, atol=atol)
            np.testing.assert_array_equal(terminated, native_terminated)
            ended = np.asarray(native_infos["round_ended"])
            np.testing.assert_array_equal(infos["round_ended"], ended)
            assert infos.keys() == native_infos.keys()
            if not ended.any():
                continue
            for key in ROUND_KEYS:
                assert infos[key].shape == ((num_envs, length) if key == "response" else (num_envs,))
                np.testing.assert_allclose(infos[key][ended], np.asarray(native_infos[key])[ended], rtol=0, atol=atol)
            lengths = infos["response_length"][ended]
            np.testing.assert_array_equal(lengths, np.asarray(observation["length"])[ended])
            assert np.all(infos["response"][ended][np.arange(length)[None, :] >= lengths[:, None]] == eos)
            ragged_steps += int(len(set(lengths.tolist())) > 1)
        assert ragged_steps > 0, "no step ended two rounds of different lengths: the test exercised no padding"
    finally:
        vectorized.close()
        native.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_info_entry_has_a_fixed_shape(env_id: str) -> None:
    env = gym.make(env_id, **env_kwargs(env_id))
    eos = env.unwrapped.eos_token_id
    rng = np.random.default_rng(1)
    shapes: dict[str, set[tuple[int, ...]]] = {}
    lengths = set()
    observation, info = env.reset(seed=0)
    for _ in range(30):
        batch = {key: np.asarray(value)[None] for key, value in observation.items()}
        observation, _, terminated, _, info = env.step(int(eos_biased_actions(batch, eos, rng)[0]))
        for key, value in info.items():
            shapes.setdefault(key, set()).add(np.shape(value))
        if terminated:
            lengths.add(info["response_length"])
            observation, info = env.reset()
    assert len(lengths) > 1
    assert {key: len(found) for key, found in shapes.items()} == dict.fromkeys(shapes, 1)
    assert shapes["response"] == {(env.unwrapped.problem.max_length,)}


@pytest.mark.parametrize("vec_env_name", ["DummyVecEnv", "SubprocVecEnv"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sb3_vec_envs_step_every_id_without_a_wrapper(env_id: str, vec_env_name: str) -> None:
    from stable_baselines3.common import vec_env
    from stable_baselines3.common.env_util import make_vec_env

    kwargs = env_kwargs(env_id)
    start = {"start_method": "fork"} if vec_env_name == "SubprocVecEnv" else None  # no fresh interpreter per worker
    envs = make_vec_env(
        env_id, n_envs=2, seed=0, env_kwargs=kwargs, vec_env_cls=getattr(vec_env, vec_env_name), vec_env_kwargs=start
    )
    native = gym.make_vec(env_id, 2, **kwargs)
    eos = native.unwrapped.eos_token_id
    length = native.unwrapped.problem.max_length
    rng = np.random.default_rng(2)
    try:
        observation = envs.reset()
        ended_rounds = 0
        for _ in range(3 * length):
            observation, _, dones, infos = envs.step(eos_biased_actions(observation, eos, rng))
            for done, info in zip(dones, infos, strict=True):
                if done:
                    ended_rounds += 1
                    assert info["response"].shape == (length,)
                    assert info["response"][info["response_length"] - 1] == eos
                    assert info["regret"] == pytest.approx(info["optimal_utility"] - info["utility"])
        assert ended_rounds >= 2
    finally:
        envs.close()
        native.close()


def test_pad_response_info_is_a_deprecated_pass_through() -> None:
    with pytest.warns(DeprecationWarning, match="PadResponseInfo"):
        from tokenized_bandit_gym.wrappers import PadResponseInfo
    env = PadResponseInfo(gym.make("TokenizedLinearBandit-v0"))
    env.reset(seed=0)
    _, _, terminated, _, info = env.step(env.unwrapped.eos_token_id)
    assert terminated and info["response_length"] == 1
    assert info["response"].shape == (env.unwrapped.problem.max_length,)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_shell_reports_observations_in_the_space_key_order(env_id: str) -> None:
    """The single env, the native vector env (both backends) and an arena player, each over its round batch."""
    from tokenized_bandit_gym.adapters.pettingzoo_arena import TokenizedBanditArena

    kwargs = env_kwargs(env_id)
    env = gym.make(env_id, **kwargs)
    observation, _ = env.reset(seed=0)
    assert list(observation) == list(env.observation_space.spaces)
    assert env.observation_space.contains(observation)
    for backend in ("numpy", "torch"):
        envs = gym.make_vec(env_id, 3, array_backend=backend, **kwargs)
        batched, _ = envs.reset(seed=0)
        assert list(batched) == list(envs.unwrapped.single_observation_space.spaces)
        batched, *_ = envs.step(np.asarray(batched["action_mask"]).argmax(axis=1))
        assert list(batched) == list(envs.unwrapped.single_observation_space.spaces)
    arena = TokenizedBanditArena(env_id, ["a", "b"], **kwargs)
    players, _ = arena.reset(seed=0)
    assert list(players["a"]) == list(arena.observation_space("a").spaces)
    assert arena.observation_space("a").contains(players["a"])
