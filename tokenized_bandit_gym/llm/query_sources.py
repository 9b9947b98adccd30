"""Query pools for the LLM-backed envs: built-in story openings, the paper's generator, files, datasets."""

from __future__ import annotations

import csv
import gzip
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tokenized_bandit_gym.core.validation import check_memory

# What a Hugging Face tokenizer holds per character of the text it tokenizes (ids, offsets, token
# strings; measured at about 160 bytes on a byte-level BPE): a lower bound for the memory guard.
TOKENIZER_BYTES_PER_CHARACTER = 128

STORY_OPENINGS: tuple[str, ...] = (
    "Once upon a time, there was a little girl named Lily.",
    "One day, a big dog found a red ball in the park.",
    "Tom and Sue went to the beach with their mom.",
    "There was a small cat who liked to play in the garden.",
    "Once upon a time, a boy named Tim had a shiny toy car.",
    "One sunny day, Ben saw a bird in a tall tree.",
    "Mia wanted to bake a cake for her friend.",
    "The little bunny was sad because it lost its carrot.",
    "Once upon a time, there was a kind old man who lived in a small house.",
    "Sam and his dad went to the store to buy some milk.",
    "A little frog lived in a big pond near the forest.",
    "One day, Anna found a pretty flower in the yard.",
    "Once upon a time, there was a brave little fish.",
    "Max the dog loved to run and jump in the grass.",
    "Lucy had a new doll and she wanted to show it to everyone.",
    "Once upon a time, in a small town, there lived a happy girl.",
)
"""Default queries: TinyStories-style openings that suit the shipped ``stories260K`` model."""

PAPER_TEMPLATES: tuple[str, ...] = (
    "I work as a software engineer in New York and I love {interest}. Any advice on balancing both?",
    "I'm looking for ways to improve my skills in {interest} without burning out at my tech job. Any tips?",
    "Could you recommend some resources or places in NYC to enjoy {interest} after work?",
    "What are some practical time-management strategies to fit in {interest} while coding full-time?",
    "Any suggestions on how to meet new people in the city who also enjoy {interest}?",
    "Can you give me a one-sentence recommendation for exploring {interest} around New York?",
    "I often hang out with coworkers who share my interest in {interest}. How do we plan something fun after work?",
    "As someone who loves {interest} and coding, how can I unwind effectively?",
    "What are some must-try experiences in {interest} near Manhattan on weekends?",
    "Could you suggest a beginner-friendly way to dive into {interest}?",
    "Any advice on juggling a programming career and daily sessions of {interest} to stay productive?",
    "What is a good way to combine my love of {interest} and my passion for software engineering?",
    "I'd like to find new ways to level up my {interest} skills during lunch breaks. Suggestions?",
    "Any personal organization tips for balancing a full-time software job with {interest} and social life?",
    "In your opinion, what's a fun project or event in NYC that merges {interest} with technology?",
    "I love going out with friends to enjoy {interest}, but I'm also studying new programming languages. "
    "How do I manage both?",
    "Could you recommend an app or a platform that helps me track progress on {interest}?",
    "Any recommended communities in New York for people who share my enthusiasm for {interest}?",
    "What's an underrated aspect of {interest} that helps relieve stress from my coding job?",
    "I'm trying to step out of my comfort zone with {interest}. Got any beginner challenges or ideas?",
)
"""The 20 prompt templates of the paper's appendix D."""

PAPER_INTERESTS: tuple[str, ...] = (
    "tennis",
    "dog training",
    "video gaming",
    "breweries and nightlife",
    "coding projects",
    "tech meetups",
    "coffee shops",
    "gym and workouts",
    "weekend getaways",
    "music concerts",
    "NYC events",
    "board game nights",
    "watching sports with friends",
    "side hustle ideas",
    "improving my coding skills",
    "finding time for hobbies",
    "balancing health and tech",
    "staying updated with new frameworks",
    "apartment-friendly dog breeds",
    "managing stress after work",
)
"""The 20 user interests of the paper's appendix D."""


def paper_queries(num_queries: int = 1000, seed: int = 0) -> list[str]:
    """The paper's query generator (appendix D): template and interest drawn uniformly per query.

    Args:
        num_queries: how many queries (the paper uses 1,000).
        seed: seeds the ``np.random.Generator`` that draws them.
    """
    if isinstance(num_queries, bool) or not isinstance(num_queries, int) or num_queries < 1:
        raise ValueError(f"num_queries must be a positive integer, got {num_queries!r}")
    rng = np.random.default_rng(seed)
    templates = rng.integers(len(PAPER_TEMPLATES), size=num_queries)
    interests = rng.integers(len(PAPER_INTERESTS), size=num_queries)
    return [PAPER_TEMPLATES[t].format(interest=PAPER_INTERESTS[i]) for t, i in zip(templates, interests, strict=True)]


def csv_queries(path: str | os.PathLike[str], query_column: str | None = None) -> list[str]:
    """The non-empty cells of one column of a CSV file (a UTF-8 BOM is accepted).

    Args:
        path: the CSV file (header row first).
        query_column: the column; None: ``Question`` (TruthfulQA's).

    Raises:
        ValueError: the file has no such column (the message lists the file's columns).
    """
    column = "Question" if query_column is None else query_column
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        columns = reader.fieldnames or []
        if column not in columns:
            hint = "" if query_column is not None else "; pass query_column= to choose one"
            raise ValueError(
                f"{os.fspath(path)!r} line 1 (the header) has no column {column!r}; "
                f"its columns are {list(columns)}{hint}"
            )
        queries = []
        for row in reader:
            cell = row[column]
            if cell is None:  # a short row (fewer cells than the header)
                raise ValueError(f"{os.fspath(path)!r} line {reader.line_num}: no {column!r} cell in a short row")
            if cell.strip():
                queries.append(cell.strip())
        return queries


def json_lines(lines: Iterable[str], where: Callable[[int], str]) -> Iterator[tuple[int, Any]]:
    """Each non-blank line of a JSON-lines text, parsed, with its 1-based number.

    Args:
        lines: the text's lines.
        where: the line's place for the error, from its number (``"'queries.jsonl' line 3"``).

    Raises:
        ValueError: ``<where> is not valid JSON: <why>`` for a line that does not parse.
    """
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{where(number)} is not valid JSON: {error}") from error
        yield number, record


def jsonl_queries(path: str | os.PathLike[str], query_field: str | None = None) -> list[str]:
    """One query per line of a ``.jsonl`` or ``.jsonl.gz`` file: a field's text, or HH-RLHF's first human turn.

    Args:
        path: the JSON-lines file (gzip when the name ends in ``.gz``).
        query_field: the field holding the query, a dotted path into nested objects
            (``"prompt.text"``); None: the first human turn of HH-RLHF's ``chosen`` dialogue.

    Raises:
        ValueError: a line is not a JSON object, lacks the field (the message names the line and
            the fields there are) or holds something other than a string there.
    """
    name = os.fspath(path)
    opener = gzip.open if name.endswith(".gz") else open
    queries = []
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, record in json_lines(handle, lambda number: f"{name!r} line {number}"):
            value = _field(record, query_field or "chosen", name, number, hh_rlhf_default=query_field is None)
            if query_field is None:
                value = value.split("\n\nAssistant:")[0].replace("\n\nHuman:", "", 1)
            if value.strip():
                queries.append(value.strip())
    return queries


def _field(record: object, dotted: str, name: str, number: int, hh_rlhf_default: bool) -> str:
    """The string at the dotted path ``dotted`` of one JSON record (line ``number`` of file ``name``)."""
    value = record
    for depth, key in enumerate(dotted.split(".")):
        if not isinstance(value, dict) or key not in value:
            where = ".".join(dotted.split(".")[:depth]) or "the top level"
            what = f"has fields {sorted(value)}" if isinstance(value, dict) else f"is a {type(value).__name__}"
            hint = "; pass query_field= (a dotted path) to choose one" if hh_rlhf_default else ""
            raise ValueError(f"{name!r} line {number}: no field {dotted!r} ({where} {what}){hint}")
        value = value[key]
    if not isinstance(value, str):
        raise ValueError(f"{name!r} line {number}: field {dotted!r} holds a {type(value).__name__}, not a string")
    return value


def text_file_queries(path: str | os.PathLike[str]) -> list[str]:
    """One query per non-empty line of a plain text file."""
    with open(path, encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip()]


def hf_dataset_queries(name: str, split: str = "train", column: str | None = None, limit: int = 1000) -> list[str]:
    """Queries from a Hugging Face dataset (needs the optional ``datasets`` package and network or cache).

    Args:
        name: dataset name, e.g. ``"truthfulqa/truthful_qa"``; a config may follow a colon
            (``"truthful_qa:generation"``).
        split: dataset split.
        column: text column (default: ``question``, ``prompt`` or ``text``, whichever exists).
        limit: keep at most this many rows.
    """
    try:
        import datasets
    except ImportError as error:
        raise ImportError(
            "queries='hf:<name>' needs the optional 'datasets' package: pip install tokenized-bandit-gym[datasets]"
        ) from error
    dataset_name, _, config = name.partition(":")
    dataset = datasets.load_dataset(dataset_name, config or None, split=split)
    if column is None:
        column = next((c for c in ("question", "prompt", "text") if c in dataset.column_names), None)
        if column is None:
            raise ValueError(f"dataset {name!r} has none of the columns question/prompt/text; pass column=")
    return [str(row[column]).strip() for row in dataset.select(range(min(limit, len(dataset))))]


def resolve_queries(
    queries: str | os.PathLike[str] | Sequence[str] | None,
    seed: int = 0,
    query_column: str | None = None,
    query_field: str | None = None,
) -> list[str]:
    """Turn a query source into a non-empty list of query strings.

    Sources: None (the built-in :data:`STORY_OPENINGS`), ``"stories"``, ``"paper"`` (1,000 seeded
    queries of the paper's generator, seeded by ``seed``), ``"hf:<dataset>"``, a path to a
    ``.csv`` (the column ``query_column``, default TruthfulQA's ``Question``), a ``.jsonl`` or
    ``.jsonl.gz`` (the field ``query_field``, a dotted path; default HH-RLHF's first human turn)
    or a plain text file (one query a line), or a sequence of strings.

    Raises:
        ValueError: the source is empty, a file does not exist or lacks the column or field (the
            message names the file, what it has and the line), or the source is not understood.
        TypeError: a sequence holds something other than strings.
    """
    for keyword, value in (("query_column", query_column), ("query_field", query_field)):
        if value is not None and (not isinstance(value, str) or not value):
            raise TypeError(f"{keyword} must be a non-empty string or None, got {value!r}")
    is_file = isinstance(queries, os.PathLike) or (
        isinstance(queries, str) and queries not in ("stories", "paper") and not queries.startswith("hf:")
    )
    if (query_column is not None or query_field is not None) and not is_file:
        raise ValueError("query_column= and query_field= apply to a query file, not to a built-in source or a list")
    if queries is None or queries == "stories":
        result = list(STORY_OPENINGS)
    elif queries == "paper":
        result = paper_queries(1000, seed)
    elif isinstance(queries, str) and queries.startswith("hf:"):
        result = hf_dataset_queries(queries[3:])
    elif isinstance(queries, (str, os.PathLike)):
        path = Path(queries)
        if not path.is_file():
            raise ValueError(
                f"queries={os.fspath(queries)!r} is neither a known source ('stories', 'paper', 'hf:<name>') "
                "nor an existing file"
            )
        suffixes = "".join(path.suffixes[-2:])
        is_csv, is_jsonl = path.suffix == ".csv", suffixes == ".jsonl.gz" or path.suffix == ".jsonl"
        if query_column is not None and not is_csv:
            raise ValueError(f"query_column={query_column!r} applies to a .csv file, not {os.fspath(path)!r}")
        if query_field is not None and not is_jsonl:
            raise ValueError(f"query_field={query_field!r} applies to a .jsonl(.gz) file, not {os.fspath(path)!r}")
        try:
            if is_csv:
                result = csv_queries(path, query_column)
            elif is_jsonl:
                result = jsonl_queries(path, query_field)
            else:
                result = text_file_queries(path)
        except UnicodeDecodeError as error:
            raise ValueError(
                f"the query file {os.fspath(path)!r} is not UTF-8 text (byte "
                f"{error.object[error.start : error.start + 1]!r} at offset {error.start})"
            ) from error
    elif isinstance(queries, Sequence):
        if not all(isinstance(query, str) for query in queries):
            raise TypeError("queries must be a sequence of strings")
        result = [query for query in queries if query.strip()]
    else:
        raise TypeError(f"queries must be None, a source name, a path or a sequence of strings, got {queries!r}")
    if not result:
        raise ValueError(f"the query source {queries!r} holds no queries")
    longest = max(range(len(result)), key=lambda index: len(result[index]))
    check_memory(
        f"query {longest} of the query source ({len(result[longest]):,} characters, tokenized whole)",
        len(result[longest]) * TOKENIZER_BYTES_PER_CHARACTER,
    )
    return result
