"""The public conformance checks (``tokenized_bandit_gym.testing``) on what a user adds: a family, an agent, an env.

Toy pieces defined here pass every check; broken ones fail with a ConformanceError that names the check,
the subject and the first difference (the checks must be able to fail).
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest

import tokenized_bandit_gym  # noqa: F401
from tokenized_bandit_gym import testing
from tokenized_bandit_gym.core import problem_factory
from tokenized_bandit_gym.core.meanpool_problem import MeanPoolProblem
from tokenized_bandit_gym.envs.tokenized_linear_bandit_env import TokenizedLinearBanditEnv
from tokenized_bandit_gym.task import Task
from tokenized_bandit_gym.testing import ConformanceError

SMALL = {"vocab_size": 4, "max_length": 3, "embedding_dim": 3}


@dataclass(frozen=True)
class HalfNormMeanPool(problem_factory.Family):
    """A user's family: mean-pooled token vectors with a shorter theta."""

    problem_class: ClassVar[type] = MeanPoolProblem
    theta_norm: float = 0.5


def test_a_toy_family_passes_every_env_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(problem_factory.FAMILIES, "half_norm_meanpool", HalfNormMeanPool)  # the one registry line
    assert testing.family_env_ids("half_norm_meanpool") == ["TokenizedLinearBandit-v0"]
    testing.check_family("half_norm_meanpool", **SMALL)
    theta = gym.make("TokenizedLinearBandit-v0", family="half_norm_meanpool").unwrapped.problem.theta
    assert float(theta.norm()) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="family 'no_such_family' is not in FAMILIES"):
        testing.check_family("no_such_family")


SHRUNK_MEANPOOL_MODULE = '''"""A user's family in a module of its own: mean-pooled token vectors shrunk by a gain."""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from tokenized_bandit_gym.core.instance_sizes import InstanceSizes
from tokenized_bandit_gym.core.meanpool_problem import MeanPoolProblem
from tokenized_bandit_gym.core.problem_factory import Family


class ShrunkMeanPoolProblem(MeanPoolProblem):
    """MeanPoolProblem with every token vector times ``shrink`` in (0, 1] (DDMC still exact)."""

    def __init__(self, sizes: InstanceSizes, shrink: float = 0.5, theta_norm: float = 1.0) -> None:
        if not 0.0 < shrink <= 1.0:
            raise ValueError(f"shrink must be in (0, 1], got {shrink!r}")
        super().__init__(sizes, theta_norm=theta_norm)
        self.shrink = shrink
        self.token_vectors = self.token_vectors * shrink


@dataclass(frozen=True)
class ShrunkMeanPool(Family):
    problem_class: ClassVar[type] = ShrunkMeanPoolProblem
    multi_armed: ClassVar[bool] = True
    shrink: float = 0.5
    theta_norm: float = 1.0
'''


def test_a_family_is_its_module_plus_one_registry_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ARCHITECTURE's recipe: the family's module and one line in FAMILIES, nothing else, and it plays both envs."""
    (tmp_path / "shrunk_meanpool_family.py").write_text(SHRUNK_MEANPOOL_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("shrunk_meanpool_family")
    monkeypatch.setitem(sys.modules, "shrunk_meanpool_family", module)  # forgotten again after the test
    monkeypatch.setitem(problem_factory.FAMILIES, "shrunk_meanpool", module.ShrunkMeanPool)  # the one line
    env_ids = testing.family_env_ids("shrunk_meanpool")
    assert env_ids == ["TokenizedLinearBandit-v0", "TokenizedMultiArmedBandit-v0"]
    testing.check_family("shrunk_meanpool", shrink=0.25, **SMALL)
    for env_id in env_ids:
        problem = gym.make(env_id, family="shrunk_meanpool", shrink=0.25, **SMALL).unwrapped.problem
        hidden = getattr(problem, "base", problem)  # the TMAB's hidden TLB instance
        assert isinstance(hidden, module.ShrunkMeanPoolProblem) and hidden.shrink == 0.25
        with pytest.raises(ValueError, match="shrink"):
            gym.make(env_id, family="shrunk_meanpool", shrink=2.0)
        with pytest.raises(ValueError, match="shrink=0.25 applies to family \\['shrunk_meanpool'\\]"):
            gym.make(env_id, family="meanpool", shrink=0.25)


class FirstAllowed:
    """A user's agent: the first allowed candidate, every step."""

    name = "first_allowed"

    def reset(self, task: Task, seed: int | None = None) -> None:
        self.rounds = 0

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        return int(np.flatnonzero(observation["action_mask"])[0])

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        self.rounds += 1


def test_a_toy_agent_passes_the_agent_checks() -> None:
    testing.check_agent(FirstAllowed, "TokenizedMultiArmedBandit-v0", env_kwargs={"vocab_size": 3, "max_length": 3})
    testing.check_agent(lambda: FirstAllowed(), "TokenizedLinearBandit-v0", env_kwargs=SMALL)


class AlwaysEOS(FirstAllowed):
    name = "always_eos"

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        return int(observation["candidate_tokens"].argmax())  # EOS is the last id


class Restless(FirstAllowed):
    """Each new instance plays differently: not a function of its seed."""

    name = "restless"
    instances = 0

    def reset(self, task: Task, seed: int | None = None) -> None:
        super().reset(task, seed)
        Restless.instances += 1
        self.offset = Restless.instances

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        allowed = np.flatnonzero(observation["action_mask"])
        return int(allowed[self.offset % allowed.size])


class NoUpdate:
    name = "no_update"

    def reset(self, task: Task, seed: int | None = None) -> None: ...

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        return 0


def test_broken_agents_fail_naming_the_check_and_the_first_difference() -> None:
    with pytest.raises(ConformanceError, match=r"valid actions check failed on agent AlwaysEOS.*action 3 is masked"):
        testing.check_agent(AlwaysEOS, "TokenizedLinearBandit-v0", env_kwargs={**SMALL, "fixed_length": True})
    testing.check_agent(AlwaysEOS, "TokenizedLinearBandit-v0", env_kwargs=SMALL)  # EOS allowed: fine
    with pytest.raises(ConformanceError, match=r"agent determinism check failed on agent Restless.*actions\[\d+\]"):
        testing.check_agent(Restless, "TokenizedLinearBandit-v0", env_kwargs=SMALL)
    with pytest.raises(ConformanceError, match="agent protocol check failed on agent NoUpdate"):
        testing.check_agent(NoUpdate, "TokenizedLinearBandit-v0", env_kwargs=SMALL)
    with pytest.raises(TypeError, match="agent must be a registered name"):
        testing.check_agent(3, "TokenizedLinearBandit-v0")  # type: ignore[arg-type]


class UnseededRewardEnv(TokenizedLinearBanditEnv):
    """Adds noise from an unseeded generator: not reproducible."""

    def step(self, action: Any) -> Any:
        observation, reward, terminated, truncated, info = super().step(action)
        return observation, reward + float(np.random.default_rng().random()), terminated, truncated, info


def test_a_broken_env_fails_naming_the_check_the_id_and_the_first_difference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        gym.registry, "UnseededReward-v0", gym.envs.registration.EnvSpec("UnseededReward-v0", UnseededRewardEnv)
    )
    with pytest.raises(ConformanceError, match=r"determinism check failed on UnseededReward-v0: trajectory\[1\]\[1\]"):
        testing.check_determinism("UnseededReward-v0")
    with pytest.raises(ConformanceError, match="gymnasium check_env check failed on UnseededReward-v0: Deterministic"):
        testing.check_gymnasium_api("UnseededReward-v0")  # Gymnasium's own AssertionError, named


def test_first_difference_names_the_path_and_honours_the_tolerance() -> None:
    assert testing.first_difference({"a": [1, np.zeros(2)]}, {"a": [1, np.zeros(2)]}) is None
    assert testing.first_difference({"a": [1, np.ones(2)]}, {"a": [1, np.zeros(2)]}, "x") == (
        "x['a'][1]: array([1., 1.]) != array([0., 0.])"
    )
    assert testing.first_difference(np.array([1.0 + 5e-5]), np.array([1.0]), atol=1e-4) is None
    assert testing.first_difference(np.array([1.0 + 5e-5]), np.array([1.0])) is not None
    assert testing.first_difference(np.array([3]), np.array([4]), atol=1e-4) is not None  # integers stay exact
    assert "shape (2,) != (3,)" in str(testing.first_difference(np.zeros(2), np.zeros(3)))
    assert testing.first_difference(np.array([np.nan]), np.array([np.nan])) is None
