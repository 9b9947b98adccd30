"""theta learned from human comparisons: a Bradley-Terry linear reward head on the policy model's own features.

The alignment env's latent utility is ``<theta, e(x, y)>`` (paper section 5.1) with ``theta``
chosen by hand (``0.5 * 1`` in the paper). Here ``theta`` is instead fitted on pairwise human
comparisons, the standard linear reward model on a frozen LM's features: Bradley-Terry,
``P(chosen > rejected) = sigmoid(<theta, e(chosen) - e(rejected)>)``, that is an L2-regularised
logistic regression without intercept on the differences of the model's own mean-pooled
embeddings ``e`` (the same ``e`` the env pools), solved by Newton's method, then rescaled to unit
norm as the env's default ``theta`` is.

This is a linear reward model on the policy model's own features, not a claim about human
values: its held-out pairwise accuracy (stored with it, with a bootstrap interval) says how much
of the comparisons it explains; where that is not clearly above chance (0.5) a warning says so.

A fit is cached once per (model, comparisons, pooling and fit settings) under the same cache
root as converted models (:func:`~tokenized_bandit_gym.llm.packaged_models.cache_root`), in a
directory written atomically with a checksum of every file.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from tokenized_bandit_gym.llm.packaged_models import build_once, cache_root
from tokenized_bandit_gym.llm.query_sources import json_lines

HH_RLHF_COMPARISONS = Path(__file__).resolve().parents[1] / "data" / "hh-rlhf" / "harmless-base_test.jsonl.gz"
"""The shipped HH-RLHF subset (harmless-base test split): chosen/rejected dialogue pairs."""
DEFAULT_FIELDS = ("chosen", "rejected")
MIN_PAIRS = 10
"""Fewest usable pairs: a fifth (at least 2) is held out, and the fit needs at least 8."""
HELD_OUT_FRACTION = 0.2
CHANCE = 0.5
FIT_FILE = "preference_theta.json"


@dataclasses.dataclass(frozen=True)
class Comparisons:
    """Pairwise comparisons: ``chosen[i]`` was preferred to ``rejected[i]``.

    Attributes:
        chosen: the preferred texts, one per pair.
        rejected: the other texts, one per pair.
        source: where they came from (a file name), for reports.
        checksum: sha256 of the source file's bytes.
    """

    chosen: list[str]
    rejected: list[str]
    source: str
    checksum: str


@dataclasses.dataclass(frozen=True)
class PreferenceFit:
    """A fitted Bradley-Terry ``theta`` and how well it explains held-out comparisons.

    Attributes:
        theta: unit-norm ``theta`` ``(d,)`` float64.
        held_out_accuracy: fraction of held-out pairs with ``<theta, e(chosen) - e(rejected)> > 0``.
        accuracy_interval: 95% bootstrap interval of ``held_out_accuracy`` (1,000 resamples).
        num_pairs: pairs used (fit plus held out).
        num_held_out: held-out pairs.
        source: what the comparisons were, for reports (``theta_source`` of the env).
        checksum: sha256 of the stored fit (theta and every figure above), from the cache manifest.
    """

    theta: torch.Tensor
    held_out_accuracy: float
    accuracy_interval: tuple[float, float]
    num_pairs: int
    num_held_out: int
    source: str
    checksum: str

    @property
    def clearly_above_chance(self) -> bool:
        """Whether the whole bootstrap interval lies above chance (0.5)."""
        return self.accuracy_interval[0] > CHANCE

    def describe(self) -> str:
        """One line for reports: the source, the held-out accuracy next to chance, the pair counts."""
        low, high = self.accuracy_interval
        return (
            f"Bradley-Terry theta fitted on {self.source}: held-out pairwise accuracy {self.held_out_accuracy:.3f} "
            f"(95% bootstrap [{low:.3f}, {high:.3f}]; chance 0.5) on {self.num_held_out} of {self.num_pairs} pairs"
        )


def read_comparisons(path: str | os.PathLike[str], fields: Sequence[str] = DEFAULT_FIELDS) -> Comparisons:
    """Read chosen/rejected pairs from a ``.jsonl`` (``.jsonl.gz``) file or a ``.csv`` with named columns.

    Args:
        path: the file; JSONL records or CSV rows each hold one pair.
        fields: the names of the chosen and the rejected field (JSON keys or CSV column names).

    Raises:
        ValueError: the file is missing, of another format or empty; a field is missing; a pair's
            chosen equals its rejected; there are fewer than :data:`MIN_PAIRS` pairs (too few
            for a held-out split).
        TypeError: ``fields`` is not two strings, or a field's value is not a string.
    """
    if isinstance(fields, str) or len(fields) != 2 or not all(isinstance(name, str) for name in fields):
        raise TypeError(f"fields must be two field names (chosen, rejected), got {fields!r}")
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"comparisons file {str(file)!r} does not exist")
    name = file.name.lower()
    raw = file.read_bytes()
    if name.endswith(".csv"):
        rows = _csv_rows(raw.decode("utf-8"), file, fields)
    elif name.endswith((".jsonl", ".jsonl.gz")):
        rows = _jsonl_rows(gzip.decompress(raw) if name.endswith(".gz") else raw, file, fields)
    else:
        raise ValueError(f"comparisons file {str(file)!r} must be .jsonl, .jsonl.gz or .csv")
    if not rows:
        raise ValueError(f"comparisons file {str(file)!r} holds no pairs")
    for number, (chosen, rejected) in enumerate(rows, start=1):
        if chosen == rejected:
            raise ValueError(f"pair {number} of {str(file)!r}: chosen equals rejected ({chosen[:60]!r})")
    if len(rows) < MIN_PAIRS:
        raise ValueError(
            f"comparisons file {str(file)!r} holds {len(rows)} pairs: too few for a held-out split "
            f"(at least {MIN_PAIRS} needed)"
        )
    return Comparisons(
        [chosen for chosen, _ in rows], [rejected for _, rejected in rows], file.name, hashlib.sha256(raw).hexdigest()
    )


def fit_bradley_terry(differences: torch.Tensor, l2: float = 1.0, iterations: int = 50) -> torch.Tensor:
    """Bradley-Terry ``theta`` ``(d,)``: the minimiser of the L2-regularised logistic loss.

    Minimises ``sum_i log(1 + exp(-<theta, x_i>)) + l2 / 2 * ||theta||^2`` over ``theta`` by
    Newton's method (the loss is strictly convex for ``l2 > 0``), where ``x_i = e(chosen_i) -
    e(rejected_i)`` are the rows of ``differences`` ``(n, d)``. Not rescaled.

    Raises:
        ValueError: ``differences`` is not a finite 2-D tensor, or ``l2`` is not positive.
    """
    x = torch.as_tensor(differences, dtype=torch.float64)
    if x.dim() != 2 or x.shape[0] == 0 or not bool(torch.isfinite(x).all()):
        raise ValueError(f"differences must be a finite, non-empty (n, d) tensor, got shape {tuple(x.shape)}")
    if not l2 > 0:
        raise ValueError(f"l2 must be positive, got {l2}")
    theta = torch.zeros(x.shape[1], dtype=torch.float64)
    identity = torch.eye(x.shape[1], dtype=torch.float64)
    for _ in range(iterations):
        margin = x @ theta  # (n,)
        gradient = -x.T @ torch.sigmoid(-margin) + l2 * theta  # (d,)
        weight = torch.sigmoid(margin) * torch.sigmoid(-margin)  # (n,)
        hessian = x.T @ (weight[:, None] * x) + l2 * identity  # (d, d)
        step = torch.linalg.solve(hessian, gradient)
        theta = theta - step
        if float(step.abs().max()) < 1e-10 * max(1.0, float(theta.abs().max())):
            break
    return theta


def held_out_accuracy(
    theta: torch.Tensor, differences: torch.Tensor, resamples: int = 1000, seed: int = 0
) -> tuple[float, tuple[float, float]]:
    """Pairwise accuracy of ``theta`` ``(d,)`` on ``differences`` ``(n, d)`` and its 95% bootstrap interval."""
    correct = (torch.as_tensor(differences, dtype=torch.float64) @ theta > 0).double()  # (n,)
    generator = torch.Generator().manual_seed(seed)
    draws = torch.randint(0, correct.shape[0], (resamples, correct.shape[0]), generator=generator)
    means = correct[draws].mean(dim=1)  # (resamples,)
    low, high = torch.quantile(means, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return float(correct.mean()), (low, high)


@torch.no_grad()
def pooled_embeddings(problem: Any, texts: Sequence[str], max_tokens: int = 64, batch_size: int = 8) -> torch.Tensor:
    """The env's ``e`` ``(n, d)`` float64 of whole texts: the model's mean-pooled last hidden state.

    Each text is tokenized as the env tokenizes a raw query (BOS included, no chat template: the
    comparisons carry their own dialogue format), keeps its last ``max_tokens`` ids, and is pooled
    over every id (``pooling="query_response"``) and normalised as ``problem.embedding_norm`` says.
    """
    rows = []
    for text in texts:
        token_ids = [int(i) for i in problem.tokenizer(text)["input_ids"]][-max_tokens:]
        rows.append(token_ids or [problem.eos_token_id])
    pooled = []
    for start in range(0, len(rows), batch_size):
        batch = rows[start : start + batch_size]
        width = max(len(row) for row in batch)
        ids = torch.full((len(batch), width), problem.eos_token_id, dtype=torch.int64)
        mask = torch.zeros((len(batch), width), dtype=torch.int64)
        for index, row in enumerate(batch):
            ids[index, : len(row)] = torch.tensor(row)
            mask[index, : len(row)] = 1
        ids, mask = ids.to(problem.device), mask.to(problem.device)
        output = problem.model(input_ids=ids, attention_mask=mask, output_hidden_states=True, use_cache=False)
        hidden = output.hidden_states[-1].double()  # (b, W, H)
        total = torch.where(mask.bool()[:, :, None], hidden, 0.0).sum(dim=1)  # (b, H)
        pooled.append(total / mask.sum(dim=1, keepdim=True).double())
    embedding = torch.cat(pooled).cpu()  # (n, H)
    if problem.embedding_norm == "l2":
        embedding = embedding / embedding.norm(dim=1, keepdim=True).clamp(min=1e-12)
    return embedding


def preference_theta(
    problem: Any,
    comparisons: Comparisons,
    max_pairs: int = 200,
    max_tokens: int = 64,
    l2: float = 1.0,
    seed: int = 0,
) -> PreferenceFit:
    """Fit (or load the cached) Bradley-Terry ``theta`` of ``problem``'s model on ``comparisons``.

    The first ``max_pairs`` pairs are embedded with :func:`pooled_embeddings`; a seeded fifth (at
    least 2) is held out, :func:`fit_bradley_terry` fits the rest, and ``theta`` is rescaled to
    unit norm. Warns (UserWarning) when the held-out accuracy is not clearly above chance.

    Args:
        problem: a :class:`~tokenized_bandit_gym.llm.language_model_problem.LanguageModelProblem`.
        comparisons: the pairs (:func:`read_comparisons`).
        max_pairs: pairs used at most (embedding costs two forwards of ``max_tokens`` per pair).
        max_tokens: each text keeps its last ``max_tokens`` ids.
        l2: the ridge weight of :func:`fit_bradley_terry`.
        seed: seeds the held-out split and the bootstrap.
    """
    key = _cache_key(problem, comparisons, max_pairs, max_tokens, l2, seed)
    target = cache_root() / "preference-theta" / key

    def write(scratch: Path) -> dict[str, str]:
        record = _fit_record(problem, comparisons, max_pairs, max_tokens, l2, seed)
        (scratch / FIT_FILE).write_text(json.dumps(record) + "\n")
        return {"comparisons": comparisons.source, "comparisons_sha256": comparisons.checksum}

    build_once(target, write)
    record = json.loads((target / FIT_FILE).read_text())
    manifest = json.loads((target / "checksums.json").read_text())
    fit = PreferenceFit(
        theta=torch.tensor(record["theta"], dtype=torch.float64),
        held_out_accuracy=record["held_out_accuracy"],
        accuracy_interval=(record["accuracy_interval"][0], record["accuracy_interval"][1]),
        num_pairs=record["num_pairs"],
        num_held_out=record["num_held_out"],
        source=record["source"],
        checksum=manifest["files"][FIT_FILE],
    )
    if not fit.clearly_above_chance:
        warnings.warn(
            f"{fit.describe()}: not clearly above chance, so this theta is close to an arbitrary direction",
            UserWarning,
            stacklevel=2,
        )
    return fit


def _fit_record(
    problem: Any, comparisons: Comparisons, max_pairs: int, max_tokens: int, l2: float, seed: int
) -> dict[str, Any]:
    count = min(max_pairs, len(comparisons.chosen))
    chosen = pooled_embeddings(problem, comparisons.chosen[:count], max_tokens)  # (n, H)
    rejected = pooled_embeddings(problem, comparisons.rejected[:count], max_tokens)  # (n, H)
    differences = chosen - rejected  # (n, H)
    order = torch.randperm(count, generator=torch.Generator().manual_seed(seed))
    held = max(2, round(HELD_OUT_FRACTION * count))
    theta = fit_bradley_terry(differences[order[held:]], l2)
    theta = theta / theta.norm().clamp(min=1e-300)
    accuracy, interval = held_out_accuracy(theta, differences[order[:held]], seed=seed)
    return {
        "theta": theta.tolist(),
        "held_out_accuracy": accuracy,
        "accuracy_interval": list(interval),
        "num_pairs": count,
        "num_held_out": held,
        "source": f"{comparisons.source} (sha256 {comparisons.checksum[:12]}, {count} pairs)",
    }


def _cache_key(problem: Any, comparisons: Comparisons, max_pairs: int, max_tokens: int, l2: float, seed: int) -> str:
    """sha256 of everything the fit depends on: model weights (LM head), comparisons, pooling, settings."""
    head = problem.model.get_output_embeddings().weight.detach().float().cpu().contiguous()
    settings = {
        "model": str(getattr(problem.model.config, "_name_or_path", "")),
        "model_type": problem.model.config.model_type,
        "head_sha256": hashlib.sha256(head.numpy().tobytes()).hexdigest(),
        "comparisons_sha256": comparisons.checksum,
        "embedding_norm": problem.embedding_norm,
        "pooling": "query_response",
        "max_pairs": max_pairs,
        "max_tokens": max_tokens,
        "l2": l2,
        "seed": seed,
    }
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:24]


def _jsonl_rows(raw: bytes, file: Path, fields: Sequence[str]) -> list[tuple[str, str]]:
    rows = []
    lines = raw.decode("utf-8").splitlines()
    for number, record in json_lines(lines, lambda number: f"line {number} of {str(file)!r}"):
        if not isinstance(record, dict):
            raise ValueError(f"line {number} of {str(file)!r} is not a JSON object")
        rows.append(_pair(record, fields, f"line {number} of {str(file)!r}"))
    return rows


def _csv_rows(text: str, file: Path, fields: Sequence[str]) -> list[tuple[str, str]]:
    reader = csv.DictReader(text.splitlines())
    missing = [name for name in fields if name not in (reader.fieldnames or [])]
    if reader.fieldnames and missing:
        raise ValueError(f"{str(file)!r} has no column {missing[0]!r} (columns: {reader.fieldnames})")
    return [_pair(row, fields, f"row {number} of {str(file)!r}") for number, row in enumerate(reader, start=2)]


def _pair(record: dict[str, Any], fields: Sequence[str], where: str) -> tuple[str, str]:
    values = []
    for name in fields:
        if name not in record:
            raise ValueError(f"{where} has no field {name!r}")
        value = record[name]
        if not isinstance(value, str):
            raise TypeError(f"{where}: field {name!r} must be a string, got {type(value).__name__}")
        values.append(value)
    return values[0], values[1]
