"""Bad input raises a clear exception naming the bad value; nothing is silently clipped."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym
from tokenized_bandit_gym.envs import TokenizedLinearBanditEnv, TokenizedMultiArmedBanditEnv


@pytest.fixture
def env() -> TokenizedLinearBanditEnv:
    environment = TokenizedLinearBanditEnv()
    environment.reset(seed=0)
    return environment


@pytest.mark.parametrize(
    "action,error,pattern",
    [
        (16, ValueError, "16"),
        (-1, ValueError, "-1"),
        (np.int64(99), ValueError, "99"),
        (2.0, TypeError, "2.0"),
        (float("nan"), ValueError, "NaN"),
        (True, TypeError, "True"),
        ("3", TypeError, "'3'"),
        (np.array([1, 2]), TypeError, "1"),
    ],
)
def test_invalid_actions(env: TokenizedLinearBanditEnv, action: object, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        env.step(action)


def test_integer_like_actions_are_accepted(env: TokenizedLinearBanditEnv) -> None:
    for action in (1, np.int32(1), np.array(1)):
        fresh = TokenizedLinearBanditEnv()
        fresh.reset(seed=0)
        fresh.step(action)


def test_masked_action_raises_under_strict_actions() -> None:
    environment = TokenizedLinearBanditEnv(strict_actions=True, max_length=2)
    environment.reset(seed=0)
    environment.step(0)
    with pytest.raises(ValueError, match="masked"):
        environment.step(0)


def test_step_before_reset() -> None:
    with pytest.raises(ValueError, match="reset"):
        TokenizedLinearBanditEnv().step(0)
    with pytest.raises(gym.error.ResetNeeded):
        gym.make("TokenizedLinearBandit-v0").step(0)


def test_step_after_episode_ended(env: TokenizedLinearBanditEnv) -> None:
    env.step(env.eos_token_id)
    with pytest.raises(ValueError, match="ended"):
        env.step(0)


@pytest.mark.parametrize(
    "kwargs,error,pattern",
    [
        ({"vocab_size": 1}, ValueError, "vocab_size"),
        ({"vocab_size": 2.5}, TypeError, "vocab_size"),
        ({"max_length": 0}, ValueError, "max_length"),
        ({"embedding_dim": 0}, ValueError, "embedding_dim"),
        ({"alpha": 1.5}, ValueError, "alpha"),
        ({"alpha": -0.1}, ValueError, "alpha"),
        ({"alpha": float("nan")}, ValueError, "alpha"),
        ({"noise_scale": -0.1}, ValueError, "noise_scale"),
        ({"noise": "cauchy"}, ValueError, "cauchy"),
        ({"family": "unknown"}, ValueError, "unknown"),
        ({"family": "meanpool", "alpha": 0.5}, ValueError, "alpha"),
        ({"ddmc_violation": 0.5}, ValueError, "ddmc_violation"),
        ({"family": "markov", "ddmc_violation": -1.0}, ValueError, "ddmc_violation"),
        ({"family": "needle", "vocab_size": 2}, ValueError, "vocab_size"),
        ({"family": "needle", "needle_gap": 2.0}, ValueError, "needle_gap"),
        ({"num_queries": 0}, ValueError, "num_queries"),
        ({"instance_seed": -1}, ValueError, "instance_seed"),
        ({"theta_norm": 1.5}, ValueError, "theta_norm"),
        ({"device": "quantum"}, ValueError, "quantum"),
        ({"dtype": "int8"}, ValueError, "int8"),
        ({"render_mode": "human"}, ValueError, "human"),
        ({"fixed_length": "yes"}, TypeError, "yes"),
    ],
)
def test_invalid_linear_constructor_arguments(kwargs: dict, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        TokenizedLinearBanditEnv(**kwargs)


@pytest.mark.parametrize(
    "kwargs,error,pattern",
    [
        ({"vocab_size": 1}, ValueError, "vocab_size"),
        ({"max_length": 0}, ValueError, "max_length"),
        ({"family": "needle"}, ValueError, "needle"),
        ({"family": "random_table", "vocab_size": 40, "max_length": 8}, ValueError, "max_length=8"),
        ({"family": "random_table", "alpha": 0.5}, ValueError, "alpha"),
        ({"noise": "bounded", "noise_scale": float("inf")}, ValueError, "noise_scale"),
    ],
)
def test_invalid_multi_armed_constructor_arguments(kwargs: dict, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        TokenizedMultiArmedBanditEnv(**kwargs)


def test_embedding_oracle_rejects_bad_responses() -> None:
    problem = TokenizedLinearBanditEnv().problem
    import torch

    with pytest.raises(ValueError, match="16"):
        problem.embed(torch.tensor([0]), torch.tensor([[16]]))
    with pytest.raises(ValueError, match="max_length"):
        problem.embed(torch.tensor([0]), torch.zeros(1, 9, dtype=torch.int64))
    with pytest.raises(ValueError, match="query"):
        problem.embed(torch.tensor([32]), torch.zeros(1, 2, dtype=torch.int64))


# Issue 49, item 5: values that cannot be right are refused, and numpy integers are seeds, on every registered id.
REGISTERED = tokenized_bandit_gym.registered_ids()
SMALL_LLM = {"max_length": 3, "top_k": 3}


def _small(env_id: str, **kwargs: object) -> dict[str, object]:
    from tokenized_bandit_gym.registration import LLM_ENVS

    return {**(SMALL_LLM if env_id in LLM_ENVS else {}), **kwargs}


def _same_observations(first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> bool:
    return first.keys() == second.keys() and all(np.array_equal(first[key], second[key]) for key in first)


@pytest.mark.parametrize("noise", ["gaussian", "bounded"])
@pytest.mark.parametrize("env_id", REGISTERED)
def test_a_noise_scale_whose_draws_overflow_the_reward_is_refused(env_id: str, noise: str) -> None:
    """``noise_scale=1e308`` gave ``-inf`` rewards; the largest scale accepted keeps every reward finite."""
    from tokenized_bandit_gym.core.noise_model import NoiseModel

    with pytest.raises(ValueError, match=r"noise_scale=1e\+308 would overflow the float64 reward"):
        gym.make(env_id, **_small(env_id, noise=noise, noise_scale=1e308))
    with pytest.raises(ValueError, match=r"noise_scale=1e\+308"):
        gym.make_vec(
            env_id, 2, vectorization_mode="vector_entry_point", **_small(env_id, noise=noise, noise_scale=1e308)
        )
    largest = NoiseModel.largest_scale(noise)
    env = gym.make(env_id, **_small(env_id, noise=noise, noise_scale=largest))
    observation, _ = env.reset(seed=0)
    terminated = False
    while not terminated:
        observation, reward, terminated, _, _ = env.step(int(np.flatnonzero(observation["action_mask"])[0]))
    assert np.isfinite(reward) and abs(reward) > 1e300


@pytest.mark.parametrize("env_id", REGISTERED)
def test_reset_seeds_are_checked_alike_on_every_env_kind(env_id: str) -> None:
    """Bools are refused (``seed=True`` played ``seed=1``); NumPy integers are the seed they hold, on the single
    env, the native vector env (a seed array too, one per sub-env) and the pairwise-feedback env."""
    with pytest.raises(TypeError, match="instance_seed must be an integer, got True"):
        gym.make(env_id, **_small(env_id, instance_seed=True))
    single = gym.make(env_id, **_small(env_id, instance_seed=np.int64(3)))
    twin = gym.make(env_id, **_small(env_id, instance_seed=3))
    assert _same_observations(single.reset(seed=0)[0], twin.reset(seed=0)[0])
    for bad, error in ((True, TypeError), (np.bool_(False), TypeError), (1.0, TypeError), ("3", TypeError)):
        with pytest.raises(error, match=f"seed must be an integer, got {bad!r}"):
            single.reset(seed=bad)
    with pytest.raises(ValueError, match=r"seed must be >= 0, got np.int64\(-1\)"):
        single.reset(seed=np.int64(-1))
    assert _same_observations(single.reset(seed=np.int64(3))[0], single.reset(seed=3)[0])
    assert _same_observations(single.reset(seed=np.uint8(3))[0], single.reset(seed=3)[0])

    vector = gym.make_vec(env_id, 2, vectorization_mode="vector_entry_point", **_small(env_id))
    for bad, pattern in ((True, "seed must be an integer, got True"), ([1, True], r"seed\[1\] must be an integer")):
        with pytest.raises(TypeError, match=pattern):
            vector.reset(seed=bad)
    for bad in (np.array([[3, 4]]), np.array([3.0, 4.0]), np.array([True, False])):
        with pytest.raises(TypeError, match="a seed array must be 1-D of integers"):
            vector.reset(seed=bad)
    with pytest.raises(ValueError, match=r"seed\[0\] must be >= 0, got -3"):
        vector.reset(seed=np.array([-3, 4]))
    with pytest.raises(ValueError, match="one entry per sub-env"):
        vector.reset(seed=np.array([3, 4, 5]))
    expected = vector.reset(seed=[3, 4])[0]
    assert _same_observations(vector.reset(seed=np.array([3, 4]))[0], expected)
    assert _same_observations(vector.reset(seed=[np.int64(3), np.int32(4)])[0], expected)
    assert _same_observations(vector.reset(seed=np.int64(3))[0], expected)


def test_pairwise_and_arena_resets_check_seeds_alike() -> None:
    from tokenized_bandit_gym.adapters.pettingzoo_arena import TokenizedBanditArena

    pairwise = gym.make("TokenizedLinearBandit-v0", feedback="pairwise")
    with pytest.raises(TypeError, match="seed must be an integer, got True"):
        pairwise.reset(seed=True)
    assert _same_observations(pairwise.reset(seed=np.int64(2))[0], pairwise.reset(seed=2)[0])
    arena = TokenizedBanditArena()
    with pytest.raises(TypeError, match="seed must be an integer, got True"):
        arena.reset(seed=True)
    first, second = arena.reset(seed=np.int64(2))[0], arena.reset(seed=2)[0]
    assert all(_same_observations(first[name], second[name]) for name in first)


@pytest.mark.parametrize("env_id", REGISTERED)
def test_a_refused_vector_action_is_named_as_the_caller_passed_it(env_id: str) -> None:
    """A uint64 action was reported clipped to int64's maximum; a Python int beyond int64 as a float dtype."""
    vector = gym.make_vec(env_id, 2, vectorization_mode="vector_entry_point", **_small(env_id))
    vector.reset(seed=0)
    largest = 2**64 - 1
    for actions in (
        np.array([0, largest], dtype=np.uint64),
        [0, largest],
        torch.tensor([0, 2**63 - 1]).to(torch.uint64),
    ):
        shown = largest if not isinstance(actions, torch.Tensor) else 2**63 - 1
        with pytest.raises(ValueError, match=f"action {shown} of sub-env 1 is out of range"):
            vector.step(actions)
    with pytest.raises(ValueError, match=f"action {2**70} of sub-env 0 is out of range"):
        vector.step([2**70, 0])
    with pytest.raises(TypeError, match="integer token indices"):
        vector.step([0.5, 0])
    vector.step(np.array([0, 1], dtype=np.uint64))  # in range: accepted as before
