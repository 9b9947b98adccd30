"""The ``tbg`` command line: help, list, run then report, errors as one line."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tokenized_bandit_gym.evaluation.cli import build_parser, main
from tokenized_bandit_gym.evaluation.results_store import ResultsStore

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parents[2]

SMALL_SPEC = """
title = "cli test"
rounds = 8
seeds = [0, 1]

[[task]]
id = "TokenizedMultiArmedBanditRandomTable-v0"
label = "table"

[[task]]
id = "TokenizedLinearBandit-v0"
kwargs = { vocab_size = 4, max_length = 3, embedding_dim = 3 }
label = "tiny TLB"

[[agent]]
name = "random"

[[agent]]
name = "oracle_greedy"
tasks = ["table"]
"""


@pytest.mark.parametrize(
    "argv", [["--help"], ["run", "--help"], ["report", "--help"], ["list", "--help"], ["ddmc", "--help"]]
)
def test_every_command_has_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "usage: tbg" in out and "``" not in out  # plain text, no reStructuredText markup


def test_every_option_is_explained() -> None:
    parser = build_parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    for name, command in commands.choices.items():
        for action in command._actions:
            assert action.help, f"tbg {name} {action.option_strings or action.dest} has no help text"


@pytest.mark.parametrize("argv", [["--help"], ["ddmc", "--help"], ["list"]])
def test_help_and_list_import_no_torch_scipy_or_matplotlib(argv: list[str]) -> None:
    code = (
        "import sys\n"
        "from tokenized_bandit_gym.evaluation.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('torch', 'scipy', 'matplotlib', 'transformers', 'stable_baselines3')\n"
        "print('loaded:', ','.join(name for name in heavy if name in sys.modules))\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert completed.stdout.strip().splitlines()[-1] == "loaded:"


def test_list_shows_envs_and_agents(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "TokenizedLinearBandit-v0" in out and "TokenizedMultiArmedBanditRandomTable-v0" in out
    assert "  random" in out and "  oracle_greedy" in out


def test_run_prints_table_writes_report_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC)
    store, out = tmp_path / "r.sqlite", tmp_path / "report"
    argv = ["run", str(spec), "--store", str(store), "--out", str(out), "--workers", "1", "--no-progress"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "| rank | agent |" in captured.out and "## table" in captured.out and "## tiny TLB" in captured.out
    assert "6 runs stored, 0 already in the store" in captured.err
    for name in (
        "leaderboard.md",
        "leaderboard.html",
        "regret_curves.png",
        "regret_curves.svg",
        "regret_table.png",
        "regret_table.svg",
        "summary.csv",
        "aggregate.csv",
        "runs.csv",
        "leaderboard.json",
    ):
        assert (out / name).stat().st_size > 0, name
    page = (out / "leaderboard.html").read_text()
    assert page.count("<svg") == 3 and "src=" not in page  # the overview and one per task and 'href="http' not in page
    with ResultsStore(store) as opened:
        before = opened.raw_rows()
    assert main([*argv, "--no-report"]) == 0
    assert "0 runs stored, 6 already in the store" in capsys.readouterr().err
    with ResultsStore(store) as opened:
        assert opened.raw_rows() == before


def test_report_renders_a_store_written_by_an_older_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "old.sqlite"
    shutil.copyfile(DATA / "store_schema1.sqlite", store)
    assert main(["report", "--store", str(store), "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert "## TLB small" in out and "## TMAB table" in out and "oracle_greedy" in out
    assert (tmp_path / "report" / "leaderboard.html").stat().st_size > 0
    only_spec = ["--spec", str(DATA / "fixture_spec.toml")]
    assert main(["report", "--store", str(store), *only_spec, "--out", str(tmp_path / "only")]) == 0
    assert "8 runs." in capsys.readouterr().out


def test_errors_are_one_line_with_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC.replace('name = "random"', 'name = "nobody"'))
    assert main(["run", str(spec), "--store", str(tmp_path / "r.sqlite")]) == 2
    assert "agent[0].name 'nobody'" in capsys.readouterr().err
    foreign = tmp_path / "notes.txt"
    foreign.write_text("my notes")
    assert main(["report", "--store", str(foreign)]) == 2
    assert "not an SQLite database" in capsys.readouterr().err and foreign.read_text() == "my notes"
    assert main(["report", "--store", str(tmp_path / "none.sqlite")]) == 2


def test_ray_backend_without_ray_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC)
    assert main(["run", str(spec), "--store", str(tmp_path / "r.sqlite"), "--backend", "ray"]) == 2
    assert "distributed" in capsys.readouterr().err
    assert not (tmp_path / "r.sqlite").exists()
