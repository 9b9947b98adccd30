"""Query sources: the paper's generator, TruthfulQA, HH-RLHF, text files, datasets."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tokenized_bandit_gym.llm.query_sources import (
    PAPER_INTERESTS,
    PAPER_TEMPLATES,
    STORY_OPENINGS,
    paper_queries,
    resolve_queries,
)

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def test_paper_generator_is_seeded_and_covers_the_grid() -> None:
    assert len(PAPER_TEMPLATES) == 20 and len(PAPER_INTERESTS) == 20
    queries = paper_queries(1000, seed=0)
    assert len(queries) == 1000 and queries == paper_queries(1000, seed=0) != paper_queries(1000, seed=1)
    assert all(any(interest in query for interest in PAPER_INTERESTS) for query in queries)
    assert resolve_queries("paper", seed=0) == queries


def test_files() -> None:
    truthful = resolve_queries(DATA / "truthfulqa" / "TruthfulQA.csv")
    assert len(truthful) == 817 and truthful[0].endswith("?") and not truthful[0].startswith("\ufeff")
    dialogues = resolve_queries(DATA / "hh-rlhf" / "harmless-base_test.jsonl.gz")
    assert len(dialogues) == 2312 and not any("Human:" in q.split("\n")[0] for q in dialogues[:50])
    assert resolve_queries(None) == list(STORY_OPENINGS) == resolve_queries("stories")


def test_text_file_and_lists(tmp_path: Path) -> None:
    path = tmp_path / "q.txt"
    path.write_text("first\n\nsecond\n")
    assert resolve_queries(path) == ["first", "second"]
    assert resolve_queries(["a", " ", "b"]) == ["a", "b"]
    with pytest.raises(TypeError):
        resolve_queries(["a", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="no queries"):
        resolve_queries([])


@pytest.mark.skipif(importlib.util.find_spec("datasets") is not None, reason="datasets is installed")
def test_hf_dataset_needs_datasets() -> None:
    with pytest.raises(ImportError, match="datasets"):
        resolve_queries("hf:truthful_qa")
