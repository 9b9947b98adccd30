"""A user's own agent goes wherever a built-in one goes: "module:Class", entry points, ``tbg run --import``.

Each way is run from the command line with two worker processes (and on Ray, slow), the agents guide's
(docs/AGENTS.md) example is run exactly as printed, and bad references are refused before any run, naming them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tokenized_bandit_gym.evaluation.agent_support import (
    BUILT_IN_UNSUPPORTED,
    TASK_KINDS,
    agent_support,
    declared_support,
)
from tokenized_bandit_gym.evaluation.leaderboard_spec import SpecError, parse_spec
from tokenized_bandit_gym.evaluation.results_store import ResultsStore
from tokenized_bandit_gym.registration import (
    AGENT_ENTRY_POINTS,
    AgentLoadError,
    agent_registrations,
    built_in_agent_names,
    load_agent_class,
    make_agent,
    register_agent,
    restore_agent_registrations,
)
from tokenized_bandit_gym.testing import check_agent

REPO = Path(__file__).resolve().parents[2]
AGENTS_GUIDE = REPO / "docs" / "AGENTS.md"


def guide_user_agent_files() -> tuple[str, str, str]:
    """The agents guide's agent module, its spec and its command, exactly as printed."""
    text = AGENTS_GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"```(python|toml|bash)\n(.*?)```", text, re.S)
    module = next(body for kind, body in blocks if kind == "python" and "class EpsilonGreedy" in body)
    spec = next(body for kind, body in blocks if kind == "toml" and "epsilon_greedy" in body)
    command = next(body for kind, body in blocks if kind == "bash" and "--import my_agents" in body)
    return module, spec, command.strip()


def fake_distribution(site: Path, name: str, entry_points: dict[str, str]) -> None:
    """An installed distribution (a ``.dist-info`` folder on the path) listing agents as entry points."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[tokenized_bandit_gym.agents]\n{lines}")


def tbg(arguments: list[str], cwd: Path, python_path: list[Path], timeout: float = 600) -> subprocess.CompletedProcess:
    """``tbg ARGUMENTS`` in a fresh interpreter with ``python_path`` first on its path (as a user's shell)."""
    path = os.pathsep.join([*(str(entry) for entry in python_path), str(REPO)])
    command = [sys.executable, "-m", "tokenized_bandit_gym.evaluation.cli", *arguments]
    return subprocess.run(
        command, cwd=cwd, env=dict(os.environ, PYTHONPATH=path), capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def user_files(tmp_path: Path) -> Path:
    module, spec, _ = guide_user_agent_files()
    (tmp_path / "my_agents.py").write_text(module)
    (tmp_path / "my_leaderboard.toml").write_text(spec)
    return tmp_path


def stored_agents(store: Path) -> dict[str, int]:
    with ResultsStore(store, create=False) as results:
        counts: dict[str, int] = {}
        for record in results.records():
            counts[record.spec.agent] = counts.get(record.spec.agent, 0) + 1
        return counts


def test_guide_example_runs_as_printed_with_two_workers(user_files: Path) -> None:
    _, _, command = guide_user_agent_files()
    arguments = command.split()
    assert arguments[:2] == ["tbg", "run"] and "--workers" in arguments
    # tbg is the console script; `python -m` runs the same main() without the current folder on the path.
    completed = subprocess.run(
        [sys.executable, "-c", "import sys; from tokenized_bandit_gym.evaluation.cli import main; sys.exit(main())"]
        + arguments[1:],
        cwd=user_files,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "epsilon_greedy" in completed.stdout and "greedy_etc" in completed.stdout
    assert stored_agents(user_files / "my.sqlite") == {"epsilon_greedy": 2, "greedy_etc": 2}
    # Progress on a stream that is not a terminal: plain lines, no carriage returns or escapes, never past the total.
    assert "\r" not in completed.stderr and "\x1b" not in completed.stderr
    counts = [tuple(map(int, found)) for found in re.findall(r"rounds: (\d+)/(\d+) rounds", completed.stderr)]
    assert counts and all(done <= total for done, total in counts) and counts[-1][0] == counts[-1][1] == 4 * 300


SPEC_OF_EVERY_WAY = """
rounds = 40
seeds = 2

[[task]]
id = "TokenizedMultiArmedBandit-v0"
kwargs = {{ vocab_size = 3, max_length = 3 }}

[[agent]]
name = "my_agents:EpsilonGreedy"

[[agent]]
name = "installed_epsilon_greedy"
kwargs = {{ epsilon = 0.2 }}
{imported}
"""


@pytest.mark.parametrize("backend", ["local", pytest.param("ray", marks=pytest.mark.slow)])
def test_module_class_entry_point_and_import_play_in_workers(user_files: Path, backend: str) -> None:
    if backend == "ray" and importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed (the distributed extra)")
    site = user_files / "site"
    fake_distribution(site, "user_agents", {"installed_epsilon_greedy": "my_agents:EpsilonGreedy"})
    imported = '\n[[agent]]\nname = "epsilon_greedy"\nkwargs = { epsilon = 0.3 }\n'
    (user_files / "every_way.toml").write_text(SPEC_OF_EVERY_WAY.format(imported=imported))
    arguments = ["run", "every_way.toml", "--import", "my_agents", "--store", "s.sqlite", "--no-report"]
    arguments += ["--workers", "2"] if backend == "local" else ["--backend", "ray"]
    completed = tbg(arguments, user_files, [site, user_files])
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert stored_agents(user_files / "s.sqlite") == {
        "my_agents:EpsilonGreedy": 2,
        "installed_epsilon_greedy": 2,
        "epsilon_greedy": 2,
    }


def test_readme_agent_passes_the_conformance_checks(user_files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's agent passes ``tokenized_bandit_gym.testing.check_agent`` by its "module:Class" reference."""
    monkeypatch.syspath_prepend(str(user_files))
    monkeypatch.setattr("tokenized_bandit_gym.registration.AGENT_ENTRY_POINTS", dict(AGENT_ENTRY_POINTS))
    try:
        check_agent("my_agents:EpsilonGreedy", "TokenizedMultiArmedBandit-v0", rounds=20)
    finally:
        sys.modules.pop("my_agents", None)  # the module of this test's folder


def test_bad_module_class_is_refused_at_spec_load_naming_it() -> None:
    def spec(name: str) -> dict:
        return {"rounds": 5, "seeds": 1, "task": [{"id": "TokenizedLinearBandit-v0"}], "agent": [{"name": name}]}

    with pytest.raises(SpecError, match=r"'no_such_module_xyz:Agent'.*cannot import module 'no_such_module_xyz'"):
        parse_spec(spec("no_such_module_xyz:Agent"))
    with pytest.raises(SpecError, match=r"'json:JSONDecoder'.*is not an agent class"):
        parse_spec(spec("json:JSONDecoder"))
    with pytest.raises(SpecError, match=r"'json:NoSuchClass'.*has no attribute 'NoSuchClass'"):
        parse_spec(spec("json:NoSuchClass"))
    with pytest.raises(SpecError, match=r"'a:b:c' is not a registered agent"):
        parse_spec(spec("a:b:c"))


def test_failing_entry_points_are_reported_by_name_and_do_not_hide_the_others(tmp_path: Path) -> None:
    entry_points = {
        "broken_import": "no_such_module_xyz:Agent",
        "not_an_agent": "json:JSONDecoder",
        "malformed": "no_colon_here",
        "eoful": "json:JSONDecoder",  # clashes with a built-in name
    }
    fake_distribution(tmp_path, "broken_agents", entry_points)
    completed = tbg(["list"], tmp_path, [tmp_path])
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = completed.stdout.splitlines()

    def line_of(name: str) -> str:
        return "\n".join(line for line in lines if line.split() and line.split()[0] == name)

    assert "no_such_module_xyz" in line_of("broken_import") and "not usable" in line_of("broken_import")
    assert "is not an agent class" in line_of("not_an_agent")
    assert "not 'module:Class'" in line_of("malformed")
    assert "clashes" in line_of("eoful") and "linear, LLM" in line_of("eoful")  # the built-in eoful stays
    assert line_of("random").split()[1:] == ["linear,", "TMAB,", "LLM"]


def test_registration_is_repeatable_and_carried_to_another_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tokenized_bandit_gym.registration.AGENT_ENTRY_POINTS", dict(AGENT_ENTRY_POINTS))
    register_agent("copy_of_random", "tokenized_bandit_gym.agents.random_agent:RandomAgent")
    register_agent("copy_of_random", "tokenized_bandit_gym.agents.random_agent:RandomAgent")  # same again: fine
    with pytest.raises(ValueError, match="already registered"):
        register_agent("copy_of_random", "tokenized_bandit_gym.agents.eoful:EOFUL")
    carried = agent_registrations()
    assert ("copy_of_random", "tokenized_bandit_gym.agents.random_agent:RandomAgent") in carried.entry_points
    restore_agent_registrations(carried)  # what a worker does; here every name is already there
    assert type(make_agent("copy_of_random")).__name__ == "RandomAgent"
    assert load_agent_class("tokenized_bandit_gym.agents.eoful:EOFUL") is load_agent_class("eoful")
    with pytest.raises(AgentLoadError, match="no_such_module_xyz"):
        restore_agent_registrations(type(carried)(modules=("no_such_module_xyz",)))


def test_declared_support_of_built_in_agents_is_what_they_answer() -> None:
    assert set(BUILT_IN_UNSUPPORTED) <= built_in_agent_names()
    for name in sorted(built_in_agent_names()):
        declared, asked = declared_support(name), agent_support(name)
        assert declared is not None and asked.problem is None, (name, asked.problem)
        assert declared.supported == asked.supported, name
        for kind in TASK_KINDS:
            assert (declared.reasons[kind] is None) == (asked.reasons[kind] is None), (name, kind)
