"""benchmarks/tpop_loop.py: T-POP's loop as its code runs it, and the benchmark's table, at a tiny size (slow)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def script() -> dict:
    return runpy.run_path(str(BENCHMARKS / "tpop_loop.py"))


@pytest.mark.slow
def test_tpop_exploit_arm_with_an_untrained_head_is_greedy_decoding_and_the_arms_differ(script: dict) -> None:
    from tokenized_bandit_gym.llm.load_language_model import load_language_model

    model, tokenizer = load_language_model("stories260K")
    query = tokenizer(script["QUERY"])["input_ids"]
    loop = script["TPOPLoop"](model, tokenizer, top_k=3)
    exploit, explore = loop.round(query, 4)
    greedy = list(query)
    with torch.no_grad():
        for _ in range(4):  # the model's own greedy decode, one full forward per token
            greedy.append(int(model(input_ids=torch.tensor([greedy])).logits[0, -1].argmax()))
    assert exploit == greedy[len(query) :]  # sigma(0) is the same for every candidate: p alone decides
    assert all(first != second for first, second in zip(exploit, explore, strict=True))  # forced to differ
    assert torch.all(loop.inverse_diagonal >= 1.0)  # T-POP's code adds the squared differences to V^-1


@pytest.mark.slow
def test_tpop_loop_benchmark_reports_both_rows(script: dict) -> None:
    table = script["benchmark"](script["Args"](max_length=2, top_k=3, repeats=1))
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row[0] for row in rows] == [
        "| our tpop agent on the pairwise env",
        "| T-POP's loop (no cache, re-decode + re-embed)",
    ]
    assert all(float(row[1]) > 0 for row in rows)


@pytest.mark.slow  # two fresh processes, each importing torch and transformers
def test_tpop_loop_versions_compares_two_checkouts_side_by_side() -> None:
    """Both sides are this checkout here: the script runs end to end and reports a ratio per checkout."""
    versions = runpy.run_path(str(BENCHMARKS / "tpop_loop_versions.py"))
    repo = str(BENCHMARKS.parent)
    argv = ["--before", repo, "--after", repo, "--repeats", "1", "--max-length", "2", "--top-k", "3"]
    table = versions["main"](argv)
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row[0] for row in rows] == ["| before", "| after"]
    assert all(float(row[3].strip("*x")) > 0 for row in rows)  # the ratio of the best rounds
