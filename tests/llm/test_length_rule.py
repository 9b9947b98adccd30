"""``fixed_length`` and ``min_length`` on the LLM core and envs: every forward, batching and benchmark obeys them."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the ids)
from tests.llm.test_language_model_problem import QUERIES, reference
from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem

LENGTH = 5


def reference_candidates(
    problem: LanguageModelProblem, query: int, response: list[int], eos_allowed: bool
) -> list[int]:
    """The top-k next tokens of ``x:y`` from a no-cache forward, EOS left out where it may not come next."""
    query_ids = problem.query_tokens[query, : int(problem.query_lengths[query])]
    ids = torch.cat([query_ids, torch.tensor(response, dtype=torch.int64)])[None]  # (1, T)
    with torch.no_grad():
        logprobs = problem.model(input_ids=ids).logits[0, -1].float().log_softmax(dim=-1)  # (n,)
    if not eos_allowed:
        logprobs[problem.eos_token_id] = float("-inf")
    tokens = logprobs.topk(problem.top_k).indices.tolist()
    if eos_allowed and problem.eos_token_id not in tokens:
        tokens[-1] = problem.eos_token_id
    return tokens


@pytest.mark.parametrize("batching", ["mask", "expand"])
@pytest.mark.parametrize("implementation", ["native", "transformers"])
@pytest.mark.parametrize("rule", [{"fixed_length": True}, {"fixed_length": False, "min_length": 3}])
def test_candidates_mask_and_lengths_follow_the_rule(
    tiny_llama: tuple[Any, Any], batching: str, implementation: str, rule: dict[str, Any]
) -> None:
    model, tokenizer = tiny_llama
    problem = LanguageModelProblem(
        model,
        tokenizer,
        QUERIES,
        max_length=LENGTH,
        top_k=4,
        candidate_batching=batching,
        forward_implementation=implementation,
        embedding_norm="l2",
        **rule,
    )
    first_eos = LENGTH if rule.get("fixed_length") else rule["min_length"]
    assert problem.first_eos_position == first_eos
    generator = torch.Generator().manual_seed(0)
    state = problem.initial_state(torch.arange(len(QUERIES)))
    eos_rows = torch.zeros(len(QUERIES), dtype=torch.bool)
    while not bool(state.finished.all()):
        mask = problem.action_mask(state)  # (B, k)
        is_eos = state.candidate_tokens == problem.eos_token_id
        for row in range(len(QUERIES)):
            if bool(state.finished[row]):
                continue
            length = int(state.lengths[row])
            eos_allowed = length >= first_eos - 1
            response = state.tokens[row, :length].tolist()
            assert state.candidate_tokens[row].tolist() == reference_candidates(problem, row, response, eos_allowed)
            assert bool(mask[row][is_eos[row]].any()) == eos_allowed
        pooled, logprobs = reference(problem, state)
        live = ~state.finished
        torch.testing.assert_close(problem.candidate_pooled(state)[live], pooled[live], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(
            problem.candidate_sequence_logprobs(state)[live], logprobs[live], atol=1e-4, rtol=1e-4
        )
        # stop as early as allowed where EOS is a candidate, otherwise a random allowed candidate
        scores = torch.rand(mask.shape, generator=generator) + 2.0 * (is_eos & mask)
        actions = scores.masked_fill(~mask, -1.0).argmax(dim=1)
        eos_rows |= is_eos.gather(1, actions[:, None])[:, 0] & ~state.finished
        state = problem.advance(state, actions)
    assert bool(eos_rows.all())
    assert state.lengths.tolist() == [first_eos] * len(QUERIES)  # every row stopped at the first allowed position


@pytest.mark.parametrize("rule", [{"fixed_length": True}, {"fixed_length": False, "min_length": 4}])
def test_benchmarks_obey_the_rule(stories: tuple[Any, Any], rule: dict[str, Any]) -> None:
    problem = LanguageModelProblem(*stories, QUERIES, max_length=LENGTH, top_k=3, embedding_norm="l2", **rule)
    free = LanguageModelProblem(*stories, QUERIES, max_length=LENGTH, top_k=3, fixed_length=False, embedding_norm="l2")
    first_eos = problem.first_eos_position
    queries = torch.arange(len(QUERIES))
    greedy = problem.oracle_greedy(queries)
    beam = problem.oracle_beam(queries, 3)
    for decoded in (greedy, beam):
        eos_positions = (decoded.responses == problem.eos_token_id).int().argmax(dim=1) + 1  # (B,)
        assert bool((eos_positions >= first_eos).all())
        torch.testing.assert_close(decoded.utility, problem.utility(queries, decoded.responses), atol=1e-4, rtol=1e-5)
    assert bool((beam.utility >= greedy.utility - 1e-9).all())
    # the free problem's greedy, where it stops before the first allowed position, is not a response of the rule
    free_greedy = free.oracle_greedy(queries)
    free_eos = (free_greedy.responses == free.eos_token_id).int().argmax(dim=1) + 1
    early = free_eos < first_eos
    assert bool((free_greedy.utility[early] != greedy.utility[early]).all())


def test_single_and_vector_envs_give_fixed_length_responses() -> None:
    kwargs = {"max_length": 4, "top_k": 3, "noise_scale": 0.0}
    env = gym.make("TokenizedAlignment-v0", **kwargs)
    assert env.unwrapped.problem.fixed_length  # the default
    observation, info = env.reset(seed=0)
    assert info["benchmark_upper_bound"] is False  # greedy decoding with the true utility is no optimum
    terminated = False
    while not terminated:
        eos = np.flatnonzero(observation["candidate_tokens"] == env.unwrapped.eos_token_id)
        action = int(eos[0]) if eos.size else 0
        assert eos.size == 0 or observation["length"] == 3
        observation, _, terminated, _, info = env.step(action)
        assert info["benchmark_upper_bound"] is False
    assert info["response_length"] == 4 and not info["forced_eos"]
    envs = gym.make_vec("TokenizedAlignment-v0", num_envs=3, min_length=2, fixed_length=False, **kwargs)
    observations, infos = envs.reset(seed=0)
    for _ in range(4):
        assert infos["benchmark_upper_bound"].shape == (3,) and not infos["benchmark_upper_bound"].any()
        observations, _, terminated, _, infos = envs.step(np.zeros(3, dtype=np.int64))
        assert not (observations["candidate_tokens"][observations["length"] < 1] == envs.unwrapped.eos_token_id).any()
    lengths = infos["response_length"][terminated]
    assert terminated.any() and (lengths >= 2).all()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"fixed_length": True, "min_length": 3}, ValueError, "min_length=3"),
        ({"fixed_length": False, "min_length": 7}, ValueError, "got 7"),
        ({"fixed_length": False, "min_length": 0}, ValueError, "got 0"),
        ({"fixed_length": False, "min_length": 2.0}, TypeError, "min_length"),
        ({"fixed_length": 1}, TypeError, "fixed_length"),
    ],
)
def test_bad_length_rules_are_refused_naming_the_value(
    stories: tuple[Any, Any], kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        LanguageModelProblem(*stories, QUERIES, max_length=LENGTH, top_k=3, **kwargs)
    with pytest.raises(error, match=message):
        gym.make("TokenizedDecoding-v0", max_length=LENGTH, **kwargs)
