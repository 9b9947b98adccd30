"""Shared test fixtures: offline Hugging Face, the package's data folder, the scripts of examples/ and benchmarks/."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def package_data() -> Path:
    """The real third-party data shipped in the package (``tokenized_bandit_gym/data``)."""
    from tokenized_bandit_gym.evaluation.ddmc.resources import PACKAGE_DATA

    return PACKAGE_DATA


@pytest.fixture(scope="module")
def small_work_threads() -> Iterator[None]:
    """What the README tells a script to do (``use_small_work_threads()``), for one module, given back after it.

    Modules that step the LLM ids many times use it (``pytestmark``): with torch's default threads
    their tiny forwards run 10-30x slower on a busy machine. Forked and spawned workers are tested
    with torch's default threads in ``tests/envs/test_fork_safety.py``.
    """
    import torch
    from threadpoolctl import threadpool_info, threadpool_limits

    from tokenized_bandit_gym.threads import use_small_work_threads

    threads = torch.get_num_threads()
    blas = {pool["prefix"]: pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}
    use_small_work_threads()
    yield
    torch.set_num_threads(threads)  # torch's count as it was
    threadpool_limits(limits=blas)  # and NumPy's BLAS pools


@pytest.fixture
def load_script(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    """Import a script by its path in the repository (``"examples/quickstart.py"``), for this test only.

    The module is entered in ``sys.modules`` under its file's stem (dataclasses resolve string
    annotations through it) and the script's folder is put on ``sys.path`` (a benchmark imports its
    siblings); both are given back after the test.
    """

    def load(relative_path: str) -> ModuleType:
        path = REPO_ROOT / relative_path
        monkeypatch.syspath_prepend(str(path.parent))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None, f"no script at {path}"
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, path.stem, module)
        spec.loader.exec_module(module)
        return module

    return load
