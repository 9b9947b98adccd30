"""Sizes that cannot fit are refused before anything is allocated, naming the value and the memory it needs.

Every guard goes through ``core.validation.check_memory``; the tests either use sizes no machine
holds, or give that check a small budget (the memory available to this process) to see where it bites.
The counts of these cases are recorded in ``docs/STORE_INTEGRITY.md``.
"""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium as gym
import pytest

import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
from tokenized_bandit_gym.core import validation
from tokenized_bandit_gym.evaluation.cli import main
from tokenized_bandit_gym.evaluation.leaderboard_spec import SPEC_FILE_MAX_BYTES, SpecError, load_spec, parse_spec

NEEDS = r"would need at least [\d,.]+ GiB of memory, more than the [\d,.]+ GiB available"


def spec_data(rounds: int = 10, seeds: object = 2, agent: dict | None = None, task_kwargs: dict | None = None) -> dict:
    return {
        "rounds": rounds,
        "seeds": seeds,
        "task": [{"id": "TokenizedMultiArmedBandit-v0", "kwargs": task_kwargs or {}}],
        "agent": [agent or {"name": "random"}],
    }


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> int:
    """The memory guard sees 256 MiB available."""
    budget = 256 * 2**20
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: budget)
    return budget


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (spec_data(seeds=10**12), "seeds=1000000000000"),
        (spec_data(rounds=10**12), "rounds=1000000000000"),
        ({**spec_data(), "task": [{"id": "TokenizedMultiArmedBandit-v0", "rounds": 10**13}]}, "task[0].rounds="),
    ],
    ids=["seeds", "rounds", "task-rounds"],
)
def test_spec_sizes_beyond_any_memory_are_refused_at_once(data: dict, named: str) -> None:
    with pytest.raises(SpecError, match=re.escape(named) + ".*" + NEEDS):
        parse_spec(data, check_registry=False)


def test_a_spec_listing_more_runs_than_fit_is_refused(small_budget: int) -> None:
    seeds = list(range(300_000))  # 600,000 runs with two agents
    data = {**spec_data(seeds=seeds), "agent": [{"name": "random"}, {"name": "oracle_greedy"}]}
    with pytest.raises(SpecError, match=r"1 tasks x 2 agents x 300000 seeds = 600,000 runs.*" + NEEDS):
        parse_spec(data, check_registry=False)
    parse_spec(spec_data(seeds=1000), check_registry=False)  # a thousand runs fit


def test_spec_files_that_are_devices_or_huge_are_never_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if Path("/dev/zero").exists():
        with pytest.raises(SpecError, match="'/dev/zero': it is not a regular file"):
            load_spec("/dev/zero")
        assert main(["run", "/dev/zero", "--store", str(tmp_path / "r.sqlite")]) == 2
        assert capsys.readouterr().err.startswith("tbg: error: cannot read spec file '/dev/zero': it is not a regular")
    huge = tmp_path / "huge.toml"
    with huge.open("wb") as handle:
        handle.truncate(SPEC_FILE_MAX_BYTES + 1)  # sparse: no disk used
    with pytest.raises(SpecError, match=f"is {SPEC_FILE_MAX_BYTES + 1:,} bytes"):
        load_spec(huge)
    with pytest.raises(SpecError, match="it is not a regular file"):
        load_spec(tmp_path)


def test_a_vector_env_too_large_for_memory_is_refused_before_it_allocates() -> None:
    with pytest.raises(ValueError, match=r"num_envs=1000000000 \(of Tokenized.*VectorEnv\): " + NEEDS):
        gym.make_vec("TokenizedLinearBandit-v0", num_envs=10**9, vectorization_mode="vector_entry_point")


def test_the_vector_env_guard_bites_where_the_budget_ends(small_budget: int) -> None:
    from tokenized_bandit_gym.envs.tokenized_bandit_vector_env import vector_env_memory_bytes

    single = gym.make("TokenizedLinearBandit-v0").unwrapped.observation_space
    fits = small_budget // vector_env_memory_bytes(1, single, 256)
    env = gym.make_vec("TokenizedLinearBandit-v0", num_envs=min(fits, 64), vectorization_mode="vector_entry_point")
    env.close()
    with pytest.raises(ValueError, match=f"num_envs={fits + 1} "):
        gym.make_vec("TokenizedLinearBandit-v0", num_envs=fits + 1, vectorization_mode="vector_entry_point")


@pytest.mark.parametrize("name", ["batched_eoful", "batched_greedy_etc"])
def test_batched_agents_refuse_a_batch_whose_buffer_cannot_fit(name: str) -> None:
    from tokenized_bandit_gym.registration import make_agent

    with pytest.raises(ValueError, match=r"batch_size=1000000000000 \(rounds buffered between updates\): " + NEEDS):
        make_agent(name, batch_size=10**12)


def test_a_spec_with_an_oversized_batch_is_refused_when_it_is_loaded(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'rounds = 10\nseeds = 1\n[[task]]\nid = "TokenizedLinearBandit-v0"\n'
        '[[agent]]\nname = "batched_eoful"\nkwargs = { batch_size = 1000000000000 }\n'
    )
    with pytest.raises(SpecError, match="batch_size=1000000000000"):
        load_spec(spec)


def test_a_query_too_long_to_tokenize_is_refused_before_tokenizing(tmp_path: Path, small_budget: int) -> None:
    from tokenized_bandit_gym.llm.query_sources import TOKENIZER_BYTES_PER_CHARACTER, resolve_queries

    queries = tmp_path / "queries.txt"
    too_long = small_budget // TOKENIZER_BYTES_PER_CHARACTER + 1
    queries.write_text("a short query\n" + "x" * too_long + "\n")
    with pytest.raises(ValueError, match=rf"query 1 of the query source \({too_long:,} characters, tokenized whole\)"):
        resolve_queries(str(queries))
    queries.write_text("a short query\n" + "x" * (too_long // 2) + "\n")
    assert len(resolve_queries(str(queries))) == 2


def test_instance_sizes_use_the_same_guard(small_budget: int) -> None:
    with pytest.raises(ValueError, match=r"vocab_size=1000000, .*" + NEEDS):
        gym.make("TokenizedLinearBandit-v0", vocab_size=10**6, embedding_dim=16)
