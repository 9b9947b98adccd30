"""The SQLite results store: round trips, no duplicates, foreign and corrupted files left untouched."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from tests.evaluation.records import make_record
from tokenized_bandit_gym.evaluation.results_store import SCHEMA_VERSION, ResultsStore, StoreError

FIXTURE = Path(__file__).resolve().parent / "data" / "store_schema1.sqlite"


def test_round_trip_keeps_arrays_bit_for_bit(tmp_path: Path) -> None:
    record = make_record("A", "random", 3, np.random.default_rng(0).normal(size=17))
    with ResultsStore(tmp_path / "r.sqlite") as store:
        assert store.add(record)
        assert record.spec.key in store and len(store) == 1
    with ResultsStore(tmp_path / "r.sqlite", create=False) as store:
        (loaded,) = list(store.records())
    assert loaded.spec == record.spec and loaded.spec.key == record.spec.key
    for name, array in record.arrays.items():
        assert loaded.arrays[name].tobytes() == array.tobytes()
    assert loaded.metadata["device"] == "cpu" and loaded.metadata["package_version"] == "0"


def test_same_run_is_never_stored_twice(tmp_path: Path) -> None:
    with ResultsStore(tmp_path / "r.sqlite") as store:
        assert store.add(make_record("A", "random", 0, [1.0, 2.0]))
        before = store.raw_rows()
        assert not store.add(make_record("A", "random", 0, [5.0, 5.0]))
        assert store.raw_rows() == before and len(store) == 1
        assert store.add(make_record("A", "random", 1, [1.0, 2.0]))
        assert len(store) == 2


def test_new_store_uses_wal_and_records_its_schema(tmp_path: Path) -> None:
    ResultsStore(tmp_path / "r.sqlite").close()
    connection = sqlite3.connect(tmp_path / "r.sqlite")
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert connection.execute("SELECT version FROM tbg_schema").fetchone()[0] == SCHEMA_VERSION
    connection.close()


def test_missing_store_is_reported_when_not_creating(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no results store"):
        ResultsStore(tmp_path / "missing.sqlite", create=False)
    assert not (tmp_path / "missing.sqlite").exists()


@pytest.mark.parametrize(
    "content",
    [b"rounds = 3\nthis is a TOML file, not a store\n", b"SQLite format 3\x00" + b"\x07" * 2000, bytes(range(256)) * 8],
    ids=["text", "corrupted-sqlite", "binary"],
)
def test_foreign_or_corrupted_file_is_reported_and_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "results.sqlite"
    path.write_bytes(content)
    with pytest.raises(StoreError, match="not modified"):
        ResultsStore(path)
    assert path.read_bytes() == content
    assert sorted(item.name for item in tmp_path.iterdir()) == ["results.sqlite"]


def test_sqlite_database_of_another_application_is_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    connection.execute("INSERT INTO customers VALUES (1, 'ada')")
    connection.commit()
    connection.close()
    content = path.read_bytes()
    with pytest.raises(StoreError, match="another application"):
        ResultsStore(path)
    assert path.read_bytes() == content


def test_store_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    ResultsStore(path).close()
    connection = sqlite3.connect(path)
    connection.execute("UPDATE tbg_schema SET version = ?", (SCHEMA_VERSION + 1,))
    connection.commit()
    connection.close()
    content = path.read_bytes()
    with pytest.raises(StoreError, match="newer"):
        ResultsStore(path)
    assert path.read_bytes() == content


def test_store_written_by_an_older_run_is_readable(tmp_path: Path) -> None:
    """A store file committed to the repository (schema 1) reads with this code."""
    path = tmp_path / "old.sqlite"
    shutil.copyfile(FIXTURE, path)
    with ResultsStore(path, create=False) as store:
        assert store.schema_version == 1
        records = list(store.records())
    assert len(records) == 8
    assert {record.spec.agent for record in records} == {"random", "oracle_greedy"}
    for record in records:
        assert record.arrays["regret"].shape == (record.spec.rounds,)
        regret = record.arrays["optimal_utility"] - record.arrays["utility"]
        np.testing.assert_allclose(record.arrays["regret"], regret, atol=1e-12)
