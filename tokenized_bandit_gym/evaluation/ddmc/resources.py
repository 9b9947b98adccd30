"""Where the shipped model and the bundled datasets live: the packaged copy first, then the repository's data.

The shipped stories260K model is packaged at ``tokenized_bandit_gym/data/models/stories260K``; in a source
checkout without it, the shared data folder next to the repository (``../shared/data``) is used.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_MODEL_NAME = "stories260K"
"""Name of the shipped model; :func:`resolve_model` maps it to a local directory."""

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # tokenized_bandit_gym/
_REPO_ROOT = _PACKAGE_ROOT.parent

DATASET_FILES: dict[str, str] = {
    "truthfulqa": "truthfulqa/TruthfulQA.csv",
    "hh-rlhf": "hh-rlhf/harmless-base_test.jsonl.gz",
}
"""Bundled dataset names and their paths relative to a data folder."""


def data_roots() -> list[Path]:
    """Return the folders searched for shipped models and datasets, in order of preference."""
    return [_PACKAGE_ROOT / "data", _REPO_ROOT.parent / "shared" / "data", _REPO_ROOT / "shared" / "data"]


def resolve_model(name_or_path: str | os.PathLike[str] = DEFAULT_MODEL_NAME) -> str:
    """Return what to pass to ``from_pretrained``: a local directory for the shipped model, else the argument.

    Args:
        name_or_path: ``"stories260K"`` (the shipped model), a local directory, or a Hugging Face model id.

    Returns:
        A local path (the packaged copy preferred) for the shipped model or an existing path; otherwise
        ``name_or_path`` unchanged, for ``from_pretrained`` to look up.

    Raises:
        FileNotFoundError: The shipped model was asked for and no copy of it was found.
    """
    text = os.fspath(name_or_path)
    if Path(text).exists():
        return text
    if text == DEFAULT_MODEL_NAME:
        for root in data_roots():
            candidate = root / "models" / DEFAULT_MODEL_NAME
            if (candidate / "config.json").is_file():
                return str(candidate)
        raise FileNotFoundError(
            f"the shipped model {DEFAULT_MODEL_NAME!r} was not found under {[str(r) for r in data_roots()]}"
        )
    return text


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
