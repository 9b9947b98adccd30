"""``tbg ddmc`` is wired into the console script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenized_bandit_gym.evaluation.cli import main


def test_ddmc_help_is_listed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "ddmc" in capsys.readouterr().out


def test_tbg_ddmc_runs_on_a_few_truthfulqa_questions(tmp_path: Path, package_data: Path) -> None:
    out = tmp_path / "ddmc.json"
    status = main(
        [
            "ddmc",
            "--dataset",
            str(package_data / "truthfulqa" / "TruthfulQA.csv"),
            "--max-items",
            "4",
            "--num-bootstrap",
            "50",
            "--plot",
            str(tmp_path / "ddmc.png"),
            "--json",
            str(out),
        ]
    )
    assert status == 0
    assert out.stat().st_size > 0 and json.loads(out.read_text())


def test_tbg_ddmc_refuses_an_unloadable_model_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ddmc", "--model", "made-up-org/no-such-model-14", "--max-items", "1"]) == 2
    assert "tbg ddmc: error: model 'made-up-org/no-such-model-14' is neither" in capsys.readouterr().err
