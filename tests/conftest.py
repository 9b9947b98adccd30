"""Shared test fixtures: offline Hugging Face, the shared data folder, small instances."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real third-party data beside the checkout (``../shared/data``)."""
    path = Path(os.environ.get("TBG_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
    if not path.is_dir():
        pytest.fail(f"shared data folder not found at {path}; set TBG_SHARED_DATA")
    return path
