"""Wrappers for SB3: one-hot observations against a plain reference, masks through wrapper stacks, regret sums."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from stable_baselines3.common.env_checker import check_env
from stable_baselines3.common.vec_env import DummyVecEnv

import tokenized_bandit_gym
from tokenized_bandit_gym.adapters.sb3 import ExposeActionMasks, SB3Observation, TokenObservationEncoder
from tokenized_bandit_gym.registration import SYNTHETIC_ENVS
from tokenized_bandit_gym.wrappers import RegretStatistics

# The synthetic ids; the LLM-backed ids have their own tests under tests/llm.
ENV_IDS = [env_id for env_id in tokenized_bandit_gym.registered_ids() if env_id in SYNTHETIC_ENVS]


def reference_one_hot(observation: dict, space: spaces.Dict, keys: tuple[str, ...]) -> np.ndarray:
    """A plain loop implementation of the flat one-hot encoding."""
    parts = []
    for key in keys:
        value = observation[key]
        if key in ("query", "response"):
            n = int(space[key].nvec[0])
            real = int(observation["query_length" if key == "query" else "length"])
            for position, token in enumerate(value):
                row = [0.0] * n
                if position < real:
                    row[int(token)] = 1.0
                parts.extend(row)
        elif key == "length":
            row = [0.0] * int(space[key].n)
            row[int(value)] = 1.0
            parts.extend(row)
        else:
            parts.extend(float(x) for x in np.asarray(value).reshape(-1))
    return np.asarray(parts, dtype=np.float32)


def random_rollout(env: gym.Env, seed: int, steps: int):
    """Yield observations of a random allowed-action rollout over several episodes."""
    rng = np.random.default_rng(seed)
    observation, _ = env.reset(seed=seed)
    yield observation
    for _ in range(steps):
        mask = env.get_wrapper_attr("action_masks")()
        observation, _, terminated, _, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        yield observation
        if terminated:
            observation, _ = env.reset()
            yield observation


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_one_hot_encoding_matches_reference(env_id):
    env = gym.make(env_id)
    encoder = TokenObservationEncoder(env.observation_space)
    assert "candidate_tokens" not in encoder.keys and "query_length" not in encoder.keys
    for observation in random_rollout(env, seed=1, steps=30):
        encoded = encoder.encode(observation)
        assert encoder.observation_space.contains(encoded)
        np.testing.assert_array_equal(encoded, reference_one_hot(observation, env.observation_space, encoder.keys))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_dict_encodings_stay_in_their_space(env_id):
    env = gym.make(env_id)
    for encoding in ("one_hot", "multi_discrete"):
        wrapped = SB3Observation(gym.make(env_id), token_encoding=encoding, flatten=False)
        assert all(not isinstance(s, spaces.Dict) for s in wrapped.observation_space.spaces.values())
        for observation in random_rollout(wrapped, seed=2, steps=10):
            assert wrapped.observation_space.contains(observation)
    assert env.observation_space.contains(env.reset(seed=0)[0])


def test_default_keys_leave_out_llm_sized_one_hots():
    big = spaces.Dict(
        {
            "query": spaces.MultiDiscrete([50_000] * 4),
            "query_length": spaces.Discrete(5),
            "response": spaces.MultiDiscrete([50_000] * 3),
            "length": spaces.Discrete(4),
            "candidate_logprobs": spaces.Box(-np.inf, 0.0, shape=(8,), dtype=np.float32),
            "action_mask": spaces.MultiBinary(8),
        }
    )
    encoder = TokenObservationEncoder(big)
    assert encoder.keys == ("length", "candidate_logprobs", "action_mask")
    assert encoder.observation_space.shape == (4 + 8 + 8,)
    assert TokenObservationEncoder(big, keys=["response"]).observation_space.shape == (150_000,)


def test_encoder_rejects_bad_arguments():
    space = gym.make("TokenizedMultiArmedBandit-v0").observation_space
    with pytest.raises(ValueError, match="flatten"):
        TokenObservationEncoder(space, token_encoding="multi_discrete", flatten=True)
    with pytest.raises(ValueError, match="token_encoding"):
        TokenObservationEncoder(space, token_encoding="embedding")
    with pytest.raises(ValueError, match="candidate_embeddings"):
        TokenObservationEncoder(space, keys=["candidate_embeddings"])
    with pytest.raises(TypeError, match="Dict"):
        TokenObservationEncoder(spaces.Discrete(3))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_wrapped_env_passes_sb3_check_env(env_id):
    check_env(SB3Observation(gym.make(env_id)), warn=False)


@pytest.mark.parametrize("env_id", ["TokenizedLinearBandit-v0", "TokenizedMultiArmedBandit-v0"])
def test_action_masks_reach_through_gym_make_wrappers(env_id):
    stack = ExposeActionMasks(TimeLimit(RegretStatistics(SB3Observation(gym.make(env_id))), 100))
    inner = gym.make(env_id, fixed_length=True)
    fixed_stack = RegretStatistics(SB3Observation(inner))
    vec = DummyVecEnv([lambda: stack, lambda: fixed_stack])
    assert is_masking_supported(vec)
    vec.reset()
    masks = get_action_masks(vec)
    np.testing.assert_array_equal(masks[0], stack.unwrapped.action_masks())
    np.testing.assert_array_equal(masks[1], inner.unwrapped.action_masks())
    assert not masks[1][inner.unwrapped.eos_token_id]  # fixed length: EOS not allowed at position 1
    eos = stack.unwrapped.eos_token_id
    stack.reset(seed=0)
    for _ in range(stack.unwrapped.problem.max_length - 1):
        stack.step(0)
    only_eos = np.zeros_like(masks[0])
    only_eos[eos] = True
    np.testing.assert_array_equal(stack.action_masks(), only_eos)


def test_expose_action_masks_falls_back_to_the_observation():
    class NoMethod(gym.Wrapper):
        """Hides every action_masks() below by raising on the lookup."""

        def get_wrapper_attr(self, name):
            if name == "action_masks":
                raise AttributeError(name)
            return super().get_wrapper_attr(name)

    env = ExposeActionMasks(NoMethod(gym.make("TokenizedMultiArmedBandit-v0")))
    with pytest.raises(AttributeError):
        env.action_masks()
    observation, _ = env.reset(seed=0)
    np.testing.assert_array_equal(env.action_masks(), observation["action_mask"].astype(bool))


@pytest.mark.parametrize("env_id", ["TokenizedLinearBanditNeedle-v0", "TokenizedMultiArmedBanditRandomTable-v0"])
def test_regret_statistics_sum_the_final_infos(env_id):
    env = RegretStatistics(gym.make(env_id))
    rng = np.random.default_rng(0)
    regrets, utilities, optima = [], [], []
    _, info = env.reset(seed=0)
    for _ in range(12):
        terminated = False
        while not terminated:
            assert info["regret_statistics"]["rounds"] == len(regrets)  # in every step's info: one schema
            _, _, terminated, _, info = env.step(int(rng.integers(env.action_space.n)))
        regrets.append(info["regret"])
        utilities.append(info["utility"])
        optima.append(info["optimal_utility"])
        stats = info["regret_statistics"]
        assert stats["rounds"] == len(regrets)
        assert stats["regret"] == info["regret"]
        assert stats["cumulative_regret"] == pytest.approx(sum(regrets), abs=1e-12)
        assert stats["cumulative_utility"] == pytest.approx(sum(utilities), abs=1e-12)
        assert stats["cumulative_optimal_utility"] == pytest.approx(sum(optima), abs=1e-12)
        _, info = env.reset()
    assert env.regrets == regrets
    assert env.cumulative_regret == pytest.approx(sum(regrets), abs=1e-12)


def test_maskable_ppo_trains_on_make_vec_env_with_the_wrappers():
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    from tokenized_bandit_gym.adapters.sb3.callback import CumulativeRegretCallback, log_nowhere_unless_asked

    def wrap(env):
        return RegretStatistics(SB3Observation(env))

    # make_vec_env asks for render_mode="rgb_array" by default, which these envs do not offer.
    vec = make_vec_env(
        "TokenizedLinearBanditNeedle-v0", n_envs=2, seed=0, wrapper_class=wrap, env_kwargs={"render_mode": None}
    )
    model = log_nowhere_unless_asked(MaskablePPO("MlpPolicy", vec, n_steps=16, batch_size=32, n_epochs=1, seed=0))
    callback = CumulativeRegretCallback()
    model.learn(64, callback=callback)
    assert callback.rounds > 0
    statistics = sum(vec.get_attr("cumulative_regret"))
    assert callback.cumulative_regret == pytest.approx(statistics, abs=1e-9)


def test_old_sb3_names_are_deprecated_aliases_of_the_adapters():
    import importlib
    import sys

    from tokenized_bandit_gym.adapters import sb3

    for name in ("SB3Observation", "ExposeActionMasks", "TokenObservationEncoder"):
        with pytest.warns(DeprecationWarning, match=name):
            old = getattr(importlib.import_module("tokenized_bandit_gym.wrappers"), name)
        assert old is getattr(sb3, name)
    sys.modules.pop("tokenized_bandit_gym.adapters.cumulative_regret_callback", None)
    with pytest.warns(DeprecationWarning, match="adapters.sb3"):
        old_module = importlib.import_module("tokenized_bandit_gym.adapters.cumulative_regret_callback")
    assert old_module.CumulativeRegretCallback is sb3.CumulativeRegretCallback
