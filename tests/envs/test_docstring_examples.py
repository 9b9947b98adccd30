"""The doctest in every env class docstring runs (the docstring is the documentation page)."""

from __future__ import annotations

import doctest
import importlib

import pytest

import tokenized_bandit_gym
from tokenized_bandit_gym.registration import SYNTHETIC_ENVS, VECTOR_ENTRY_POINTS

MODULES = sorted(
    {entry_point.split(":")[0] for entry_point, _ in SYNTHETIC_ENVS.values()}
    | {entry_point.split(":")[0] for entry_point in VECTOR_ENTRY_POINTS.values()}
    | {
        "tokenized_bandit_gym.adapters.pettingzoo_arena",
        "tokenized_bandit_gym.adapters.sb3.observation",
        "tokenized_bandit_gym.envs.language_model_config",
        "tokenized_bandit_gym.envs.synthetic_config",
        "tokenized_bandit_gym.wrappers.action_mask_alias",
    }
)


@pytest.mark.parametrize("module_name", MODULES)
def test_env_docstring_examples_run(module_name: str) -> None:
    assert tokenized_bandit_gym.registered_ids()
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
