"""The PettingZoo arena: API and seed conformance, common random numbers, equivalence with the single env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

import tokenized_bandit_gym
from tokenized_bandit_gym.adapters.pettingzoo_arena import TokenizedBanditArena
from tokenized_bandit_gym.agents.oracle_greedy import OracleGreedy
from tokenized_bandit_gym.agents.random_agent import RandomAgent
from tokenized_bandit_gym.agents.sb3_agent import SB3Agent
from tokenized_bandit_gym.evaluation.run_arena import run_arena
from tokenized_bandit_gym.evaluation.run_online import run_online
from tokenized_bandit_gym.registration import LLM_ENVS

# Every registered id, the LLM-backed ones at a test size.
ENV_IDS = tokenized_bandit_gym.registered_ids()
SMALL_LLM = {"max_length": 5, "top_k": 4}


def env_kwargs(env_id):
    return dict(SMALL_LLM) if env_id in LLM_ENVS else {}


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_parallel_api_and_seed_tests(env_id):
    kwargs = env_kwargs(env_id)
    parallel_api_test(TokenizedBanditArena(env_id, ["a", "b", "c"], **kwargs), num_cycles=50)
    parallel_seed_test(lambda: TokenizedBanditArena(env_id, ["a", "b"], **kwargs))


def test_fixed_length_arena_passes_the_api_test():
    parallel_api_test(TokenizedBanditArena("TokenizedLinearBandit-v0", ["a", "b"], fixed_length=True), num_cycles=50)


def assert_same(actual, expected, env_id):
    """Equal on the synthetic ids; on the LLM ids, floats to rounding (one batched forward for every player)."""
    if env_id in LLM_ENVS and np.asarray(expected).dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_each_player_sees_what_it_would_see_alone(env_id):
    """Step for step, every player's observation, reward and info equal the single env's."""
    env = gym.make(env_id, **env_kwargs(env_id))
    arena = TokenizedBanditArena(env_id, ["same", "twin", "other"], **env_kwargs(env_id))
    rng = np.random.default_rng(0)
    for episode in range(6):
        seed = 7 if episode == 0 else None
        observation, info = env.reset(seed=seed)
        observations, infos = arena.reset(seed=seed)
        assert infos["same"].keys() == info.keys()
        for key, value in info.items():
            assert type(infos["same"][key]) is type(value), key
            assert_same(infos["same"][key], value, env_id)
        terminated = False
        while not terminated:
            assert observations["same"].keys() == observation.keys()
            for key, value in observation.items():
                assert type(observations["same"][key]) is type(value)
                assert_same(observations["same"][key], value, env_id)
                assert_same(observations["twin"][key], observations["same"][key], env_id)
            action = int(rng.integers(env.action_space.n))
            other = int(rng.integers(env.action_space.n))
            actions = {name: action for name in ("same", "twin")}
            if "other" in arena.agents:
                actions["other"] = other
            observation, reward, terminated, _, info = env.step(action)
            observations, rewards, terminations, _, infos = arena.step(actions)
            assert_same(rewards["twin"], rewards["same"], env_id)  # twins are two rows of one batched forward
            assert_same(rewards["same"], reward, env_id)
            assert terminations["same"] == terminations["twin"] == terminated
            assert infos["same"].keys() == info.keys()
            for key, value in info.items():
                assert type(infos["same"][key]) is type(value), key
                assert_same(infos["same"][key], value, env_id)
        assert "same" not in arena.agents
        while arena.agents:
            observations, rewards, *_ = arena.step({"other": int(rng.integers(env.action_space.n))})
        if infos.get("other", {}).get("round_ended"):
            assert infos["other"]["noise"] == info["noise"]  # one noise draw for everyone


@pytest.mark.parametrize(
    "env_id", ["TokenizedLinearBandit-v0", "TokenizedMultiArmedBandit-v0", "TokenizedAlignment-v0"]
)
def test_run_arena_equals_run_online_for_every_player(env_id):
    kwargs = env_kwargs(env_id)
    arena = TokenizedBanditArena(env_id, ["random", "random_twin", "greedy"], **kwargs)
    players = {"random": RandomAgent(), "random_twin": RandomAgent(), "greedy": OracleGreedy()}
    results = run_arena(arena, players, 25, seed=2)
    assert_same(results["random_twin"].reward, results["random"].reward, env_id)
    alone = run_online(gym.make(env_id, **kwargs), RandomAgent(), 25, seed=2)
    assert_same(results["random"].reward, alone.reward, env_id)
    assert_same(results["random"].regret, alone.regret, env_id)
    greedy_alone = run_online(gym.make(env_id, **kwargs), OracleGreedy(), 25, seed=2)
    assert_same(results["greedy"].regret, greedy_alone.regret, env_id)
    noise = results["random"].reward - results["random"].utility
    np.testing.assert_allclose(results["greedy"].reward - results["greedy"].utility, noise, atol=1e-12)


def test_two_sb3_agents_with_one_policy_get_identical_rewards_every_round():
    arena = TokenizedBanditArena("TokenizedMultiArmedBanditRandomTable-v0", ["ppo_a", "ppo_b", "dqn"])
    players = {"ppo_a": SB3Agent("ppo"), "ppo_b": SB3Agent("ppo"), "dqn": SB3Agent("dqn")}
    results = run_arena(arena, players, 30, seed=5)
    np.testing.assert_array_equal(results["ppo_a"].reward, results["ppo_b"].reward)
    np.testing.assert_array_equal(results["ppo_a"].utility, results["ppo_b"].utility)


def test_arena_rejects_bad_input():
    with pytest.raises(ValueError, match="distinct"):
        TokenizedBanditArena("TokenizedMultiArmedBandit-v0", ["a", "a"])
    with pytest.raises(ValueError, match="only used with an env id"):
        TokenizedBanditArena(gym.make("TokenizedMultiArmedBandit-v0"), ["a"], vocab_size=5)
    arena = TokenizedBanditArena("TokenizedMultiArmedBandit-v0", ["a", "b"])
    with pytest.raises(ValueError, match="reset"):
        arena.step({"a": 0, "b": 0})
    arena.reset(seed=0)
    with pytest.raises(ValueError, match="missing"):
        arena.step({"a": 0})
    with pytest.raises(ValueError, match="out of range"):
        arena.step({"a": 0, "b": 99})
    with pytest.raises(TypeError):
        arena.step({"a": 0, "b": 1.5})
    strict = TokenizedBanditArena("TokenizedMultiArmedBandit-v0", ["a"], fixed_length=True)
    strict.reset(seed=0)
    with pytest.raises(ValueError, match="masked"):
        strict.step({"a": strict.eos_token_id})


def test_render_ansi_lists_every_player():
    arena = TokenizedBanditArena("TokenizedMultiArmedBandit-v0", ["a", "b"], render_mode="ansi")
    arena.reset(seed=0)
    arena.step({"a": 0, "b": arena.eos_token_id})
    text = arena.render()
    assert "a: [0]" in text and "b: [EOS]" in text


def test_llm_players_are_rows_of_one_batch_one_forward_per_step(monkeypatch):
    arena = TokenizedBanditArena("TokenizedDecoding-v0", ["a", "b", "c"], **SMALL_LLM)
    problem = arena.problem
    assert arena.rounds.problem is problem and arena.rounds.num_rows == 3
    calls = {"initial_state": [], "advance": []}
    for method in calls:
        original = getattr(problem, method)

        def counted(state_or_queries, *args, _original=original, _method=method, **kwargs):
            calls[_method].append(state_or_queries)
            return _original(state_or_queries, *args, **kwargs)

        monkeypatch.setattr(problem, method, counted)
    observations, _ = arena.reset(seed=1)
    assert observations["a"]["query"].tolist() == observations["b"]["query"].tolist()
    assert len(calls["initial_state"]) == 1 and calls["initial_state"][0].numel() == 1  # the query encoded once
    first_forward_rows = []
    while arena.agents:
        before = len(calls["advance"])
        arena.step({name: int(np.argmax(arena.action_masks(name))) for name in arena.agents})
        first_forward_rows.append(calls["advance"][before].batch_size)  # (the last step also runs the beam search)
    # every live player in one forward per step, with the query's benchmark row (greedy decoding with the true
    # utility, whose response is the round-end greedy benchmark): four rows
    assert first_forward_rows == [3 + 1] * SMALL_LLM["max_length"]


def test_what_a_caller_writes_into_an_observation_changes_nothing_the_arena_checks():
    arena = TokenizedBanditArena("TokenizedMultiArmedBandit-v0", ["a", "b"])
    observations, _ = arena.reset(seed=0)
    eos = arena.eos_token_id
    non_eos = 0 if eos != 0 else 1
    steps = 0
    while "a" in arena.agents and steps <= arena.problem.max_length:
        observations["a"]["action_mask"][:] = 1  # a careless agent or wrapper allows everything
        observations["a"]["response"][:] = eos
        step_observations, _, terminations, _, infos = arena.step(dict.fromkeys(arena.agents, non_eos))
        observations.update(step_observations)
        steps += 1
    assert steps == arena.problem.max_length and terminations["a"] and infos["a"]["forced_eos"]
    assert infos["a"]["response"][: steps - 1].tolist() == [non_eos] * (steps - 1)
    assert arena.action_space("a") is not arena.action_space("b")  # each player's own spaces (own random state)
