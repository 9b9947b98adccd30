"""Query sources: the paper's generator, TruthfulQA, HH-RLHF, text files, datasets."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tokenized_bandit_gym.evaluation.ddmc.resources import PACKAGE_DATA
from tokenized_bandit_gym.llm.query_sources import (
    PAPER_INTERESTS,
    PAPER_TEMPLATES,
    STORY_OPENINGS,
    paper_queries,
    resolve_queries,
)

DATA = PACKAGE_DATA


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


def test_csv_column_and_jsonl_field_on_the_real_files() -> None:
    truthful = DATA / "truthfulqa" / "TruthfulQA.csv"
    answers = resolve_queries(truthful, query_column="Best Answer")
    assert len(answers) == 817 and answers[0] == "The watermelon seeds pass through your digestive system"
    dialogues = DATA / "hh-rlhf" / "harmless-base_test.jsonl.gz"
    rejected = resolve_queries(dialogues, query_field="rejected")
    assert len(rejected) == 2312 and rejected[0].startswith("Human:")  # the whole dialogue, stripped


def test_query_file_errors_name_the_file_what_it_has_and_the_line(tmp_path: Path) -> None:
    truthful = DATA / "truthfulqa" / "TruthfulQA.csv"
    with pytest.raises(ValueError, match=r"TruthfulQA.csv' line 1 \(the header\) has no column 'Prompt'; its columns "):
        resolve_queries(truthful, query_column="Prompt")
    with pytest.raises(ValueError, match=r"'Best Answer'"):
        resolve_queries(truthful, query_column="Prompt")
    plain = tmp_path / "plain.csv"
    plain.write_text("id,text\n1,hello\n")
    with pytest.raises(ValueError, match=r"no column 'Question'.*\['id', 'text'\]; pass query_column="):
        resolve_queries(plain)
    assert resolve_queries(plain, query_column="text") == ["hello"]
    nested = tmp_path / "nested.jsonl"
    nested.write_text('{"prompt": {"text": "first"}}\n\n{"prompt": {"text": "second"}}\n{"prompt": {"txt": "x"}}\n')
    with pytest.raises(
        ValueError, match=r"nested.jsonl' line 4: no field 'prompt.text' \(prompt has fields \['txt'\]\)"
    ):
        resolve_queries(nested, query_field="prompt.text")
    nested.write_text('{"prompt": {"text": "first"}}\n{"prompt": {"text": 3}}\n')
    with pytest.raises(ValueError, match=r"line 2: field 'prompt.text' holds a int, not a string"):
        resolve_queries(nested, query_field="prompt.text")
    nested.write_text('{"prompt": {"text": "first"}}\n{"prompt": {"text": "second"}}\n')
    assert resolve_queries(nested, query_field="prompt.text") == ["first", "second"]
    with pytest.raises(ValueError, match=r"line 1: no field 'chosen' \(the top level has fields \['prompt'\]\); pass"):
        resolve_queries(nested)  # the HH-RLHF default, on a file without 'chosen'
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"q": "a"}\n{"q": \n')
    with pytest.raises(ValueError, match=r"broken.jsonl' line 2 is not valid JSON"):
        resolve_queries(broken, query_field="q")
    with pytest.raises(ValueError, match="applies to a .csv file"):
        resolve_queries(nested, query_column="q")
    with pytest.raises(ValueError, match="apply to a query file"):
        resolve_queries("paper", query_field="q")


def test_env_takes_query_column_and_field() -> None:
    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401

    env = gym.make(
        "TokenizedAlignment-v0", queries=str(DATA / "truthfulqa" / "TruthfulQA.csv"), query_column="Best Answer",
        max_length=3, top_k=2,
    )  # fmt: skip
    assert env.unwrapped.problem.query_texts[0] == "The watermelon seeds pass through your digestive system"
    with pytest.raises(ValueError, match="no field 'prompt'"):
        gym.make("TokenizedAlignment-v0", queries=str(DATA / "hh-rlhf" / "harmless-base_test.jsonl.gz"),
                 query_field="prompt")  # fmt: skip
