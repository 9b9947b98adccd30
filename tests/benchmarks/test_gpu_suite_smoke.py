"""Smoke test: the GPU suite's CPU path (``--device cpu --shape tiny``) runs end to end and reports every target."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_gpu_suite_runs_on_the_cpu_with_tiny_shapes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = runpy.run_path(str(BENCHMARKS / "gpu_suite.py"))
    out = tmp_path / "suite.json"
    argv = ["--device", "cpu", "--shape", "tiny", "--out", str(out), "--repeats", "1", "--max-length", "3"]
    results = script["main"]([*argv, "--top-k", "3", "--env-seconds", "0.02"])
    assert json.loads(out.read_text()) == json.loads(json.dumps(results))  # the file holds what was returned
    printed = capsys.readouterr().out
    assert "\ndevice: cpu" in printed
    assert not any("error" in results[part] or "skipped" in results[part] for part in script["PARTS"])
    assert results["gpu_tests"] == {"ran": False, "why": "not a CUDA device"}
    for entry in results["llama"]["batches"].values():
        assert entry["eager_ms"] > 0 and entry["captured_ms"] > 0 and not entry["captured"]  # no CUDA graph on a CPU
        assert entry["floor_ms"] >= results["llama"]["bytes_floor_ms"] > 0
    assert set(results["vector_envs"]) == {"64", "1024"} and set(results["vector_envs_large"]) == {"4096"}
    assert all(entry["captured_token_steps_per_second"] > 0 for entry in results["vector_envs"].values())
    for entry in results["vector_envs"].values():  # the env's own step in step_mode="captured" (no graph on a CPU)
        assert entry["env_captured_token_steps_per_second"] > 0 and not entry["env_captured"]
    llm_env = results["llm_vector_env"]
    assert llm_env["eager_ms"] > 0 and llm_env["captured_ms"] > 0 and not llm_env["captured"]
    assert "step_mode eager / captured" in printed
    assert len(results["targets"]) == 7
    for target in results["targets"]:
        assert target["ratio"] > 0 and target["target"] in printed


def test_a_part_that_raises_is_recorded_and_the_others_still_run(tmp_path: Path) -> None:
    script = runpy.run_path(str(BENCHMARKS / "gpu_suite.py"))
    parts = script["PARTS"]

    def broken(args: object, device: object) -> dict[str, object]:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    parts["nine_rows"] = broken
    parts.pop("llama"), parts.pop("vector_envs_large"), parts.pop("llm_vector_env")  # the cheap parts suffice here
    out = tmp_path / "suite.json"
    argv = ["--device", "cpu", "--shape", "tiny", "--out", str(out), "--env-seconds", "0.02"]
    results = script["main"](argv)
    assert "illegal memory access" in results["nine_rows"]["error"]
    assert set(results["vector_envs"]) == {"64", "1024"}  # measured despite the failing part
    assert json.loads(out.read_text())["nine_rows"] == results["nine_rows"]
    assert all("nine-row" not in target["target"] for target in results["targets"])


def test_a_part_is_skipped_when_the_budget_is_spent(tmp_path: Path) -> None:
    script = runpy.run_path(str(BENCHMARKS / "gpu_suite.py"))
    out = tmp_path / "suite.json"
    results = script["main"](["--device", "cpu", "--shape", "tiny", "--out", str(out), "--budget-seconds", "1"])
    assert all("budget left" in results[part]["skipped"] for part in script["PARTS"])
    assert results["targets"] == []
