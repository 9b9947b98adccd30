import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from tokenized_bandit_gym.evaluation.ddmc import add_ddmc_subcommand, ddmc_main

ROOT = Path(__file__).resolve().parents[3]
os.environ["HF_HUB_OFFLINE"] = "1"


def test_ddmc_main_tiny_budget(tmp_path, capsys):
    plot, report = tmp_path / "ddmc.png", tmp_path / "ddmc.json"
    options = ["--max-items", "3", "--num-bootstrap", "5", "--min-group-size", "1"]
    code = ddmc_main([*options, "--plot", str(plot), "--json", str(report)])
    assert code == 0
    assert "diverged" in capsys.readouterr().out
    assert plot.stat().st_size > 0
    data = json.loads(report.read_text())
    assert data["num_items"] == 3
    all_pairs = data["summaries"]["all"]["d2"]
    diverged = data["summaries"]["diverged"]["d2"]
    # Group 0 holds only diverged pairs, so both groupings agree there.
    assert all_pairs["common_suffix"][0] == diverged["common_suffix"][0] == 0
    assert np.isclose(all_pairs["mean"][0], diverged["mean"][0])
    assert data["num_prefix_pairs"]["diverged"] < data["num_prefix_pairs"]["all"]


def test_hh_rlhf_subcommand(tmp_path):
    parser = argparse.ArgumentParser(prog="tbg")
    add_ddmc_subcommand(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["ddmc", "--dataset", "hh-rlhf", "--max-items", "2", "--max-tokens", "64", "--num-bootstrap", "0"]
    )
    assert args.func(args) == 0


def test_validate_ddmc_example_runs(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, str(ROOT / "examples" / "validate_ddmc.py"), "--max-items", "3"]
    command += ["--num-bootstrap", "10", "--plot", str(tmp_path / "fig.png")]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Spearman" in result.stdout and (tmp_path / "fig.png").exists()


def test_resume_dir_reuses_the_kept_embeddings_and_embeds_only_what_is_missing(tmp_path, monkeypatch):
    """An interrupted embedding resumes: kept batches are reused, and the table equals an uncached run's."""
    from tokenized_bandit_gym.evaluation.ddmc import prefix_pair_table
    from tokenized_bandit_gym.evaluation.ddmc.answer_pair_loaders import load_answer_pairs
    from tokenized_bandit_gym.evaluation.ddmc.resources import resolve_dataset
    from tokenized_bandit_gym.llm.prefix_embedder import PrefixEmbedder

    pairs = load_answer_pairs(resolve_dataset("truthfulqa"), max_items=3)
    embedder = PrefixEmbedder(batch_size=4)
    reference = prefix_pair_table.build_prefix_pair_table(pairs, embedder)
    embedded: list[int] = []
    original = embedder.prefix_embeddings

    def interrupted(sequences, on_batch=None):
        embedded.append(len(sequences))
        if len(embedded) == 1:  # the first run stops after its first batch, as a killed process would
            first = original(sequences[:4], on_batch=on_batch)
            raise KeyboardInterrupt(len(first))
        return original(sequences, on_batch=on_batch)

    monkeypatch.setattr(embedder, "prefix_embeddings", interrupted)
    try:
        prefix_pair_table.build_prefix_pair_table(pairs, embedder, cache_dir=tmp_path)
    except KeyboardInterrupt:
        pass
    assert len(list(tmp_path.glob("batch-*.safetensors"))) == 1
    resumed = prefix_pair_table.build_prefix_pair_table(pairs, embedder, cache_dir=tmp_path)
    assert embedded[1] == embedded[0] - 4  # only the texts the interrupted run had not embedded
    # The same texts are embedded in batches of other row counts, and a BLAS product's float32 rounding depends
    # on the row count (the native forward's packed/transposed weights): equal to float32 rounding of unit-norm
    # embeddings, so the near-zero distances of equal prefixes differ by ~1e-6.
    np.testing.assert_allclose(resumed.distances, reference.distances, rtol=1e-6, atol=1e-5)
    np.testing.assert_array_equal(resumed.common_suffix, reference.common_suffix)
