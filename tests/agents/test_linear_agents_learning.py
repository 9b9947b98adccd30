"""Identity-style learning tests (cf. SB3's test_identity.py) for the linear agents, and the oracles."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.agents.lookahead_eoful import LookaheadEOFUL, lookahead_blocks
from tokenized_bandit_gym.core.enumeration import complete_responses
from tokenized_bandit_gym.evaluation.run_online import run_online
from tokenized_bandit_gym.registration import SYNTHETIC_ENVS, registered_ids
from tokenized_bandit_gym.task import Task

# A tiny TLB whose greedy optimum is exact (fixed_length on the discounted family, Theorem 5.1).
TINY = {
    "vocab_size": 4,
    "embedding_dim": 4,
    "max_length": 3,
    "fixed_length": True,
    "num_queries": 8,
    "instance_seed": 1,
}
ROUNDS = 250
TAIL = ROUNDS // 5  # the last 20% of rounds
# Mean regret per round over the tail; RandomAgent's is about 0.2 here and the optimum's utility about 0.6.
THRESHOLD = 0.03


def tail_regret(agent):
    env = gym.make("TokenizedLinearBandit-v0", **TINY)
    return run_online(env, agent, ROUNDS, seed=1).regret[-TAIL:].mean()


@pytest.fixture(scope="module")
def random_tail_regret():
    return tail_regret(agents.make("random"))


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [("eoful", {}), ("eoful", {"beta": 0.3}), ("lookahead_eoful", {"k": 2}), ("tokenized_lin_ts", {})],
)
def test_linear_agent_learns_the_tiny_instance(name, kwargs, random_tail_regret):
    regret = tail_regret(agents.make(name, **kwargs))
    assert regret < THRESHOLD, f"{name} {kwargs}: tail regret {regret:.4f} >= {THRESHOLD}"
    assert regret < 0.25 * random_tail_regret, f"{name}: {regret:.4f} vs random {random_tail_regret:.4f}"


@pytest.mark.parametrize("env_id", [env_id for env_id in registered_ids() if env_id in SYNTHETIC_ENVS])
def test_oracle_optimal_has_exactly_zero_regret_on_every_synthetic_env(env_id):
    # The response is the exact optimum token for token, and the env replays the optimum to price it,
    # so the regret is exactly 0.
    env = gym.make(env_id)
    agent = agents.make("oracle_optimal")
    agent.reset(Task.from_env(env, 25))
    for round_index in range(25):
        observation, info = env.reset(seed=0 if round_index == 0 else None)
        terminated = False
        while not terminated:
            observation, reward, terminated, _, info = env.step(agent.act(observation, info))
        np.testing.assert_array_equal(info["response"], info["optimal_response"])  # both padded with EOS to L
        assert info["regret"] == 0.0


def test_fixed_theta_greedy_follows_the_fixed_parameter_and_never_learns():
    agent = agents.make("fixed_theta_greedy", theta=-0.5)
    result = run_online(gym.make("TokenizedLinearBandit-v0", **TINY), agent, 40, seed=0)
    assert torch.equal(agent.theta, torch.full((4,), -0.5, dtype=torch.float64))
    # Greedy on <theta', e> is what OracleGreedy does on an instance whose theta is theta' (a fresh
    # instance, so no benchmark was cached with the old theta).
    env = gym.make("TokenizedLinearBandit-v0", **TINY)
    problem = env.unwrapped.problem
    problem.theta = -problem.theta
    mirrored = agents.make("fixed_theta_greedy", theta=problem.theta.numpy())
    oracle = agents.make("oracle_greedy")
    env.reset(seed=0)
    task = Task.from_env(env, 10)
    mirrored.reset(task)
    oracle.reset(task)
    for round_index in range(10):
        observation, info = env.reset(seed=1 if round_index == 0 else None)
        terminated = False
        while not terminated:
            action = mirrored.act(observation, info)
            assert action == oracle.act(observation, info)
            observation, _, terminated, _, info = env.step(action)
    assert result.regret.shape == (40,)


def test_fixed_theta_greedy_rejects_a_vector_of_the_wrong_dimension():
    env = gym.make("TokenizedLinearBandit-v0", **TINY)
    with pytest.raises(ValueError, match="entries"):
        agents.make("fixed_theta_greedy", theta=[1.0, 2.0]).reset(Task.from_env(env, 5))


@pytest.mark.parametrize("fixed_length", [False, True])
@pytest.mark.parametrize("length", [0, 1, 2, 3])
def test_lookahead_blocks_are_the_allowed_continuations(fixed_length, length):
    # Brute force: the distinct (length + k)-token prefixes of complete responses extending a prefix.
    vocab, eos, big_l, k = 4, 3, 4, 2
    blocks = lookahead_blocks(vocab, eos, big_l, fixed_length, length, k)
    complete = complete_responses(vocab, big_l, eos, fixed_length).tolist()
    expected = set()
    for response in complete:
        stop = response.index(eos) + 1
        if stop <= length:
            continue
        block = tuple(response[length : min(length + k, stop)])
        if all(token != eos for token in response[:length]):
            expected.add(block)
    assert len(blocks) == len(set(blocks))
    assert set(blocks) == expected


def test_lookahead_eoful_with_k_equal_to_the_length_is_optimistic_enumeration():
    # With k = L the first block is the whole response: it maximises the UCB over every response.
    env = gym.make("TokenizedLinearBandit-v0", vocab_size=4, embedding_dim=3, max_length=3, num_queries=4)
    problem = env.unwrapped.problem
    agent = LookaheadEOFUL(k=3, beta=0.5)
    agent.reset(Task.from_env(env, 30))
    complete = complete_responses(4, 3, problem.eos_token_id, False)
    for round_index in range(30):
        observation, info = env.reset(seed=0 if round_index == 0 else None)
        queries = torch.full((complete.shape[0],), info["query_index"])
        scores = agent.confidence.ucb(problem.embed(queries, complete), agent.beta_scale)
        terminated = False
        while not terminated:
            observation, reward, terminated, _, info = env.step(agent.act(observation, info))
        played = torch.as_tensor(info["response"][: info["response_length"]])[None]
        played_score = agent.confidence.ucb(
            problem.embed(torch.tensor([info["query_index"]]), played), agent.beta_scale
        )[0]
        assert float(played_score) >= float(scores.max()) - 1e-12  # ties (round 1: C_1 = {0}) allowed
        agent.update(observation, reward, info)
