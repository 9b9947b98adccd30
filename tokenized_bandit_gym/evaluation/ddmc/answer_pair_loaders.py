"""Readers for the answer-pair datasets of the DDMC validation (paper section 6.1).

Two file shapes are understood:

* TruthfulQA-shaped CSV (``Question``, ``Best Answer``, ``Incorrect Answers`` columns, the incorrect answers
  separated by ``;``; an optional UTF-8 BOM is skipped): one pair per (best answer, incorrect answer).
* HH-RLHF-shaped JSON lines (optionally gzipped; ``chosen`` and ``rejected`` dialogues): one pair per line,
  the query being the longest common prefix of the two dialogues and the answers the remainders, so
  ``query + answer`` is the original dialogue.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
from pathlib import Path

from tokenized_bandit_gym.core.validation import check_choice, check_int
from tokenized_bandit_gym.evaluation.ddmc.answer_pair import DATASET_FORMATS, AnswerPair

TRUTHFULQA_TEMPLATE = "Q: {query}\nA: {answer}"
"""Default ``query:answer`` concatenation for TruthfulQA-shaped files."""

HH_RLHF_TEMPLATE = "{query}{answer}"
"""Default concatenation for HH-RLHF-shaped files: the original dialogue."""


def load_truthfulqa_pairs(
    path: str | os.PathLike[str], max_items: int | None = None, template: str = TRUTHFULQA_TEMPLATE
) -> list[AnswerPair]:
    """Read (best answer, incorrect answer) pairs from a TruthfulQA-shaped CSV.

    Args:
        path: CSV file with ``Question``, ``Best Answer`` and ``Incorrect Answers`` columns.
        max_items: Keep the first ``max_items`` questions (all when None).
        template: Format string with ``{query}`` and ``{answer}`` giving the text that is tokenized.

    Returns:
        The pairs, in file order; ``item`` is the question's index among the kept questions.

    Raises:
        ValueError: A required column is missing, or ``template`` lacks a field.
    """
    _check_template(template)
    limit = None if max_items is None else check_int("max_items", max_items, minimum=1)
    pairs: list[AnswerPair] = []
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = {"Question", "Best Answer", "Incorrect Answers"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path} is not TruthfulQA-shaped: missing columns {sorted(missing)}")
        item = 0
        for row in reader:
            if limit is not None and item >= limit:
                break
            query, best = row["Question"].strip(), row["Best Answer"].strip()
            incorrect = [answer.strip() for answer in row["Incorrect Answers"].split(";") if answer.strip()]
            if not query or not best or not incorrect:
                continue
            for wrong in incorrect:
                pairs.append(_pair(item, query, best, wrong, template))
            item += 1
    return pairs


def load_hh_rlhf_pairs(
    path: str | os.PathLike[str], max_items: int | None = None, template: str = HH_RLHF_TEMPLATE
) -> list[AnswerPair]:
    """Read (chosen, rejected) pairs from HH-RLHF-shaped JSON lines (``.jsonl`` or ``.jsonl.gz``).

    Args:
        path: File with one ``{"chosen": str, "rejected": str}`` object per line.
        max_items: Keep the first ``max_items`` usable lines (all when None). Lines whose two dialogues are
            identical are skipped.
        template: Format string with ``{query}`` and ``{answer}``.

    Returns:
        The pairs; the query is the longest common prefix of the two dialogues.

    Raises:
        ValueError: A line lacks ``chosen`` or ``rejected``, or ``template`` lacks a field.
    """
    _check_template(template)
    limit = None if max_items is None else check_int("max_items", max_items, minimum=1)
    opener = gzip.open if str(path).endswith(".gz") else open
    pairs: list[AnswerPair] = []
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if limit is not None and len(pairs) >= limit:
                break
            if not line.strip():
                continue
            record = json.loads(line)
            if "chosen" not in record or "rejected" not in record:
                raise ValueError(f"{path}:{number} is not HH-RLHF-shaped: needs 'chosen' and 'rejected' keys")
            chosen, rejected = str(record["chosen"]), str(record["rejected"])
            if chosen == rejected:
                continue
            query = os.path.commonprefix([chosen, rejected])
            pairs.append(_pair(len(pairs), query, chosen[len(query) :], rejected[len(query) :], template))
    return pairs


def load_answer_pairs(
    path: str | os.PathLike[str],
    dataset_format: str = "auto",
    max_items: int | None = None,
    template: str | None = None,
) -> list[AnswerPair]:
    """Read answer pairs from a TruthfulQA- or HH-RLHF-shaped file.

    Args:
        path: The dataset file.
        dataset_format: One of :data:`DATASET_FORMATS`.
        max_items: Keep the first ``max_items`` questions or dialogues (all when None).
        template: ``query:answer`` format string; the format's default when None.

    Returns:
        The pairs.

    Raises:
        ValueError: Unknown format, or an extension ``"auto"`` cannot place.
        FileNotFoundError: ``path`` does not exist.
    """
    check_choice("dataset_format", dataset_format, DATASET_FORMATS)
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"dataset file not found: {file}")
    if dataset_format == "auto":
        name = file.name.lower()
        if name.endswith(".csv"):
            dataset_format = "truthfulqa"
        elif name.endswith((".jsonl", ".jsonl.gz", ".json.gz", ".json")):
            dataset_format = "hh-rlhf"
        else:
            raise ValueError(f"cannot infer the format of {file}; pass dataset_format='truthfulqa' or 'hh-rlhf'")
    if dataset_format == "truthfulqa":
        return load_truthfulqa_pairs(file, max_items, TRUTHFULQA_TEMPLATE if template is None else template)
    return load_hh_rlhf_pairs(file, max_items, HH_RLHF_TEMPLATE if template is None else template)


def _check_template(template: str) -> None:
    if not isinstance(template, str) or "{query}" not in template or "{answer}" not in template:
        raise ValueError(f"template must contain '{{query}}' and '{{answer}}', got {template!r}")


def _pair(item: int, query: str, answer_a: str, answer_b: str, template: str) -> AnswerPair:
    return AnswerPair(
        item=item,
        query=query,
        answer_a=answer_a,
        answer_b=answer_b,
        text_a=template.format(query=query, answer=answer_a),
        text_b=template.format(query=query, answer=answer_b),
    )
