"""Every registered id, tested the moment it is registered (Gymnasium's tests/envs style).

The conformance checks themselves live in :mod:`tokenized_bandit_gym.testing` (users run them on their
own ids); this file runs them on every registered id and adds the checks of this project's semantics.
"""

from __future__ import annotations

import copy
import pickle

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest

import tokenized_bandit_gym
from tokenized_bandit_gym import testing
from tokenized_bandit_gym.registration import LLM_ENVS, SYNTHETIC_ENVS
from tokenized_bandit_gym.testing import random_trajectory

ENV_IDS = [env_id for env_id in tokenized_bandit_gym.registered_ids() if env_id in SYNTHETIC_ENVS]


pytestmark = pytest.mark.usefixtures("small_work_threads")


def test_every_synthetic_id_is_registered() -> None:
    assert set(ENV_IDS) == set(SYNTHETIC_ENVS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_check_env(env_id: str) -> None:
    testing.check_gymnasium_api(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sb3_check_env(env_id: str) -> None:
    testing.check_sb3_api(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_make_with_module_prefix(env_id: str) -> None:
    env = gym.make(f"tokenized_bandit_gym:{env_id}")
    assert env.unwrapped.spec.id == env_id


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seeds_give_identical_trajectories_and_common_random_numbers(env_id: str) -> None:
    """Same seeds, same trajectory; two policies with the same seed see the same queries and noise."""
    testing.check_determinism(env_id)


SMALL_LLM = {"max_length": 5, "top_k": 4}


def small_kwargs(env_id: str) -> dict:
    return dict(SMALL_LLM) if env_id in LLM_ENVS else {}


@pytest.mark.parametrize("copier", sorted(testing.COPIERS))
@pytest.mark.parametrize("env_id", tokenized_bandit_gym.registered_ids())
def test_copied_env_continues_identically_from_mid_round(env_id: str, copier: str) -> None:
    """Every id, the LLM ones included (rebuilt from their recipe, with their round state and streams)."""
    testing.check_pickling(env_id, copiers=[copier], **small_kwargs(env_id))


@pytest.mark.parametrize("env_id", tokenized_bandit_gym.registered_ids())
def test_copied_native_vector_env_continues_identically(env_id: str) -> None:
    testing.check_vector_pickling(env_id, **small_kwargs(env_id))


@pytest.mark.parametrize("env_id", sorted(LLM_ENVS))
def test_pickled_llm_env_holds_no_weights(env_id: str) -> None:
    env = gym.make(env_id, **SMALL_LLM)
    env.reset(seed=0)
    model = env.unwrapped.problem.model
    weight_bytes = sum(parameter.numel() * parameter.element_size() for parameter in model.parameters())
    assert len(cloudpickle.dumps(env)) < weight_bytes / 4


def test_llm_env_over_a_loaded_model_refuses_to_pickle() -> None:
    from tokenized_bandit_gym.llm.load_language_model import load_language_model

    model, tokenizer = load_language_model()
    env = gym.make("TokenizedAlignment-v0", model=model, tokenizer=tokenizer, **SMALL_LLM)
    with pytest.raises(TypeError, match="model passed in loaded cannot be pickled"):
        pickle.dumps(env)
    with pytest.raises(TypeError, match="hub name or a local path"):
        copy.deepcopy(env)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_episode_end_reports_exact_regret(env_id: str) -> None:
    assert gym.make(env_id).unwrapped.optimal_kind == "exact"
    for step in random_trajectory(gym.make(env_id), seed=0, policy_seed=4, rounds=5):
        if step[0] == "reset" or not step[3]["round_ended"]:
            if step[0] != "reset":
                assert step[1] == 0.0
            continue
        info = step[3]
        assert info["regret"] == pytest.approx(info["optimal_utility"] - info["utility"], abs=1e-12)
        assert info["regret"] >= -1e-12
        assert info["oracle_greedy_utility"] <= info["optimal_utility"] + 1e-12
        assert step[1] == pytest.approx(info["utility"] + info["noise"], abs=1e-12)
        assert info["response"][-1] == gym.make(env_id).unwrapped.eos_token_id


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_action_masks_reachable_through_wrappers(env_id: str) -> None:
    env = gym.make(env_id)
    observation, _ = env.reset(seed=0)
    np.testing.assert_array_equal(env.get_wrapper_attr("action_masks")(), observation["action_mask"].astype(bool))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_forced_eos_at_last_position(env_id: str) -> None:
    env = gym.make(env_id)
    env.reset(seed=0)
    eos = env.unwrapped.eos_token_id
    length = env.unwrapped.problem.max_length
    non_eos = 0 if eos != 0 else 1
    info: dict = {}
    for step_index in range(length):
        _, _, terminated, _, info = env.step(non_eos)
        assert terminated == (step_index == length - 1)
    assert info["forced_eos"] is True
    assert info["response"][-1] == eos and info["response_length"] == length


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_rgb_array_render_draws_one_cell_per_token(env_id: str) -> None:
    env = gym.make(env_id, render_mode="rgb_array")
    env.reset(seed=0)
    before = env.render()
    env.step(env.unwrapped.eos_token_id)
    after = env.render()
    assert after.dtype == np.uint8 and after.ndim == 3 and after.shape[2] == 3
    assert after.shape == before.shape
    assert np.all(after[8:15, 0:7] == 0)  # the response's first cell is EOS, drawn black
    assert np.all(before[8:15, 0:7] == 255)  # and was empty before the step


def test_make_vec_env_from_sb3_works_with_its_default_render_mode() -> None:
    from stable_baselines3.common.env_util import make_vec_env

    vec_env = make_vec_env("TokenizedLinearBandit-v0", n_envs=2, seed=0)
    observations = vec_env.reset()
    assert observations["action_mask"].shape == (2, 16)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_ansi_render_shows_the_response(env_id: str) -> None:
    env = gym.make(env_id, render_mode="ansi")
    env.reset(seed=0)
    env.step(env.unwrapped.eos_token_id)
    assert "EOS" in env.render()


def test_noise_free_reward_equals_utility() -> None:
    env = gym.make("TokenizedLinearBandit-v0", noise_scale=0.0)
    for step in random_trajectory(env, seed=2, policy_seed=2):
        if step[0] != "reset" and "utility" in step[3]:
            assert step[1] == step[3]["utility"]


def test_bounded_noise_stays_within_scale() -> None:
    env = gym.make("TokenizedMultiArmedBandit-v0", noise="bounded", noise_scale=0.05)
    noise = [
        step[3]["noise"]
        for step in random_trajectory(env, seed=0, policy_seed=0, rounds=50)
        if step[0] != "reset" and "noise" in step[3]
    ]
    assert max(abs(value) for value in noise) <= 0.05
    assert np.std(noise) > 0.01


def test_instance_seed_fixes_the_instance_and_reset_seed_does_not_change_it() -> None:
    first = gym.make("TokenizedLinearBandit-v0", instance_seed=4).unwrapped
    second = gym.make("TokenizedLinearBandit-v0", instance_seed=4).unwrapped
    other = gym.make("TokenizedLinearBandit-v0", instance_seed=5).unwrapped
    first.reset(seed=1)
    second.reset(seed=99)
    assert np.array_equal(first.problem.theta.numpy(), second.problem.theta.numpy())
    assert not np.array_equal(first.problem.theta.numpy(), other.problem.theta.numpy())


def test_fixed_length_masks_early_eos_and_ends_at_length() -> None:
    env = gym.make("TokenizedLinearBandit-v0", fixed_length=True)
    observation, _ = env.reset(seed=0)
    eos = env.unwrapped.eos_token_id
    assert observation["action_mask"][eos] == 0
    with pytest.raises(ValueError, match="masked"):
        env.step(eos)
    steps = 0
    terminated = False
    while not terminated:
        _, _, terminated, _, info = env.step(0)
        steps += 1
    assert steps == env.unwrapped.problem.max_length


@pytest.mark.parametrize("env_id", tokenized_bandit_gym.registered_ids())
def test_every_problem_implements_the_protocol(env_id: str) -> None:
    """Synthetic and LLM problems alike: the typed Protocol, and its calls agree with each other."""
    testing.check_problem_protocol(env_id, **({"max_length": 4, "top_k": 3} if env_id in LLM_ENVS else {}))
