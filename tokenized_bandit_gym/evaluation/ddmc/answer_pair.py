"""One pair of answers to the same query, the unit the DDMC diagnostics compare."""

from __future__ import annotations

from dataclasses import dataclass

DATASET_FORMATS: tuple[str, ...] = ("auto", "truthfulqa", "hh-rlhf")
"""Accepted values of ``dataset_format``; ``"auto"`` picks by file extension (``.csv`` vs ``.jsonl[.gz]``)."""


@dataclass(frozen=True)
class AnswerPair:
    """Two answers to one query, as texts ready to tokenize.

    Attributes:
        item: Index of the dataset item (question or dialogue) the pair comes from; bootstrap intervals
            resample items, because the pairs of one item share their query.
        query: The shared query (TruthfulQA question, HH-RLHF common dialogue prefix).
        answer_a: The preferred answer (TruthfulQA best answer, HH-RLHF chosen continuation).
        answer_b: The other answer (a TruthfulQA incorrect answer, HH-RLHF rejected continuation).
        text_a: ``query:answer_a`` as it is tokenized (the template applied).
        text_b: ``query:answer_b`` as it is tokenized.
    """

    item: int
    query: str
    answer_a: str
    answer_b: str
    text_a: str
    text_b: str
