"""No degenerate policy beats the benchmark of a registered LLM id under its defaults, on any value map.

Each policy plays whole rounds of the native vector env (the defaults: L, k, queries, benchmark)
with the shipped model, and the test reports its mean regret and whether it beats the benchmark:

* always-EOS: EOS whenever it is an allowed candidate, otherwise a uniformly random allowed one
  (it stops as early as the env lets it);
* always-first-candidate: the most likely allowed token, i.e. Misaligned greedy (reported as it
  is: greedy on the LM alone may beat greedy on the true utility by a little);
* uniform random over the allowed candidates.

With free lengths (``fixed_length=False``, an explicit choice) always-EOS beats the alignment
benchmark; that configuration is checked too, as the case the env's defaults rule out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import tokenized_bandit_gym  # noqa: F401  (registers the ids)
from tokenized_bandit_gym.llm.value_map import VALUE_MAPS
from tokenized_bandit_gym.registration import LLM_ENVS

NUM_ENVS = 8
ROUNDS_PER_ENV = 2
Policy = Callable[[dict[str, np.ndarray], int, np.random.Generator], np.ndarray]


def always_eos(observations: dict[str, np.ndarray], eos: int, rng: np.random.Generator) -> np.ndarray:
    """The EOS candidate where it is allowed, else a uniformly random allowed candidate, ``(N,)``."""
    mask = observations["action_mask"].astype(bool)  # (N, k)
    eos_allowed = mask & (observations["candidate_tokens"] == eos)  # (N, k)
    scores = rng.random(mask.shape) + 2.0 * eos_allowed
    return np.where(mask, scores, -1.0).argmax(axis=1)


def first_candidate(observations: dict[str, np.ndarray], eos: int, rng: np.random.Generator) -> np.ndarray:
    """The first (most likely) allowed candidate, ``(N,)``: Misaligned greedy."""
    return observations["action_mask"].astype(bool).argmax(axis=1)


def uniform_random(observations: dict[str, np.ndarray], eos: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random allowed candidate, ``(N,)``."""
    mask = observations["action_mask"].astype(bool)
    return np.where(mask, rng.random(mask.shape), -1.0).argmax(axis=1)


POLICIES: dict[str, Policy] = {
    "always-EOS": always_eos,
    "always-first-candidate": first_candidate,
    "uniform random": uniform_random,
}


def mean_regret(envs: Any, policy: Policy) -> float:
    """Mean regret of ``policy`` over ``ROUNDS_PER_ENV`` rounds of each of the N sub-envs."""
    eos = envs.unwrapped.eos_token_id
    rng = np.random.default_rng(0)
    observations, _ = envs.reset(seed=list(range(NUM_ENVS)))
    regrets: list[np.ndarray] = []
    rounds = np.zeros(NUM_ENVS, dtype=np.int64)
    while rounds.min() < ROUNDS_PER_ENV:
        observations, _, terminated, _, infos = envs.step(policy(observations, eos, rng))
        counted = terminated & (rounds < ROUNDS_PER_ENV)
        if counted.any():
            regrets.append(infos["regret"][counted])
        rounds += terminated
    return float(np.concatenate(regrets).mean())


@pytest.fixture(scope="module")
def results(stories: tuple[Any, Any]) -> dict[tuple[str, str, bool], dict[str, float]]:
    """Mean regret of every policy, per (env id, value map, fixed length), with the shipped model."""
    model, tokenizer = stories
    table: dict[tuple[str, str, bool], dict[str, float]] = {}
    configurations = [(env_id, value_map, None) for env_id in LLM_ENVS for value_map in VALUE_MAPS]
    configurations.append(("TokenizedAlignment-v0", "logprob", False))  # free lengths: the explicit choice
    for env_id, value_map, fixed_length in configurations:
        kwargs: dict[str, Any] = {"model": model, "tokenizer": tokenizer, "value_map": value_map}
        if fixed_length is not None:
            kwargs["fixed_length"] = fixed_length
        envs = gym.make_vec(env_id, num_envs=NUM_ENVS, **kwargs)
        fixed = envs.unwrapped.problem.fixed_length
        table[(env_id, value_map, fixed)] = {name: mean_regret(envs, policy) for name, policy in POLICIES.items()}
        envs.close()
    for (env_id, value_map, fixed), regrets in table.items():
        shown = ", ".join(f"{name} {regret:+.4g}{' BEATS' if regret < 0 else ''}" for name, regret in regrets.items())
        print(f"{env_id} value_map={value_map} fixed_length={fixed}: mean regret {shown}")
    return table


@pytest.mark.slow
@pytest.mark.parametrize("env_id", list(LLM_ENVS))
@pytest.mark.parametrize("value_map", VALUE_MAPS)
def test_degenerate_policies_do_not_beat_the_default_benchmark(
    results: dict[tuple[str, str, bool], dict[str, float]], env_id: str, value_map: str
) -> None:
    regrets = results[(env_id, value_map, True)]  # the ids' default is fixed length
    for name in ("always-EOS", "uniform random"):
        assert regrets[name] > 0.0, f"{name} beats the {env_id} benchmark with value_map={value_map}: {regrets}"
    assert np.isfinite(regrets["always-first-candidate"])  # Misaligned greedy: reported, not bounded


@pytest.mark.slow
def test_free_lengths_let_the_empty_answer_win(results: dict[tuple[str, str, bool], dict[str, float]]) -> None:
    # The case the default rules out: v = log p of the whole response favours stopping at once.
    assert results[("TokenizedAlignment-v0", "logprob", False)]["always-EOS"] < 0.0
