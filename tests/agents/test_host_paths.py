"""The linear agents' NumPy path (the CPU) and torch path play the same game.

The two paths run the same formulas; NumPy's and torch's matrix products may sum in different
orders, so values agree to 1e-12 and every decision (hence every regret) is identical.
"""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.agents import linear_confidence
from tokenized_bandit_gym.agents.linear_confidence import LinearConfidence
from tokenized_bandit_gym.evaluation import run_online


def _play(agent_name: str, host: bool, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(linear_confidence, "runs_on_host", lambda device: host)
    agent = agents.make(agent_name, **({"record_ratios": True} if agent_name == "eoful" else {}))
    if agent_name == "lookahead_eoful":  # its torch path replays every block through the oracle: a smaller game
        result = run_online(gym.make("TokenizedLinearBandit-v0", max_length=5), agent, 40, seed=5)
    else:
        result = run_online(gym.make("TokenizedLinearBandit-v0"), agent, 120, seed=5)
    assert agent.confidence.on_host is host
    return agent, result


@pytest.mark.parametrize("agent_name", ["eoful", "tokenized_lin_ts", "lookahead_eoful"])
def test_host_and_torch_paths_make_the_same_decisions(agent_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    host_agent, host = _play(agent_name, True, monkeypatch)
    torch_agent, reference = _play(agent_name, False, monkeypatch)
    np.testing.assert_array_equal(host.regret, reference.regret)
    for name in ("design", "design_inverse", "response_sum", "theta_hat"):
        host_value = getattr(host_agent.confidence, name).numpy()
        np.testing.assert_allclose(host_value, getattr(torch_agent.confidence, name).numpy(), rtol=0.0, atol=1e-12)
    if agent_name == "eoful":
        for name in ("prefix_ratio_max", "prefix_ratio_mean", "prefix_inverse_ratio_max", "prefix_inverse_ratio_mean"):
            np.testing.assert_allclose(getattr(host_agent, name), getattr(torch_agent, name), rtol=1e-12)


def test_lookahead_eoful_replays_a_prefix_it_did_not_choose_to_its_block_end() -> None:
    """The host path's ``e(x, y)`` at a decision: the last block's end, or the table replayed, the oracle's bits."""
    env = gym.make("TokenizedLinearBandit-v0", max_length=6)
    problem = env.unwrapped.problem
    agent = agents.make("lookahead_eoful")
    run_online(env, agent, 5, seed=1)  # a learned confidence set
    alpha, rows = problem.host_carry_rows()
    observation, info = env.reset(seed=2)
    for _ in range(2):  # two tokens: the first block, played by the agent
        observation, *_, info = env.step(agent.act(observation, info))
    query, length = info["query_index"], int(observation["length"])
    block_end = agent._block_end[2]
    replayed = agent._prefix_embedding(observation, query, length, alpha, rows, problem.max_length + 1)
    oracle = problem.embed(torch.tensor([query]), torch.as_tensor(observation["response"][:length])[None])[0]
    np.testing.assert_array_equal(block_end, oracle.numpy())
    agent._block_end = None
    np.testing.assert_array_equal(agent._prefix_embedding(observation, query, length, alpha, rows, 7), block_end)
    assert replayed is block_end


def test_ucb_host_equals_ucb() -> None:
    generator = torch.Generator().manual_seed(0)
    confidence = LinearConfidence(8, 4)
    assert confidence.on_host
    for _ in range(5):
        confidence.update(torch.rand(8, generator=generator, dtype=torch.float64), 0.3)
    features = torch.rand(6, 8, generator=generator, dtype=torch.float64)
    np.testing.assert_allclose(confidence.ucb_host(features.numpy(), 0.7), confidence.ucb(features, 0.7), rtol=1e-12)
    mahalanobis, width = confidence.norms_host(features.numpy())
    np.testing.assert_allclose(mahalanobis, confidence.mahalanobis(features), rtol=1e-12)
    np.testing.assert_allclose(width, confidence.width(features), rtol=1e-12)


def test_a_python_float_reward_is_learned_in_float64() -> None:
    confidence = LinearConfidence(2, 2, refactor_every=1)  # the torch path (a refactorisation every round)
    reward = 0.1234567891234
    confidence.update(np.array([1.0, 0.0]), reward)
    assert confidence.response_sum[0].item() == reward


def test_host_update_checks_its_input() -> None:
    confidence = LinearConfidence(3, 2)
    with pytest.raises(ValueError, match="finite"):
        confidence.update(np.array([1.0, np.nan, 0.0]), 1.0)
    with pytest.raises(ValueError, match="rewards"):
        confidence.update(np.ones(3), [1.0, 2.0])
    with pytest.raises(ValueError, match="shape"):
        confidence.update(np.ones(4), 1.0)


def test_the_current_beta_is_the_checked_formula() -> None:
    confidence = LinearConfidence(16, 8, sigma=0.3, delta=0.01)
    for rounds in range(0, 200, 7):
        confidence.rounds = rounds
        assert confidence.beta() == linear_confidence.confidence_radius(rounds + 1, 16, 8, 0.3, 0.01)
        assert confidence.beta() == confidence.beta(rounds + 1)


def test_a_copy_learns_apart_from_its_original() -> None:
    # the host update writes into the tensors in place: a copy's NumPy views must be of its own tensors
    generator = torch.Generator().manual_seed(1)
    original = LinearConfidence(6, 4)
    original.update(torch.rand(6, generator=generator, dtype=torch.float64).numpy(), 0.5)
    snapshot = {name: getattr(original, name).clone() for name in ("design", "design_inverse", "theta_hat")}
    for copied in (copy.deepcopy(original), pickle.loads(pickle.dumps(original))):
        copied.update(torch.rand(6, generator=generator, dtype=torch.float64).numpy(), 0.9)
        for name, value in snapshot.items():
            assert torch.equal(getattr(original, name), value)
            assert not torch.equal(getattr(copied, name), value)
        np.testing.assert_allclose(copied.design_inverse.numpy(), np.linalg.inv(copied.design.numpy()), atol=1e-12)
