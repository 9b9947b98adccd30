"""Pairwise feedback (``feedback="pairwise"``): two responses a round, a Bradley-Terry comparison as reward.

The TLB ids and the alignment env, single and native vector, under Gymnasium's and SB3's checkers
and vectorizers, with fixed-shape infos in every autoreset mode; the comparison's frequency
against the Bradley-Terry probability; the utilities against the scalar env's; bad input.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import tokenized_bandit_gym  # noqa: F401  (registers the ids)
from tokenized_bandit_gym.envs.pairwise_feedback import FeedbackChannel, preference_outcome

pytestmark = pytest.mark.usefixtures("small_work_threads")

TLB_IDS = ["TokenizedLinearBandit-v0", "TokenizedLinearBanditMeanPool-v0"]
SMALL_LLM = {"max_length": 4, "top_k": 4, "fixed_length": False}
PAIRWISE_KEYS = ("utilities", "preferred", "regret_weak")
CASES = [(env_id, {}) for env_id in TLB_IDS] + [("TokenizedAlignment-v0", SMALL_LLM)]


def pairwise(env_id: str, kwargs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**kwargs, "feedback": "pairwise", "preference_temperature": 0.5, **extra}


def random_actions(observation: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    """A random allowed action per row, EOS-heavy so the two responses have different lengths."""
    masks = np.asarray(observation["action_mask"]).astype(bool)  # (N, k)
    scores = np.where(masks, rng.random(masks.shape), -1.0)
    return scores.argmax(axis=1)


def play_round(env: gym.Env, rng: np.random.Generator, seed: int | None = None) -> tuple[list, float, dict]:
    """One episode with random allowed actions: the observations' (length, first_length), reward, last info."""
    observation, _ = env.reset(seed=seed)
    phases, terminated, reward, info = [], False, 0.0, {}
    while not terminated:
        phases.append((int(observation["length"]), int(observation["first_length"])))
        action = int(rng.choice(np.flatnonzero(observation["action_mask"])))
        observation, reward, terminated, _, info = env.step(action)
    return phases, float(reward), info


@pytest.mark.parametrize(("env_id", "kwargs"), CASES)
def test_checkers_pass_under_pairwise_feedback(env_id: str, kwargs: dict[str, Any]) -> None:
    env = gym.make(env_id, **pairwise(env_id, kwargs))
    check_env(env.unwrapped, skip_render_check=True)
    with pytest.warns(UserWarning):  # SB3 only warns about the (k, d) features' shape, as for every id
        sb3_check_env(env.unwrapped)
    assert {"first_response", "first_length"} <= set(env.observation_space.spaces)
    assert "first_response" not in gym.make(env_id, **kwargs).observation_space.spaces  # scalar stays the default


@pytest.mark.parametrize(("env_id", "kwargs"), CASES)
def test_a_round_is_two_responses_to_one_query_with_the_dueling_regret(env_id: str, kwargs: dict[str, Any]) -> None:
    env = gym.make(env_id, **pairwise(env_id, kwargs))
    rng = np.random.default_rng(1)
    for round_index in range(4):
        phases, reward, info = play_round(env, rng, seed=5 if round_index == 0 else None)
        second_start = next(step for step, (_, first) in enumerate(phases) if first > 0)
        assert all(first == 0 for _, first in phases[:second_start])  # the first response, then the second
        assert phases[second_start][0] == 0 and phases[-1][1] == second_start
        utilities = info["utilities"]
        assert utilities.shape == (2,) and info["preferred"] in (0, 1) and reward == 1.0 - info["preferred"]
        assert math.isclose(info["utility"], utilities.mean(), abs_tol=1e-12)
        assert math.isclose(info["regret"], info["optimal_utility"] - utilities.mean(), abs_tol=1e-12)
        assert math.isclose(info["regret_weak"], info["optimal_utility"] - utilities.max(), abs_tol=1e-12)


@pytest.mark.parametrize("env_id", TLB_IDS)
def test_pairwise_utilities_are_the_scalar_envs_utilities_of_the_same_responses(env_id: str) -> None:
    """Replaying each response in the scalar env on the same query gives the same utility (independent reference)."""
    env = gym.make(env_id, **pairwise(env_id, {}))
    scalar = gym.make(env_id, noise_scale=0.0)
    rng = np.random.default_rng(2)
    for seed in range(3):
        observation, info = env.reset(seed=seed)
        terminated, responses, current = False, [], []
        while not terminated:
            action = int(rng.choice(np.flatnonzero(observation["action_mask"])))
            current.append(action)
            observation, _, terminated, _, info = env.step(action)
            if action == env.unwrapped.eos_token_id or len(current) == env.unwrapped.problem.max_length:
                responses.append(current)
                current = []
        scalar_observation, _ = scalar.reset(seed=seed)  # the same query stream: the same query
        assert int(scalar_observation["query_length"]) == int(observation["query_length"])
        np.testing.assert_array_equal(scalar_observation["query"], observation["query"])
        for response, utility in zip(responses, info["utilities"], strict=True):
            scalar.reset(seed=seed)
            for token in response:
                _, _, _, _, scalar_info = scalar.step(token)
            assert math.isclose(scalar_info["utility"], utility, abs_tol=1e-12)


def test_preference_frequency_matches_bradley_terry_within_sampling_error() -> None:
    """The first response is preferred in a fraction of rounds equal to the mean sigma((u1 - u2) / tau)."""
    tau, num_envs = 0.05, 64
    env = gym.make_vec("TokenizedLinearBandit-v0", num_envs, feedback="pairwise", preference_temperature=tau)
    observation, _ = env.reset(seed=0)
    rng = np.random.default_rng(3)
    first_preferred, probabilities = [], []
    while len(probabilities) < 3000:
        observation, rewards, terminated, _, infos = env.step(random_actions(observation, rng))
        for row in np.flatnonzero(terminated):
            u1, u2 = infos["utilities"][row]
            probabilities.append(1.0 / (1.0 + math.exp(-(u1 - u2) / tau)))
            first_preferred.append(rewards[row])
            assert rewards[row] == 1.0 - infos["preferred"][row]
    probabilities_array = np.array(probabilities)
    assert 0.1 < probabilities_array.mean() < 0.9 and probabilities_array.std() > 0.1  # informative comparisons
    standard_error = math.sqrt(np.sum(probabilities_array * (1 - probabilities_array))) / len(probabilities)
    assert abs(np.mean(first_preferred) - probabilities_array.mean()) < 4 * standard_error


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_native_vector_env_rows_are_the_single_env_with_fixed_shape_infos(backend: str, mode: str) -> None:
    """Each row of the native vector env plays exactly the single pairwise env with its seed; infos keep their shape."""
    env_id, num_envs, seeds = "TokenizedLinearBandit-v0", 3, [4, 6, 8]
    kwargs = pairwise(env_id, {})
    vector = gym.make_vec(env_id, num_envs, array_backend=backend, autoreset_mode=mode, **kwargs)
    singles = [gym.make(env_id, **kwargs) for _ in range(num_envs)]
    observation, infos = vector.reset(seed=seeds)
    single_observations = [single.reset(seed=seed)[0] for single, seed in zip(singles, seeds, strict=True)]
    shapes = {key: np.asarray(value).shape for key, value in infos.items()}
    rng = np.random.default_rng(4)
    ended_rounds, pending_restart = 0, np.zeros(num_envs, dtype=bool)
    for _ in range(60):
        for row, single_observation in enumerate(single_observations):
            for key in ("response", "first_response", "first_length", "length", "action_mask"):
                np.testing.assert_array_equal(np.asarray(observation[key])[row], single_observation[key])
        actions = np.array([int(rng.choice(np.flatnonzero(obs["action_mask"]))) for obs in single_observations])
        observation, rewards, terminated, _, infos = vector.step(
            torch.tensor(actions) if backend == "torch" else actions
        )
        rewards, terminated = np.asarray(rewards), np.asarray(terminated)
        assert {
            key: np.asarray(value).shape for key, value in infos.items() if not key.startswith(("final", "_final"))
        } == shapes
        info_rows = infos["final_info"] if mode == "SameStep" and terminated.any() else infos
        for row, single in enumerate(singles):
            if pending_restart[row]:  # NEXT_STEP: this step restarted the row (its action ignored)
                single_observations[row] = single.reset()[0]
                continue
            single_observations[row], reward, done, _, info = single.step(int(actions[row]))
            assert reward == rewards[row] and done == terminated[row]
            if done:
                ended_rounds += 1
                for key in (*PAIRWISE_KEYS, "regret", "utility"):
                    np.testing.assert_allclose(np.asarray(info_rows[key])[row], info[key], rtol=0, atol=1e-12)
                if mode != "NextStep":
                    single_observations[row] = single.reset()[0]
        pending_restart = terminated & (mode == "NextStep")
        if mode == "Disabled" and terminated.any():
            observation, _ = vector.reset(options={"reset_mask": terminated.astype(bool)})
    assert ended_rounds >= 5


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("env_id", "kwargs"), [CASES[0], CASES[-1]])
def test_gymnasium_vectorizers_stack_pairwise_infos_like_the_native_vector_env(
    env_id: str, kwargs: dict[str, Any], mode: str
) -> None:
    num_envs, seeds = 2, [3, 5]
    kwargs = pairwise(env_id, kwargs)
    atol = 1e-4 if env_id == "TokenizedAlignment-v0" else 1e-12
    vectorized = gym.make_vec(env_id, num_envs, vectorization_mode=mode, **kwargs)
    native = gym.make_vec(env_id, num_envs, **kwargs)
    try:
        observation, _ = vectorized.reset(seed=seeds)
        native_observation, _ = native.reset(seed=seeds)
        rng = np.random.default_rng(0)
        ended = 0
        for _ in range(24):
            np.testing.assert_array_equal(observation["first_response"], native_observation["first_response"])
            actions = random_actions(native_observation, rng)
            observation, rewards, terminated, _, infos = vectorized.step(actions)
            native_observation, native_rewards, native_terminated, _, native_infos = native.step(actions)
            np.testing.assert_array_equal(rewards, native_rewards)
            np.testing.assert_array_equal(terminated, native_terminated)
            assert infos.keys() == native_infos.keys()
            assert infos["utilities"].shape == (num_envs, 2) and infos["preferred"].shape == (num_envs,)
            for key in PAIRWISE_KEYS:
                np.testing.assert_allclose(infos[key], np.asarray(native_infos[key]), rtol=0, atol=atol)
            ended += int(np.sum(terminated))
        assert ended > 0
    finally:
        vectorized.close()
        native.close()


def test_preference_outcome_agrees_on_numpy_and_torch() -> None:
    rng = np.random.default_rng(5)
    u1, u2, optimal, noise = rng.normal(size=(4, 50))
    host = preference_outcome(u1, u2, optimal, noise, 0.3)
    device = preference_outcome(*(torch.tensor(value) for value in (u1, u2, optimal, noise)), 0.3)
    for key, value in host.items():
        np.testing.assert_allclose(value, device[key].numpy(), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(host["reward"], (noise + 1) / 2 < 1 / (1 + np.exp(-(u1 - u2) / 0.3)))


@pytest.mark.parametrize("temperature", [0.0, -1.0, math.nan, math.inf, -math.inf])
def test_bad_temperature_is_refused_naming_the_value(temperature: float) -> None:
    with pytest.raises(ValueError, match="preference_temperature"):
        gym.make("TokenizedLinearBandit-v0", feedback="pairwise", preference_temperature=temperature)


def test_bad_feedback_is_refused_naming_the_value() -> None:
    with pytest.raises(ValueError, match="'dueling'"):
        gym.make("TokenizedLinearBandit-v0", feedback="dueling")
    with pytest.raises(TypeError, match="preference_temperature"):
        FeedbackChannel("pairwise", "hot")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'Pairwise'"):  # refused before the model loads
        gym.make("TokenizedAlignment-v0", feedback="Pairwise")
    with pytest.raises(ValueError, match="nan"):
        gym.make_vec("TokenizedAlignment-v0", 2, feedback="pairwise", preference_temperature=math.nan)


def test_the_arena_refuses_pairwise_feedback() -> None:
    from tokenized_bandit_gym.adapters.pettingzoo_arena import TokenizedBanditArena

    with pytest.raises(ValueError, match="feedback='pairwise'"):
        TokenizedBanditArena("TokenizedLinearBandit-v0", ["a", "b"], feedback="pairwise")
