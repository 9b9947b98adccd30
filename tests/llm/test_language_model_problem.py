"""The KV-cached batched core equals a plain no-cache forward of every x:y:tau, over whole episodes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem
from tokenized_bandit_gym.llm.language_model_state import LanguageModelState
from tokenized_bandit_gym.llm.query_sources import STORY_OPENINGS

QUERIES = ["Once upon a time", "Tom saw a dog.", "The little girl named Lily went to the big park with mom.", "Hi"]


def reference(problem: LanguageModelProblem, state: LanguageModelState) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean-pooled last-layer hidden states ``(B, k, H)`` and ``log p(y:tau | x)`` ``(B, k)``, no cache."""
    batch, k = state.candidate_tokens.shape
    pooled = torch.zeros(batch, k, problem.hidden_size)
    logprobs = torch.zeros(batch, k, dtype=torch.float64)
    for row in range(batch):
        query = int(state.queries[row])
        query_length = int(problem.query_lengths[query])
        length = int(state.lengths[row])
        for slot in range(k):
            ids = torch.cat(
                [
                    problem.query_tokens[query, :query_length],
                    state.tokens[row, :length],
                    state.candidate_tokens[row, slot : slot + 1],
                ]
            )[None]  # (1, T)
            with torch.no_grad():
                hidden = problem.model.base_model(input_ids=ids).last_hidden_state[0]  # (T, H)
                logits = problem.model(input_ids=ids).logits[0].float()  # (T, n)
            start = 0 if problem.pooling == "query_response" else query_length
            pooled[row, slot] = hidden[start:].mean(dim=0)
            token_logprobs = logits.log_softmax(dim=-1)[query_length - 1 : -1]  # (|y| + 1, n)
            logprobs[row, slot] = token_logprobs.gather(1, ids[0, query_length:, None]).sum()
    return pooled, logprobs


def play_and_compare(problem: LanguageModelProblem, queries: list[int], seed: int) -> int:
    """Play whole episodes with seeded random valid actions; compare every live row at every step."""
    generator = torch.Generator().manual_seed(seed)
    state = problem.initial_state(torch.tensor(queries))
    compared = 0
    while not bool(state.finished.all()):
        live = ~state.finished
        pooled, logprobs = reference(problem, state)
        torch.testing.assert_close(problem.candidate_pooled(state)[live], pooled[live], atol=1e-4, rtol=0)
        torch.testing.assert_close(problem.candidate_sequence_logprobs(state)[live], logprobs[live], atol=1e-4, rtol=0)
        features = problem.candidate_embeddings(state)  # (B, k, d + 1)
        torch.testing.assert_close(
            features @ problem.theta, problem.candidate_utilities(state), atol=1e-9, rtol=0
        )  # the TLB reduction u = <theta', [e : v]>
        compared += int(live.sum())
        mask = problem.action_mask(state).float()  # (B, k)
        state = problem.advance(state, torch.multinomial(mask, 1, generator=generator)[:, 0])
    return compared


@pytest.mark.parametrize("implementation", ["native", "transformers"])
@pytest.mark.parametrize("model_name", ["stories", "tiny_llama", "tiny_gpt2"])
@pytest.mark.parametrize(
    ("queries", "batching"),
    [([1], "mask"), ([0, 2, 3], "mask"), ([0, 2, 3], "expand")],
    ids=["B1-mask", "B3-mask", "B3-expand"],
)
def test_cached_step_equals_full_forward(
    request: pytest.FixtureRequest, model_name: str, queries: list[int], batching: str, implementation: str
) -> None:
    model, tokenizer = request.getfixturevalue(model_name)
    problem = LanguageModelProblem(
        model,
        tokenizer,
        QUERIES,
        max_length=5,
        top_k=3,
        candidate_batching=batching,
        forward_implementation=implementation,
        fixed_length=False,
        embedding_norm="l2",
    )
    assert problem.candidate_batching == batching
    assert problem.forward_implementation == implementation
    lengths = problem.query_lengths[torch.tensor(queries)]
    assert len(queries) == 1 or len(set(lengths.tolist())) > 1  # different prefix lengths in the batch
    assert play_and_compare(problem, queries, seed=len(queries)) >= len(queries)


def test_response_pooling_and_no_eos_candidate(stories: tuple[Any, Any]) -> None:
    problem = LanguageModelProblem(
        *stories,
        QUERIES,
        max_length=4,
        top_k=3,
        pooling="response",
        eos_candidate=False,
        embedding_norm="none",
        fixed_length=False,
    )
    play_and_compare(problem, [0, 3], seed=5)


@pytest.mark.parametrize("implementation", ["native", "transformers"])
def test_each_step_encodes_only_the_new_candidates(stories: tuple[Any, Any], implementation: str) -> None:
    """No token is encoded twice: after the prefill, every step runs exactly the B * k candidates."""
    problem = LanguageModelProblem(
        *stories,
        QUERIES,
        max_length=6,
        top_k=4,
        forward_implementation=implementation,
        fixed_length=False,
        embedding_norm="l2",
    )
    seen: list[int] = []  # tokens embedded per forward: both implementations embed every token they encode
    handle = problem.model.get_input_embeddings().register_forward_pre_hook(
        lambda module, args: seen.append(int(args[0].numel()))
    )
    try:
        state = problem.initial_state(torch.tensor([0, 2]))
        width = int(problem.query_lengths[torch.tensor([0, 2])].max())
        assert seen == [2 * width, 2 * 4]
        seen.clear()
        state = problem.advance(state, torch.tensor([0, 1]))
        assert seen == [2 * 4]
    finally:
        handle.remove()


@pytest.mark.parametrize("batching", ["mask", "expand"])
def test_equal_rows_evenly_spaced_are_read_without_a_copy_and_stay_exact(
    stories: tuple[Any, Any], batching: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B rounds over a pool (rows i and i + Q equal): the first Q rows' caches are read as a view, and every row
    still equals the no-cache forward of its own x:y:tau, as the gathered rows do."""
    problem = LanguageModelProblem(
        *stories,
        QUERIES[:3],
        max_length=4,
        top_k=3,
        candidate_batching=batching,
        fixed_length=False,
        embedding_norm="l2",
    )
    state = problem.initial_state(torch.arange(9) % 3)
    gathered: list[int] = []  # rows of a cache gathered by index_select
    index_select = torch.Tensor.index_select
    monkeypatch.setattr(
        torch.Tensor, "index_select", lambda self, *a: gathered.append(self.dim()) or index_select(self, *a)
    )
    for actions in ([0] * 9, [1, 2, 0] * 3):
        state = problem.advance(state, torch.tensor(actions))
        pooled, logprobs = reference(problem, state)
        torch.testing.assert_close(problem.candidate_pooled(state), pooled, atol=1e-4, rtol=0)
        torch.testing.assert_close(problem.candidate_sequence_logprobs(state), logprobs, atol=1e-4, rtol=0)
    assert 4 not in gathered  # no (B, h, P, hd) cache was gathered


@pytest.mark.parametrize("implementation", ["native", "transformers"])
@pytest.mark.parametrize("batching", ["mask", "expand"])
def test_equal_rows_share_one_forward_and_stay_exact(
    stories: tuple[Any, Any], batching: str, implementation: str
) -> None:
    """Rows that are the same partial round (agents on one query until their choices part) are forwarded once,
    and every row still equals the no-cache forward of its own x:y:tau."""
    k = 4
    problem = LanguageModelProblem(
        *stories,
        QUERIES,
        max_length=5,
        top_k=k,
        candidate_batching=batching,
        forward_implementation=implementation,
        fixed_length=False,
        embedding_norm="l2",
    )
    seen: list[int] = []  # tokens embedded per forward
    handle = problem.model.get_input_embeddings().register_forward_pre_hook(
        lambda module, args: seen.append(int(args[0].numel()))
    )

    def step(state: LanguageModelState, actions: list[int], distinct: int) -> LanguageModelState:
        chosen = torch.tensor(actions)
        assert problem.action_mask(state)[torch.arange(len(actions)), chosen].all()
        seen.clear()
        state = problem.advance(state, chosen)
        assert seen == [distinct * k]
        return state

    try:
        state = problem.initial_state(torch.tensor([0, 2, 0, 0]))
        assert seen[1:] == [2 * k]  # after the prefill: the candidates of query 0 once, of query 2 once
        state = step(state, [1, 0, 1, 2], distinct=3)  # rows 0 and 2 stay one partial round, row 3 parts
        assert state.tokens[0].tolist() == state.tokens[2].tolist() != state.tokens[3].tolist()
        checked = state
        state = step(state, [0, 0, 1, 0], distinct=4)  # rows 0 and 2 part
    finally:
        handle.remove()
    for current in (checked, state):
        pooled, logprobs = reference(problem, current)
        torch.testing.assert_close(problem.candidate_pooled(current), pooled, atol=1e-4, rtol=0)
        torch.testing.assert_close(problem.candidate_sequence_logprobs(current), logprobs, atol=1e-4, rtol=0)
        for row in range(current.batch_size):  # each row's candidate cache entries are its own tokens'
            alone = problem.state_for(
                current.queries[row : row + 1], current.tokens[row : row + 1, : current.lengths[row]]
            )
            assert alone.candidate_tokens.tolist() == current.candidate_tokens[row : row + 1].tolist()
            for (keys, values), (alone_keys, alone_values) in zip(
                current.candidate_past, alone.candidate_past, strict=True
            ):
                torch.testing.assert_close(keys[row : row + 1], alone_keys, atol=1e-4, rtol=0)
                torch.testing.assert_close(values[row : row + 1], alone_values, atol=1e-4, rtol=0)


def test_candidates_and_mask(stories: tuple[Any, Any]) -> None:
    problem = LanguageModelProblem(*stories, QUERIES, max_length=3, top_k=5, fixed_length=False, embedding_norm="l2")
    state = problem.initial_state(torch.tensor([0]))
    logprobs = problem._logprobs(state.last_hidden)[0]
    eos = problem.eos_token_id
    top = logprobs.topk(5).indices
    expected = top if eos in top.tolist() else torch.cat([top[:4], torch.tensor([eos])])
    assert state.candidate_tokens[0].tolist() == expected.tolist()
    assert problem.action_mask(state).all()
    state = problem.advance(problem.advance(state, torch.tensor([0])), torch.tensor([0]))  # position L next
    mask = problem.action_mask(state)[0]
    assert mask.sum() == 1 and int(state.candidate_tokens[0][mask][0]) == eos


def test_replay_matches_cached_step(stories: tuple[Any, Any]) -> None:
    """state_for (token replay, one forward per token) gives the same candidates and utilities."""
    problem = LanguageModelProblem(*stories, QUERIES, max_length=6, top_k=4, fixed_length=False, embedding_norm="l2")
    state = problem.initial_state(torch.tensor([2, 0]))
    for action in (1, 0, 2):
        state = problem.advance(state, torch.full((2,), action))
    replayed = problem.state_for(state.queries, state.tokens[:, :3])
    assert torch.equal(replayed.candidate_tokens, state.candidate_tokens)
    torch.testing.assert_close(
        problem.candidate_utilities(replayed), problem.candidate_utilities(state), atol=1e-5, rtol=0
    )
    torch.testing.assert_close(problem.utility_of(replayed), problem.utility_of(state), atol=1e-5, rtol=0)
    single = problem.state_for(state.queries[:1], state.tokens[:1, :3])  # memoised single-row path
    torch.testing.assert_close(
        problem.candidate_utilities(single), problem.candidate_utilities(state)[:1], atol=1e-5, rtol=0
    )


def test_batched_greedy_equals_single_rows_and_beam_is_no_worse(stories: tuple[Any, Any]) -> None:
    problem = LanguageModelProblem(
        *stories, list(STORY_OPENINGS[:3]), max_length=6, top_k=4, fixed_length=False, embedding_norm="l2"
    )
    batched = problem.greedy_decode(torch.arange(3))
    for query in range(3):
        single = problem.greedy_decode(torch.tensor([query]))
        assert torch.equal(single.responses[0], batched.responses[query])
        torch.testing.assert_close(single.utility[0], batched.utility[query], atol=1e-5, rtol=0)
        torch.testing.assert_close(
            problem.utility(torch.tensor([query]), single.responses), single.utility, atol=1e-5, rtol=0
        )
    beam = problem.oracle_beam(torch.arange(3), width=3)
    assert bool((beam.utility >= problem.oracle_greedy(torch.arange(3)).utility - 1e-12).all())


def test_oracle_greedy_decoded_ahead_in_a_batch_equals_one_query_at_a_time(stories: tuple[Any, Any]) -> None:
    """The reproduction decodes benchmarks ahead, several queries per forward: the cache then holds what one
    query's own decode gives (to float rounding), and has_oracle_greedy says which queries are cached."""
    ahead = LanguageModelProblem(*stories, QUERIES, max_length=4, top_k=3, fixed_length=False, embedding_norm="l2")
    alone = LanguageModelProblem(*stories, QUERIES, max_length=4, top_k=3, fixed_length=False, embedding_norm="l2")
    assert not any(ahead.has_oracle_greedy(query) for query in range(3))
    ahead.oracle_greedy(torch.tensor([2, 0]))
    assert [ahead.has_oracle_greedy(query) for query in range(3)] == [True, False, True]
    for query in (0, 2):
        cached, decoded = ahead.oracle_greedy(torch.tensor([query])), alone.oracle_greedy(torch.tensor([query]))
        torch.testing.assert_close(cached.utility, decoded.utility, atol=1e-5, rtol=0)
        assert torch.equal(cached.responses, decoded.responses)


def test_decoding_problem_without_embeddings(stories: tuple[Any, Any]) -> None:
    """gamma = 1 and no embeddings: one forward of the chosen token per step; u = v(p)."""
    problem = LanguageModelProblem(
        *stories,
        QUERIES,
        max_length=4,
        top_k=3,
        gamma=1.0,
        embeddings=False,
        value_map="prob",
        fixed_length=False,
        embedding_norm="l2",
    )
    state = problem.initial_state(torch.tensor([0, 1]))
    while not bool(state.finished.all()):
        expected = problem.candidate_sequence_logprobs(state).exp()
        torch.testing.assert_close(problem.candidate_utilities(state), expected)
        preferred = torch.tensor([[0.0, 2.0, 1.0], [2.0, 1.0, 0.0]])  # (B, k): rows prefer slots 1 and 0
        state = problem.advance(state, preferred.masked_fill(~problem.action_mask(state), -1.0).argmax(dim=1))
    _, logprobs = reference_sequence(problem, state)
    torch.testing.assert_close(problem.utility_of(state), logprobs.exp(), atol=1e-5, rtol=0)


def reference_sequence(problem: LanguageModelProblem, state: LanguageModelState) -> tuple[None, torch.Tensor]:
    """``log p(y | x)`` ``(B,)`` by a no-cache forward."""
    values = []
    for row in range(state.batch_size):
        query = int(state.queries[row])
        query_length = int(problem.query_lengths[query])
        ids = torch.cat([problem.query_tokens[query, :query_length], state.tokens[row, : int(state.lengths[row])]])
        with torch.no_grad():
            logits = problem.model(input_ids=ids[None]).logits[0].float().log_softmax(dim=-1)
        values.append(logits[query_length - 1 : -1].gather(1, ids[query_length:, None]).sum().double())
    return None, torch.stack(values)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"top_k": 0}, "top_k"),
        ({"top_k": 513}, "larger than the vocabulary"),
        ({"gamma": 1.5}, "gamma"),
        ({"gamma": -0.1}, "gamma"),
        ({"value_map": "log"}, "value_map"),
        ({"pooling": "max"}, "pooling"),
        ({"theta": [1.0, 2.0]}, "theta"),
        ({"embeddings": False}, "gamma == 1"),
    ],
)
def test_bad_arguments(stories: tuple[Any, Any], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LanguageModelProblem(*stories, QUERIES, **kwargs)


def test_empty_query_pool_and_tokenizer_without_eos(stories: tuple[Any, Any]) -> None:
    with pytest.raises(ValueError, match="empty"):
        LanguageModelProblem(*stories, [], fixed_length=False, embedding_norm="l2")

    class NoEos:
        eos_token_id = None

    with pytest.raises(ValueError, match="no EOS"):
        LanguageModelProblem(stories[0], NoEos(), QUERIES, fixed_length=False, embedding_norm="l2")


def test_chat_template_is_applied_when_present(stories: tuple[Any, Any]) -> None:
    import copy

    tokenizer = copy.deepcopy(stories[1])
    tokenizer.chat_template = "{% for m in messages %}User: {{ m['content'] }}\n{% endfor %}Story:"
    problem = LanguageModelProblem(
        stories[0], tokenizer, QUERIES[:2], max_length=3, top_k=2, fixed_length=False, embedding_norm="l2"
    )
    assert problem.chat_template
    expected = tokenizer.apply_chat_template([{"role": "user", "content": QUERIES[1]}], add_generation_prompt=True)
    expected = expected if isinstance(expected, list) else expected["input_ids"]
    assert problem.query_tokens[1, : int(problem.query_lengths[1])].tolist() == list(expected)
    plain = LanguageModelProblem(
        stories[0],
        tokenizer,
        QUERIES[:2],
        max_length=3,
        top_k=2,
        chat_template=False,
        fixed_length=False,
        embedding_norm="l2",
    )
    assert plain.query_tokens[1, : int(plain.query_lengths[1])].tolist() == stories[1](QUERIES[1])["input_ids"]
    with pytest.raises(ValueError, match="no chat template"):
        LanguageModelProblem(*stories, QUERIES, chat_template=True, fixed_length=False, embedding_norm="l2")


def test_bfloat16_weights_step(stories: tuple[Any, Any]) -> None:
    import copy

    model = copy.deepcopy(stories[0]).to(torch.bfloat16)
    problem = LanguageModelProblem(
        model, stories[1], QUERIES, max_length=3, top_k=3, fixed_length=False, embedding_norm="l2"
    )
    state = problem.initial_state(torch.tensor([0, 3]))
    while not bool(state.finished.all()):
        assert bool(torch.isfinite(problem.candidate_embeddings(state)).all())
        state = problem.advance(state, problem.action_mask(state).float().argmax(dim=1))
    assert bool(torch.isfinite(problem.utility_of(state)).all())


def tensors_of(state: LanguageModelState) -> list[torch.Tensor]:
    """Every tensor a state holds (cache layers included), in a fixed order."""
    tensors = []
    for value in state.__dict__.values():
        if isinstance(value, torch.Tensor):
            tensors.append(value)
        elif isinstance(value, tuple):
            tensors.extend(tensor for pair in value for tensor in pair)
    return tensors


@pytest.mark.parametrize("batching", ["mask", "expand"])
def test_branching_from_a_state_leaves_it_intact(stories: tuple[Any, Any], batching: str) -> None:
    """States share cache tensors with their successors: advancing one (twice, deeply) never changes it."""
    problem = LanguageModelProblem(
        *stories, QUERIES, max_length=8, top_k=4, candidate_batching=batching, fixed_length=False, embedding_norm="l2"
    )
    state = problem.advance(problem.initial_state(torch.tensor([0, 2])), torch.tensor([1, 0]))
    snapshot = [tensor.clone() for tensor in tensors_of(state)]
    first = problem.advance(state, torch.tensor([0, 1]))
    deep = problem.advance(problem.advance(first, torch.tensor([2, 2])), torch.tensor([1, 3]))
    second = problem.advance(state, torch.tensor([3, 2]))
    for kept, now in zip(snapshot, tensors_of(state), strict=True):
        assert torch.equal(kept, now)
    again = problem.advance(state, torch.tensor([0, 1]))
    for branch, replay in zip(tensors_of(first), tensors_of(again), strict=True):
        assert torch.equal(branch, replay)
    for branched in (second, deep):
        replayed = problem.state_for(branched.queries, branched.tokens[:, : int(branched.lengths[0])])
        assert torch.equal(replayed.candidate_tokens, branched.candidate_tokens)
        # float32 sums of ~50 replayed in another batch shape: a few ulps apart on some CPUs (1.2e-5 of 47.6 seen
        # on an AMD EPYC), hence a relative part
        torch.testing.assert_close(
            problem.candidate_utilities(replayed), problem.candidate_utilities(branched), atol=1e-5, rtol=1e-6
        )


def test_long_episode_equals_full_recompute_at_every_step(stories: tuple[Any, Any]) -> None:
    """Twelve cached steps (cache grown by a chosen candidate's entries each step) match no-cache forwards."""
    problem = LanguageModelProblem(
        *stories, QUERIES, max_length=12, top_k=5, eos_candidate=False, fixed_length=False, embedding_norm="l2"
    )
    assert play_and_compare(problem, [2, 3], seed=7) >= 2 * 6
