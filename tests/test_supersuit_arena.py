"""The arena under SuperSuit: black_death_v3 -> pettingzoo_env_to_vec_env_v1 -> concat_vec_envs_v1 on every id."""

from __future__ import annotations

from typing import Any

import cloudpickle
import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo.test import parallel_api_test

import tokenized_bandit_gym
from tokenized_bandit_gym.adapters.pettingzoo_arena import TokenizedBanditArena
from tokenized_bandit_gym.adapters.supersuit_arena import SuperSuitArena
from tokenized_bandit_gym.registration import LLM_ENVS

ss = pytest.importorskip("supersuit")

ENV_IDS = tokenized_bandit_gym.registered_ids()
SMALL_LLM = {"max_length": 5, "top_k": 4}
NAMES = ["a", "b"]


pytestmark = pytest.mark.usefixtures("small_work_threads")


def make_arena(env_id: str) -> TokenizedBanditArena:
    return TokenizedBanditArena(env_id, NAMES, **(dict(SMALL_LLM) if env_id in LLM_ENVS else {}))


def supersuit_vec_env(env_id: str, copies: int, num_cpus: int = 0) -> Any:
    """The documented pipeline, exactly as a user writes it."""
    arena = SuperSuitArena(make_arena(env_id))
    return ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(ss.black_death_v3(arena)), copies, num_cpus=num_cpus)


def allowed_actions(wrapper: SuperSuitArena, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random allowed action for every flat row (0 in the zero rows of finished players)."""
    masks = wrapper.action_masks_of(rows)  # (R, k)
    return np.array([rng.choice(np.flatnonzero(mask)) if mask.any() else 0 for mask in masks], dtype=np.int64)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pipeline_plays_what_the_arena_plays(env_id: str) -> None:
    """Row 2c + i is player i of copy c, seeded seed + c: it sees and earns what that player of a plain arena does."""
    copies, seed = 2, 5
    envs = supersuit_vec_env(env_id, copies)
    wrapper = SuperSuitArena(make_arena(env_id))
    direct = [make_arena(env_id) for _ in range(copies)]
    observations, _ = envs.reset(seed=seed)
    direct_observations = [arena.reset(seed=seed + copy)[0] for copy, arena in enumerate(direct)]
    rng = np.random.default_rng(0)
    rounds_ended = 0
    for _ in range(6 * direct[0].problem.max_length):
        for copy, arena in enumerate(direct):
            for player, name in enumerate(NAMES):
                row = observations[copy * len(NAMES) + player]
                expected = direct_observations[copy].get(name)
                if expected is None:  # finished early: black death's zero observation
                    assert not row.any()
                else:
                    np.testing.assert_array_equal(row, spaces.flatten(arena.observation_space(name), expected))
        actions = allowed_actions(wrapper, observations, rng)
        observations, rewards, terminations, truncations, _ = envs.step(actions)
        for copy, arena in enumerate(direct):
            live = list(arena.agents)
            stepped = arena.step({name: int(actions[copy * len(NAMES) + NAMES.index(name)]) for name in live})
            direct_observations[copy], direct_rewards = stepped[0], stepped[1]
            rows = slice(copy * len(NAMES), (copy + 1) * len(NAMES))
            expected_rewards = np.array([direct_rewards.get(name, 0.0) for name in NAMES], dtype=np.float32)
            np.testing.assert_array_equal(rewards[rows], expected_rewards)  # SuperSuit's rewards are float32
            round_over = not arena.agents
            assert terminations[rows].tolist() == truncations[rows].tolist() == [round_over] * len(NAMES)
            if round_over:  # the vector env reset this copy itself, without a seed
                rounds_ended += 1
                direct_observations[copy] = arena.reset()[0]
    assert rounds_ended >= 2 * copies


@pytest.mark.timeout(300)
@pytest.mark.parametrize("env_id", ["TokenizedLinearBandit-v0", "TokenizedAlignment-v0"])
def test_pipeline_in_worker_processes(env_id: str) -> None:
    """``num_cpus=2``: each copy is shipped (cloudpickle) to a forked worker, where it is stepped."""
    envs = supersuit_vec_env(env_id, copies=2, num_cpus=2)
    wrapper = SuperSuitArena(make_arena(env_id))
    try:
        observations, _ = envs.reset(seed=0)
        rng = np.random.default_rng(1)
        ended = 0
        for _ in range(3 * wrapper.problem.max_length):
            observations, rewards, terminations, _, _ = envs.step(allowed_actions(wrapper, observations, rng))
            ended += int(terminations.sum())
            assert observations.shape == (4, *wrapper.observation_space("a").shape)
        assert ended >= 4
    finally:
        envs.close()


@pytest.mark.parametrize("env_id", ["TokenizedLinearBandit-v0", "TokenizedMultiArmedBandit-v0", "TokenizedDecoding-v0"])
def test_wrapped_arena_passes_the_parallel_api_test(env_id: str) -> None:
    parallel_api_test(SuperSuitArena(make_arena(env_id)), num_cycles=30)


@pytest.mark.parametrize("env_id", ["TokenizedLinearBandit-v0", "TokenizedAlignment-v0"])
def test_flat_observation_unflattens_to_the_arena_observation(env_id: str) -> None:
    arena = make_arena(env_id)
    wrapper = SuperSuitArena(make_arena(env_id))
    expected, _ = arena.reset(seed=2)
    flat, _ = wrapper.reset(seed=2)
    space = wrapper.observation_space("b")
    assert isinstance(space, spaces.Box) and space.contains(flat["b"])
    restored = wrapper.unflatten_observation("b", flat["b"])
    assert restored.keys() == expected["b"].keys()
    for key, value in expected["b"].items():
        np.testing.assert_array_equal(restored[key], value)
    rows = np.stack([flat["a"], np.zeros_like(flat["b"]), flat["b"]])
    masks = wrapper.action_masks_of(rows)
    assert masks.dtype == bool and masks.shape == (3, wrapper.action_space("a").n)
    np.testing.assert_array_equal(masks[0], expected["a"]["action_mask"].astype(bool))
    assert not masks[1].any()


def test_only_the_round_end_is_truncated() -> None:
    """Players that finish early are only terminated; the last ones are terminated and truncated (black_death_v3)."""
    wrapper = SuperSuitArena(make_arena("TokenizedLinearBandit-v0"))
    eos = wrapper.eos_token_id
    observations, _ = wrapper.reset(seed=0)
    tokens = wrapper.unflatten_observation("a", observations["a"])["candidate_tokens"]
    eos_action, other = int(np.flatnonzero(tokens == eos)[0]), int(np.flatnonzero(tokens != eos)[0])
    _, _, terminations, truncations, _ = wrapper.step({"a": eos_action, "b": other})
    assert terminations == {"a": True, "b": False} and truncations == {"a": False, "b": False}
    assert wrapper.agents == ["b"]
    while wrapper.agents:
        _, _, terminations, truncations, _ = wrapper.step({"b": other})
    assert terminations == truncations == {"b": True}


def test_wrapper_refuses_what_is_not_an_arena() -> None:
    with pytest.raises(TypeError, match="TokenizedBanditArena"):
        SuperSuitArena(object())


@pytest.mark.parametrize("env_id", ["TokenizedLinearBandit-v0", "TokenizedAlignment-v0"])
def test_copied_arena_continues_identically_from_mid_round(env_id: str) -> None:
    """What concat_vec_envs_v1 ships to its workers: the arena with its round in progress and its streams."""
    arena = make_arena(env_id)
    observations, _ = arena.reset(seed=1)
    arena.step({name: int(np.flatnonzero(observations[name]["action_mask"])[0]) for name in NAMES})
    copied = cloudpickle.loads(cloudpickle.dumps(arena))
    for _ in range(4 * arena.problem.max_length):
        if not arena.agents:
            first, second = arena.reset(), copied.reset()
        else:
            actions = {name: int(np.flatnonzero(arena.action_masks(name))[-1]) for name in arena.agents}
            first, second = arena.step(actions), copied.step(actions)
        np.testing.assert_equal(second, first)  # every observation, reward, flag and info (nested), exactly
