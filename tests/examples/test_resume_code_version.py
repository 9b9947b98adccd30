"""The resumable examples reuse a finished run only when this code made it, and say so when it did not.

Each example's resume check reads a file the test writes with this code's version, another version, or none (a
file written before versions were recorded); no model is loaded.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tokenized_bandit_gym.evaluation import provenance

OTHER_VERSION = {"package_version": "0.0.1", "git_commit": "0" * 40}
RECORDED = {"this code": provenance.code_version, "other code": lambda: OTHER_VERSION, "none recorded": lambda: None}


def _with_version(document: dict[str, Any], recorded: str) -> dict[str, Any]:
    version = RECORDED[recorded]()
    return document if version is None else {**document, "code_version": version}


def _check_said(said: str, path: str, recorded: str) -> None:
    """One line naming the file and both versions when other code made it, nothing when this code did."""
    if recorded == "this code":
        assert "not reusing" not in said
        return
    (line,) = [line for line in said.splitlines() if "not reusing" in line]
    assert path in line and provenance.describe_code_version(provenance.code_version()) in line
    assert ("0.0.1" if recorded == "other code" else "no recorded code version") in line


def _default_settings(module: ModuleType) -> dict[str, Any]:
    """A script's default options that say how its runs are made (its ``RUN_KEYS`` left out), as it resumes by."""
    return {key: value for key, value in dataclasses.asdict(module.Args()).items() if key not in module.RUN_KEYS}


@pytest.mark.parametrize("recorded", list(RECORDED))
def test_reproduce_regret_keeps_runs_of_this_code_only(
    recorded: str, load_script: Callable[[str], ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load_script("examples/reproduce_regret.py")
    settings = _default_settings(module)
    path = str(tmp_path / "regret.json")
    earlier = {"settings": {**settings, "seeds": [0]}, "feature_dim": 3, "runs": {"eoful/0": {}}}
    Path(path).write_text(json.dumps(_with_version(earlier, recorded)))
    kept = module.resumable_runs(path, settings)
    assert (kept.get("runs") == {"eoful/0": {}}) == (recorded == "this code")
    _check_said(capsys.readouterr().out, path, recorded)


@pytest.mark.parametrize("recorded", list(RECORDED))
def test_pairwise_alignment_keeps_runs_of_this_code_only(
    recorded: str, load_script: Callable[[str], ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load_script("examples/pairwise_alignment.py")
    settings = _default_settings(module)
    path = str(tmp_path / "pairwise.json")
    Path(path).write_text(json.dumps(_with_version({"settings": settings, "runs": {"tpop": {}}}, recorded)))
    assert (module.resumable_runs(path, settings) == {"tpop": {}}) == (recorded == "this code")
    _check_said(capsys.readouterr().out, path, recorded)


@pytest.mark.parametrize("recorded", list(RECORDED))
def test_reproduce_ratio_plots_again_only_a_run_of_this_code(
    recorded: str, load_script: Callable[[str], ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load_script("examples/reproduce_ratio.py")
    args = module.parse_args(["--out-dir", str(tmp_path)])
    ratios = {"ratio_max": [1.0], "ratio_mean": [1.0]}
    earlier = {"settings": dataclasses.asdict(args), "sigma": ratios, "sigma_inverse": ratios}
    path = str(tmp_path / "ratio.json")
    Path(path).write_text(json.dumps(_with_version(earlier, recorded)))
    assert (module.finished_run(args) is not None) == (recorded == "this code")
    _check_said(capsys.readouterr().out, path, recorded)


@pytest.mark.parametrize("recorded", list(RECORDED))
def test_reproduce_alignment_reads_back_runs_of_this_code_only(
    recorded: str, load_script: Callable[[str], ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Of two stored runs with these settings, the one of this code is read back; the other follows ``recorded``."""
    module = load_script("examples/reproduce_alignment.py")
    args = module.Args(seeds=(0,), out_dir=str(tmp_path))
    settings = module.run_settings(args)
    (tmp_path / "runs").mkdir()
    mine = {"settings": settings, "code_version": provenance.code_version(), "regret": [0.0]}
    (tmp_path / "runs" / "eoful-seed0.json").write_text(json.dumps(mine))
    other = _with_version({"settings": settings, "regret": [1.0]}, recorded)
    (tmp_path / "runs" / "wrong_theta-seed0.json").write_text(json.dumps(other))
    runs, missing = module.stored_runs(args, settings)
    assert runs["eoful"] == {0: mine}
    assert (runs["wrong_theta"] == {0: other}) == (recorded == "this code")
    assert (("wrong_theta", 0) in missing) == (recorded != "this code") and ("eoful", 0) not in missing
    _check_said(capsys.readouterr().out, f"{tmp_path}/runs", recorded)
