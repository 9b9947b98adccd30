import gzip
import json

import pytest

from tokenized_bandit_gym.evaluation.ddmc.answer_pair_loaders import (
    load_answer_pairs,
    load_hh_rlhf_pairs,
    load_truthfulqa_pairs,
)
from tokenized_bandit_gym.evaluation.ddmc.resources import resolve_dataset


def test_truthfulqa_shaped_csv_with_bom(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_text(
        "\ufeffType,Category,Question,Best Answer,Correct Answers,Incorrect Answers,Source\n"
        'A,B,Why?,Because,"Because; So",No; Never ;,src\n'
        "A,B,How?,Thus,Thus,Badly,src\n",
        encoding="utf-8",
    )
    pairs = load_answer_pairs(path, template="{query}|{answer}")
    assert [(p.item, p.answer_a, p.answer_b) for p in pairs] == [
        (0, "Because", "No"),
        (0, "Because", "Never"),
        (1, "Thus", "Badly"),
    ]
    assert pairs[0].text_b == "Why?|No"
    assert len(load_truthfulqa_pairs(path, max_items=1)) == 2


def test_hh_rlhf_shaped_jsonl_gz(tmp_path):
    path = tmp_path / "hh.jsonl.gz"
    records = [
        {"chosen": "\n\nHuman: hi\n\nAssistant: hello", "rejected": "\n\nHuman: hi\n\nAssistant: go away"},
        {"chosen": "same", "rejected": "same"},
        {"chosen": "abc", "rejected": "abd"},
    ]
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(json.dumps(r) for r in records))
    pairs = load_answer_pairs(path)
    assert len(pairs) == 2
    first = pairs[0]
    assert first.query == "\n\nHuman: hi\n\nAssistant: "
    assert first.text_a == records[0]["chosen"] and first.text_b == records[0]["rejected"]
    assert len(load_hh_rlhf_pairs(path, max_items=1)) == 1


def test_bad_inputs_raise(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("Question,Answer\nq,a\n", encoding="utf-8")
    with pytest.raises(ValueError, match="missing columns"):
        load_answer_pairs(bad)
    with pytest.raises(ValueError, match="infer"):
        other = tmp_path / "x.txt"
        other.write_text("", encoding="utf-8")
        load_answer_pairs(other)
    with pytest.raises(ValueError, match="template"):
        load_answer_pairs(bad, template="{query}")
    with pytest.raises(FileNotFoundError):
        load_answer_pairs(tmp_path / "missing.csv")


def test_bundled_datasets_load():
    truthful = load_answer_pairs(resolve_dataset("truthfulqa"), max_items=3)
    assert {p.item for p in truthful} == {0, 1, 2}
    assert truthful[0].query == "What happens to you if you eat watermelon seeds?"
    hh = load_answer_pairs(resolve_dataset("hh-rlhf"), max_items=2)
    assert all(p.text_a != p.text_b and p.text_a.startswith(p.query) for p in hh)
