"""The synthetic envs' one config (issue 50, item 1): keywords become it in one place, and every family option reaches
every env that plays the family.

A family option "reaches" the env when the problem gym.make builds holds the value (read back from the instance,
not from the config), and the instance differs from the one built at the family's default.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym
from tokenized_bandit_gym.core import FAMILIES, Family, families_playing
from tokenized_bandit_gym.core.problem_factory import Discounted, MeanPool, Needle
from tokenized_bandit_gym.core.stop_value_problem import StopValueProblem
from tokenized_bandit_gym.envs import (
    SyntheticBanditConfig,
    TokenizedLinearBanditConfig,
    TokenizedLinearBanditEnv,
    TokenizedMultiArmedBanditConfig,
    TokenizedMultiArmedBanditEnv,
)
from tokenized_bandit_gym.registration import SYNTHETIC_ENVS

assert tokenized_bandit_gym  # registers the ids


def _registered_family(env_id: str) -> Family:
    """The family (with its options) an id plays at its registered keywords."""
    family: Family = gym.make(env_id).unwrapped.config.family  # type: ignore[attr-defined]
    return family


def _non_default(value: float) -> float:
    """A valid value of a family option other than ``value`` (every option today lies in [0, 1] or above 0)."""
    return value / 2 if value > 0 else 0.5


def _instance(problem: Any) -> Any:
    """The family's own instance (a TMAB's hidden TLB instance under its stop value)."""
    return problem.base if isinstance(problem, StopValueProblem) else problem


def _read_back(problem: Any, option: str) -> float:
    """The option's value as the built instance holds it (``theta_norm`` is ``||theta||``)."""
    if option == "theta_norm":
        return float(problem.theta.norm())
    return float(getattr(problem, option))


def _tensors(problem: Any) -> dict[str, Any]:
    """Every tensor and number the instance holds."""
    return {key: value for key, value in vars(problem).items() if isinstance(value, (torch.Tensor, float))}


def _differs(first: dict[str, Any], second: dict[str, Any]) -> bool:
    for key in first.keys() & second.keys():
        a, b = first[key], second[key]
        if isinstance(a, torch.Tensor):
            if a.shape != b.shape or not torch.equal(a, b):
                return True
        elif a != b:
            return True
    return False


OPTION_CASES = [
    (env_id, option.name) for env_id in SYNTHETIC_ENVS for option in dataclasses.fields(_registered_family(env_id))
]


def test_every_synthetic_id_has_a_case_for_each_option_of_its_family() -> None:
    plays_with_options = {env_id for env_id in SYNTHETIC_ENVS if dataclasses.fields(_registered_family(env_id))}
    assert {env_id for env_id, _ in OPTION_CASES} == plays_with_options
    assert ("TokenizedMultiArmedBandit-v0", "theta_norm") in OPTION_CASES  # unreachable before the config


@pytest.mark.parametrize("env_id,option", OPTION_CASES)
def test_each_family_option_reaches_the_built_problem(env_id: str, option: str) -> None:
    default = getattr(_registered_family(env_id), option)
    value = _non_default(default)
    makers: list[Callable[..., Any]] = [gym.make, lambda env_id, **kw: gym.make_vec(env_id, num_envs=2, **kw)]
    for make in makers:
        env = make(env_id, **{option: value})
        baseline = make(env_id)
        problem = _instance(env.unwrapped.problem)
        assert _read_back(problem, option) == pytest.approx(value)
        assert _read_back(_instance(baseline.unwrapped.problem), option) == pytest.approx(default)
        assert _differs(_tensors(problem), _tensors(_instance(baseline.unwrapped.problem)))
        assert getattr(env.unwrapped.config.family, option) == value


def test_keywords_and_a_config_make_the_same_env() -> None:
    config = TokenizedLinearBanditConfig(vocab_size=6, max_length=4, embedding_dim=3, family=MeanPool(theta_norm=0.5))
    from_config = gym.make("TokenizedLinearBandit-v0", config=config)
    from_keywords = gym.make(
        "TokenizedLinearBandit-v0", vocab_size=6, max_length=4, embedding_dim=3, family="meanpool", theta_norm=0.5
    )
    assert from_config.unwrapped.config == from_keywords.unwrapped.config == config
    first, _ = from_config.reset(seed=2)
    second, _ = from_keywords.reset(seed=2)
    for key in first:
        np.testing.assert_array_equal(first[key], second[key])


def test_keywords_change_a_given_config_and_keep_its_family_options() -> None:
    config = TokenizedLinearBanditConfig(family=MeanPool(theta_norm=0.5))
    changed = TokenizedLinearBanditConfig.from_keywords(config, vocab_size=5, family="meanpool")
    assert changed == dataclasses.replace(config, vocab_size=5)
    switched = TokenizedLinearBanditConfig.from_keywords(config, family="needle")
    assert switched.family == Needle()  # another family starts from its own defaults
    assert TokenizedLinearBanditConfig.from_keywords(config) is config


def test_the_vector_env_and_pickling_carry_the_config() -> None:
    config = TokenizedMultiArmedBanditConfig(vocab_size=5, max_length=3, family=Discounted(alpha=0.5, theta_norm=0.5))
    envs = gym.make_vec("TokenizedMultiArmedBandit-v0", num_envs=3, config=config)
    assert envs.unwrapped.config == config
    env = TokenizedMultiArmedBanditEnv(config)
    assert pickle.loads(pickle.dumps(env)).config == config
    assert float(env.problem.base.theta.norm()) == pytest.approx(0.5)


def test_each_default_is_the_config_class_default() -> None:
    for env_class in (TokenizedLinearBanditEnv, TokenizedMultiArmedBanditEnv):
        assert env_class().config == env_class.config_class()
    assert TokenizedMultiArmedBanditConfig().vocab_size != TokenizedLinearBanditConfig().vocab_size


@pytest.mark.parametrize(
    "config_class,keywords,error,pattern",
    [
        (TokenizedLinearBanditConfig, {"no_such_keyword": 1}, TypeError, "no_such_keyword"),
        (TokenizedLinearBanditConfig, {"thetanorm": 0.5}, TypeError, "did you mean 'theta_norm'"),
        (TokenizedLinearBanditConfig, {"family": "meanpool", "alpha": 0.5}, ValueError, "alpha=0.5 applies to family"),
        (TokenizedLinearBanditConfig, {"family": "random_table"}, ValueError, "random_table"),
        (TokenizedMultiArmedBanditConfig, {"family": "markov"}, ValueError, "markov"),
        (TokenizedMultiArmedBanditConfig, {"needle_gap": 0.2}, TypeError, "needle_gap"),  # no TMAB family has it
        (TokenizedMultiArmedBanditConfig, {"family": "random_table", "alpha": 0.5}, ValueError, "alpha"),
    ],
)
def test_bad_keywords_are_refused_naming_them(config_class: Any, keywords: dict, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        config_class.from_keywords(**keywords)


def test_a_config_refuses_a_family_of_another_kind_or_a_name() -> None:
    with pytest.raises(ValueError, match="needle"):
        TokenizedMultiArmedBanditConfig(family=Needle())
    with pytest.raises(TypeError, match="Family dataclass"):
        TokenizedLinearBanditConfig(family="meanpool")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="TokenizedMultiArmedBanditConfig"):
        TokenizedMultiArmedBanditEnv(TokenizedLinearBanditConfig())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="the kinds' base"):
        SyntheticBanditConfig()


def test_families_playing_reads_the_registry_now(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclasses.dataclass(frozen=True)
    class LateMeanPool(MeanPool):
        linear = False

    monkeypatch.setitem(FAMILIES, "late_meanpool", LateMeanPool)
    assert "late_meanpool" in families_playing("multi_armed")
    assert "late_meanpool" not in families_playing("linear")
