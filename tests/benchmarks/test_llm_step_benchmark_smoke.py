"""The LLM per-step benchmark runs with a tiny budget and reports every method."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "llm_step.py"


def test_llm_step_benchmark_times_every_method_on_stories260k() -> None:
    spec = importlib.util.spec_from_file_location("llm_step", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["llm_step"] = module
    spec.loader.exec_module(module)
    threads = torch.get_num_threads()
    try:
        table = module.benchmark("stories260K", module.Args(max_length=4, top_k=3, repeats=1, naive_positions=2))
    finally:
        torch.set_num_threads(threads)
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[0] for row in rows] == [
        "| env step, native forward",
        "| env step, transformers forward",
        "| (a) generate per token",
        "| (b) naive, k sequences in one forward",
        "| (b) naive on the native forward",
        "| (b') naive, a forward per candidate",
        "| floors: 1-token fwd (transformers) / k-token fwd (transformers, native) / LM head",
    ]
    milliseconds = [float(row.split(" | ")[1].split(" / ")[0]) for row in rows[:-1]]
    assert all(value > 0 for value in milliseconds)


def test_bandwidth_floor_benchmark_runs_its_tiny_shape_on_the_cpu() -> None:
    path = SCRIPT.parent / "llm_bandwidth_floor.py"
    spec = importlib.util.spec_from_file_location("llm_bandwidth_floor", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["llm_bandwidth_floor"] = module
    spec.loader.exec_module(module)
    argv = ["--device", "cpu", "--shape", "tiny", "--dtype", "float32", "--batch-sizes", "1,3"]
    table = module.main([*argv, "--max-length", "4", "--top-k", "3", "--repeats", "1", "--bandwidth-bytes", "65536"])
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row[0] for row in rows] == ["| 1", "| 3", "| generate, B=1"]
    assert all(float(row[1]) > 0 for row in rows)
    model = module.build_model(module.Args(device="cpu", shape="tiny", dtype="float32"))
    embedding = model.get_input_embeddings().weight
    every_parameter = sum(parameter.numel() * 4 for parameter in model.parameters())
    assert module.bytes_read_per_step(model) == every_parameter - embedding.numel() * 4
