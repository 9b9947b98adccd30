"""examples/pairwise_alignment.py on the shipped model with a tiny budget."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest


@pytest.mark.slow
def test_pairwise_alignment_runs_every_agent_on_its_feedback(
    load_script: Callable[[str], ModuleType], tmp_path: Path
) -> None:
    module = load_script("examples/pairwise_alignment.py")
    args = module.Args(rounds=3, max_length=3, top_k=3, theta="random", tlb_rounds=5, out_dir=str(tmp_path / "out"))
    results = module.main(args)
    assert set(results["runs"]) == {"eoful", "dueling_eoful", "tpop", "misaligned_greedy"}
    for name, run in results["runs"].items():
        assert all(len(values) == 3 for values in run.values())
        if name in ("dueling_eoful", "tpop"):  # the reward of a pairwise round is the preference bit
            assert set(run["reward"]) <= {0.0, 1.0}
        else:  # a scalar round's first (only) response is its response
            np.testing.assert_allclose(run["first_regret"], run["regret"], atol=1e-9)
    misaligned = results["summary"]["misaligned_greedy"]
    assert misaligned["preference_probability_over_misaligned"] == 0.5  # against itself
    assert misaligned["higher_utility_than_misaligned"] == 0.0
    assert (tmp_path / "out" / "pairwise.png").stat().st_size > 0
    assert all(np.isfinite(value) for value in results["tlb"].values())


@pytest.mark.slow
def test_an_interrupted_run_resumes_with_the_finished_agents_kept(
    load_script: Callable[[str], ModuleType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load_script("examples/pairwise_alignment.py")
    args = module.Args(rounds=2, max_length=3, top_k=3, theta="random", tlb_rounds=0, out_dir=str(tmp_path / "out"))
    uninterrupted = module.main(module.Args(**{**vars(args), "out_dir": str(tmp_path / "whole")}))
    play = module.play
    played: list[str] = []
    stop_after: list[int] = [2]  # agents played before a KeyboardInterrupt (the first feedback's two rows)

    def play_or_stop(env: object, names: list[str], rounds: int, seed: int) -> dict:
        if len(played) == stop_after[0]:
            raise KeyboardInterrupt
        played.extend(names)
        return play(env, names, rounds, seed)

    monkeypatch.setattr(module, "play", play_or_stop)
    with pytest.raises(KeyboardInterrupt):
        module.main(args)
    played.clear()
    stop_after[0] = len(module.AGENTS)
    resumed = module.main(args)
    assert len(played) == len(module.AGENTS) - 2  # the two saved agents were kept, not played again
    assert resumed["runs"] == uninterrupted["runs"]
    played.clear()
    module.main(module.Args(**{**vars(args), "rounds": 3}))
    assert len(played) == len(module.AGENTS)  # other settings: nothing is kept
