"""What can be known before running is refused at load, in one line: agents that cannot play a task, typos.

Also the Python leaderboard API's usual slip (``spec.runs`` without the call) and ``tbg list``'s descriptions.
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tokenized_bandit_gym.evaluation.agent_support import BUILT_IN_UNSUPPORTED
from tokenized_bandit_gym.evaluation.cli import main
from tokenized_bandit_gym.evaluation.leaderboard_runner import run_leaderboard
from tokenized_bandit_gym.evaluation.leaderboard_spec import SpecError, load_spec, parse_spec
from tokenized_bandit_gym.evaluation.results_store import ResultsStore
from tokenized_bandit_gym.registration import agent_description, list_agents, load_agent_class
from tokenized_bandit_gym.suggestions import did_you_mean

TMAB = {"id": "TokenizedMultiArmedBandit-v0", "kwargs": {"vocab_size": 3, "max_length": 3}, "label": "TMAB"}
TLB = {
    "id": "TokenizedLinearBandit-v0",
    "kwargs": {"vocab_size": 4, "max_length": 3, "embedding_dim": 3},
    "label": "TLB",
}
SPEC: dict[str, Any] = {"rounds": 6, "seeds": [0], "task": [TLB, TMAB], "agent": [{"name": "random"}]}
REPO = Path(__file__).resolve().parents[2]


def spec_with_agent(agent: dict[str, Any], **top: Any) -> dict[str, Any]:
    data = copy.deepcopy(SPEC)
    data["agent"].append(agent)
    data.update(top)
    return data


@pytest.mark.parametrize("name", sorted(name for name, kinds in BUILT_IN_UNSUPPORTED.items() if "TMAB" in kinds))
def test_an_agent_that_cannot_play_a_task_is_refused_in_one_line_naming_both(name: str) -> None:
    with pytest.raises(SpecError) as refused:
        parse_spec(spec_with_agent({"name": name, "label": f"my {name}"}, task=[TMAB]))
    message = str(refused.value)
    assert "\n" not in message
    assert f"agent[1] 'my {name}' ({name!r}) cannot play task[0] 'TMAB' ('TokenizedMultiArmedBandit-v0')" in message
    assert "agent[1].tasks" in message  # and says how to leave the task out


def test_an_agent_limited_to_the_tasks_it_plays_is_accepted() -> None:
    spec = parse_spec(spec_with_agent({"name": "eoful", "tasks": ["TLB"]}))
    assert {run.task_label for run in spec.runs() if run.agent == "eoful"} == {"TLB"}


def test_tbg_run_refuses_before_any_run_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'rounds = 5\nseeds = 1\n[[task]]\nid = "TokenizedMultiArmedBandit-v0"\n'
        '[[agent]]\nname = "eoful"\n[[agent]]\nname = "random"\n'
    )
    store, out = tmp_path / "store.sqlite", tmp_path / "report"
    assert main(["run", str(spec), "--store", str(store), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'eoful' cannot play task[0] 'TokenizedMultiArmedBandit-v0'" in err[0]
    assert "embedding" in err[0]  # the agent's own reason
    assert not store.exists() and not out.exists()


@pytest.mark.parametrize(
    ("change", "typo", "suggestion"),
    [
        (lambda data: data["agent"].append({"name": "eofl"}), "'eofl'", "'eoful'"),
        (lambda data: data["task"].append({"id": "TokenizedLinearBandt-v0"}), "'TokenizedLinearBandt-v0'", None),
        (lambda data: data.update(sedes=[0]), "'sedes'", "'seeds'"),
        (lambda data: data["task"][0].update(lable="x"), "'task[0].lable'", "'label'"),
        (lambda data: data["agent"][0].update(kwarg={}), "'agent[0].kwarg'", "'kwargs'"),
        (
            lambda data: data["task"][1]["kwargs"].update(vocab_sise=3),
            "task[1].kwargs {'vocab_size': 3, 'max_length': 3, 'vocab_sise': 3} are invalid",
            "'vocab_size'",
        ),
        (
            lambda data: data["agent"].append({"name": "eoful", "kwargs": {"bta": 1}}),
            "agent[1].kwargs {'bta': 1} are invalid for 'eoful'",
            "'beta'",
        ),
        (lambda data: data["agent"].append({"name": "oracle_greedy", "tasks": ["TMBA"]}), "'TMBA'", "'TMAB'"),
    ],
)
def test_unknown_names_get_a_suggestion(change: Any, typo: str, suggestion: str | None) -> None:
    data = copy.deepcopy(SPEC)
    change(data)
    with pytest.raises(SpecError) as refused:
        parse_spec(data)
    message = str(refused.value)
    assert typo in message and "\n" not in message
    expected = suggestion or "'TokenizedLinearBandit-v0'"
    assert f"(did you mean {expected}" in message or f"or {expected}" in message


def test_did_you_mean_suggests_only_close_names() -> None:
    assert did_you_mean("eofull", ["eoful", "random"]) == " (did you mean 'eoful'?)"
    assert did_you_mean("EOFUL", ["eoful", "random"]) == " (did you mean 'eoful'?)"
    assert did_you_mean("zzzzzz", ["eoful", "random"]) == ""
    assert did_you_mean(3, ["eoful"]) == ""
    with pytest.raises(ValueError, match=r"unknown agent 'radnom' \(did you mean 'random'\?\)"):
        load_agent_class("radnom")


def test_a_shipped_spec_name_with_a_typo_gets_a_suggestion() -> None:
    with pytest.raises(SpecError, match=r"\(did you mean 'leaderboard'\?\)"):
        load_spec("leaderbord")


def test_every_agent_has_a_one_line_description_from_its_docstring() -> None:
    for name in list_agents():
        description = agent_description(name)
        assert description and "\n" not in description, name
        assert not re.search(r"``|:\w+:`", description), (name, description)  # plain text, no reStructuredText
        first_line = load_agent_class(name).__doc__.strip().splitlines()[0]
        for word in description.split():  # every word is the docstring's, markup aside
            assert word.strip(".,;()") in first_line, (name, word)


def test_tbg_list_prints_each_agents_description_without_importing_it() -> None:
    code = (
        "import sys\n"
        "from tokenized_bandit_gym.evaluation.cli import main\n"
        "main(['list'])\n"
        "print('agent modules loaded:', [m for m in sys.modules if m.startswith('tokenized_bandit_gym.agents.')])\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    lines = completed.stdout.splitlines()
    assert lines[-1] == "agent modules loaded: []"
    for name in list_agents():
        at = next(index for index, line in enumerate(lines) if line.split() and line.split()[0] == name)
        assert lines[at + 1].strip() == agent_description(name), name


def test_run_leaderboard_refuses_the_method_spec_runs_before_touching_the_store(tmp_path: Path) -> None:
    spec = parse_spec(SPEC)
    with ResultsStore(tmp_path / "store.sqlite") as store:
        with pytest.raises(TypeError, match=r"call it \(spec\.runs\(\)\)"):
            run_leaderboard(spec.runs, store, progress=False)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"runs\[0\] must be a RunSpec"):
            run_leaderboard([run.key for run in spec.runs()], store, progress=False)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="store must be a ResultsStore"):
            run_leaderboard(spec, str(tmp_path / "store.sqlite"), progress=False)  # type: ignore[arg-type]
        assert len(store) == 0
        with pytest.raises(TypeError, match="records\\(\\) takes run keys or RunSpecs"):
            list(store.records([1]))  # type: ignore[list-item]
