"""The single env's memoised round starts, mask table and pool benchmarks change no trajectory.

A reference shell below steps the same instance through the general batched core only (mask,
candidate carries and embeddings, ``advance``, ``utility_of``, ``optimal`` and ``oracle_greedy``
recomputed at every step and round, nothing memoised); the env must return the same
observations, rewards and infos, bit for bit, for the same seed and actions.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym
from tokenized_bandit_gym.core import LinearTokenizedProblem, RoundStreams, TokenizedProblem
from tokenized_bandit_gym.core.query_start_memo import QueryStartMemo, TablePrefix, TablePrefixMemo
from tokenized_bandit_gym.envs import TokenizedBanditEnv
from tokenized_bandit_gym.registration import SYNTHETIC_ENVS

assert tokenized_bandit_gym  # registers the ids


class ReferenceShell:
    """The single env's semantics written with the general core calls (no memo, no tables)."""

    def __init__(self, env: TokenizedBanditEnv) -> None:
        self.problem: TokenizedProblem = env.problem
        self.noise_model = env.noise_model
        self.streams: RoundStreams | None = None

    def reset(self, seed: int | None) -> tuple[dict[str, Any], dict[str, Any]]:
        if seed is not None:
            self.streams = RoundStreams.from_seed(seed)
        assert self.streams is not None
        self.query, self.noise = self.streams.draw(self.problem.num_queries, self.noise_model)
        self.state = self.problem.initial_state(torch.tensor([self.query]))
        return self.observe(), {"query_index": int(self.query), "forced_eos": False, **self.pending()}

    def pending(self) -> dict[str, Any]:
        """The documented fill values of the round's info before it ends."""
        problem = self.problem
        length = problem.max_length
        pending: dict[str, Any] = dict.fromkeys(("utility", "optimal_utility", "regret", "oracle_greedy_utility"), 0.0)
        pending.update(noise=0.0, response=np.full(length, -1), response_length=0, optimal_response=np.full(length, -1))
        if isinstance(problem, LinearTokenizedProblem):
            pending["response_embedding"] = np.zeros(problem.embedding_dim, dtype=np.float32)
        pending["round_ended"] = False
        return pending

    def candidate_carries(self) -> torch.Tensor:
        state = self.state
        tokens = self.problem.vocabulary.expand(1, -1)
        return self.problem.append(state.queries, state.carry, state.last_tokens, tokens, state.lengths + 1)

    def observe(self) -> dict[str, Any]:
        problem, state = self.problem, self.state
        self.mask = problem.action_mask(state)[0].numpy()
        observation = {
            "query": problem.query_tokens.numpy()[self.query].copy(),
            "query_length": problem.query_lengths.numpy()[self.query].copy(),
            "response": state.tokens[0].numpy().copy(),
            "length": np.int64(state.lengths[0]),
            "candidate_tokens": np.arange(problem.vocab_size),
            "action_mask": self.mask.astype(np.int8),
        }
        if isinstance(problem, LinearTokenizedProblem):
            embeddings = np.zeros((problem.vocab_size, problem.embedding_dim), dtype=np.float32)
            if not bool(state.finished[0]):
                general = LinearTokenizedProblem.candidate_embeddings(problem, state, self.candidate_carries())
                embeddings = general[0].to(torch.float32).numpy()
            observation["candidate_embeddings"] = embeddings
        return observation

    def step(self, action: int) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        problem = self.problem
        forced_eos = not self.mask[action]
        token = problem.eos_token_id if forced_eos else action
        carries = self.candidate_carries()
        self.state = problem.advance(self.state, torch.tensor([token]), candidate_carries=carries)
        terminated = bool(self.state.finished[0])
        info: dict[str, Any] = {"query_index": int(self.query), "forced_eos": forced_eos, **self.pending()}
        reward = 0.0
        if terminated:
            queries = self.state.queries
            utility = float(problem.utility_of(self.state)[0])
            optimum = problem.optimal(queries)
            length = int(self.state.lengths[0])
            info.update(
                utility=utility,
                optimal_utility=float(optimum.utility[0]),
                regret=float(optimum.utility[0]) - utility,
                oracle_greedy_utility=float(problem.oracle_greedy(queries).utility[0]),
                noise=self.noise,
                response=self.state.tokens[0].numpy().copy(),
                response_length=length,
                optimal_response=optimum.responses[0].numpy().copy(),
                round_ended=True,
            )
            if isinstance(problem, LinearTokenizedProblem):
                info["response_embedding"] = problem.embedding_of(self.state)[0].to(torch.float32).numpy().copy()
            reward = utility + self.noise
        return self.observe(), reward, terminated, info


def assert_same(actual: dict[str, Any], expected: dict[str, Any], what: str) -> None:
    assert set(actual) == set(expected), what
    for key, value in expected.items():
        assert type(actual[key]) is type(value), f"{what} {key!r}"
        np.testing.assert_array_equal(actual[key], value, err_msg=f"{what} {key!r}")
        if isinstance(value, np.ndarray):
            assert actual[key].dtype == value.dtype, f"{what} {key!r}"


VARIANTS = [(env_id, {}) for env_id in SYNTHETIC_ENVS] + [
    ("TokenizedLinearBandit-v0", {"fixed_length": True, "dtype": "float32"}),
    ("TokenizedLinearBanditMarkov-v0", {"fixed_length": True, "num_queries": 3}),
    ("TokenizedMultiArmedBandit-v0", {"family": "meanpool", "fixed_length": True}),
]


@pytest.mark.parametrize(("env_id", "kwargs"), VARIANTS)
@pytest.mark.parametrize("seed", [0, 7])
def test_same_seed_same_trajectory_as_the_unmemoised_reference(env_id: str, kwargs: dict, seed: int) -> None:
    env = gym.make(env_id, **kwargs)
    reference = ReferenceShell(env.unwrapped)
    rng = np.random.default_rng(seed)
    for episode in range(25):
        episode_seed = seed if episode == 0 else None
        observation, info = env.reset(seed=episode_seed)
        expected_observation, expected_info = reference.reset(episode_seed)
        assert_same(observation, expected_observation, f"reset {episode}")
        assert_same(info, expected_info, f"reset info {episode}")
        terminated = False
        while not terminated:
            allowed = np.flatnonzero(observation["action_mask"])
            action = int(rng.choice(allowed))
            if allowed.size == 1 and rng.random() < 0.5:
                action = int(rng.integers(env.action_space.n))  # any token at position L: the forced EOS
            observation["response"][:] = -1  # the caller owns what it was given
            if "candidate_embeddings" in observation:
                observation["candidate_embeddings"][:] = np.nan
            observation, reward, terminated, truncated, info = env.step(action)
            expected_observation, expected_reward, expected_terminated, expected_info = reference.step(action)
            assert_same(observation, expected_observation, f"episode {episode}")
            assert (reward, terminated, truncated) == (expected_reward, expected_terminated, False)
            assert_same(info, expected_info, f"episode {episode} info")
            if terminated:
                info["optimal_response"][:] = -1
                info["response"][:] = -1


@pytest.mark.parametrize("env_id", list(SYNTHETIC_ENVS))
def test_memoised_round_starts_stay_equal_to_a_fresh_start(env_id: str) -> None:
    env = gym.make(env_id).unwrapped
    env.reset(seed=3)
    rng = np.random.default_rng(3)
    for _ in range(40):
        observation, _ = env.reset()
        terminated = False
        while not terminated:
            action = int(rng.choice(np.flatnonzero(observation["action_mask"])))
            observation, _, terminated, _, _ = env.step(action)
    memo = env.rounds.memo
    assert len(memo) > 0
    core = QueryStartMemo(env.problem, memo.with_candidates)  # the core's states, computed afresh
    for query in list(memo._starts):
        memoised, fresh = memo.get(query), core.compute(query)
        if isinstance(memoised, TablePrefix):  # the carry table's memo keeps the carry and the float32 candidates
            np.testing.assert_array_equal(memoised.carry, fresh.state.carry[0].numpy())
            observed = memo.observed_embeddings(query, memoised)  # computed, or kept after two observations
            if fresh.host_embeddings is None:
                assert observed is None
            else:
                np.testing.assert_array_equal(observed, fresh.host_embeddings)
            continue
        for field in ("queries", "tokens", "lengths", "finished", "carry", "last_tokens"):
            assert torch.equal(getattr(memoised.state, field), getattr(fresh.state, field)), field
        for name in ("candidate_carries", "candidate_embeddings"):
            if getattr(fresh, name) is None:
                assert getattr(memoised, name) is None
            else:
                assert torch.equal(getattr(memoised, name), getattr(fresh, name)), name


def test_numpy_rounds_float64_to_float32_as_torch_does() -> None:
    """The env casts candidate embeddings in NumPy; the vector env and the memo cast in torch."""
    rng = np.random.default_rng(0)
    values = rng.standard_normal(20000) * np.exp2(rng.integers(-160, 140, 20000))  # normal, subnormal, overflow
    halfway = (rng.standard_normal(5000).astype(np.float32).astype(np.float64)) * (1 + 2.0**-24)
    values = np.concatenate([values, halfway, [0.0, -0.0, np.inf, -np.inf, 1e-46, -1e-46]])
    expected = torch.from_numpy(values).to(torch.float32).numpy()
    with np.errstate(over="ignore"):
        actual = values.astype(np.float32)
    np.testing.assert_array_equal(actual.view(np.int32), expected.view(np.int32))


@pytest.mark.parametrize("env_id", list(SYNTHETIC_ENVS))
def test_replayed_prefixes_give_the_unmemoised_trajectory(env_id: str) -> None:
    """Two action plans replayed over 60 rounds: most steps read the prefix memo, nothing changes."""
    env = gym.make(env_id)
    reference = ReferenceShell(env.unwrapped)
    replayed = 0
    for episode in range(60):
        episode_seed = 11 if episode == 0 else None
        observation, _ = env.reset(seed=episode_seed)
        reference.reset(episode_seed)
        plan = np.random.default_rng(episode % 2)  # the same two action plans again and again
        node = env.unwrapped.rounds.node
        terminated = False
        while not terminated:
            action = int(plan.choice(np.flatnonzero(observation["action_mask"])))
            replayed += action in node.children
            observation, reward, terminated, _, info = env.step(action)
            node = env.unwrapped.rounds.node
            expected_observation, expected_reward, _, expected_info = reference.step(action)
            assert_same(observation, expected_observation, f"episode {episode}")
            assert reward == expected_reward
            assert_same(info, expected_info, f"episode {episode} info")
    assert replayed > 0
    assert env.unwrapped.rounds.memo.nodes > len(env.unwrapped.rounds.memo)


@pytest.mark.parametrize("copier", ["pickle", "deepcopy"])
@pytest.mark.parametrize("env_id", ["TokenizedMultiArmedBandit-v0", "TokenizedLinearBandit-v0"])
def test_a_copied_env_ends_its_rounds_with_its_own_utilities(env_id: str, copier: str) -> None:
    """Copied after rounds ended (the carry table's memo then holds its round-end state), both envs go on alike."""
    env = gym.make(env_id)
    env.reset(seed=4)
    rng = np.random.default_rng(4)

    def play_round(target: gym.Env, actions: list[int] | None = None) -> tuple[list[int], list[float]]:
        observation, _ = target.reset()
        played, rewards, terminated = [], [], False
        while not terminated:
            allowed = np.flatnonzero(observation["action_mask"])
            action = int(rng.choice(allowed)) if actions is None else actions[len(played)]
            observation, reward, terminated, _, info = target.step(action)
            played.append(action)
            rewards.append((reward, info["utility"], info["regret"]))
        return played, rewards

    for _ in range(3):
        play_round(env)
    copied = pickle.loads(pickle.dumps(env)) if copier == "pickle" else copy.deepcopy(env)
    assert copied.unwrapped.rounds.memo is not env.unwrapped.rounds.memo
    for _ in range(12):  # new responses and replayed ones: each env's round ends write its own memo's state
        played, rewards = play_round(env)
        assert play_round(copied, played) == (played, rewards)


@pytest.mark.parametrize(
    "env_id", ["TokenizedMultiArmedBandit-v0", "TokenizedLinearBandit-v0", "TokenizedLinearBanditMarkov-v0"]
)
def test_prefix_memo_stops_growing_at_its_capacity(env_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The carry table's memo (TMAB, TLB) and the core's (Markov) compute what they cannot keep, the same values."""
    from tokenized_bandit_gym.core import query_start_memo

    env = gym.make(env_id)
    monkeypatch.setattr(query_start_memo, "MEMO_BYTE_CAP", 1)
    full = gym.make(env_id)  # a memo of one node: every step computed afresh
    assert full.unwrapped.rounds.memo.capacity == 1
    for env_under_test in (env, full):
        env_under_test.reset(seed=2)
    rng = np.random.default_rng(2)
    for _ in range(30):
        observation, _ = env.reset()
        other, _ = full.reset()
        terminated = False
        while not terminated:
            action = int(rng.choice(np.flatnonzero(observation["action_mask"])))
            observation, reward, terminated, _, info = env.step(action)
            other, other_reward, _, _, other_info = full.step(action)
            assert_same(other, observation, "capped memo")
            assert (other_reward, other_info.get("regret")) == (reward, info.get("regret"))
        assert full.unwrapped.rounds.memo.nodes <= 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_single_env_on_cuda_plays_as_on_cpu() -> None:
    """The B = 1 round batch takes an instance on any device (only the N-row host batch needs the CPU)."""
    cpu, cuda = gym.make("TokenizedLinearBandit-v0"), gym.make("TokenizedLinearBandit-v0", device="cuda")
    cpu_observation, _ = cpu.reset(seed=0)
    cuda_observation, _ = cuda.reset(seed=0)
    for _ in range(40):
        np.testing.assert_allclose(cuda_observation["candidate_embeddings"], cpu_observation["candidate_embeddings"])
        action = int(np.flatnonzero(cpu_observation["action_mask"])[-1])
        cpu_observation, cpu_reward, cpu_done, _, cpu_info = cpu.step(action)
        cuda_observation, cuda_reward, cuda_done, _, cuda_info = cuda.step(action)
        assert cuda_done == cpu_done and cuda_reward == pytest.approx(cpu_reward)
        if cpu_done:
            assert cuda_info["regret"] == pytest.approx(cpu_info["regret"])
            cpu_observation, _ = cpu.reset()
            cuda_observation, _ = cuda.reset()


def test_a_prefix_observed_again_gives_its_candidates_in_new_arrays() -> None:
    env = gym.make("TokenizedLinearBandit-v0").unwrapped
    memo = env.rounds.memo
    assert isinstance(memo, TablePrefixMemo)
    core = QueryStartMemo(env.problem, True)  # the core's candidates, computed afresh
    start, core_start = memo.get(2), core.compute(2)
    child, core_child = memo.child(2, start, 3), core.child(2, core_start, 3, env.problem.vocabulary[3:4])
    for node, fresh in ((start, core_start), (child, core_child)):
        first = memo.observed_embeddings(2, node)
        np.testing.assert_array_equal(first, fresh.host_embeddings)
        first[:] = 7.0  # the caller's own array: later observations never see it
        second, third = memo.observed_embeddings(2, node), memo.observed_embeddings(2, node)
        for observed in (second, third):
            np.testing.assert_array_equal(observed, fresh.host_embeddings)
            assert observed.flags.writeable and not np.shares_memory(observed, node.host_embeddings)
        assert not np.shares_memory(second, third)
