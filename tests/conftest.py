"""Shared test fixtures: offline Hugging Face, the package's data folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def package_data() -> Path:
    """The real third-party data shipped in the package (``tokenized_bandit_gym/data``)."""
    from tokenized_bandit_gym.evaluation.ddmc.resources import PACKAGE_DATA

    return PACKAGE_DATA
