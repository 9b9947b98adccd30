"""WrongTheta as the paper defines it: ``fixed_theta_greedy`` with ``theta="negated"`` resolves ``theta' = -theta``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.evaluation.leaderboard_spec import SpecError, parse_spec
from tokenized_bandit_gym.task import Task

TINY_TLB = {"vocab_size": 5, "max_length": 3, "embedding_dim": 4}


def test_negated_is_minus_theta_on_the_tlb() -> None:
    env = gym.make("TokenizedLinearBandit-v0", **TINY_TLB)
    agent = agents.make("fixed_theta_greedy", theta="negated")
    agent.reset(Task.from_env(env, 5))
    assert torch.equal(agent.theta, -env.unwrapped.problem.theta.double())


def test_negated_keeps_the_value_coordinate_on_the_llm_env() -> None:
    env = gym.make("TokenizedAlignment-v0", max_length=3, top_k=3, noise_scale=0.0)
    problem = env.unwrapped.problem
    agent = agents.make("fixed_theta_greedy")  # "negated" is the default
    agent.reset(Task.from_env(env, 5))
    gamma = problem.gamma
    expected = torch.cat([-(1.0 - gamma) * problem.latent_theta, torch.tensor([gamma], dtype=torch.float64)])
    torch.testing.assert_close(agent.theta, expected)
    # It maximises the convex combination gamma * v + (1 - gamma) * <-theta, e> over the allowed candidates.
    observation, info = env.reset(seed=0)
    terminated = False
    while not terminated:
        state = env.unwrapped.rounds.state
        features = problem.candidate_embeddings(state)[0]  # (k, d + 1)
        wrong = gamma * features[:, -1] - (1.0 - gamma) * (features[:, :-1] @ problem.latent_theta)  # (k,)
        wrong = wrong.masked_fill(~torch.as_tensor(observation["action_mask"]).bool(), float("-inf"))
        action = agent.act(observation, info)
        assert float(wrong[action]) >= float(wrong.max()) - 1e-4
        observation, _, terminated, _, info = env.step(action)
    assert info["response_length"] == problem.max_length  # not the empty answer


def spec(theta: str) -> dict:
    """A one-task spec with WrongTheta's ``theta`` written as a name."""
    return {
        "rounds": 3,
        "seeds": [0],
        "task": [{"id": "TokenizedLinearBandit-v0", "kwargs": TINY_TLB}],
        "agent": [{"name": "fixed_theta_greedy", "kwargs": {"theta": theta}}],
    }


def test_negated_is_written_in_a_spec() -> None:
    parsed = parse_spec(spec("negated"))
    assert parsed.agents[0].kwargs == {"theta": "negated"}
    with pytest.raises(SpecError, match="'minus'"):
        parse_spec(spec("minus"))


@pytest.mark.parametrize("theta", ["negative", "minus", ""])
def test_unresolvable_names_are_refused_at_construction(theta: str) -> None:
    with pytest.raises(ValueError, match=repr(theta)):
        agents.make("fixed_theta_greedy", theta=theta)


def test_negated_is_refused_on_a_task_without_theta() -> None:
    env = gym.make("TokenizedMultiArmedBandit-v0", vocab_size=4, max_length=2)
    task = Task.from_env(env, 5)
    with pytest.raises(ValueError, match="embeddings|hidden theta"):
        agents.make("fixed_theta_greedy", theta="negated").reset(task)
    assert np.isfinite(agents.make("fixed_theta_greedy", theta=-0.5)._fill)
