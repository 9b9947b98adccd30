"""examples/reproduce_alignment.py on the shipped model with a tiny budget (theta fitted on HH-RLHF, cached in tmp)."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.slow
def test_reproduce_alignment_oracle_is_the_benchmark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TBG_CACHE_DIR", str(tmp_path / "cache"))
    spec = importlib.util.spec_from_file_location("example_reproduce_alignment", EXAMPLES / "reproduce_alignment.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["example_reproduce_alignment"] = module
    spec.loader.exec_module(module)
    args = module.Args(model="stories260K", rounds=3, max_length=4, top_k=3, samples=1, out_dir=str(tmp_path / "out"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the fit on 260K parameters is not above chance: it warns
        results = module.main(args)
    assert results["runs"]["args_oracle"]["regret"] == [0.0, 0.0, 0.0]  # reward-guided greedy is the env's benchmark
    assert results["summary"]["misaligned_greedy"]["ties"] == 1.0
    for summary in results["summary"].values():
        assert 0.0 <= summary["preferred"] + summary["ties"] <= 1.0
    assert 0.0 <= results["accuracy_interval"][0] <= results["held_out_accuracy"] <= results["accuracy_interval"][1]
    assert (tmp_path / "out" / "alignment.png").stat().st_size > 0
