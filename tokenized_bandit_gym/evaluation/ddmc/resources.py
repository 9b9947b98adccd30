"""Where the shipped model and the bundled datasets live.

The shipped stories260K model is packaged at ``tokenized_bandit_gym/data/models/stories260K`` (the package's
one loader resolves its name); the bundled datasets ship in the same data folder (``tokenized_bandit_gym/data``,
whose README gives their provenance, licenses and checksums). Nothing is looked up outside the package.
"""

from __future__ import annotations

import os
from pathlib import Path

from tokenized_bandit_gym.llm.load_language_model import DEFAULT_MODEL_NAME, resolve_model_source

PACKAGE_DATA = Path(__file__).resolve().parents[2] / "data"
"""The package's data folder (``tokenized_bandit_gym/data``): the shipped model, tokenizer and datasets."""

DATASET_FILES: dict[str, str] = {
    "truthfulqa": "truthfulqa/TruthfulQA.csv",
    "hh-rlhf": "hh-rlhf/harmless-base_test.jsonl.gz",
}
"""Bundled dataset names and their paths relative to a data folder."""


def data_roots() -> list[Path]:
    """Return the folders searched for shipped models and datasets: the package's own data folder."""
    return [PACKAGE_DATA]


def resolve_model(name_or_path: str | os.PathLike[str] = DEFAULT_MODEL_NAME) -> str:
    """Return what the package's loader loads: the shipped model's directory for ``"stories260K"``, else the argument.

    The one resolution rule of :func:`tokenized_bandit_gym.llm.load_language_model.resolve_model_source`.
    """
    return resolve_model_source(name_or_path)


def resolve_dataset(name_or_path: str | os.PathLike[str]) -> Path:
    """Return the file of a bundled dataset name (``"truthfulqa"``, ``"hh-rlhf"``) or the given path.

    Raises:
        FileNotFoundError: Neither a bundled dataset nor an existing file.
    """
    text = os.fspath(name_or_path)
    if text in DATASET_FILES:
        for root in data_roots():
            candidate = root / DATASET_FILES[text]
            if candidate.is_file():
                return candidate
        raise FileNotFoundError(f"bundled dataset {text!r} not found under {[str(r) for r in data_roots()]}")
    path = Path(text)
    if not path.is_file():
        raise FileNotFoundError(f"dataset file not found: {path} (or use one of {sorted(DATASET_FILES)})")
    return path
