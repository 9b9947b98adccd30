"""Conformance over model families: every cached step equals the model's own no-cache forward, or is refused.

Each family is a tiny random model built from transformers' own config class (tests/llm/tiny_models.py),
with sliding windows shorter than the sequences. The reference of every candidate tau is a plain
``model(x:y:tau, output_hidden_states=True)``: the mean of its last hidden state, and the log-probs of
its own logits (so logit scaling, softcapping and tied heads are the model's).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.llm.tiny_models import FAMILY_NAMES, discovered_causal_lm_types, tiny_discovered, tiny_family
from tokenized_bandit_gym.evaluation.check_model import check_language_model, reference_scores
from tokenized_bandit_gym.llm import native_decoder_forward
from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem

QUERIES = [
    "Once upon a time, there was a little girl named Lily who liked to play in the park.",
    "Tom saw a big dog.",
    "The cat sat on the mat and looked at the bird in the tree.",
    "Hi",
]
MIN_COSINE, MAX_LOGPROB_ERROR = 0.9999, 1e-4
PATHS = [
    (forward, batching) for forward in ("auto", "native", "transformers") for batching in ("auto", "mask", "expand")
]


def no_cache_reference(model: Any, ids: torch.Tensor, query_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean last hidden state ``(H,)`` and ``log p(y:tau | x)`` of one sequence ``ids`` ``(T,)``: a plain forward."""
    with torch.no_grad():
        output = model(input_ids=ids[None], output_hidden_states=True, use_cache=False)
    logprobs = output.logits[0].double().log_softmax(dim=-1)[query_length - 1 : -1]  # (|y| + 1, n)
    return output.hidden_states[-1][0].double().mean(dim=0), logprobs.gather(1, ids[query_length:, None]).sum()


def play_with_pauses(problem: LanguageModelProblem, seed: int) -> int:
    """Random allowed actions on three rows of different query lengths; some rows sit out some steps.

    A row that sits out gets a masked cache column in the middle of its prefix, so a window measured
    in cache columns instead of tokens would show here. Every live row is compared at every step.
    """
    generator = torch.Generator().manual_seed(seed)
    state = problem.initial_state(torch.tensor([0, 1, 2]))
    compared = 0
    while not bool(state.finished.all()):
        sequence = problem.candidate_sequence_logprobs(state)
        pooled = problem.candidate_pooled(state) if problem.embeddings else None  # no e in the decoding problem
        for row in torch.nonzero(~state.finished)[:, 0].tolist():
            query = int(state.queries[row])
            prefix = torch.cat(
                [
                    problem.query_tokens[query, : int(problem.query_lengths[query])],
                    state.tokens[row, : state.lengths[row]],
                ]
            )
            for slot in range(problem.top_k):
                ids = torch.cat([prefix, state.candidate_tokens[row, slot : slot + 1]])
                mean, logprob = no_cache_reference(problem.model, ids, int(problem.query_lengths[query]))
                if pooled is not None:
                    cosine = torch.nn.functional.cosine_similarity(pooled[row, slot].double(), mean, dim=0)
                    assert float(cosine) >= MIN_COSINE, (row, slot, float(cosine))
                assert abs(float(sequence[row, slot]) - float(logprob)) <= MAX_LOGPROB_ERROR, (row, slot)
            compared += 1
        actions = torch.multinomial(problem.action_mask(state).float(), 1, generator=generator)[:, 0]
        active = torch.rand(3, generator=generator) < 0.7  # (3,) rows that step now
        state = problem.advance(state, actions, active=active)
    return compared


@pytest.fixture(scope="module")
def tokenizer(stories: tuple[Any, Any]) -> Any:
    return stories[1]


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_every_path_equals_the_no_cache_forward_or_is_refused(family: str, tokenizer: Any) -> None:
    model = tiny_family(family)
    model_type = model.config.model_type
    used = set()
    for forward, batching in PATHS:
        try:
            problem = LanguageModelProblem(
                model, tokenizer, QUERIES, max_length=5, top_k=3, forward_implementation=forward,
                candidate_batching=batching, fixed_length=False, embedding_norm="l2"
            )  # fmt: skip
        except ValueError as error:
            assert forward == "native" and f"model_type={model_type!r}" in str(error), str(error)
            continue
        assert problem.query_lengths[0] + 5 > 2 * 4  # queries plus responses are longer than any window
        assert play_with_pauses(problem, seed=len(used)) >= 3
        used.add((problem.forward_implementation, problem.candidate_batching))
    assert ("transformers", "mask") in used and ("transformers", "expand") in used


@pytest.mark.parametrize("family", ["llama-bias-tied", "qwen2", "gpt2"])
def test_packed_weights_equal_the_no_cache_forward(
    family: str, tokenizer: Any, monkeypatch: pytest.MonkeyPatch, cpu_vendor: str
) -> None:
    """The native forward over MKL-packed weights (Intel) or oneDNN's linear (AMD), every weight so however small,
    steps as the model computes."""
    monkeypatch.setattr(native_decoder_forward, "PACKED_MIN_WEIGHTS", 1)
    prepared = (
        native_decoder_forward.mkl_packs if cpu_vendor == "GenuineIntel" else native_decoder_forward.onednn_multiplies
    )
    if not prepared(torch.zeros(2, 2)):
        pytest.skip(f"torch has no {'MKL packed GEMM' if cpu_vendor == 'GenuineIntel' else 'oneDNN linear'} here")
    problem = LanguageModelProblem(
        tiny_family(family),
        tokenizer,
        QUERIES,
        max_length=5,
        top_k=3,
        forward_implementation="native",
        fixed_length=False,
        embedding_norm="l2",
    )
    layers = problem._forward._projections  # per layer: GPT-2's by name, Llama's as a named tuple
    projections = [linear for layer in layers for linear in (layer.values() if isinstance(layer, dict) else layer)]
    flag = "packed" if cpu_vendor == "GenuineIntel" else "onednn"
    assert all(getattr(linear, flag) for linear in projections)  # a group is so when all its weights are (one product)
    assert play_with_pauses(problem, seed=0) >= 3


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_single_and_vector_envs_match_the_no_cache_forward(family: str, tokenizer: Any) -> None:
    verdicts = check_language_model(
        tiny_family(family), tokenizer, steps=4, seed=1, num_envs=2, max_length=4, top_k=3, queries=QUERIES
    )
    assert {verdict.env for verdict in verdicts} == {"single", "vector"}
    for verdict in verdicts:
        assert verdict.passed or (verdict.refusal is not None and verdict.requested.startswith("native")), verdict
    assert all(verdict.passed for verdict in verdicts if verdict.requested == "auto/auto")


def test_check_reference_equals_one_forward_per_candidate(tokenizer: Any) -> None:
    """The check-model reference (k sequences in one forward) equals a forward of each sequence alone."""
    model = tiny_family("gemma3-text")
    prefix = torch.tensor([1, 45, 77, 12, 300, 9, 18, 250, 61])
    candidates = torch.tensor([5, 99, 2])
    pooled, token, sequence = reference_scores(model, prefix, candidates, query_length=4, pooling="query_response")
    for slot in range(3):
        mean, logprob = no_cache_reference(model, torch.cat([prefix, candidates[slot : slot + 1]]), 4)
        torch.testing.assert_close(pooled[slot], mean, atol=1e-5, rtol=0)
        torch.testing.assert_close(sequence[slot], logprob, atol=1e-5, rtol=0)
        with torch.no_grad():
            logits = model(input_ids=prefix[None]).logits[0, -1].double()
        torch.testing.assert_close(token[slot], logits.log_softmax(dim=-1)[candidates[slot]], atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("model_type", discovered_causal_lm_types())
def test_discovered_family_equals_the_no_cache_forward_or_is_refused(model_type: str, tokenizer: Any) -> None:
    """The long tail: every other causal LM transformers builds from a small config (skips say why not)."""
    model = tiny_discovered(model_type)
    embeddings = getattr(model.get_input_embeddings(), "weight", None)
    if embeddings is not None and int(embeddings.shape[0]) < 512:
        pytest.skip(f"{model_type}: the config keeps a vocabulary smaller than the test tokenizer's 512 ids")
    try:
        problem = LanguageModelProblem(
            model, tokenizer, QUERIES, max_length=4, top_k=3, fixed_length=False, embedding_norm="l2"
        )
    except ValueError as error:
        assert "model_type=" in str(error) or model_type in str(error), str(error)
        return
    assert play_with_pauses(problem, seed=0) >= 3
