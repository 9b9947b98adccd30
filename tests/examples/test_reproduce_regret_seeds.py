"""reproduce_regret.py over several seeds: their mean and band, and a rerun that resumes instead of repeating."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.examples.test_reproduce_scripts import alignment_stack_available
from tokenized_bandit_gym.evaluation import provenance

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--rounds", "3", "--max-length", "3", "--top-k", "2", "--seeds", "0,1"]


def run(out_dir: Path, *options: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    script = str(ROOT / "examples" / "reproduce_regret.py")
    command = [sys.executable, script, *TINY, *options, "--out-dir", str(out_dir)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=out_dir)


def test_seeds_are_averaged_and_a_rerun_resumes(tmp_path: Path) -> None:
    if not alignment_stack_available():
        pytest.skip("TokenizedAlignment-v0 and the reproduction agents are not installed")
    first = run(tmp_path)
    assert first.returncode == 0, first.stderr
    data = json.loads((tmp_path / "regret.json").read_text())
    assert sorted(data["runs"]) == sorted(f"{name}/{seed}" for name in data["agents"] for seed in (0, 1))
    for name, entry in data["agents"].items():
        per_seed = np.array([data["runs"][f"{name}/{seed}"]["cumulative_regret"] for seed in (0, 1)])
        np.testing.assert_allclose(entry["cumulative_regret"], per_seed.mean(axis=0))
        np.testing.assert_allclose(entry["cumulative_regret_min"], per_seed.min(axis=0))
    assert "queries: " in first.stdout
    assert data["code_version"] == provenance.code_version()  # the script is this checkout's code
    progress = json.loads((tmp_path / "progress.json").read_text())  # the last group's curves, written as it ran
    assert progress["rounds_played"] == 3 and sorted(progress["runs"]) == [
        f"{name}/1" for name in sorted(data["agents"])
    ]
    for key, curve in progress["runs"].items():
        np.testing.assert_allclose(curve, data["runs"][key]["cumulative_regret"])
    second = run(tmp_path)
    assert second.returncode == 0, second.stderr
    assert "resuming: 6 finished runs kept" in second.stdout and "expected run time" not in second.stdout
    assert json.loads((tmp_path / "regret.json").read_text())["runs"] == data["runs"]


def test_ratio_figure_from_a_regret_run(tmp_path: Path) -> None:
    """reproduce_ratio.py --from-regret plots the ratios EOFUL recorded in that run, without running it again."""
    runs = {"eoful/1": {name: [1.0, 0.5, 0.75] for name in ("prefix_ratio_max", "prefix_ratio_mean")}}
    runs["eoful/1"] |= {"prefix_inverse_ratio_max": [3.0, 2.0, 1.0], "prefix_inverse_ratio_mean": [2.0, 1.5, 1.0]}
    settings = {"model": "some-model", "queries": "paper", "max_length": 5, "top_k": 3, "gamma": 0.8}
    settings |= {"value_map": "logprob", "embedding_norm": "none", "beta": 1.0}
    regret = {"settings": settings, "runs": runs, "formatting": "the raw query text (no chat template)"}
    (tmp_path / "regret.json").write_text(json.dumps(regret))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    script = str(ROOT / "examples" / "reproduce_ratio.py")
    command = [sys.executable, script, "--from-regret", "regret.json", "--seed", "1", "--out-dir", "out"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "out" / "ratio.json").read_text())
    assert summary["sigma_inverse"]["ratio_max"] == [3.0, 2.0, 1.0] and summary["sigma"]["max_of_max"] == 1.0
    assert summary["settings"]["model"] == "some-model" and summary["settings"]["rounds"] == 3
    assert summary["sigma_inverse"]["share_rounds_max_below_threshold"] == 1 / 3
    missing = subprocess.run([*command[:-4], "--seed", "0"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert missing.returncode == 2 and "no EOFUL run of seed 0" in missing.stderr
    # a regret.json that records no env id was made before --env-id, under -v0; one that does keeps its reading
    assert summary["settings"]["env_id"] == "TokenizedAlignment-v0"
    assert summary["settings"]["value_map"] == "logprob" and summary["settings"]["pooling"] == ""
    regret["settings"] |= {"env_id": "TokenizedAlignment-v1", "value_map": "", "pooling": "response"}
    (tmp_path / "regret.json").write_text(json.dumps(regret))
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    settings = json.loads((tmp_path / "out" / "ratio.json").read_text())["settings"]
    assert (settings["env_id"], settings["value_map"], settings["pooling"]) == ("TokenizedAlignment-v1", "", "response")


def test_ratio_script_runs_the_env_id_with_the_reading_flags_it_is_given(
    load_script, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reproduce_ratio.py makes --env-id with each set reading flag, and leaves the unset ones to the env id."""
    import gymnasium as gym

    from tokenized_bandit_gym.evaluation.alignment_regret import READING_FLAGS

    module = load_script("examples/reproduce_ratio.py")
    assert set(READING_FLAGS) <= {field.name for field in dataclasses.fields(module.Args)}
    made: dict = {}

    def make(env_id: str, **kwargs: object) -> None:
        made.update(kwargs, env_id=env_id)
        raise gym.error.Error("stop here")

    monkeypatch.setattr(gym, "make", make)
    args = module.parse_args(["--env-id", "TokenizedAlignment-v0", "--pooling", "response", "--score-forced-eos", "no"])
    with pytest.raises(SystemExit, match="TokenizedAlignment-v0"):
        module.run_eoful(args)
    assert made["env_id"] == "TokenizedAlignment-v0"
    assert (made["pooling"], made["score_forced_eos"]) == ("response", False)
    assert not {"value_map", "embedding_norm", "theta_scale"} & set(made)  # unset: the env id's own
    assert module.parse_args([]).env_id == "TokenizedAlignment-v1"
    assert module.parse_args(["--real-llm"]).model == "smollm2-135m-instruct"
    assert module.parse_args(["--real-llm", "--model", "stories260K"]).model == "stories260K"  # a named model is kept


def test_real_llm_preset_is_the_paper_setting_short_on_smollm2() -> None:
    from examples.reproduce_regret import parse_args

    args = parse_args(["--real-llm"])
    assert args.model == "smollm2-135m-instruct"
    assert (args.max_length, args.top_k, args.gamma, args.theta) == (30, 15, 0.8, 0.5)
    assert (args.rounds, args.seeds) == (100, "0,1,2")
    assert parse_args(["--real-llm", "--rounds", "1000"]).rounds == 1000
    assert parse_args(["--real-llm", "--model", "stories260K"]).model == "stories260K"  # a named model is kept
    assert args.runs_per_forward == 9  # every (agent, seed) run a row of one forward: closer to the compute floor
    assert parse_args(["--real-llm", "--seeds", "4"]).runs_per_forward == 3
    assert parse_args(["--real-llm", "--runs-per-forward", "3"]).runs_per_forward == 3
    assert parse_args([]).runs_per_forward == 0  # elsewhere the agents of one seed


@pytest.mark.slow
def test_runs_as_rows_of_one_forward_play_what_single_envs_play() -> None:
    """Each (agent, seed) row of the vector env plays what run_online plays on a single env with that seed."""
    if not alignment_stack_available():
        pytest.skip("TokenizedAlignment-v0 and the reproduction agents are not installed")
    import gymnasium as gym

    from examples.reproduce_regret import (
        ENV_ID,
        RATIO_ATTRIBUTES,
        Args,
        env_kwargs,
        make_agent,
        make_env,
        play_rows,
    )
    from tokenized_bandit_gym.evaluation import run_online

    args = Args(rounds=3, max_length=4, top_k=3, theta=0.5)
    runs = [(name, seed) for seed in (0, 1) for name in ("eoful", "fixed_theta_greedy", "misaligned_greedy")]
    rows = make_env(args, len(runs))
    played = play_rows(rows, runs, args)
    problem = rows.unwrapped.problem
    single = gym.make(ENV_ID, **env_kwargs(args) | {"model": problem.model, "tokenizer": problem.tokenizer})
    for (name, seed), (cumulative, agent) in zip(runs, played, strict=True):
        reference_agent = make_agent(name, single, args)
        reference = run_online(single, reference_agent, rounds=args.rounds, seed=seed)
        assert cumulative.shape == (args.rounds,)
        np.testing.assert_allclose(cumulative, reference.cumulative_regret, atol=1e-5)
        for attribute in RATIO_ATTRIBUTES:  # EOFUL's Assumption 4 ratios, one per round
            if hasattr(reference_agent, attribute):
                np.testing.assert_allclose(getattr(agent, attribute), getattr(reference_agent, attribute), rtol=1e-4)
    assert len(played[0][1].prefix_ratio_max) == args.rounds


def test_one_run_plays_as_a_one_row_env_what_a_single_env_plays() -> None:
    """One (agent, seed) run is a one-row vector env: every info entry is a (1, ...) array, ``round_ended`` too,
    and the row plays what run_online plays on a single env with that seed."""
    if not alignment_stack_available():
        pytest.skip("TokenizedAlignment-v0 and the reproduction agents are not installed")
    import gymnasium as gym

    from examples.reproduce_regret import Args, env_kwargs, make_agent, make_env
    from tokenized_bandit_gym.evaluation import run_online
    from tokenized_bandit_gym.evaluation.runs_as_rows import play_rows

    args = Args(rounds=3, max_length=3, top_k=2)
    env = make_env(args, 1)
    ended_infos: list[dict[str, Any]] = []
    regret = play_rows(
        env,
        [make_agent("eoful", env, args)],
        [0],
        args.rounds,
        on_rounds_ended=lambda ended, played, observations, final: ended_infos.append(final),
        progress=False,
    )
    assert regret.shape == (1, args.rounds) and len(ended_infos) == args.rounds
    for final in ended_infos:
        assert all(isinstance(value, np.ndarray) and value.shape[0] == 1 for value in final.values()), final
        assert final["round_ended"].tolist() == [True]
    problem = env.unwrapped.problem
    single = gym.make(args.env_id, **env_kwargs(args) | {"model": problem.model, "tokenizer": problem.tokenizer})
    reference = run_online(single, make_agent("eoful", single, args), rounds=args.rounds, seed=0)
    np.testing.assert_allclose(np.cumsum(regret[0]), reference.cumulative_regret, atol=1e-5)


class _Interrupt(Exception):
    """Stands for a run killed mid-group (a time limit, Ctrl-C)."""


def test_a_group_stopped_mid_run_resumes_from_its_checkpoint_and_plays_the_same(tmp_path: Path) -> None:
    """Stopped after round 3 with a checkpoint every 2 rounds, a fresh env and fresh agents resume at round 3.

    The resumed rows play what the uninterrupted rows play, bit for bit (regrets and EOFUL's per-round ratios),
    and a checkpoint of other runs (another identity) is ignored: that call starts at round 1.
    """
    if not alignment_stack_available():
        pytest.skip("TokenizedAlignment-v0 and the reproduction agents are not installed")
    from examples.reproduce_regret import RATIO_ATTRIBUTES, Args, make_agent, make_env
    from tokenized_bandit_gym.evaluation.runs_as_rows import RowsCheckpoint, play_rows

    args = Args(rounds=6, max_length=4, top_k=3, theta=0.5)
    runs = [(name, seed) for seed in (0, 1) for name in ("eoful", "fixed_theta_greedy", "misaligned_greedy")]
    seeds = [seed for _, seed in runs]
    first_env = make_env(args, len(runs))
    problem = first_env.unwrapped.problem

    def fresh() -> tuple:
        env = make_env(args, len(runs), model=problem.model, tokenizer=problem.tokenizer)
        return env, [make_agent(name, env, args) for name, _ in runs]

    reference_agents = [make_agent(name, first_env, args) for name, _ in runs]
    reference = play_rows(first_env, reference_agents, seeds, args.rounds, progress=False)

    def stop_after_round_3(ended: np.ndarray, played: np.ndarray, *_: object) -> None:
        if played.min() >= 3:
            raise _Interrupt

    checkpoint = RowsCheckpoint(str(tmp_path / "checkpoint.npz"), every=2, identity={"runs": runs})
    env, agents = fresh()
    with pytest.raises(_Interrupt):
        play_rows(env, agents, seeds, args.rounds, on_rounds_ended=stop_after_round_3, checkpoint=checkpoint)
    assert (tmp_path / "checkpoint.npz").exists()

    for identity, first_round in (({"runs": runs}, 3), ({"runs": runs[::-1]}, 1)):
        first_played: list[int] = []
        env, agents = fresh()
        regret = play_rows(
            env,
            agents,
            seeds,
            args.rounds,
            on_rounds_ended=lambda ended, played, *_, seen=first_played: seen.append(int(played.min())),
            progress=False,
            checkpoint=RowsCheckpoint(checkpoint.path, every=2, identity=identity),
        )
        assert first_played[0] == first_round
        np.testing.assert_array_equal(regret, reference)
        for agent, reference_agent in zip(agents, reference_agents, strict=True):
            for attribute in RATIO_ATTRIBUTES:
                if hasattr(reference_agent, attribute):
                    np.testing.assert_array_equal(getattr(agent, attribute), getattr(reference_agent, attribute))


def test_rows_checkpoint_refuses_a_bad_path_or_interval() -> None:
    from tokenized_bandit_gym.evaluation.runs_as_rows import RowsCheckpoint

    with pytest.raises(ValueError, match="path"):
        RowsCheckpoint("")
    with pytest.raises(ValueError, match="got 0"):
        RowsCheckpoint("x.npz", every=0)


def test_benchmarks_kept_in_a_file_are_not_decoded_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh env warmed from the file of the same settings decodes nothing and holds the same benchmarks.

    Of other settings, or of the same settings but written by other code, the file is not read: every query is
    decoded again (to the same benchmarks).
    """
    if not alignment_stack_available():
        pytest.skip("TokenizedAlignment-v0 and the reproduction agents are not installed")
    import torch

    from examples.reproduce_regret import Args, make_env
    from tokenized_bandit_gym.evaluation import provenance
    from tokenized_bandit_gym.evaluation.runs_as_rows import queries_of_runs, warm_benchmarks

    args = Args(rounds=4, max_length=3, top_k=2, theta=0.5)
    path = str(tmp_path / "benchmarks.npz")
    first = make_env(args, 2)
    warm_benchmarks(first, [0, 1], args.rounds, 3, False, path, {"settings": 1})
    expected = first.unwrapped.problem.cached_benchmarks().greedy
    queries = queries_of_runs(first, [0, 1], args.rounds)
    assert sorted(expected) == queries

    model, tokenizer = first.unwrapped.problem.model, first.unwrapped.problem.tokenizer
    other_code = {"package_version": "0.0.1", "git_commit": None}
    for identity, decoded, version in (
        ({"settings": 1}, 0, provenance.code_version()),
        ({"settings": 2}, len(queries), provenance.code_version()),
        ({"settings": 2}, len(queries), other_code),
    ):
        monkeypatch.setattr(provenance, "code_version", lambda version=version: dict(version))
        env = make_env(args, 2, model=model, tokenizer=tokenizer)
        problem = env.unwrapped.problem
        calls: list[int] = []
        decode = problem.greedy_decode

        def counted(batch: torch.Tensor, decode: Any = decode, calls: list[int] = calls) -> Any:
            calls.extend(batch.tolist())
            return decode(batch)

        problem.greedy_decode = counted
        warm_benchmarks(env, [0, 1], args.rounds, 3, False, path, identity)
        assert len(calls) == decoded
        for query, (utility, response) in problem.cached_benchmarks().greedy.items():
            assert utility == expected[query][0] and torch.equal(response, expected[query][1])


def test_captured_step_mode_plays_the_runs_eager_plays(tmp_path: Path) -> None:
    """--step-mode captured (the static-shape step) gives each run the eager step's regret, to float rounding."""
    if not alignment_stack_available():
        pytest.skip("TokenizedAlignment-v0 and the reproduction agents are not installed")
    curves = {}
    for mode in ("eager", "captured"):
        out_dir = tmp_path / mode
        out_dir.mkdir()
        done = run(out_dir, "--step-mode", mode, "--runs-per-forward", "6")
        assert done.returncode == 0, done.stderr
        data = json.loads((out_dir / "regret.json").read_text())
        assert data["settings"]["step_mode"] == mode
        curves[mode] = {key: entry["cumulative_regret"] for key, entry in data["runs"].items()}
    assert sorted(curves["captured"]) == sorted(curves["eager"])
    for key, curve in curves["eager"].items():
        np.testing.assert_allclose(curves["captured"][key], curve, rtol=1e-4, atol=1e-3)
