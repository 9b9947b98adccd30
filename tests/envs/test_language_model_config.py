"""The LLM envs' one config (issue 50, item 1): keywords become it in one place, every field reaches what is built.

A field "reaches" the env when the env or the problem gym.make builds holds the value (read back from the
instance, not from the config), or refuses it where the instance cannot take it (``chat_template=True`` on a
model without a template).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import pickle
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym
from tokenized_bandit_gym.envs.language_model_config import (
    Feedback,
    LanguageModelEnvConfig,
    Rewards,
    TokenizedAlignmentConfig,
    TokenizedDecodingConfig,
)
from tokenized_bandit_gym.envs.tokenized_alignment_env import TokenizedAlignmentEnv
from tokenized_bandit_gym.envs.tokenized_decoding_env import TokenizedDecodingEnv
from tokenized_bandit_gym.llm.language_model_config import (
    Candidates,
    LanguageModelProblemConfig,
    LengthRule,
    QuerySource,
    Reading,
    problem_argument_names,
)
from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem
from tokenized_bandit_gym.llm.load_language_model import DEFAULT_MODEL, load_language_model
from tokenized_bandit_gym.registration import ALIGNMENT_V1_READING

assert tokenized_bandit_gym  # registers the ids

TINY = {"max_length": 3, "top_k": 3}
"""Sizes every env of these tests is built at (fast on stories260K)."""


def test_defaults_and_the_v1_reading_are_the_configs_the_keywords_describe() -> None:
    assert TokenizedAlignmentConfig.from_keywords() == TokenizedAlignmentConfig()
    assert TokenizedDecodingConfig.from_keywords() == TokenizedDecodingConfig()
    v1 = TokenizedAlignmentConfig(
        reading=Reading(value_map="scaled_logprob", pooling="response", theta_scale="literal", score_forced_eos=False)
    )
    assert TokenizedAlignmentConfig.from_keywords(**ALIGNMENT_V1_READING) == v1
    assert gym.make("TokenizedAlignment-v1", **TINY).unwrapped.config == TokenizedAlignmentConfig.from_keywords(
        v1, **TINY
    )


def test_non_default_keywords_land_in_their_parts() -> None:
    config = TokenizedAlignmentConfig.from_keywords(
        top_k=3, max_length=5, fixed_length=False, min_length=2, queries=["a", "b"], pooling="response",
        noise="bounded", feedback="pairwise", instance_seed=7, theta=[0.5, 0.25],
    )  # fmt: skip
    expected = TokenizedAlignmentConfig(
        candidates=Candidates(top_k=3),
        length=LengthRule(max_length=5, fixed_length=False, min_length=2),
        query_source=QuerySource(("a", "b")),
        reading=Reading(pooling="response", theta=(0.5, 0.25)),
        rewards=Feedback(noise="bounded", feedback="pairwise"),
        instance_seed=7,
    )
    assert config == expected
    assert TokenizedAlignmentConfig.from_keywords(config) is config
    assert TokenizedAlignmentConfig.from_keywords(config, top_k=4) == dataclasses.replace(
        expected, candidates=Candidates(top_k=4)
    )
    decoding = TokenizedDecodingConfig.from_keywords(query="Hi.", observe_logprobs=True, beam_width=2)
    assert decoding == TokenizedDecodingConfig(
        query="Hi.", observe_logprobs=True, rewards=Rewards(optimal_kind="oracle_beam", beam_width=2)
    )


def _write_comparisons(path: Path) -> str:
    rows = [{"good": f"The cat sat on mat {i}.", "bad": f"Dog ran far away {i}!"} for i in range(12)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def _reach_cases(tmp_path: Path) -> dict[str, tuple[dict[str, Any], Callable[[Any], bool]]]:
    """Per alignment keyword: keywords that set it away from its default, and what the built env shows."""
    model, tokenizer = load_language_model(DEFAULT_MODEL)
    csv = tmp_path / "queries.csv"
    csv.write_text("prompt\nOnce there was a frog.\n")
    jsonl = tmp_path / "queries.jsonl"
    jsonl.write_text(json.dumps({"turn": {"text": "A bird sang."}}) + "\n")
    comparisons = _write_comparisons(tmp_path / "pairs.jsonl")

    def problem(env: Any) -> LanguageModelProblem:
        return env.problem  # type: ignore[no-any-return]

    return {
        "model": ({"model": model, "tokenizer": tokenizer}, lambda env: problem(env).model is model),
        "tokenizer": ({"model": model, "tokenizer": tokenizer}, lambda env: problem(env).tokenizer is tokenizer),
        "dtype": ({"dtype": "float64"}, lambda env: next(problem(env).model.parameters()).dtype == torch.float64),
        "device": ({"device": torch.device("cpu")}, lambda env: problem(env).device.type == "cpu"),
        "trust_remote_code": (
            {"trust_remote_code": True},
            lambda env: problem(env).recipe.config.source.trust_remote_code is True,
        ),
        "attn_implementation": (
            {"attn_implementation": "eager", "forward_implementation": "transformers"},
            lambda env: problem(env).model.config._attn_implementation == "eager",
        ),
        "forward_implementation": (
            {"forward_implementation": "transformers"},
            lambda env: problem(env).forward_implementation == "transformers",
        ),
        "candidate_batching": (
            {"candidate_batching": "expand"},
            lambda env: problem(env).candidate_batching == "expand",
        ),
        "chat_template": ({"chat_template": False}, lambda env: problem(env).chat_template is False),
        "query_truncation": ({"query_truncation": "left"}, lambda env: problem(env).query_truncation == "left"),
        "queries": ({"queries": ["A small query."]}, lambda env: problem(env).query_texts == ["A small query."]),
        "query_column": (
            {"queries": str(csv), "query_column": "prompt"},
            lambda env: problem(env).query_texts == ["Once there was a frog."],
        ),
        "query_field": (
            {"queries": str(jsonl), "query_field": "turn.text"},
            lambda env: problem(env).query_texts == ["A bird sang."],
        ),
        "gamma": ({"gamma": 0.5}, lambda env: problem(env).gamma == 0.5),
        "value_map": ({"value_map": "prob"}, lambda env: problem(env).value_map.name == "prob"),
        "theta": ({"theta": "random"}, lambda env: "random" in problem(env).theta_source),
        "theta_scale": ({"theta_scale": "literal"}, lambda env: problem(env).theta_scale == "literal"),
        "score_forced_eos": ({"score_forced_eos": False}, lambda env: problem(env).score_forced_eos is False),
        "pooling": ({"pooling": "response"}, lambda env: problem(env).pooling == "response"),
        "embedding_norm": ({"embedding_norm": "l2"}, lambda env: problem(env).embedding_norm == "l2"),
        "embedding_layer": ({"embedding_layer": "pre_norm"}, lambda env: problem(env).embedding_layer == "pre_norm"),
        "comparisons": (
            {"theta": "comparisons", "comparisons": comparisons, "comparison_fields": ("good", "bad")},
            lambda env: problem(env).preference_fit is not None,
        ),
        "comparison_fields": (
            {"theta": "comparisons", "comparisons": comparisons, "comparison_fields": ("good", "bad")},
            lambda env: getattr(problem(env).preference_fit, "num_pairs", None) == 12,
        ),
        "top_k": ({"top_k": 2}, lambda env: problem(env).top_k == 2 and env.action_space.n == 2),
        "eos_candidate": ({"eos_candidate": False}, lambda env: problem(env).eos_candidate is False),
        "max_length": ({"max_length": 2}, lambda env: problem(env).max_length == 2),
        "fixed_length": ({"fixed_length": False}, lambda env: problem(env).fixed_length is False),
        "min_length": ({"fixed_length": False, "min_length": 2}, lambda env: problem(env).min_length == 2),
        "noise": ({"noise": "bounded"}, lambda env: env.noise_model.kind == "bounded"),
        "noise_scale": ({"noise_scale": 0.3}, lambda env: env.noise_model.scale == 0.3),
        "optimal_kind": ({"optimal_kind": "oracle_beam"}, lambda env: env.optimal_kind == "oracle_beam"),
        "beam_width": ({"beam_width": 2}, lambda env: env.beam_width == 2),
        "strict_actions": ({"strict_actions": True}, lambda env: env.strict_actions is True),
        "feedback": ({"feedback": "pairwise"}, lambda env: "first_response" in env.observation_space.spaces),
        "preference_temperature": (
            {"feedback": "pairwise", "preference_temperature": 0.5},
            lambda env: env.feedback_channel.temperature == 0.5,
        ),
        "instance_seed": (
            {"theta": "random", "instance_seed": 3},
            lambda env: "instance_seed=3" in problem(env).theta_source,
        ),
    }


DECODING_CASES: dict[str, tuple[dict[str, Any], Callable[[Any], bool]]] = {
    "query": ({"query": "Tom had a red ball."}, lambda env: env.problem.query_texts == ["Tom had a red ball."]),
    "value_map": ({"value_map": "logprob"}, lambda env: env.problem.value_map.name == "logprob"),
    "observe_logprobs": ({"observe_logprobs": True}, lambda env: "candidate_logprobs" in env.observation_space.spaces),
    "top_k": ({"top_k": 2}, lambda env: env.problem.top_k == 2),
    "beam_width": ({"beam_width": 3}, lambda env: env.beam_width == 3),
}


def test_every_alignment_keyword_reaches_the_built_env(tmp_path: Path) -> None:
    cases = _reach_cases(tmp_path)
    assert set(cases) == set(TokenizedAlignmentConfig.keyword_defaults())  # a new field needs its case here
    for name, (keywords, shows) in cases.items():
        env = gym.make("TokenizedAlignment-v0", **{**TINY, **keywords}).unwrapped
        assert shows(env), f"{name}={keywords} did not reach the env"
        if name not in ("device", "tokenizer", "model", "chat_template"):  # those read the same at the default
            baseline = gym.make("TokenizedAlignment-v0", **TINY).unwrapped
            assert not shows(baseline), f"{name}: the default already shows it"
    with pytest.raises(ValueError, match="no chat template"):  # True reaches the problem, which refuses it here
        gym.make("TokenizedAlignment-v0", chat_template=True, **TINY)


def test_the_decoding_keywords_reach_the_built_env() -> None:
    shared = set(TokenizedDecodingConfig.keyword_defaults()) - {"query", "value_map", "observe_logprobs"}
    assert shared < set(TokenizedAlignmentConfig.keyword_defaults())  # reached as for alignment (same parts)
    for name, (keywords, shows) in DECODING_CASES.items():
        env = gym.make("TokenizedDecoding-v0", **{"max_length": 3, **keywords}).unwrapped
        assert shows(env), f"{name}={keywords} did not reach the env"
        assert not shows(gym.make("TokenizedDecoding-v0", max_length=3).unwrapped)


def test_the_problem_gets_every_argument_from_the_config() -> None:
    config = TokenizedAlignmentConfig().problem_config()
    parameters = inspect.signature(LanguageModelProblem).parameters
    assert set(config.problem_arguments()) == problem_argument_names()  # every argument given by the config
    assert problem_argument_names() == set(parameters) - {"model", "tokenizer", "queries", "theta"}
    for name, value in config.problem_arguments().items():  # built directly, the problem has the same defaults
        assert parameters[name].default == value, name


@pytest.mark.parametrize(
    "config_class,keywords,error,pattern",
    [
        (TokenizedAlignmentConfig, {"embeding_norm": "l2"}, TypeError, "did you mean 'embedding_norm'"),
        (TokenizedAlignmentConfig, {"topk": 3}, TypeError, "did you mean 'top_k'"),
        (TokenizedDecodingConfig, {"gamma": 0.5}, TypeError, "'gamma'"),  # decoding's u = v(p): no gamma
        (TokenizedDecodingConfig, {"feedback": "pairwise"}, TypeError, "'feedback'"),
        (TokenizedAlignmentConfig, {"embedding_norm": "l3"}, ValueError, "embedding_norm.*'l3'"),
        (TokenizedAlignmentConfig, {"pooling": "mean"}, ValueError, "pooling.*'mean'"),
        (TokenizedAlignmentConfig, {"gamma": 1.5}, ValueError, "gamma"),
        (TokenizedAlignmentConfig, {"top_k": 0}, ValueError, "top_k"),
        (TokenizedAlignmentConfig, {"min_length": 2}, ValueError, "min_length"),  # fixed_length=True already
        (TokenizedAlignmentConfig, {"theta": "hh"}, ValueError, "theta.*'hh'"),
        (TokenizedAlignmentConfig, {"feedback": "duel"}, ValueError, "feedback.*'duel'"),
        (TokenizedAlignmentConfig, {"noise": "cauchy"}, ValueError, "noise.*'cauchy'"),
        (TokenizedAlignmentConfig, {"optimal_kind": "exact"}, ValueError, "optimal_kind.*'exact'"),
        (TokenizedAlignmentConfig, {"instance_seed": -1}, ValueError, "instance_seed"),
        (TokenizedDecodingConfig, {"query": " "}, ValueError, "query"),
        (TokenizedDecodingConfig, {"value_map": "exp"}, ValueError, "value_map.*'exp'"),
        (TokenizedAlignmentConfig, {"strict_actions": 1}, TypeError, "strict_actions"),
    ],
)
def test_bad_keywords_are_refused_naming_them(
    config_class: type[LanguageModelEnvConfig], keywords: dict[str, Any], error: type[Exception], pattern: str
) -> None:
    with pytest.raises(error, match=pattern):
        config_class.from_keywords(**keywords)


def test_a_config_of_another_kind_or_the_base_is_refused() -> None:
    with pytest.raises(TypeError, match="TokenizedDecodingConfig"):
        TokenizedDecodingEnv(TokenizedAlignmentConfig())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="the LLM kinds' base"):
        LanguageModelEnvConfig()


def _trajectory(env: Any, seed: int = 0, steps: int = 8) -> list[Any]:
    """Observations, rewards and flags of ``steps`` steps of action 0 (resetting at each round's end)."""
    out: list[Any] = []
    observation, _ = env.reset(seed=seed)
    for _ in range(steps):
        observation, reward, terminated, truncated, _ = env.step(
            np.zeros(env.num_envs, dtype=np.int64) if hasattr(env, "num_envs") else 0
        )
        out.append(({key: np.asarray(value) for key, value in observation.items()}, reward, terminated))
        if not hasattr(env, "num_envs") and terminated:
            env.reset()
    return out


def _assert_same(first: list[Any], second: list[Any]) -> None:
    for (obs_a, reward_a, done_a), (obs_b, reward_b, done_b) in zip(first, second, strict=True):
        assert obs_a.keys() == obs_b.keys()
        for key in obs_a:
            np.testing.assert_array_equal(obs_a[key], obs_b[key])
        np.testing.assert_array_equal(reward_a, reward_b)
        np.testing.assert_array_equal(done_a, done_b)


@pytest.mark.parametrize(
    "env_id,keywords",
    [
        ("TokenizedAlignment-v0", {**TINY, "pooling": "response", "noise_scale": 0.2}),
        ("TokenizedAlignment-v1", TINY),
        ("TokenizedDecoding-v0", {**TINY, "observe_logprobs": True}),
    ],
)
def test_a_config_and_its_keywords_play_the_same_trajectory(env_id: str, keywords: dict[str, Any]) -> None:
    flat = gym.make(env_id, **keywords)
    config = flat.unwrapped.config
    from_config = gym.make(env_id, config=config)
    assert from_config.unwrapped.config == config
    _assert_same(_trajectory(flat), _trajectory(from_config))
    vector_flat = gym.make_vec(env_id, 2, vectorization_mode="vector_entry_point", **keywords)
    vector_config = gym.make_vec(env_id, 2, vectorization_mode="vector_entry_point", config=config)
    assert vector_config.unwrapped.config == config
    _assert_same(_trajectory(vector_flat), _trajectory(vector_config))


def test_pickling_carries_the_config_and_the_recipe_holds_its_problem_part() -> None:
    config = TokenizedAlignmentConfig.from_keywords(**TINY, theta="random", instance_seed=2, noise_scale=0.0)
    env = TokenizedAlignmentEnv(config)
    recipe = env.problem.recipe
    assert recipe is not None
    problem_config = recipe.config
    assert isinstance(problem_config, LanguageModelProblemConfig)
    assert problem_config.candidates == config.candidates and problem_config.length == config.length
    assert problem_config.query_source.queries == tuple(env.problem.query_texts)  # resolved: no file read again
    copy = pickle.loads(pickle.dumps(env))
    assert copy.config == config
    torch.testing.assert_close(copy.problem.latent_theta, env.problem.latent_theta)
    assert copy.problem.theta_source == env.problem.theta_source
    _assert_same(_trajectory(copy), _trajectory(env))


def test_a_loaded_model_is_held_by_the_config() -> None:
    model, tokenizer = load_language_model(DEFAULT_MODEL)
    env = TokenizedAlignmentEnv(model=model, tokenizer=tokenizer, **TINY)
    assert env.config.source.model is model and env.config == TokenizedAlignmentConfig.from_keywords(
        model=model, tokenizer=tokenizer, **TINY
    )
    with pytest.raises(TypeError, match="passed in loaded"):  # as before the config: nothing to rebuild the model from
        pickle.dumps(env)


_TABLE_ROW = re.compile(r"^\s*\| (``\w+``(?:, ``\w+``)*) \| (.*?) \| .* \|$")


def _table_defaults(env_class: type) -> dict[str, str]:
    """``{keyword: default cell}`` of the env docstring's keyword table (a row of several keywords split)."""
    rows: dict[str, str] = {}
    lines = (env_class.__doc__ or "").splitlines()
    start = next(number for number, line in enumerate(lines) if line.strip().startswith("| keyword | default |"))
    for line in lines[start + 2 :]:
        if not line.strip().startswith("|"):
            break
        match = _TABLE_ROW.match(line)
        if match is None:
            continue
        names = re.findall(r"``(\w+)``", match.group(1))
        cells = [cell.strip() for cell in match.group(2).split(", ")] if len(names) > 1 else [match.group(2).strip()]
        for name, cell in zip(names, cells if len(cells) == len(names) else [""] * len(names), strict=True):
            rows[name] = cell
    return rows


@pytest.mark.parametrize("env_class", [TokenizedAlignmentEnv, TokenizedDecodingEnv])
def test_each_docstring_table_default_is_the_config_default(env_class: Any) -> None:
    table = _table_defaults(env_class)
    defaults = env_class.config_class.keyword_defaults()
    assert table and set(table) <= set(defaults) | {"render_mode"}
    if env_class is TokenizedAlignmentEnv:
        assert set(defaults) <= set(table)  # every alignment keyword is in its table
    checked = 0
    for name, cell in table.items():
        try:
            written = ast.literal_eval(cell.replace("``", ""))
        except (ValueError, SyntaxError):
            continue  # a description ("shipped ``stories260K``", "story openings"), not a value
        assert written == defaults[name], (
            f"{env_class.__name__}'s table says {name}={cell}, the config {defaults[name]!r}"
        )
        checked += 1
    assert checked >= len(table) - 6
