"""Smoke tests: the LLM benchmark scripts run end to end with a tiny budget and report every method."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _rows(table: str) -> list[list[str]]:
    """The body rows of the markdown table in ``table``, split into cells."""
    return [line.split(" | ") for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]


@pytest.mark.slow  # 30-75 s: every method of the step benchmark, each timed
def test_llm_step_benchmark_times_every_method_on_stories260k() -> None:
    script = runpy.run_path(str(BENCHMARKS / "llm_step.py"))
    table = script["benchmark"]("stories260K", script["Args"](max_length=4, top_k=3, repeats=1, naive_positions=2))
    rows = _rows(table)
    assert [row[0] for row in rows] == [
        "| env step, native forward",
        "| env step, transformers forward",
        "| env step, native forward on F.linear",
        "| (a) generate per token",
        "| (b) naive, k sequences in one forward",
        "| (b) naive on the native forward",
        "| (b') naive, a forward per candidate",
        "| compute floor: k x 2 x decoder weights + LM head at the measured matmul rate",
        "| bandwidth floor: 1-token native fwd + LM head (every weight read once)",
        "| floors: 1-token fwd (transformers) / k-token fwd (transformers, native) / LM head",
    ]
    assert all(float(row[1].split(" / ")[0]) > 0 for row in rows)


@pytest.mark.slow  # 10-17 s
def test_bandwidth_floor_benchmark_runs_its_tiny_shape_on_the_cpu() -> None:
    script = runpy.run_path(str(BENCHMARKS / "llm_bandwidth_floor.py"))
    argv = ["--device", "cpu", "--shape", "tiny", "--dtype", "float32", "--batch-sizes", "1,3"]
    table = script["main"]([*argv, "--max-length", "4", "--top-k", "3", "--repeats", "1", "--bandwidth-bytes", "65536"])
    rows = _rows(table)
    assert [row[0] for row in rows] == ["| 1", "| 3", "| generate, B=1"]
    assert all(float(row[1]) > 0 for row in rows[:2])  # the env steps, timed directly
    # generate's per-token time is t(L) - t(1) over L - 1: at 3 new tokens of the tiny model, noise can make it <= 0
    assert np.isfinite(float(rows[2][1]))
    model = script["build_model"](script["Args"](device="cpu", shape="tiny", dtype="float32"))
    embedding = model.get_input_embeddings().weight
    every_parameter = sum(parameter.numel() * 4 for parameter in model.parameters())
    assert script["bytes_read_per_step"](model) == every_parameter - embedding.numel() * 4


@pytest.mark.slow  # two fresh processes, each importing torch and transformers
def test_llm_step_versions_compares_two_checkouts_side_by_side() -> None:
    """Both sides are this checkout here: the script runs end to end and reports both forwards."""
    script = runpy.run_path(str(BENCHMARKS / "llm_step_versions.py"))
    repo = str(BENCHMARKS.parent)
    argv = ["--before", repo, "--after", repo, "--models", "stories260K", "--repeats", "1"]
    rows = _rows(script["main"]([*argv, "--max-length", "3", "--top-k", "2"]))
    assert [row[0] for row in rows] == ["| native", "| transformers"]
    assert all(float(row[1]) > 0 and float(row[2]) > 0 for row in rows)


@pytest.mark.slow
def test_figure2_rows_benchmark_times_every_layout_on_stories260k(capsys: pytest.CaptureFixture[str]) -> None:
    """llm_figure2_rows.py: one row per layout, positive CPU seconds and floor, on a tiny budget."""
    script = runpy.run_path(str(BENCHMARKS / "llm_figure2_rows.py"))
    args = script["Args"](model="stories260K", rounds=1, seeds="0,1", max_length=3, top_k=2)
    script["main"](args)
    rows = _rows(capsys.readouterr().out)
    assert [row[0] for row in rows] == ["| sequential", "| agents", "| agents_x_seeds"]
    assert [int(row[1]) for row in rows] == [2, 6, 12]  # k, 3k, 3 x 2 seeds x k candidate rows a forward
    assert all(float(row[3]) > 0 and float(row[4]) > 0 for row in rows)


def test_whole_run_floor_counts_the_queries_the_runs_play() -> None:
    """The floor's benchmark decodes are the distinct queries the env itself plays over every seed's rounds."""
    import gymnasium as gym

    from tokenized_bandit_gym.evaluation import alignment_regret

    script = runpy.run_path(str(BENCHMARKS / "llm_whole_run_floor.py"))
    options = alignment_regret.parse_options(["--rounds", "4", "--seeds", "0,1", "--max-length", "3", "--top-k", "2"])
    floor = script["command_floor"](options)
    played = set()
    env = gym.make(alignment_regret.ENV_ID, **alignment_regret.env_kwargs(options))
    for seed in (0, 1):
        _, info = env.reset(seed=seed)
        for _ in range(options.rounds):
            played.add(int(info["query_index"]))
            terminated = False
            while not terminated:
                _, _, terminated, _, info = env.step(0)
            _, info = env.reset()
    env.close()
    assert floor.benchmarks == len(played)
    assert floor.runs == 2 * len(alignment_regret.agent_names(options))
    model = env.unwrapped.problem.model
    decoder = sum(parameter.numel() for parameter in model.parameters()) - model.get_input_embeddings().weight.numel()
    assert floor.flops_per_step >= options.top_k * 2 * decoder  # every decoder weight, each candidate
    assert floor.flops == (floor.runs * 4 + floor.benchmarks) * 3 * floor.flops_per_step


@pytest.mark.slow  # a fresh process runs the reproduction
def test_whole_run_floor_times_the_command_against_its_floor(tmp_path: Path) -> None:
    script = runpy.run_path(str(BENCHMARKS / "llm_whole_run_floor.py"))
    options = ["--rounds", "2", "--seeds", "0", "--max-length", "3"]
    table = script["main"](["--rate-samples", "1", "--keep-results", str(tmp_path), "--", *options])
    (row,) = _rows(table)
    floor_seconds, wall_seconds, ratio = float(row[3]), float(row[4]), float(row[5].strip(" |*x"))
    assert floor_seconds > 0 and wall_seconds > 0
    assert ratio == pytest.approx(wall_seconds / floor_seconds, rel=0.05)  # printed to 0 decimals, 2 for the ratio
    assert float(row[6].strip(" |x")) >= ratio - 0.01  # at the fastest sample the floor is shortest
    kept = json.loads((tmp_path / "regret.json").read_text())
    assert all(len(run["cumulative_regret"]) == 2 for run in kept["runs"].values())
