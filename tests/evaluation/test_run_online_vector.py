"""run_online_vector: per-round agents on a vector env replay run_online on single envs exactly."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import tokenized_bandit_gym  # noqa: F401
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.agents.oracle_greedy import OracleGreedy
from tokenized_bandit_gym.agents.random_agent import RandomAgent
from tokenized_bandit_gym.batched_agent import BatchedAgent
from tokenized_bandit_gym.evaluation import run_online, run_online_vector
from tokenized_bandit_gym.independent_agents import IndependentAgents
from tokenized_bandit_gym.task import Task


@pytest.mark.parametrize(
    ("env_id", "agent_class"),
    [("TokenizedLinearBandit-v0", RandomAgent), ("TokenizedMultiArmedBandit-v0", OracleGreedy)],
)
def test_independent_copies_replay_single_env_runs(env_id: str, agent_class: type) -> None:
    num_envs, rounds, seed = 3, 24, 5
    vector = gym.make_vec(env_id, num_envs=num_envs)
    result = run_online_vector(vector, agent_class, rounds, seed=seed)
    env_index = result.metadata["env_index"]
    assert result.rounds == rounds and result.metadata["num_envs"] == num_envs
    for row in range(num_envs):
        mine = env_index == row
        single = run_online(gym.make(env_id), agent_class(), int(mine.sum()), seed=seed + row)
        np.testing.assert_array_equal(result.regret[mine], single.regret)
        np.testing.assert_array_equal(result.reward[mine], single.reward)
        np.testing.assert_array_equal(result.optimal_utility[mine], single.optimal_utility)


def test_oracle_greedy_regret_is_the_greedy_gap() -> None:
    result = run_online_vector(gym.make_vec("TokenizedLinearBandit-v0", num_envs=8), OracleGreedy, 40, seed=0)
    np.testing.assert_allclose(result.regret, result.greedy_gap, atol=1e-12)
    assert result.regret.min() >= -1e-12


def test_torch_backend_runs_the_same_rounds() -> None:
    numpy_result = run_online_vector(gym.make_vec("TokenizedLinearBandit-v0", num_envs=4), RandomAgent, 20, seed=1)
    torch_env = gym.make_vec("TokenizedLinearBandit-v0", num_envs=4, array_backend="torch")
    torch_result = run_online_vector(torch_env, RandomAgent, 20, seed=1)
    np.testing.assert_array_equal(torch_result.regret, numpy_result.regret)
    np.testing.assert_array_equal(torch_result.metadata["env_index"], numpy_result.metadata["env_index"])


class _CountingAgent:
    """Always EOS; records the batches it is given."""

    name = "counting"

    def reset(self, task: Any, num_envs: int, seed: int | None = None) -> None:
        self.eos, self.num_envs, self.batches, self.needs = task.eos_token_id, num_envs, [], []

    def act_batch(self, observations: dict[str, Any], infos: dict[str, Any], needs_action: Any) -> np.ndarray:
        self.needs.append(np.asarray(needs_action).copy())
        return np.full(self.num_envs, self.eos)

    def update_batch(self, rows: Any, observations: dict[str, Any], rewards: Any, infos: dict[str, Any]) -> None:
        self.batches.append((np.asarray(rows), np.asarray(rewards), infos))


def test_batched_agent_protocol_calls() -> None:
    agent = _CountingAgent()
    assert isinstance(agent, BatchedAgent)
    result = run_online_vector(gym.make_vec("TokenizedMultiArmedBandit-v0", num_envs=3), agent, 7, seed=0)
    # every round is one EOS: all rows end together, then all autoreset on the next step
    assert [rows.tolist() for rows, _, _ in agent.batches] == [[0, 1, 2]] * 3
    assert [needs.tolist() for needs in agent.needs] == [[True] * 3, [False] * 3] * 2 + [[True] * 3]
    rows, rewards, infos = agent.batches[0]
    assert rewards.shape == (3,) and infos["regret"].shape == (3,) and infos["response"].shape == (3, 6)
    assert not any(key.startswith("_") for key in infos)
    assert result.metadata["env_index"].tolist() == [0, 1, 2, 0, 1, 2, 0]


def test_bad_arguments_raise() -> None:
    vector = gym.make_vec("TokenizedLinearBandit-v0", num_envs=2)
    with pytest.raises(TypeError, match="factory of Agents"):
        run_online_vector(vector, RandomAgent(), 4)
    with pytest.raises(ValueError, match="rounds must be a positive integer, got 0"):
        run_online_vector(vector, RandomAgent, 0)
    sync = gym.make_vec("TokenizedLinearBandit-v0", num_envs=2, vectorization_mode="sync")
    with pytest.raises(TypeError, match="has no .problem"):
        run_online_vector(sync, RandomAgent, 4)
    with pytest.raises(TypeError, match="agent_factory must be callable"):
        IndependentAgents(3)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", agents.list_agents())
def test_every_registered_agent_runs_on_the_vector_env(name: str) -> None:
    env_id, rounds, seed = "TokenizedLinearBandit-v0", 6, 1
    if callable(getattr(agents.make(name), "act_batch", None)):
        # a registered BatchedAgent with batch_size 1 on one sub-env is its sequential agent
        sequential = name.removeprefix("batched_")
        result = run_online_vector(gym.make_vec(env_id, num_envs=1), agents.make(name), rounds, seed=seed)
        single = run_online(gym.make(env_id), agents.make(sequential), rounds, seed=seed)
        np.testing.assert_array_equal(result.utility, single.utility)
        return
    try:
        agents.make(name).reset(Task.from_env(gym.make(env_id), rounds), seed)
    except ValueError as error:
        pytest.skip(f"{name} does not play {env_id}: {error}")
    # one sub-env: exactly run_online's rounds, for any agent (same task, same horizon)
    result = run_online_vector(gym.make_vec(env_id, num_envs=1), lambda: agents.make(name), rounds, seed=seed)
    single = run_online(gym.make(env_id), agents.make(name), rounds, seed=seed)
    np.testing.assert_array_equal(result.utility, single.utility)
    # several sub-envs: every copy keeps playing until T rounds are recorded
    result = run_online_vector(gym.make_vec(env_id, num_envs=3), lambda: agents.make(name), rounds, seed=seed)
    assert result.rounds == rounds and np.isfinite(result.regret).all()


def test_run_online_dispatches_a_vector_env_to_run_online_vector() -> None:
    from tokenized_bandit_gym.agents.batched_eoful import BatchedEOFUL

    results = [
        run(gym.make_vec("TokenizedLinearBandit-v0", num_envs=4), BatchedEOFUL(), 24, seed=3)
        for run in (run_online, run_online_vector)
    ]
    for key in ("regret", "utility", "reward"):
        np.testing.assert_array_equal(getattr(results[0], key), getattr(results[1], key))
    np.testing.assert_array_equal(results[0].metadata["env_index"], results[1].metadata["env_index"])


def test_run_online_rejects_a_batched_agent_on_a_single_env() -> None:
    from tokenized_bandit_gym.agents.batched_eoful import BatchedEOFUL

    with pytest.raises(TypeError, match="vector env"):
        run_online(gym.make("TokenizedLinearBandit-v0"), BatchedEOFUL(), 4)
