"""Every bad input gets a clear exception naming the bad value, before any run starts, also under ``python -O``.

The matrix tests use only ``pytest.raises`` (no ``assert``), so :func:`test_matrix_under_python_optimize`
can run them again in a ``python -O`` subprocess, where ``assert`` statements vanish.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.envs import TokenizedLinearBanditEnv, TokenizedMultiArmedBanditEnv
from tokenized_bandit_gym.evaluation.cli import OutputError, check_output_folder, main
from tokenized_bandit_gym.evaluation.leaderboard_spec import SpecError, load_spec, parse_spec
from tokenized_bandit_gym.evaluation.results_store import ResultsStore, StoreError

REPO = Path(__file__).resolve().parents[2]
TLB = "TokenizedLinearBandit-v0"
TMAB = "TokenizedMultiArmedBandit-v0"
CUDA_MISSING = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch without a usable CUDA device")

# (env id, kwargs, exception, pattern the message must contain)
ENV_CASES: list[Any] = [
    (TLB, {"instance_seed": 2**70}, ValueError, f"instance_seed must be <= {2**64 - 1}, got {2**70}"),
    (TLB, {"instance_seed": 2**64}, ValueError, "instance_seed must be <="),
    (TLB, {"instance_seed": -1}, ValueError, "instance_seed must be >= 0, got -1"),
    (TLB, {"instance_seed": 1.5}, TypeError, "instance_seed must be an integer, got 1.5"),
    (TLB, {"instance_seed": "3"}, TypeError, "instance_seed must be an integer, got '3'"),
    (TLB, {"instance_seed": np.float64(2.0)}, TypeError, "instance_seed"),
    (TLB, {"vocab_size": 10**9}, ValueError, r"vocab_size=1000000000.*would need at least [\d,.]+ GiB of memory"),
    (TLB, {"embedding_dim": 10**9}, ValueError, r"embedding_dim=1000000000.*GiB of memory"),
    (TLB, {"max_length": 10**6}, ValueError, r"max_length=1000000.*GiB of memory"),
    (TLB, {"num_queries": 10**12}, ValueError, r"num_queries=1000000000000.*GiB"),
    (TLB, {"query_length": 10**12}, ValueError, r"query_length=1000000000000.*GiB"),
    pytest.param(TLB, {"device": "cuda"}, ValueError, "device='cuda' is not available", marks=CUDA_MISSING),
    pytest.param(TLB, {"device": "cuda:7"}, ValueError, "device='cuda:7' is not available", marks=CUDA_MISSING),
    (TLB, {"device": "quantum"}, ValueError, "quantum"),
    (TLB, {"device": "meta"}, ValueError, "'meta'"),
    (TLB, {"device": 2.5}, ValueError, "2.5"),
    (TLB, {"dtype": "int8"}, ValueError, "int8"),
    (TLB, {"dtype": "float16"}, ValueError, "float16"),
    (TLB, {"vocab_size": 1}, ValueError, "vocab_size must be >= 2, got 1"),
    (TLB, {"vocab_size": 2.5}, TypeError, "vocab_size must be an integer, got 2.5"),
    (TLB, {"vocab_size": True}, TypeError, "vocab_size must be an integer, got True"),
    (TLB, {"max_length": 0}, ValueError, "max_length must be >= 1, got 0"),
    (TLB, {"embedding_dim": -3}, ValueError, "embedding_dim must be >= 1, got -3"),
    (TLB, {"num_queries": 0}, ValueError, "num_queries must be >= 1, got 0"),
    (TLB, {"alpha": 1.5}, ValueError, "alpha must be <= 1.0, got 1.5"),
    (TLB, {"alpha": float("nan")}, ValueError, "alpha must be finite, got nan"),
    (TLB, {"noise": "cauchy"}, ValueError, "cauchy"),
    (TLB, {"noise_scale": -0.1}, ValueError, "noise_scale"),
    (TLB, {"family": "unknown"}, ValueError, "unknown"),
    (TLB, {"fixed_length": "yes"}, TypeError, "yes"),
    (TLB, {"strict_actions": 1}, TypeError, "strict_actions must be a bool, got 1"),
    (TMAB, {"family": "needle"}, ValueError, "needle"),
    (TMAB, {"instance_seed": 2**70}, ValueError, "instance_seed must be <="),
    (TMAB, {"vocab_size": 10**9}, ValueError, r"vocab_size=1000000000.*GiB of memory"),
    (TMAB, {"family": "random_table", "vocab_size": 10**9}, ValueError, r"vocab_size=1000000000.*GiB of memory"),
    (TMAB, {"family": "random_table", "vocab_size": 40, "max_length": 8}, ValueError, "max_length=8"),
    pytest.param(TMAB, {"device": "cuda"}, ValueError, "device='cuda' is not available", marks=CUDA_MISSING),
    ("TokenizedAlignment-v0", {"model": 123}, TypeError, r"model must be .*got 123 \(int\)"),
    ("TokenizedAlignment-v0", {"model": ["a"]}, TypeError, r"model must be .*got \['a'\]"),
    ("TokenizedAlignment-v0", {"instance_seed": 2**70}, ValueError, "instance_seed must be <="),
    pytest.param(
        "TokenizedAlignment-v0", {"device": "cuda"}, ValueError, "device='cuda' is not available", marks=CUDA_MISSING
    ),
]


@pytest.mark.parametrize(("env_id", "kwargs", "error", "pattern"), ENV_CASES)
def test_matrix_env_arguments(env_id: str, kwargs: dict[str, Any], error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        gym.make(env_id, **kwargs)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "error", "pattern"),
    [
        (TLB, {"instance_seed": 2**70}, ValueError, "instance_seed must be <="),
        (TLB, {"vocab_size": 10**9}, ValueError, r"vocab_size=1000000000.*GiB of memory"),
        pytest.param(TLB, {"device": "cuda"}, ValueError, "device='cuda' is not available", marks=CUDA_MISSING),
        (TMAB, {"max_length": 10**6}, ValueError, r"max_length=1000000.*GiB of memory"),
    ],
)
def test_matrix_vector_env_arguments(env_id: str, kwargs: dict[str, Any], error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        gym.make_vec(env_id, num_envs=2, **kwargs)


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda: TokenizedLinearBanditEnv(render_mode="human"), "human"),
        (lambda: TokenizedMultiArmedBanditEnv(render_mode="human"), "human"),
        (lambda: TokenizedLinearBanditEnv(render_mode="rgb"), "'rgb'"),
    ],
    ids=["tlb-human", "tmab-human", "tlb-rgb"],
)
def test_matrix_render_modes(make: Any, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        make()


@pytest.mark.parametrize(
    ("name", "kwargs", "error", "pattern"),
    [
        ("maskable_ppo", {"learning_rate": "x"}, TypeError, "learning_rate must be a real number, got 'x'"),
        ("ppo", {"learning_rate": "x"}, TypeError, "learning_rate must be a real number, got 'x'"),
        ("a2c", {"learning_rate": None}, TypeError, "learning_rate must be a real number, got None"),
        ("dqn", {"learning_rate": "x"}, TypeError, "learning_rate"),
        ("recurrent_ppo", {"learning_rate": -1.0}, ValueError, "learning_rate must be >= 0.0, got -1.0"),
        ("maskable_ppo", {"gamma": 2}, ValueError, "gamma must be <= 1.0, got 2"),
        ("maskable_ppo", {"n_steps": 0}, ValueError, "n_steps must be >= 1, got 0"),
        ("ppo", {"batch_size": 8.5}, TypeError, "batch_size must be an integer, got 8.5"),
        ("dqn", {"n_epochs": 3}, TypeError, "DQN takes no hyperparameter n_epochs=3"),
        ("maskable_ppo", {"clip_range": "wide"}, TypeError, "clip_range must be a real number, got 'wide'"),
        ("dqn", {"exploration_fraction": 1.5}, ValueError, "exploration_fraction must be <= 1.0, got 1.5"),
        ("maskable_ppo", {"seed": 3}, TypeError, "seed=3"),
        ("sb3", {"algo": "trpo"}, ValueError, "trpo"),
        ("maskable_ppo", {"torch_threads": 0}, ValueError, "torch_threads"),
    ],
)
def test_matrix_agent_arguments(name: str, kwargs: dict[str, Any], error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        agents.make(name, **kwargs)


def spec_table(tasks: list[dict[str, Any]] | None = None, agents_: list[dict[str, Any]] | None = None, **top: Any):
    table: dict[str, Any] = {"rounds": 5, "seeds": 1}
    table["task"] = tasks if tasks is not None else [{"id": TMAB}]
    table["agent"] = agents_ if agents_ is not None else [{"name": "random"}]
    table.update(top)
    return table


SPEC_CASES: list[Any] = [
    (spec_table([{"id": "CartPole-v1"}]), r"task\[0\].id 'CartPole-v1' is not a tokenized bandit env"),
    (spec_table([{"id": "Nope-v0"}]), r"task\[0\].id 'Nope-v0' is not a registered env id"),
    (spec_table([{"id": TLB, "kwargs": {"render_mode": "human"}}]), r"render_mode 'human' is not supported"),
    (spec_table([{"id": TLB, "kwargs": {"vocab_size": 10**9}}]), r"task\[0\].kwargs .*GiB of memory"),
    (spec_table([{"id": TLB, "kwargs": {"instance_seed": 2**70}}]), r"instance_seed must be <="),
    (spec_table([{"id": TLB, "kwargs": {"nonsense": 1}}]), r"task\[0\].kwargs \{'nonsense': 1\} are invalid"),
    (
        spec_table(agents_=[{"name": "maskable_ppo", "kwargs": {"learning_rate": "x"}}]),
        r"agent\[0\].kwargs \{'learning_rate': 'x'\} are invalid for 'maskable_ppo'",
    ),
    (spec_table(agents_=[{"name": "ppo", "kwargs": {"gamma": 2.0}}]), r"gamma must be <= 1.0, got 2.0"),
    (spec_table(agents_=[{"name": "eoful", "kwargs": {"nonsense": 1}}]), r"agent\[0\].kwargs \{'nonsense': 1\}"),
    (spec_table(agents_=[{"name": "nope"}]), r"agent\[0\].name 'nope' is not a registered agent"),
    (
        spec_table(agents_=[{"name": "random", "label": "A"}, {"name": "random", "label": "B"}]),
        r"agent\[1\] \('B'\) is the same agent as agent\[0\] \('A'\)",
    ),
    (
        spec_table(
            agents_=[
                {"name": "eoful", "kwargs": {"beta": 0.1, "lam": 1.0}},
                {"name": "eoful", "kwargs": {"lam": 1.0, "beta": 0.1}, "label": "again"},
            ]
        ),
        r"agent\[1\] \('again'\) is the same agent as agent\[0\]",
    ),
    (
        spec_table(
            [
                {"id": TLB, "kwargs": {"vocab_size": 5, "max_length": 3}, "label": "a"},
                {"id": TLB, "kwargs": {"max_length": 3, "vocab_size": 5}, "label": "b"},
            ]
        ),
        r"task\[1\] \('b'\) is the same task as task\[0\] \('a'\)",
    ),
    (spec_table([{"id": TMAB, "label": "x"}, {"id": TLB, "label": "x"}]), r"task\[1\].label 'x' is used"),
    (spec_table(seeds=[1, 1]), r"seeds must be distinct"),
    (spec_table(seeds=0), r"seeds must be >= 1, got 0"),
    (spec_table(seeds="3"), r"seeds must be a non-empty list"),
    (spec_table(seeds=[-1]), r"seeds\[0\] must be >= 0, got -1"),
    (spec_table(rounds=0), r"rounds must be >= 1, got 0"),
    (spec_table(rounds=1.5), r"rounds must be an integer, got 1.5"),
    ({"seeds": 1, "task": [{"id": TMAB}], "agent": [{"name": "random"}]}, r"missing field 'rounds'"),
    (spec_table([{"kwargs": {}}]), r"missing field 'task\[0\].id'"),
    (spec_table(extra=1), r"unknown field 'extra'"),
    (spec_table(agents_=[{"name": "random", "tasks": ["nope"]}]), r"agent\[0\].tasks\[0\] 'nope' is not a task"),
    (spec_table([{"id": TMAB, "kwargs": {"noise_scale": float("nan")}}]), r"must not contain NaN"),
    (spec_table(title=""), r"title must be a non-empty string"),
    (spec_table([]), r"task must be a non-empty list"),
]


@pytest.mark.parametrize(("table", "pattern"), SPEC_CASES)
def test_matrix_spec_fields(table: dict[str, Any], pattern: str) -> None:
    with pytest.raises(SpecError, match=pattern):
        parse_spec(table)


@pytest.mark.parametrize("env_id", tokenized_bandit_gym.registered_ids())
def test_every_registered_id_passes_the_spec_check(env_id: str) -> None:
    """The suite's own ids, the LLM ones included (their problem implements the problem Protocol)."""
    kwargs = {"max_length": 4, "top_k": 3} if "Alignment" in env_id or "Decoding" in env_id else {}
    spec = parse_spec(spec_table([{"id": env_id, "kwargs": kwargs}]))
    assert [task.id for task in spec.tasks] == [env_id]


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        (b"\xff\xfe\x00\x01binary", r"is not UTF-8 text \(byte b'\\xff' at offset 0\)"),
        ("rounds = 5\ntitle = 'caf\u00e9'\n".encode("latin-1"), r"is not UTF-8 text \(byte b'\\xe9' at offset"),
        (b"rounds = 5\x00\n", r"is not valid TOML"),
        (b"rounds = = 5\n", r"is not valid TOML"),
        (b"", r"missing field 'rounds'"),
    ],
    ids=["binary", "latin-1", "nul", "bad-toml", "empty"],
)
def test_matrix_spec_files(tmp_path: Path, content: bytes, pattern: str) -> None:
    path = tmp_path / "spec.toml"
    path.write_bytes(content)
    with pytest.raises(SpecError, match=pattern):
        load_spec(path)


def test_matrix_spec_file_missing_or_a_folder(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read spec file"):
        load_spec(tmp_path / "missing.toml")
    with pytest.raises(SpecError, match="cannot read spec file"):
        load_spec(tmp_path)


def test_matrix_store_locations(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(StoreError, match="folder .* cannot be created"):
        ResultsStore(a_file / "sub" / "r.sqlite")
    with pytest.raises(StoreError, match="cannot be created|not writable"):
        ResultsStore("/proc/tbg-no-such-folder/r.sqlite")  # /proc is read-only even for root
    with pytest.raises(StoreError, match="is a directory"):
        ResultsStore(tmp_path)
    with pytest.raises(StoreError, match="not an SQLite database"):
        ResultsStore(a_file)
    with pytest.raises(StoreError, match="no results store"):
        ResultsStore(tmp_path / "missing" / "r.sqlite", create=False)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_matrix_store_in_read_only_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    with ResultsStore(folder / "old.sqlite"):
        pass
    folder.chmod(0o555)
    try:
        with pytest.raises(StoreError, match="not writable"):
            ResultsStore(folder / "new.sqlite")
        with pytest.raises(StoreError, match="must be readable and writable"):
            ResultsStore(folder / "old.sqlite")
    finally:
        folder.chmod(0o755)


def test_matrix_output_folder(tmp_path: Path) -> None:
    a_file = tmp_path / "report.html"
    a_file.write_text("x")
    with pytest.raises(OutputError, match="is an existing file"):
        check_output_folder(a_file)
    with pytest.raises(OutputError, match="cannot be created"):
        check_output_folder(a_file / "sub")
    check_output_folder(tmp_path / "new" / "report")  # creatable: no error


SPEC_TEXT = 'rounds = 5\nseeds = 1\n[[task]]\nid = "TokenizedMultiArmedBandit-v0"\n[[agent]]\nname = "random"\n'


@pytest.mark.parametrize(
    ("spec", "extra", "message"),
    [
        (SPEC_TEXT, ["--out", "{file}"], "is an existing file"),
        (SPEC_TEXT.replace("TokenizedMultiArmedBandit-v0", "CartPole-v1"), [], "is not a tokenized bandit env"),
        (SPEC_TEXT + "[[agent]]\nname = 'random'\nlabel = 'again'\n", [], "is the same agent"),
        (SPEC_TEXT.replace('"random"', "'maskable_ppo'\nkwargs = { learning_rate = 'x' }"), [], "learning_rate"),
        (SPEC_TEXT, ["--store", "{file}/sub/r.sqlite"], "cannot be created"),
    ],
    ids=["out-is-a-file", "cartpole", "duplicate-agent", "ppo-learning-rate", "store-under-a-file"],
)
def test_matrix_cli_fails_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, extra: list[str], message: str
) -> None:
    a_file = tmp_path / "existing"
    a_file.write_text("keep me")
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(spec)
    store = tmp_path / "r.sqlite"
    extra = [item.format(file=a_file) for item in extra]
    status = main(["run", str(spec_path), "--store", str(store), "--no-progress", *extra])
    captured = capsys.readouterr()
    if status != 2 or message not in captured.err or "Traceback" in captured.err:
        pytest.fail(f"expected status 2 and {message!r}, got {status}: {captured.err}")
    if store.exists() and "--store" not in extra:
        with ResultsStore(store, create=False) as opened:
            if len(opened):
                pytest.fail("a run was stored although the input was bad")
    if a_file.read_text() != "keep me":
        pytest.fail("the existing file was modified")


def test_matrix_under_python_optimize() -> None:
    """The matrix again under ``python -O`` (asserts removed): every error is raised by explicit checks."""
    if sys.flags.optimize:
        pytest.skip("already running under python -O")
    command = [sys.executable, "-O", "-m", "pytest", __file__, "-q", "-k", "test_matrix_", "-p", "no:cacheprovider"]
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    completed = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", completed.stdout).group(1))  # type: ignore[union-attr]
    assert passed >= 60, completed.stdout[-2000:]


def test_numpy_seed_builds_the_same_instance_as_the_int() -> None:
    from_numpy = TokenizedLinearBanditEnv(instance_seed=np.int64(3)).problem
    from_int = TokenizedLinearBanditEnv(instance_seed=3).problem
    other = TokenizedLinearBanditEnv(instance_seed=4).problem
    assert torch.equal(from_numpy.theta, from_int.theta) and torch.equal(from_numpy.query_tokens, from_int.query_tokens)
    assert not torch.equal(from_int.theta, other.theta)
    largest = TokenizedLinearBanditEnv(instance_seed=2**64 - 1).problem
    assert torch.isfinite(largest.theta).all()


MEASURE_PEAK = """
import sys
from pathlib import Path
import torch
from tokenized_bandit_gym.core.problem_factory import instance_memory_bytes
from tokenized_bandit_gym.envs import TokenizedLinearBanditEnv


def status(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024


torch.set_num_threads(1)
n, length, d = (int(value) for value in sys.argv[1:])
TokenizedLinearBanditEnv(vocab_size=3, max_length=2, embedding_dim=2)  # imports and lazy set-up first
Path("/proc/self/clear_refs").write_text("5")  # resets the peak (VmHWM) to the current size
before = status("VmRSS")
env = TokenizedLinearBanditEnv(vocab_size=n, max_length=length, embedding_dim=d)
print(status("VmHWM") - before, instance_memory_bytes(n, length, d, 32, 4, 8))
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc to measure peak memory")
def test_memory_bound_is_below_the_measured_peak() -> None:
    """The up-front bound never refuses what fits: a real instance's peak memory exceeds it."""
    completed = subprocess.run(
        [sys.executable, "-c", MEASURE_PEAK, "100000", "8", "16"],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    grown, bound = (int(value) for value in completed.stdout.split())
    assert 0.2 * grown < bound <= grown  # a lower bound, but not a vacuous one
