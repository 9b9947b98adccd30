"""Issue 48: the alignment envs' reading options and the regime diagnostic (``tbg regime``).

The diagnostic's numbers are recomputed here by hand from plain no-cache forwards of a tiny random Llama
(L = 2: one choice among k candidates, then the forced EOS), and each reading option is checked for what
it says it does.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
from tokenized_bandit_gym.evaluation.alignment_regime import (
    SEPARATING_GAP,
    RegimeDiagnostic,
    environment_regime,
    measure_regime,
)
from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem
from tokenized_bandit_gym.llm.pre_norm import norm_inputs_recorded
from tokenized_bandit_gym.registration import ALIGNMENT_V1_READING, LLM_ENVS

QUERIES = ["Tom saw a big dog.", "Once upon a time, there was a little girl named Lily."]
GAMMA = 0.8


def tiny_problem(tiny_llama: tuple[Any, Any], **options: Any) -> LanguageModelProblem:
    model, tokenizer = tiny_llama
    generator = torch.Generator().manual_seed(7)
    theta = options.pop("theta", torch.randn(model.config.hidden_size, generator=generator, dtype=torch.float64))
    settings = {"max_length": 2, "top_k": 4, "gamma": GAMMA, "fixed_length": True, "embedding_norm": "none"}
    return LanguageModelProblem(model, tokenizer, QUERIES, theta=theta, **(settings | options))


def no_cache(model: Any, ids: list[int], query_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Last-layer hidden states ``(T, H)`` float64 and the log-prob of each response token ``(|y|,)``: one forward."""
    with torch.no_grad():
        output = model(input_ids=torch.tensor([ids]), output_hidden_states=True, use_cache=False)
    logprobs = output.logits[0].double().log_softmax(dim=-1)[query_length - 1 : -1]  # (|y|, n)
    response = torch.tensor(ids[query_length:])
    return output.hidden_states[-1][0].double(), logprobs.gather(1, response[:, None])[:, 0]


def utility_by_hand(problem: LanguageModelProblem, query: int, response: list[int]) -> float:
    """``gamma * v + (1 - gamma) <theta, e>`` of ``response`` from one no-cache forward (the problem's reading)."""
    query_length = int(problem.query_lengths[query])
    ids = problem.query_tokens[query, :query_length].tolist() + response
    hidden, token_logprobs = no_cache(problem.model, ids, query_length)
    scored = token_logprobs.clone()
    if not problem.score_forced_eos and len(response) == problem.max_length and response[-1] == problem.eos_token_id:
        scored[-1] = 0.0
    value = problem.value_map(scored.sum())
    start = 0 if problem.pooling == "query_response" else query_length
    embedding = hidden[start:].mean(dim=0)
    return float(GAMMA * value + (1 - GAMMA) * embedding @ problem.latent_theta)


@pytest.mark.parametrize("reading", [{}, dict(ALIGNMENT_V1_READING)])
def test_diagnostic_numbers_by_hand(tiny_llama: tuple[Any, Any], reading: dict[str, Any]) -> None:
    problem = tiny_problem(tiny_llama, **reading)
    diagnostic = measure_regime(problem, [0, 1])
    eos = problem.eos_token_id
    value_spreads, theta_spreads, differs, gaps, utilities = [], [], [], [], []
    for query in (0, 1):
        query_length = int(problem.query_lengths[query])
        ids = problem.query_tokens[query, :query_length].tolist()
        with torch.no_grad():
            logits = problem.model(input_ids=torch.tensor([ids])).logits[0, -1].double()
        logits[eos] = float("-inf")  # fixed length: no EOS before position L, so k other tokens
        candidates = logits.topk(problem.top_k).indices.tolist()  # sorted by LM probability
        values, thetas = [], []
        for token in candidates:
            hidden, token_logprobs = no_cache(problem.model, [*ids, token], query_length)
            start = 0 if problem.pooling == "query_response" else query_length
            values.append(GAMMA * float(problem.value_map(token_logprobs.sum())))
            thetas.append((1 - GAMMA) * float(hidden[start:].mean(dim=0) @ problem.latent_theta))
        totals = [value + theta for value, theta in zip(values, thetas, strict=True)]
        best = max(range(len(totals)), key=totals.__getitem__)
        value_spreads.append(max(values) - min(values))
        theta_spreads.append(max(thetas) - min(thetas))
        differs.append(best != 0)
        benchmark = utility_by_hand(problem, query, [candidates[best], eos])
        lm_greedy = utility_by_hand(problem, query, [candidates[0], eos])
        gaps.append(benchmark - lm_greedy)
        utilities += [benchmark, lm_greedy]
    assert diagnostic.rounds == 2 and diagnostic.steps == 2  # the forced EOS is no choice
    assert diagnostic.value_spread == pytest.approx(sum(value_spreads) / 2, abs=1e-4)
    assert diagnostic.theta_spread == pytest.approx(sum(theta_spreads) / 2, abs=1e-4)
    assert diagnostic.differing_share == sum(differs) / 2
    assert diagnostic.gaps == pytest.approx(gaps, abs=1e-4)
    assert diagnostic.utility_min == pytest.approx(min(utilities), abs=1e-4)
    assert diagnostic.utility_max == pytest.approx(max(utilities), abs=1e-4)


def test_a_benchmark_that_never_leaves_the_lm_does_not_separate(tiny_llama: tuple[Any, Any]) -> None:
    problem = tiny_problem(tiny_llama, theta=torch.zeros(tiny_llama[0].config.hidden_size))
    diagnostic = measure_regime(problem, [0, 1])
    assert diagnostic.theta_spread == 0.0 and diagnostic.differing_share == 0.0
    assert diagnostic.gaps == (0.0, 0.0) and not diagnostic.separates
    assert "does not separate" in diagnostic.lines()[-1] and "appendix D: 8.5" in diagnostic.lines()[2]


def test_the_verdict_needs_both_a_gap_and_parting_decodes() -> None:
    parting = RegimeDiagnostic(3, 30, 1.0, 2.0, 0.5, (SEPARATING_GAP, 2 * SEPARATING_GAP, 3.0), -1.0, 9.0)
    assert parting.separates and parting.spread_ratio == 2.0 and "separates" in parting.lines()[-1]
    together = RegimeDiagnostic(3, 30, 1.0, 2.0, 0.0, (5.0, 5.0, 5.0), -1.0, 9.0)
    worse = RegimeDiagnostic(3, 30, 1.0, 2.0, 0.5, (-1.0, 0.0, 0.5), -1.0, 9.0)
    assert not together.separates and not worse.separates
    assert "not clearly worth more" in worse.lines()[-1]


def test_an_unscored_forced_eos_changes_v_by_exactly_its_log_p(tiny_llama: tuple[Any, Any]) -> None:
    scored = tiny_problem(tiny_llama, value_map="logprob")
    unscored = tiny_problem(tiny_llama, value_map="logprob", score_forced_eos=False)
    states = [problem.initial_state(torch.tensor([0, 1])) for problem in (scored, unscored)]
    first = torch.tensor([0, 2])
    states = [problem.advance(state, first) for problem, state in zip((scored, unscored), states, strict=True)]
    assert torch.equal(scored.candidate_values(states[0]), scored.candidate_sequence_logprobs(states[0]))
    eos_logprob = scored.candidate_sequence_logprobs(states[0]) - unscored.candidate_values(states[1])  # (B, k)
    eos_slot = scored.action_mask(states[0]).int().argmax(dim=1)  # (B,) the one allowed candidate at position L
    ended = [problem.advance(state, eos_slot) for problem, state in zip((scored, unscored), states, strict=True)]
    assert bool(ended[0].finished.all()) and bool((ended[0].tokens[:, -1] == scored.eos_token_id).all())
    for row in range(2):
        query = int(ended[0].queries[row])
        response = ended[0].tokens[row].tolist()
        query_length = int(scored.query_lengths[query])
        ids = [*scored.query_tokens[query, :query_length].tolist(), *response]
        _, token_logprobs = no_cache(scored.model, ids, query_length)
        eos = float(token_logprobs[-1])
        assert eos < 0.0
        difference = float(ended[0].sequence_logprob[row] - ended[1].sequence_logprob[row])
        assert difference == pytest.approx(eos, abs=1e-5)
        slot = int((states[0].candidate_tokens[row] == scored.eos_token_id).nonzero()[0, 0])
        assert float(eos_logprob[row, slot]) == pytest.approx(eos, abs=1e-5)
        utility_gap = float(scored.utility_of(ended[0])[row] - unscored.utility_of(ended[1])[row])
        assert utility_gap == pytest.approx(GAMMA * eos, abs=1e-5)


def test_an_eos_chosen_before_l_is_scored_either_way(tiny_llama: tuple[Any, Any]) -> None:
    options = {"max_length": 4, "fixed_length": False, "value_map": "logprob"}
    scored, unscored = tiny_problem(tiny_llama, **options), tiny_problem(tiny_llama, score_forced_eos=False, **options)
    states = [problem.initial_state(torch.tensor([0])) for problem in (scored, unscored)]
    slot = int((states[0].candidate_tokens[0] == scored.eos_token_id).nonzero()[0, 0])
    action = torch.tensor([slot])
    ended = [problem.advance(state, action) for problem, state in zip((scored, unscored), states, strict=True)]
    assert bool(ended[0].finished.all())
    assert torch.equal(ended[0].sequence_logprob, ended[1].sequence_logprob)


def test_theta_scale_is_the_papers_literal_half_or_its_unit_direction(tiny_llama: tuple[Any, Any]) -> None:
    d = tiny_llama[0].config.hidden_size
    literal = tiny_problem(tiny_llama, theta=None, theta_scale="literal")
    unit = tiny_problem(tiny_llama, theta=None)
    assert torch.equal(literal.latent_theta, torch.full((d,), 0.5, dtype=torch.float64))
    assert float(unit.latent_theta.norm()) == pytest.approx(1.0)
    assert torch.allclose(literal.latent_theta / literal.latent_theta.norm(), unit.latent_theta)
    assert "literal" in literal.theta_source and "unit-normed" in unit.theta_source
    given = torch.arange(d, dtype=torch.float64)
    assert torch.equal(tiny_problem(tiny_llama, theta=given, theta_scale="literal").latent_theta, given)
    with pytest.raises(ValueError, match="theta_scale"):
        tiny_problem(tiny_llama, theta=None, theta_scale="huge")
    with pytest.raises(TypeError, match="score_forced_eos"):
        tiny_problem(tiny_llama, score_forced_eos="no")


def test_v0_keeps_its_reading_and_v1_is_the_calibrated_one() -> None:
    assert LLM_ENVS["TokenizedAlignment-v0"][1] == {}  # v0's defaults are the env's, unchanged
    v1 = gym.spec("TokenizedAlignment-v1").kwargs
    assert v1 == {"value_map": "scaled_logprob", "pooling": "response", "theta_scale": "literal"} | {
        "score_forced_eos": False
    }
    with pytest.warns(DeprecationWarning, match="v1"):
        env = gym.make("TokenizedAlignment-v0", max_length=3, top_k=3)
    problem = env.unwrapped.problem
    reading = (problem.value_map.name, problem.pooling, problem.theta_scale, problem.score_forced_eos)
    assert reading == ("logprob", "query_response", "unit", True) and problem.embedding_norm == "none"


def test_v0_on_the_shipped_model_does_not_separate() -> None:
    """The issue's finding on stories260K: under v0 the benchmark is the LM's own greedy decode."""
    with pytest.warns(DeprecationWarning):
        env = gym.make("TokenizedAlignment-v0", queries="paper", max_length=8, top_k=6)
    diagnostic = environment_regime(env, rounds=3)
    assert diagnostic.value_spread > 10 * diagnostic.theta_spread
    assert not diagnostic.separates


@pytest.mark.slow
def test_v1_separates_on_smollm2_and_v0_does_not() -> None:
    from tokenized_bandit_gym.llm.packaged_models import PACKAGED_MODELS, gguf_path

    try:
        gguf_path(PACKAGED_MODELS["smollm2-135m-instruct"])
    except ValueError as missing:
        pytest.skip(f"the real instruct model is not installed: {missing}")
    settings = {"model": "smollm2-135m-instruct", "queries": "paper", "max_length": 30, "top_k": 15}
    v1 = environment_regime(gym.make("TokenizedAlignment-v1", **settings), rounds=3)
    assert v1.separates and v1.mean_gap > 3.0 and v1.utility_max > 0.0
    with pytest.warns(DeprecationWarning):
        v0 = environment_regime(gym.make("TokenizedAlignment-v0", **settings), rounds=3)
    assert not v0.separates and v0.differing_share < 0.1


def test_each_alignment_task_of_the_report_carries_its_regime(tmp_path: Any) -> None:
    from tokenized_bandit_gym.evaluation.execute_run import execute_run
    from tokenized_bandit_gym.evaluation.leaderboard import build_leaderboard
    from tokenized_bandit_gym.evaluation.leaderboard_report import markdown_line, markdown_report
    from tokenized_bandit_gym.evaluation.run_spec import RunSpec

    kwargs = {"max_length": 3, "top_k": 2}
    record = execute_run(RunSpec("TokenizedAlignment-v1", kwargs, "misaligned_greedy", {}, 0, 2, "LLM", "M"))
    decoding = execute_run(RunSpec("TokenizedDecoding-v0", kwargs, "random", {}, 0, 2, "Decoding", "R"))
    assert "regime" not in decoding.metadata  # no theta-term: nothing to separate
    assert "appendix D" in record.metadata["regime"] and "verdict: " in record.metadata["regime"]
    leaderboard = build_leaderboard([decoding, record])
    assert leaderboard.regimes == {"LLM": record.metadata["regime"]}
    note = f"Regime (tbg regime, beside appendix D): {record.metadata['regime']}."
    assert markdown_line(note) in markdown_report(leaderboard)  # HTML-escaped, as every note of the report


def test_pre_norm_pools_the_final_norms_input_and_keeps_the_log_probs(tiny_llama: tuple[Any, Any]) -> None:
    after = tiny_problem(tiny_llama, pooling="response")
    before = tiny_problem(tiny_llama, pooling="response", embedding_layer="pre_norm")
    assert before.forward_implementation == "transformers"  # the probe accepted it against the model's own forward
    states = [problem.initial_state(torch.tensor([0, 1])) for problem in (after, before)]
    assert torch.equal(states[0].candidate_tokens, states[1].candidate_tokens)
    assert torch.allclose(states[0].candidate_logprobs, states[1].candidate_logprobs, atol=1e-5)
    model = tiny_llama[0]
    for row in range(2):
        query = int(states[1].queries[row])
        ids = before.query_tokens[query, : int(before.query_lengths[query])].tolist()
        token = int(states[1].candidate_tokens[row, 0])
        with norm_inputs_recorded(model.model.norm) as recorded, torch.no_grad():
            output = model(input_ids=torch.tensor([[*ids, token]]), output_hidden_states=True, use_cache=False)
        pre, post = recorded[-1][0, -1], output.hidden_states[-1][0, -1]  # (H,) tau's states, response pooling
        assert torch.allclose(before.candidate_pooled(states[1])[row, 0], pre, atol=1e-5)
        assert torch.allclose(after.candidate_pooled(states[0])[row, 0], post, atol=1e-5)
        assert not torch.allclose(pre, post, atol=1e-2)
    with pytest.raises(ValueError, match="embedding_layer"):
        tiny_problem(tiny_llama, embedding_layer="middle")
    with pytest.raises(ValueError, match="native"):
        tiny_problem(tiny_llama, embedding_layer="pre_norm", forward_implementation="native")


def test_tbg_regime_prints_the_diagnostic_and_exits_by_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    from tokenized_bandit_gym.evaluation.cli import main

    options = ["--rounds", "2", "--max-length", "6", "--top-k", "4"]
    with pytest.warns(DeprecationWarning):
        status = main(["regime", "stories260K", "--env-id", "TokenizedAlignment-v0", *options])
    printed = capsys.readouterr().out
    assert status == 1 and "v=logprob, pooling=query_response" in printed
    assert "appendix D: 8.5, 21.1, 8.1, 20.2" in printed and "verdict: does not separate" in printed
    assert main(["regime", "stories260K", *options, "--value-map", "scaled_logprob", "--no-score-forced-eos"]) in (0, 1)
    assert "v=scaled_logprob" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:  # a size below its least value is refused while parsing
        main(["regime", "stories260K", "--rounds", "0"])
    assert refused.value.code == 2
    assert main(["regime", "stories260K", *options, "--pooling", "everything"]) == 2
    assert "pooling" in capsys.readouterr().err
