"""LanguageModelState.with_new_rows: rows restarted mid-batch still equal a plain no-cache forward."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.llm.test_language_model_problem import QUERIES, reference
from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem
from tokenized_bandit_gym.llm.language_model_state import LanguageModelState


def _compare(problem: LanguageModelProblem, state: LanguageModelState) -> None:
    live = ~state.finished
    pooled, logprobs = reference(problem, state)
    torch.testing.assert_close(problem.candidate_pooled(state)[live], pooled[live], atol=1e-4, rtol=0)
    torch.testing.assert_close(problem.candidate_sequence_logprobs(state)[live], logprobs[live], atol=1e-4, rtol=0)


def _random_actions(
    problem: LanguageModelProblem, state: LanguageModelState, generator: torch.Generator
) -> torch.Tensor:
    """A seeded random allowed action per row ``(B,)``."""
    return torch.multinomial(problem.action_mask(state).float(), 1, generator=generator)[:, 0]


@pytest.mark.parametrize("model_name", ["stories", "tiny_llama", "tiny_gpt2"])
@pytest.mark.parametrize("batching", ["mask", "expand"])
def test_restarted_rows_equal_full_forward(request: pytest.FixtureRequest, model_name: str, batching: str) -> None:
    model, tokenizer = request.getfixturevalue(model_name)
    problem = LanguageModelProblem(
        model,
        tokenizer,
        QUERIES,
        max_length=5,
        top_k=3,
        candidate_batching=batching,
        fixed_length=False,
        embedding_norm="l2",
    )
    generator = torch.Generator().manual_seed(0)
    state = problem.initial_state(torch.tensor([2, 0, 3]))  # the longest query first: the widest cache
    for _ in range(2):
        state = problem.advance(
            state, torch.multinomial(problem.action_mask(state).float(), 1, generator=generator)[:, 0]
        )
    # the row with the longest query restarts on a short one, another row on the longest
    rows = torch.tensor([0, 2])
    state = state.with_new_rows(rows, problem.initial_state(torch.tensor([3, 2])))
    assert state.queries.tolist() == [3, 0, 2] and state.lengths.tolist() == [0, 2, 0]
    live_width = int((problem.query_lengths[state.queries] + state.lengths).max())
    assert state.attention_mask.shape[1] == live_width  # the replaced round's columns were trimmed
    assert state.attention_mask.sum(dim=1).tolist() == (problem.query_lengths[state.queries] + state.lengths).tolist()
    compared = 0
    while not bool(state.finished.all()):
        _compare(problem, state)
        compared += 1
        state = problem.advance(
            state, torch.multinomial(problem.action_mask(state).float(), 1, generator=generator)[:, 0]
        )
    assert compared >= 1


def test_with_new_rows_checks_the_row_count(stories: tuple[Any, Any]) -> None:
    problem = LanguageModelProblem(*stories, QUERIES, max_length=3, top_k=2, fixed_length=False, embedding_norm="l2")
    state = problem.initial_state(torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="fresh has 1 rows but 2 rows are replaced"):
        state.with_new_rows(torch.tensor([0, 1]), problem.initial_state(torch.tensor([2])))
    assert (
        state.with_new_rows(torch.tensor([], dtype=torch.int64), state.select(torch.tensor([], dtype=torch.int64)))
        is state
    )
