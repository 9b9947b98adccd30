"""The static-shape step: equal to the eager core's, traced whole by torch.compile, captured on CUDA."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from tokenized_bandit_gym.core.cuda_graph_step import CapturedStep
from tokenized_bandit_gym.llm.captured_step import StaticLanguageModelStep
from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem

QUERIES = ["Once upon a time", "Tom saw a dog.", "The little girl named Lily went to the big park with mom."]


def chosen_actions(problem: LanguageModelProblem, state: Any, step: int) -> torch.Tensor:
    """A varied allowed action per row ``(B,)`` (the first allowed slot at or after ``step + row`` modulo k)."""
    mask = problem.action_mask(state)  # (B, k)
    k = mask.shape[1]
    order = (torch.arange(k)[None, :] + step + torch.arange(mask.shape[0])[:, None]) % k  # (B, k)
    allowed = mask.gather(1, order)
    return order.gather(1, allowed.int().argmax(dim=1, keepdim=True))[:, 0]


READINGS = {
    "v0": {"fixed_length": False, "embedding_norm": "l2"},
    "v1": {"fixed_length": True, "value_map": "scaled_logprob", "pooling": "response", "score_forced_eos": False},
}
"""Both env ids' readings: v1's leaves out the forced EOS's log p (every row is forced at L) and pools the response."""


@pytest.mark.parametrize("model", ["stories", "tiny_gpt2"])
@pytest.mark.parametrize("min_length", [None, 3])
@pytest.mark.parametrize("reading", sorted(READINGS))
def test_static_step_equals_the_eager_core_over_an_episode(
    model: str, min_length: int | None, reading: str, request: pytest.FixtureRequest
) -> None:
    if reading == "v1" and min_length is not None:
        pytest.skip("min_length needs free lengths")
    problem = LanguageModelProblem(
        *request.getfixturevalue(model), QUERIES, max_length=6, top_k=4, min_length=min_length, **READINGS[reading]
    )
    state = problem.initial_state(torch.tensor([0, 2, 1]))
    static = StaticLanguageModelStep(problem, state)
    for step in range(problem.max_length):
        actions = chosen_actions(problem, state, step)
        state = problem.advance(state, actions)
        features = static.step(actions)
        assert torch.equal(static.candidate_tokens, state.candidate_tokens)
        assert torch.equal(static.finished, state.finished) and torch.equal(static.tokens, state.tokens)
        assert torch.equal(static.pooled_count, state.pooled_count)  # what the round's utility is pooled over
        torch.testing.assert_close(static.sequence_logprob, state.sequence_logprob, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(static.hidden_sum, state.hidden_sum, atol=1e-4, rtol=1e-5)
        if not bool(state.finished.all()):  # once every row is done the eager core keeps its last candidates
            torch.testing.assert_close(features, problem.candidate_embeddings(state), atol=1e-5, rtol=1e-5)
    assert bool(state.finished.all())


def test_compiled_step_traces_whole_and_equals_the_eager_step(tiny_llama: tuple[Any, Any]) -> None:
    problem = LanguageModelProblem(
        *tiny_llama, QUERIES[:2], max_length=4, top_k=3, fixed_length=False, embedding_norm="l2"
    )
    state = problem.initial_state(torch.tensor([0, 1]))
    eager, traced = StaticLanguageModelStep(problem, state), StaticLanguageModelStep(problem, state)
    compiled = torch.compile(traced.step, fullgraph=True, backend="aot_eager")  # a graph break is an error
    for step in range(2):
        actions = torch.tensor([step % 3, (step + 1) % 3])
        torch.testing.assert_close(compiled(actions), eager.step(actions), atol=1e-6, rtol=1e-6)
        for got, wanted in zip(traced.buffers(), eager.buffers(), strict=True):
            torch.testing.assert_close(got, wanted, atol=1e-6, rtol=1e-6)


def test_refusals_name_the_reason(stories: tuple[Any, Any]) -> None:
    problem = LanguageModelProblem(
        *stories,
        QUERIES[:1],
        max_length=3,
        top_k=2,
        forward_implementation="transformers",
        fixed_length=False,
        embedding_norm="l2",
    )
    with pytest.raises(ValueError, match="native forward"):
        StaticLanguageModelStep(problem, problem.initial_state(torch.tensor([0])))
    decoding = LanguageModelProblem(
        *stories,
        QUERIES[:1],
        max_length=3,
        top_k=2,
        embeddings=False,
        gamma=1.0,
        fixed_length=False,
        embedding_norm="l2",
    )
    with pytest.raises(ValueError, match="embeddings=True"):
        StaticLanguageModelStep(decoding, decoding.initial_state(torch.tensor([0])))


def test_captured_step_runs_eagerly_off_cuda(stories: tuple[Any, Any]) -> None:
    problem = LanguageModelProblem(
        *stories, QUERIES[:1], max_length=3, top_k=2, fixed_length=False, embedding_norm="l2"
    )
    state = problem.initial_state(torch.tensor([0]))
    static, reference = StaticLanguageModelStep(problem, state), StaticLanguageModelStep(problem, state)
    step = CapturedStep(static.step, [torch.zeros(1, dtype=torch.int64)], static.buffers())
    assert not step.captured
    torch.testing.assert_close(step(torch.tensor([1])), reference.step(torch.tensor([1])))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_captured_step_replays_a_cuda_graph_equal_to_the_eager_step(stories: tuple[Any, Any]) -> None:
    model, tokenizer = stories
    problem = LanguageModelProblem(
        copy.deepcopy(model).to("cuda"),
        tokenizer,
        QUERIES,
        max_length=5,
        top_k=3,
        fixed_length=False,
        embedding_norm="l2",
    )
    state = problem.initial_state(torch.tensor([0, 1, 2], device="cuda"))
    static, reference = StaticLanguageModelStep(problem, state), StaticLanguageModelStep(problem, state)
    example = torch.zeros(3, dtype=torch.int64, device="cuda")
    step = CapturedStep(static.step, [example], static.buffers())
    assert step.captured
    for index in range(problem.max_length):
        actions = torch.full((3,), index % 3, device="cuda")
        torch.testing.assert_close(step(actions), reference.step(actions), atol=1e-5, rtol=1e-5)
