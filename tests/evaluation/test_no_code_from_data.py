"""No code runs from a results folder: a planted pickle, under every name a script resumes from, never runs.

Each test writes a pickle whose ``__reduce__`` creates a marker folder, puts it where a resume reads, runs the
resume path, and checks that the marker never appears (and that the run is what it is without the file).
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
from tests.examples.test_reproduce_scripts import alignment_stack_available
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.evaluation.runs_as_rows import RowsCheckpoint, play_rows
from tokenized_bandit_gym.evaluation.saved_state import StateError, classes_of, read_header, read_state, write_state


class _Planted:
    """Unpickling it creates the folder ``marker``: what a planted file could do instead (``os.system``)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.mkdir, (self.marker,)


def plant(path: Path, marker: Path) -> None:
    """Write the malicious pickle to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(_Planted(marker)))


def test_the_planted_pickle_does_run_when_unpickled(tmp_path: Path) -> None:
    """The planted file is live: the other tests' clean results mean the resume paths never unpickle it."""
    plant(tmp_path / "x.pkl", tmp_path / "marker")
    pickle.loads((tmp_path / "x.pkl").read_bytes())
    assert (tmp_path / "marker").is_dir()


def _rows(path: str, on_rounds_ended: Any = None) -> np.ndarray:
    env = gym.make_vec("TokenizedLinearBandit-v0", 2, vectorization_mode="vector_entry_point")
    checkpoint = RowsCheckpoint(path, every=2, identity={"runs": "two eoful"})
    players = [agents.make("eoful"), agents.make("eoful")]
    return play_rows(env, players, [0, 1], 4, on_rounds_ended=on_rounds_ended, progress=False, checkpoint=checkpoint)


@pytest.mark.parametrize("name", ["checkpoint.npz", "checkpoint.pkl", "checkpoint"])
def test_a_planted_checkpoint_is_never_unpickled(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Whatever the checkpoint's name, a pickle there is ignored with one line, and the rows play from round 1."""
    reference = _rows(str(tmp_path / "clean" / name))
    capsys.readouterr()
    plant(tmp_path / name, tmp_path / "marker")
    first_round: list[int] = []
    regret = _rows(str(tmp_path / name), lambda ended, played, *_: first_round.append(int(played.min())))
    assert not (tmp_path / "marker").exists()
    said = capsys.readouterr().out
    assert said.count("\n") == 1 and f"ignoring {tmp_path / name}" in said and "never unpickled" in said
    assert first_round[0] == 1
    np.testing.assert_array_equal(regret, reference)
    assert read_header(tmp_path / name)["identity"] == {"runs": "two eoful"}  # replaced by a checkpoint


def test_saved_state_round_trips_what_agents_hold(tmp_path: Path) -> None:
    """Arrays, tensors (and a NumPy view of one), generators, dtypes and devices come back equal and typed."""
    tensor = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    generator = np.random.default_rng(5)
    generator.random(3)
    state = {
        "tensor": tensor,
        "view": tensor.numpy(),
        "half": torch.ones(2, dtype=torch.bfloat16),
        "array": np.arange(4, dtype=np.int32),
        "scalar": np.float32(1.5),
        "generator": generator,
        "torch_generator": torch.Generator().manual_seed(3),
        "dtypes": (torch.float32, np.dtype("<f8")),
        "device": torch.device("cpu"),
        (1, 2): [None, True, 2**70, float("nan"), "text", b"\x00", {3}, frozenset({4})],
    }
    state["again"] = state["array"]
    write_state(tmp_path / "state.npz", {"header": 1}, state)
    back = read_state(tmp_path / "state.npz")
    assert read_header(tmp_path / "state.npz") == {"header": 1}
    assert torch.equal(back["tensor"], tensor) and back["half"].dtype == torch.bfloat16
    back["tensor"][0, 0] = 7.0
    assert back["view"][0, 0] == 7.0  # still a view of the tensor
    assert back["again"] is back["array"] and back["array"].dtype == np.int32
    assert type(back["scalar"]) is np.float32 and back["dtypes"] == (torch.float32, np.dtype("<f8"))
    assert back["generator"].random() == generator.random()
    assert torch.equal(
        torch.rand(2, generator=back["torch_generator"]), torch.rand(2, generator=state["torch_generator"])
    )
    items = back[(1, 2)]
    assert (
        items[:3] == [None, True, 2**70] and np.isnan(items[3]) and items[4:] == ["text", b"\x00", {3}, frozenset({4})]
    )


def test_saved_state_rebuilds_only_the_classes_the_reader_passes(tmp_path: Path) -> None:
    agent = agents.make("eoful")
    agent.reset(tokenized_bandit_gym.task.Task.from_env(gym.make("TokenizedLinearBandit-v0"), 3), 0)
    write_state(tmp_path / "agent.npz", {}, agent)
    with pytest.raises(StateError, match="class 'tokenized_bandit_gym.agents.eoful.EOFUL'.*does not have"):
        read_state(tmp_path / "agent.npz")
    assert type(read_state(tmp_path / "agent.npz", classes=classes_of(agent))) is type(agent)


@pytest.mark.parametrize(
    ("value", "pattern"),
    [(lambda: 1, "not data"), (np.array([object()]), "object"), (torch.nn.Linear(1, 1), "Parameter")],
)
def test_saved_state_refuses_what_it_cannot_hold(tmp_path: Path, value: Any, pattern: str) -> None:
    with pytest.raises(StateError, match=pattern):
        write_state(tmp_path / "x.npz", {}, {"value": value})
    assert not (tmp_path / "x.npz").exists()


def test_an_agent_the_checkpoint_cannot_hold_plays_on_unsaved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint of an agent holding a torch module is not written (one line); the rows play to the end."""
    from tokenized_bandit_gym.agents.eoful import EOFUL

    class HoldsAModule(EOFUL):
        def reset(self, task: Any, seed: int | None = None) -> None:
            super().reset(task, seed)
            self.module = torch.nn.Linear(1, 1)

    env = gym.make_vec("TokenizedLinearBandit-v0", 2, vectorization_mode="vector_entry_point")
    path = tmp_path / "checkpoint.npz"
    checkpoint = RowsCheckpoint(str(path), every=1, identity=None)
    regret = play_rows(env, [HoldsAModule(), HoldsAModule()], [0, 1], 4, progress=False, checkpoint=checkpoint)
    said = capsys.readouterr().out
    assert regret.shape == (2, 4) and not path.exists()
    assert said.count("\n") == 1 and f"not checkpointing to {path}" in said and "Parameter" in said


needs_alignment = pytest.mark.skipif(
    not alignment_stack_available(), reason="TokenizedAlignment-v0 and the reproduction agents are not installed"
)


@needs_alignment
def test_a_planted_benchmark_cache_is_never_unpickled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from examples.reproduce_regret import Args, make_env
    from tokenized_bandit_gym.evaluation.runs_as_rows import warm_benchmarks

    args = Args(rounds=2, max_length=3, top_k=2, theta=0.5)
    path = tmp_path / "benchmarks.pkl"
    plant(path, tmp_path / "marker")
    env = make_env(args, 2)
    warm_benchmarks(env, [0], args.rounds, 2, False, str(path), {"settings": 1})
    assert not (tmp_path / "marker").exists()
    said = capsys.readouterr().out
    assert said.count("\n") == 1 and f"ignoring {path}" in said
    again = make_env(args, 2, model=env.unwrapped.problem.model, tokenizer=env.unwrapped.problem.tokenizer)
    warm_benchmarks(again, [0], args.rounds, 2, False, str(path), {"settings": 1})  # the file it wrote instead
    assert (
        again.unwrapped.problem.cached_benchmarks().greedy.keys()
        == env.unwrapped.problem.cached_benchmarks().greedy.keys()
    )


@needs_alignment
def test_reproduce_regret_never_unpickles_its_out_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--out-dir`` with a pickle as ``checkpoint.pkl`` (older versions' name) and as ``checkpoint.npz``."""
    from examples.reproduce_regret import Args, main

    args = Args(
        rounds=2, max_length=3, top_k=2, theta=0.5, agents="eoful,fixed_theta_greedy", out_dir=str(tmp_path / "out")
    )
    for name in ("checkpoint.pkl", "checkpoint.npz"):
        plant(tmp_path / "out" / name, tmp_path / "marker")
    results = main(args)
    assert not (tmp_path / "marker").exists()
    said = capsys.readouterr().out
    assert "checkpoint.pkl: a pickled checkpoint of an older version is never loaded" in said
    assert f"ignoring {tmp_path / 'out' / 'checkpoint.npz'}" in said
    assert len(results["runs"]["eoful/0"]["cumulative_regret"]) == args.rounds


@pytest.mark.parametrize(
    ("script", "reader", "name"),
    [
        ("reproduce_regret", "resumable_runs", "regret.json"),
        ("pairwise_alignment", "resumable_runs", "pairwise.json"),
        ("reproduce_alignment", "_read_run", "runs/eoful-seed0.json"),
    ],
)
def test_json_results_are_never_unpickled(
    script: str, reader: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The scripts' JSON results, when a pickle is planted in their place, are ignored with one line, never run."""
    import importlib

    read = getattr(importlib.import_module(f"examples.{script}"), reader)
    plant(tmp_path / name, tmp_path / "marker")
    arguments = (str(tmp_path / name), {}) if reader == "resumable_runs" else (str(tmp_path / name),)
    kept = read(*arguments)
    assert not kept and not (tmp_path / "marker").exists()
    said = capsys.readouterr().out.splitlines()
    assert said == [f"not reusing {tmp_path / name}: not a readable JSON results file (UnicodeDecodeError)"]


def test_a_planted_ddmc_embedding_cache_is_never_unpickled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``tbg ddmc --resume-dir``: an older ``batch-*.pt`` pickle and a pickle named ``.safetensors`` are not read."""
    from tokenized_bandit_gym.evaluation.ddmc.prefix_pair_table import _cached_embeddings

    plant(tmp_path / "batch-old.pt", tmp_path / "marker")
    plant(tmp_path / "batch-planted.safetensors", tmp_path / "marker")
    assert _cached_embeddings(tmp_path) == {}
    assert not (tmp_path / "marker").exists()
    said = capsys.readouterr().out.splitlines()
    assert len(said) == 2 and "batch-*.pt" in said[0] and "batch-planted.safetensors" in said[1]


def test_a_damaged_or_foreign_state_file_is_refused_in_one_error(tmp_path: Path) -> None:
    """Garbage, a truncated file, a lone ``.npy`` array and a state nested too deeply: a StateError each."""
    write_state(tmp_path / "whole.npz", {"h": 1}, {"x": np.arange(3)})
    whole = (tmp_path / "whole.npz").read_bytes()
    deep = io.BytesIO()
    nested = "[" * 100_000 + "]" * 100_000
    np.savez(
        deep, **{"header.json": np.frombuffer(b"{}", np.uint8), "state.json": np.frombuffer(nested.encode(), np.uint8)}
    )
    single = io.BytesIO()
    np.save(single, np.arange(3))
    for name, content in (
        ("garbage", b"\x00not a file"),
        ("truncated", whole[: len(whole) // 2]),
        ("single", single.getvalue()),
        ("deep", deep.getvalue()),
    ):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(StateError, match=name):
            read_state(tmp_path / name)
