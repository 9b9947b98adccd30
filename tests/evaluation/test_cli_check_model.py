"""``tbg check-model``: the conformance check on a user's model, its verdict table and its exit status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.llm.tiny_models import tiny_family
from tokenized_bandit_gym.evaluation.cli import main
from tokenized_bandit_gym.llm.language_model_head import LanguageModelHead
from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem


def test_stories260k_passes_on_every_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-model", "stories260K", "--steps", "4", "--max-length", "5"]) == 0
    out = capsys.readouterr().out
    assert "model_type=llama" in out and out.splitlines()[-1].startswith("verdict: OK; thresholds: ")
    rows = [line.split() for line in out.splitlines() if line.startswith(("single", "vector"))]
    assert [row[1] for row in rows] == [
        "auto/auto", "native/mask", "native/expand", "transformers/mask", "transformers/expand", "auto/auto",
    ]  # fmt: skip
    assert all(row[-1] == "ok" and int(row[4]) >= 4 for row in rows)
    assert rows[0][2:4] == ["native", "mask"]  # auto runs the native forward with the 4-D candidate mask


@pytest.fixture(scope="module")
def saved_phi3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Phi-3 with a 4-token window, saved with the stories260K tokenizer."""
    from tokenized_bandit_gym.llm.load_language_model import load_language_model

    path = tmp_path_factory.mktemp("phi3")
    tiny_family("phi3-window").save_pretrained(path)
    load_language_model()[1].save_pretrained(path)
    return path


def test_a_tiny_saved_model_passes_and_native_is_refused(saved_phi3: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-model", str(saved_phi3), "--steps", "3", "--max-length", "4", "--top-k", "3"]) == 0
    out = capsys.readouterr().out
    assert "model_type=phi3" in out and "native/mask          refused: " in out and "verdict: OK" in out
    assert "transformers/expand  transformers  expand" in out


def test_a_mismatch_exits_non_zero(
    saved_phi3: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A head that goes wrong after the construction probe (a drifting scale) is caught by the step check."""
    original_log_probs, original_check = LanguageModelHead.log_probs, LanguageModelProblem._check_against_model
    checked = {"problems": 0}

    def drifting(self: LanguageModelHead, hidden: Any) -> Any:
        return original_log_probs(self, hidden) * (1.0 if checked["problems"] == 0 else 1.01)

    def check_then_drift(self: LanguageModelProblem, *requested: str) -> None:
        original_check(self, *requested)
        checked["problems"] += 1

    monkeypatch.setattr(LanguageModelHead, "log_probs", drifting)
    monkeypatch.setattr(LanguageModelProblem, "_check_against_model", check_then_drift)
    assert main(["check-model", str(saved_phi3), "--steps", "3", "--max-length", "4", "--top-k", "3"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and out.splitlines()[-1].startswith("verdict: MISMATCH")


def test_unloadable_model_and_bad_steps_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-model", "made-up-org/no-such-model-14"]) == 2
    assert "nor in the Hugging Face cache" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:  # refused while the arguments are parsed, before any model loads
        main(["check-model", "stories260K", "--steps", "0"])
    assert refused.value.code == 2
    assert "argument --steps: expected a positive integer, got '0'" in capsys.readouterr().err


def test_a_csv_of_the_users_own_column_and_length(
    saved_phi3: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "prompts.csv"
    queries.write_text('id,prompt\n1,"Tom saw a big dog, and the dog saw Tom."\n2,The cat sat\n')
    arguments = ["check-model", str(saved_phi3), "--steps", "3", "--top-k", "3", "--queries", str(queries)]
    assert main(arguments) == 2  # no default column in this file
    assert "prompt" in capsys.readouterr().err
    assert main([*arguments, "--query-column", "prompt", "--max-length", "6", "--query-truncation", "left"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("verdict: OK; thresholds: ")


def test_bfloat16_thresholds_come_from_the_noise_measured_on_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-model", "stories260K", "--steps", "2", "--max-length", "4", "--dtype", "bfloat16"]) == 0
    verdict = capsys.readouterr().out.splitlines()[-1]
    assert "bfloat16 noise measured on this model against its eager attention kernel" in verdict, verdict
    measured = float(verdict.split("(|dlogp| ")[1].split(",")[0])
    allowed = float(verdict.split("|dlogp| and |dv|/tok <= ")[1].split(" ")[0])
    assert 0.0 < measured and allowed == pytest.approx(max(1e-4, 2 * measured), rel=1e-2)


@pytest.mark.parametrize("length_rule", ["--fixed-length", "--no-fixed-length"])
def test_the_length_rule_reaches_the_envs(
    length_rule: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    built = []
    original_init = LanguageModelProblem.__init__

    def recording_init(self: LanguageModelProblem, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        built.append(self.fixed_length)

    monkeypatch.setattr(LanguageModelProblem, "__init__", recording_init)
    assert main(["check-model", "stories260K", "--steps", "2", "--max-length", "4", length_rule]) == 0
    assert built and set(built) == {length_rule == "--fixed-length"}
    assert capsys.readouterr().out.splitlines()[-1].startswith("verdict: OK; thresholds: ")
