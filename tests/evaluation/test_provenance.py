"""The code version recorded with results, and resuming from files only when this code made them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import tokenized_bandit_gym
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.evaluation import provenance
from tokenized_bandit_gym.evaluation.execute_run import environment_metadata
from tokenized_bandit_gym.evaluation.runs_as_rows import RowsCheckpoint, play_rows

OTHER_VERSION = {"package_version": "0.0.1", "git_commit": "0" * 40}


def test_code_version_is_the_package_version_and_the_checkout_head() -> None:
    version = provenance.code_version()
    assert version["package_version"] == tokenized_bandit_gym.__version__
    package_dir = Path(tokenized_bandit_gym.__file__).resolve().parent
    head = subprocess.run(["git", "-C", str(package_dir), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        assert version["git_commit"] is None
    else:
        assert version["git_commit"] in (head.stdout.strip(), head.stdout.strip() + "-dirty")
    assert {key: environment_metadata()[key] for key in version} == version  # the leaderboard records the same


def test_code_version_outside_a_git_checkout_has_no_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    installed = tmp_path / "site-packages" / "tokenized_bandit_gym"
    installed.mkdir(parents=True)
    monkeypatch.setattr(tokenized_bandit_gym, "__file__", str(installed / "__init__.py"))
    assert provenance.code_version() == {"package_version": tokenized_bandit_gym.__version__, "git_commit": None}


def test_git_is_asked_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    run = subprocess.run

    def counted(command: list[str], **options: object) -> subprocess.CompletedProcess:
        calls.append(command)
        return run(command, **options)

    provenance._git_commit.cache_clear()
    monkeypatch.setattr(provenance.subprocess, "run", counted)
    first = [provenance.code_version() for _ in range(5)]
    assert 1 <= len(calls) <= 2 and all(version == first[0] for version in first)


def test_made_by_this_code_says_which_versions_differ(capsys: pytest.CaptureFixture[str]) -> None:
    assert provenance.made_by_this_code(provenance.code_version(), "a.json")
    assert capsys.readouterr().out == ""
    current = provenance.describe_code_version(provenance.code_version())
    for recorded, named in ((OTHER_VERSION, f"0.0.1 (git {'0' * 40})"), (None, "no recorded code version")):
        assert not provenance.made_by_this_code(recorded, "a.json")
        line = capsys.readouterr().out
        assert line.count("\n") == 1 and "a.json" in line and named in line and current in line


def _rows_from_checkpoint(path: str, reference: np.ndarray) -> int:
    """Play the two rows with a checkpoint at ``path``; check they play ``reference``; the first round played."""
    env = gym.make_vec("TokenizedLinearBandit-v0", 2, vectorization_mode="vector_entry_point")
    first_round: list[int] = []
    regret = play_rows(
        env,
        [agents.make("eoful"), agents.make("eoful")],
        [0, 1],
        6,
        on_rounds_ended=lambda ended, played, *_: first_round.append(int(played.min())),
        progress=False,
        checkpoint=RowsCheckpoint(path, every=2, identity={"runs": "two eoful"}),
    )
    np.testing.assert_array_equal(regret, reference)
    return first_round[0]


class _Interrupt(Exception):
    """Stands for a run killed mid-group."""


@pytest.mark.parametrize("same_code", [True, False])
def test_a_checkpoint_of_other_code_is_played_again(
    same_code: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stopped after round 4 with a checkpoint every 2 rounds: this code resumes, other code starts at round 1."""
    env = gym.make_vec("TokenizedLinearBandit-v0", 2, vectorization_mode="vector_entry_point")
    reference = play_rows(env, [agents.make("eoful"), agents.make("eoful")], [0, 1], 6, progress=False)
    path = str(tmp_path / "checkpoint.npz")

    def stop(ended: np.ndarray, played: np.ndarray, *_: object) -> None:
        if played.min() >= 4:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        play_rows(
            gym.make_vec("TokenizedLinearBandit-v0", 2, vectorization_mode="vector_entry_point"),
            [agents.make("eoful"), agents.make("eoful")],
            [0, 1],
            6,
            on_rounds_ended=stop,
            progress=False,
            checkpoint=RowsCheckpoint(path, every=2, identity={"runs": "two eoful"}),
        )
    assert os.path.exists(path)
    capsys.readouterr()
    if not same_code:
        monkeypatch.setattr(provenance, "code_version", lambda: dict(OTHER_VERSION))
    first_round = _rows_from_checkpoint(path, reference)
    said = capsys.readouterr().out
    if same_code:
        assert first_round > 1 and "not reusing" not in said
    else:
        assert first_round == 1
        assert f"not reusing {path}" in said and "0.0.1" in said and tokenized_bandit_gym.__version__ in said
