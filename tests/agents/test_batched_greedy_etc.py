"""BatchedGreedyETC: sequential equality with GreedyETC, batch semantics, learning, backends."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401
from tokenized_bandit_gym.agents.batched_greedy_etc import BatchedGreedyETC
from tokenized_bandit_gym.agents.greedy_etc import GreedyETC
from tokenized_bandit_gym.agents.random_agent import RandomAgent
from tokenized_bandit_gym.evaluation import run_online, run_online_vector
from tokenized_bandit_gym.evaluation.run_online_vector import vector_task

SMALL_TMAB = {"vocab_size": 4, "max_length": 4}


@pytest.mark.parametrize(
    ("env_id", "kwargs", "etc_kwargs"),
    [
        ("TokenizedMultiArmedBandit-v0", SMALL_TMAB, {"exploration_rounds": 3}),
        (
            "TokenizedMultiArmedBandit-v0",
            {**SMALL_TMAB, "fixed_length": True},
            {"completion_token": 1, "exploration_rounds": 2},
        ),
        ("TokenizedLinearBandit-v0", {"vocab_size": 5, "max_length": 3}, {"exploration_rounds": 2}),
    ],
)
def test_one_sub_env_batch_of_one_is_sequential_greedy_etc(
    env_id: str, kwargs: dict[str, object], etc_kwargs: dict[str, int]
) -> None:
    rounds = 150
    vector = gym.make_vec(env_id, num_envs=1, **kwargs)
    agent = BatchedGreedyETC(**etc_kwargs)
    batched = run_online_vector(vector, agent, rounds, seed=3)
    sequential_agent = GreedyETC(**etc_kwargs)
    sequential = run_online(gym.make(env_id, **kwargs), sequential_agent, rounds, seed=3)
    np.testing.assert_array_equal(batched.utility, sequential.utility)
    np.testing.assert_array_equal(batched.reward, sequential.reward)
    assert agent.committed_response == sequential_agent.committed_response is not None
    assert len(set(np.round(sequential.utility, 9))) > 3  # it explored


def test_updates_wait_for_a_full_batch() -> None:
    envs = gym.make_vec("TokenizedMultiArmedBandit-v0", num_envs=2, **SMALL_TMAB)
    agent = BatchedGreedyETC(batch_size=3, exploration_rounds=1)
    agent.reset(vector_task(envs, 100), 2)
    observations, infos = envs.reset(seed=0)
    actions = agent.act_batch(observations, infos, np.ones(2, dtype=bool))
    assert actions.tolist() == [0, 1]  # the first two tokens of level 1, one round each
    credited = []
    for rows in ([0], [1], [0, 1]):
        agent.update_batch(np.asarray(rows), {}, np.ones(len(rows)), {})
        credited.append(int(agent.etc.counts.sum()))
    assert credited == [0, 0, 2]  # rounds 1-2 credited with the third; rows 0-1 then had no arm


def test_batched_greedy_etc_learns() -> None:
    rounds, num_envs = 2000, 8
    make = lambda: gym.make_vec("TokenizedMultiArmedBandit-v0", num_envs=num_envs, **SMALL_TMAB)  # noqa: E731
    agent = BatchedGreedyETC(batch_size=num_envs, exploration_rounds=40)
    learner = run_online_vector(make(), agent, rounds, seed=0)
    baseline = run_online_vector(make(), RandomAgent, rounds, seed=0)
    assert agent.committed_response is not None
    assert learner.regret[-rounds // 4 :].mean() < 0.3 * baseline.regret.mean()


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        BatchedGreedyETC(batch_size=0)
    with pytest.raises(ValueError, match="used before reset"):
        BatchedGreedyETC().update_batch(np.arange(1), {}, np.zeros(1), {})
    envs = gym.make_vec("TokenizedMultiArmedBandit-v0", num_envs=2, fixed_length=True)
    with pytest.raises(ValueError, match="completion_token"):
        BatchedGreedyETC().reset(vector_task(envs, 10), 2)


def test_torch_backend_actions_stay_tensors() -> None:
    envs = gym.make_vec("TokenizedMultiArmedBandit-v0", num_envs=3, array_backend="torch", **SMALL_TMAB)
    result = run_online_vector(envs, BatchedGreedyETC(batch_size=3, exploration_rounds=2), 60, seed=0)
    assert np.isfinite(result.regret).all()
    agent = BatchedGreedyETC()
    agent.reset(vector_task(envs, 10), 3)
    observations, infos = envs.reset(seed=0)
    actions = agent.act_batch(observations, infos, torch.ones(3, dtype=torch.bool))
    assert isinstance(actions, torch.Tensor) and actions.shape == (3,)


def test_runs_on_the_llm_decoding_vector_env() -> None:
    kwargs = {"max_length": 3, "top_k": 3, "optimal_kind": "oracle_greedy"}
    envs = gym.make_vec("TokenizedDecoding-v0", num_envs=4, fixed_length=False, **kwargs)  # stopped sequences y:t:EOS
    agent = BatchedGreedyETC(batch_size=4, exploration_rounds=2)
    result = run_online_vector(envs, agent, 40, seed=0)
    assert agent.committed_response is not None
    assert np.isfinite(result.regret).all()
