"""Spec parsing and validation: every error names the field and the bad value."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tokenized_bandit_gym.evaluation.leaderboard_spec import SHIPPED_SPECS, SpecError, load_spec, parse_spec

DEFAULT_SPEC = SHIPPED_SPECS / "leaderboard.toml"

VALID: dict[str, Any] = {
    "rounds": 20,
    "seeds": [0, 1],
    "task": [
        {"id": "TokenizedLinearBandit-v0", "kwargs": {"vocab_size": 6, "max_length": 3}},
        {"id": "TokenizedMultiArmedBanditRandomTable-v0", "label": "table"},
    ],
    "agent": [{"name": "random"}, {"name": "oracle_greedy", "tasks": ["table"], "label": "oracle"}],
}


def spec_with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(VALID)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


def test_valid_spec_expands_into_runs() -> None:
    spec = parse_spec(VALID)
    runs = spec.runs()
    # 2 tasks x random x 2 seeds + 1 task x oracle x 2 seeds
    assert len(runs) == 6
    assert len({run.key for run in runs}) == 6
    assert spec.tasks[0].label == "TokenizedLinearBandit-v0(max_length=3, vocab_size=6)"
    assert {run.agent_label for run in runs if run.task_label == "table"} == {"random", "oracle"}


def test_seed_count_means_range() -> None:
    assert parse_spec(spec_with(("seeds",), 3), check_registry=False).seeds == (0, 1, 2)


def test_key_depends_on_results_not_labels() -> None:
    first = parse_spec(VALID).runs()
    relabelled = parse_spec(spec_with(("task", 0, "label"), "other name")).runs()
    assert [run.key for run in first] != [] and {run.key for run in first} == {run.key for run in relabelled}
    longer = parse_spec(spec_with(("rounds",), 21)).runs()
    assert not {run.key for run in first} & {run.key for run in longer}


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("rounds",), 0, ["rounds", "0"]),
        (("rounds",), "ten", ["rounds", "'ten'"]),
        (("rounds",), True, ["rounds", "True"]),
        (("seeds",), [0, -1], ["seeds[1]", "-1"]),
        (("seeds",), [1, 1], ["seeds", "[1, 1]"]),
        (("seeds",), [], ["seeds", "[]"]),
        (("seeds",), "0", ["seeds", "'0'"]),
        (("title",), "", ["title", "''"]),
        (("colour",), "red", ["colour", "'red'"]),
        (("task",), [], ["task", "[]"]),
        (("task", 0, "id"), "NoSuchEnv-v0", ["task[0].id", "'NoSuchEnv-v0'"]),
        (("task", 0, "id"), 3, ["task[0].id", "3"]),
        (("task", 0, "kwargs"), {"vocab_size": -2}, ["task[0].kwargs", "-2"]),
        (("task", 0, "kwargs"), {"no_such_kwarg": 1}, ["task[0].kwargs", "no_such_kwarg"]),
        (("task", 0, "kwargs"), [1, 2], ["task[0].kwargs", "[1, 2]"]),
        (("task", 0, "kwargs"), {"noise_scale": float("nan")}, ["task[0].kwargs.noise_scale", "nan"]),
        (("task", 0, "rounds"), -5, ["task[0].rounds", "-5"]),
        (("task", 1, "label"), "TokenizedLinearBandit-v0(max_length=3, vocab_size=6)", ["task[1].label"]),
        (("task", 1, "colour"), "red", ["task[1].colour", "'red'"]),
        (("agent", 0, "name"), "no_such_agent", ["agent[0].name", "'no_such_agent'"]),
        (("agent", 0, "kwargs"), {"beta": 0.1}, ["agent[0].kwargs", "beta"]),
        (("agent", 1, "tasks"), ["nope"], ["agent[1].tasks[0]", "'nope'"]),
        (("agent", 1, "tasks"), "table", ["agent[1].tasks", "'table'"]),
        (("agent", 1, "label"), "random", ["agent[1].label", "'random'"]),
        (("task", 0, "horizons"), [5, 20], ["task[0].horizons[1]", "20"]),
        (("task", 0, "horizons"), [5, 5], ["task[0].horizons[0]", "5"]),
        (("task", 0, "horizons"), 5, ["task[0].horizons", "5"]),
        (("task", 0, "caveat"), 3, ["task[0].caveat", "3"]),
        (("agent", 0, "reference"), "yes", ["agent[0].reference", "'yes'"]),
        (("agent", 0, "theory_exponent"), 1.5, ["agent[0].theory_exponent", "1.5"]),
    ],
)
def test_invalid_field_is_named_with_its_value(path: tuple[Any, ...], value: Any, expected: list[str]) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_with(path, value))
    for fragment in expected:
        assert fragment in str(caught.value)


@pytest.mark.parametrize("missing", ["rounds", "seeds", "task", "agent"])
def test_missing_top_level_field_is_named(missing: str) -> None:
    data = copy.deepcopy(VALID)
    del data[missing]
    with pytest.raises(SpecError, match=missing):
        parse_spec(data)


def test_missing_task_id_and_agent_name_are_named() -> None:
    with pytest.raises(SpecError, match=r"task\[1\]\.id"):
        parse_spec(spec_with(("task", 1), {"kwargs": {}}))
    with pytest.raises(SpecError, match=r"agent\[0\]\.name"):
        parse_spec(spec_with(("agent", 0), {"kwargs": {}}))


def test_bad_toml_and_missing_file_are_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("rounds = = 3\n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(bad)
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "missing.toml")


def test_example_leaderboard_spec_is_well_formed() -> None:
    spec = load_spec(DEFAULT_SPEC, check_registry=False)
    assert len(spec.tasks) >= 3 and len(spec.seeds) >= 2
    names = {agent.name for agent in spec.agents}
    assert {"random", "oracle_greedy"} <= names


def test_default_suite_sizes_its_tmab_so_greedy_etc_commits_within_t() -> None:
    import gymnasium as gym

    from tokenized_bandit_gym.agents.greedy_etc import default_exploration_rounds

    spec = load_spec(DEFAULT_SPEC, check_registry=False)
    etc = next(agent for agent in spec.agents if agent.name.endswith("greedy_etc"))
    assert etc.theory_exponent == pytest.approx(2 / 3)
    assert next(agent for agent in spec.agents if agent.name == "eoful").theory_exponent == 0.5
    assert {agent.name for agent in spec.agents if agent.reference} == {"random", "oracle_greedy"}
    for task in spec.tasks:
        if etc.tasks is not None and task.label not in etc.tasks:
            continue
        assert len(task.horizons) >= 2 and task.caveat
        env = gym.make(task.id, **task.kwargs)
        vocab_size, max_length = env.unwrapped.problem.vocab_size, env.unwrapped.problem.max_length
        # Algorithm 2 explores at most (L - 1) n N rounds; at T it must leave a quarter of T committed.
        exploration = (max_length - 1) * vocab_size * default_exploration_rounds(task.rounds)
        assert exploration < 0.75 * task.rounds, (task.label, task.rounds, exploration)
