"""EOFUL against a plainly written OFUL/LinUCB, its batched API, diagnostics and argument checks."""

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.agents.eoful import EOFUL
from tokenized_bandit_gym.task import Task


class PlainLinUCB:
    """OFUL/LinUCB written out plainly: explicit inverse every round, the paper's beta_t."""

    def __init__(self, dim, max_length, lambda_, sigma, delta):
        self.a = lambda_ * np.eye(dim)
        self.b = np.zeros(dim)
        self.t = 1
        self.dim, self.max_length, self.sigma, self.delta = dim, max_length, sigma, delta

    def choose(self, features, allowed):
        if self.t == 1:  # C_1 = {0}: every score is 0
            scores = np.zeros(len(features))
        else:
            inverse = np.linalg.inv(self.a)
            theta = inverse @ self.b
            d, big_l = self.dim, self.max_length
            beta = self.sigma**2 * (2 + 4 * d * math.log(1 + self.t * big_l / d) + 8 * math.log(4 / self.delta))
            widths = np.sqrt(np.einsum("ki,ij,kj->k", features, inverse, features))
            scores = features @ theta + math.sqrt(beta) * widths
        scores = np.where(allowed, scores, -np.inf)
        return int(np.argmax(scores))

    def learn(self, feature, reward):
        self.a += np.outer(feature, feature)
        self.b += reward * feature
        self.t += 1


def small_task(**kwargs):
    env = gym.make("TokenizedLinearBandit-v0", **kwargs)
    return env, Task.from_env(env, horizon=100)


def test_eoful_with_one_choice_per_round_is_plain_linucb():
    # One token, then EOS: the response's embedding is the chosen candidate's.
    rng = np.random.default_rng(0)
    dim, k, rounds = 5, 7, 300
    _, task = small_task(embedding_dim=dim, max_length=2)
    theta = rng.standard_normal(dim)
    theta /= np.linalg.norm(theta)
    eoful = EOFUL(beta="theory", lambda_=1.0, delta=0.05, sigma=0.1)
    eoful.reset(task, seed=0)
    plain = PlainLinUCB(dim, task.max_length, 1.0, 0.1, 0.05)
    for _ in range(rounds):
        features = rng.standard_normal((k, dim)) / math.sqrt(dim)
        allowed = rng.random(k) < 0.7
        allowed[rng.integers(k)] = True
        observation = {"candidate_embeddings": features, "action_mask": allowed.astype(np.int8)}
        choice = eoful.act(observation, {})
        assert choice == plain.choose(features, allowed)
        reward = features[choice] @ theta + 0.1 * rng.standard_normal()
        eoful.update(observation, reward, {"response_embedding": features[choice]})
        plain.learn(features[choice], reward)
    assert np.allclose(eoful.confidence.theta_hat.numpy(), np.linalg.solve(plain.a, plain.b), atol=1e-10)


def test_eoful_on_length_two_env_matches_plain_oful_replaying_the_same_stream():
    # max_length = 2 and fixed_length: one real choice e(x, tau), then the forced EOS; the plain
    # OFUL scores e(x, tau) from the embedding oracle and learns from e(x, tau:EOS), as Algorithm 1 does.
    env, task = small_task(vocab_size=12, embedding_dim=6, max_length=2, fixed_length=True, num_queries=8)
    problem = env.unwrapped.problem
    eoful = EOFUL()
    eoful.reset(task, seed=0)
    played = []
    for round_index in range(150):
        observation, info = env.reset(seed=5 if round_index == 0 else None)
        terminated = False
        while not terminated:
            observation, reward, terminated, _, info = env.step(eoful.act(observation, info))
        eoful.update(observation, reward, info)
        played.append((info["query_index"], int(info["response"][0]), info["noise"]))
    plain = PlainLinUCB(6, 2, 1.0, 0.1, 0.05)
    eos = problem.eos_token_id
    tokens = torch.arange(problem.vocab_size)
    allowed = (tokens != eos).numpy()
    for query, eoful_token, noise in played:
        queries = torch.full((problem.vocab_size,), query)
        # float32 like the observation, so both see the same numbers
        first = problem.embed(queries, tokens[:, None]).float().double().numpy()
        token = plain.choose(first, allowed)
        assert token == eoful_token
        response = torch.tensor([[token, eos]])
        feature = problem.embed(torch.tensor([query]), response)[0]
        reward = float(feature @ problem.theta) + noise
        plain.learn(feature.float().double().numpy(), reward)


def test_select_on_a_batch_equals_act_row_by_row_and_learn_equals_sequential_updates():
    rng = np.random.default_rng(1)
    _, task = small_task(embedding_dim=4, max_length=3)
    batched, single = EOFUL(beta=0.5), EOFUL(beta=0.5)
    batched.reset(task)
    single.reset(task)
    for _ in range(10):
        features = rng.standard_normal((6, 5, 4)) / 2
        masks = rng.random((6, 5)) < 0.8
        masks[:, 0] = True
        choices = batched.select(features, masks)
        for row in range(6):  # every row decoded with the same confidence set
            observation = {"candidate_embeddings": features[row], "action_mask": masks[row]}
            assert int(choices[row]) == copy.deepcopy(single).act(observation, {})
        for row in range(6):
            single.update({}, float(row), {"response_embedding": features[row, choices[row]]})
        batched.learn(features[np.arange(6), choices.numpy()], np.arange(6.0))
    assert torch.allclose(batched.confidence.theta_hat, single.confidence.theta_hat, atol=1e-10)


def test_eoful_plays_candidate_indices_when_candidates_are_not_the_vocabulary():
    # k = 3 candidates out of a larger vocabulary: the action is an index into them.
    _, task = small_task(embedding_dim=4, max_length=3)
    eoful = EOFUL(beta=0.0)
    eoful.reset(task)
    eoful.confidence.update(np.array([1.0, 0.0, 0.0, 0.0]), 1.0)
    features = np.array([[0.1, 0.0, 0.0, 0.0], [0.9, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]])
    observation = {
        "candidate_tokens": np.array([40, 7, 1000]),
        "candidate_embeddings": features,
        "action_mask": np.array([1, 1, 1], dtype=np.int8),
    }
    assert eoful.act(observation, {}) == 1
    observation["action_mask"] = np.array([1, 0, 1], dtype=np.int8)
    assert eoful.act(observation, {}) == 2


def test_assumption_four_ratios_are_recorded_under_the_rounds_sigma():
    env, task = small_task(vocab_size=5, embedding_dim=4, max_length=4)
    eoful = EOFUL(record_ratios=True)
    eoful.reset(task)
    problem = env.unwrapped.problem
    for round_index in range(30):
        design = eoful.confidence.design.clone()
        observation, info = env.reset(seed=0 if round_index == 0 else None)
        terminated = False
        while not terminated:
            observation, reward, terminated, _, info = env.step(eoful.act(observation, info))
        response = info["response"][: info["response_length"]]
        prefixes = problem.embed(
            torch.full((len(response),), info["query_index"]),
            torch.as_tensor(response)[None].expand(len(response), -1),
            torch.arange(1, len(response) + 1),
        )
        norms = torch.sqrt(torch.einsum("li,ij,lj->l", prefixes, design, prefixes))
        ratios = norms / norms[-1]
        inverse = torch.linalg.inv(design)  # the proof's w_t uses Sigma_t^-1, inverted independently here
        widths = torch.sqrt(torch.einsum("li,ij,lj->l", prefixes, inverse, prefixes))
        inverse_ratios = widths / widths[-1]
        eoful.update(observation, reward, info)
        assert eoful.prefix_ratio_max[-1] == pytest.approx(float(ratios.max()), rel=1e-5)
        assert eoful.prefix_ratio_mean[-1] == pytest.approx(float(ratios.mean()), rel=1e-5)
        assert eoful.prefix_inverse_ratio_max[-1] == pytest.approx(float(inverse_ratios.max()), rel=1e-5)
        assert eoful.prefix_inverse_ratio_mean[-1] == pytest.approx(float(inverse_ratios.mean()), rel=1e-5)
    assert len(eoful.prefix_ratio_max) == len(eoful.prefix_inverse_ratio_mean) == 30


def test_eoful_is_deterministic():
    def play():
        env = gym.make("TokenizedLinearBandit-v0", vocab_size=6, embedding_dim=4, max_length=4)
        from tokenized_bandit_gym.evaluation.run_online import run_online

        return run_online(env, agents.make("eoful"), 40, seed=3).regret

    np.testing.assert_array_equal(play(), play())


@pytest.mark.parametrize("kwargs", [{"beta": "optimistic"}, {"beta": -1.0}, {"lambda_": -1.0}, {"refactor_every": 0}])
def test_invalid_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        EOFUL(**kwargs)


def test_eoful_refuses_tasks_without_embeddings_and_use_before_reset():
    env = gym.make("TokenizedMultiArmedBandit-v0")
    with pytest.raises(ValueError, match="embeddings"):
        EOFUL().reset(Task.from_env(env, horizon=5))
    with pytest.raises(ValueError, match="reset"):
        EOFUL().act({"candidate_embeddings": np.zeros((2, 2)), "action_mask": np.ones(2)}, {})


@pytest.mark.parametrize(
    "name", ["eoful", "lookahead_eoful", "tokenized_lin_ts", "fixed_theta_greedy", "oracle_optimal"]
)
def test_agents_are_registered(name):
    agent = agents.make(name)
    assert agent.name == name
    assert isinstance(agent, agents.Agent)


def test_assumption_four_ratios_are_opt_in_and_grow_past_the_horizon():
    def play(record_ratios: bool, horizon: int) -> EOFUL:
        env = gym.make("TokenizedLinearBandit-v0", vocab_size=5, embedding_dim=4, max_length=4)
        eoful = EOFUL(record_ratios=record_ratios)
        eoful.reset(Task.from_env(env, horizon=horizon))
        for round_index in range(25):
            observation, info = env.reset(seed=3 if round_index == 0 else None)
            terminated = False
            while not terminated:
                observation, reward, terminated, _, info = env.step(eoful.act(observation, info))
            eoful.update(observation, reward, info)
        return eoful

    silent = play(False, 25)
    assert all(len(getattr(silent, name)) == 0 for name in RATIO_NAMES)
    within, beyond = play(True, 25), play(True, 2)  # the same 25 rounds in a preallocated or a grown buffer
    for name in RATIO_NAMES:
        assert len(getattr(within, name)) == 25
        np.testing.assert_array_equal(getattr(within, name), getattr(beyond, name))
    np.testing.assert_array_equal(silent.confidence.theta_hat.numpy(), within.confidence.theta_hat.numpy())
    with pytest.raises(TypeError, match="record_ratios"):
        EOFUL(record_ratios="yes")


RATIO_NAMES = ("prefix_ratio_max", "prefix_ratio_mean", "prefix_inverse_ratio_max", "prefix_inverse_ratio_mean")
