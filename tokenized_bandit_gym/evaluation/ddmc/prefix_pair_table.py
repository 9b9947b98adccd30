"""The aligned prefix pairs of a set of answer pairs, with their common-suffix lengths and distances."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from tokenized_bandit_gym.evaluation.ddmc.answer_pair import AnswerPair
from tokenized_bandit_gym.evaluation.ddmc.common_suffix import common_suffix_lengths
from tokenized_bandit_gym.evaluation.ddmc.distances import DISTANCE_NAMES, embedding_distances
from tokenized_bandit_gym.llm.prefix_embedder import PrefixEmbedder


@dataclass(frozen=True)
class PrefixPairTable:
    """One row per aligned prefix pair ``(x^(1:k), y^(1:k))``, ``k = 1 .. min(|x|, |y|)``, of every answer pair.

    Attributes:
        item: ``(N,)`` dataset item (question/dialogue) of the row.
        pair: ``(N,)`` index of the answer pair.
        prefix_length: ``(N,)`` ``k``.
        common_suffix: ``(N,)`` length of the common suffix of the two length-``k`` prefixes.
        distances: ``(N, 5)`` distances between the prefix embeddings, columns as in ``DISTANCE_NAMES``.
    """

    item: np.ndarray
    pair: np.ndarray
    prefix_length: np.ndarray
    common_suffix: np.ndarray
    distances: np.ndarray

    @property
    def diverged(self) -> np.ndarray:
        """``(N,)`` bool: the prefixes differ somewhere (first differing token at or before ``k``)."""
        return self.common_suffix < self.prefix_length

    @property
    def num_items(self) -> int:
        """Number of distinct dataset items."""
        return int(np.unique(self.item).shape[0])

    @property
    def num_pairs(self) -> int:
        """Number of distinct answer pairs."""
        return int(np.unique(self.pair).shape[0])

    def __len__(self) -> int:
        return int(self.prefix_length.shape[0])

    def distance(self, name: str) -> np.ndarray:
        """Return the ``(N,)`` column of distance ``name`` (one of ``DISTANCE_NAMES``)."""
        if name not in DISTANCE_NAMES:
            raise ValueError(f"distance must be one of {DISTANCE_NAMES}, got {name!r}")
        return self.distances[:, DISTANCE_NAMES.index(name)]


def build_prefix_pair_table(
    pairs: Sequence[AnswerPair],
    embedder: PrefixEmbedder,
    progress: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
) -> PrefixPairTable:
    """Tokenize and embed every answer pair and tabulate its aligned prefix pairs.

    Each distinct text is tokenized and run through the model once (TruthfulQA's best answer is shared by
    all pairs of its question); every prefix embedding comes from that one forward (see ``PrefixEmbedder``).

    Args:
        pairs: The answer pairs.
        embedder: Tokenizer and model.
        progress: Show a progress bar over the texts embedded.
        cache_dir: Keep every forward's embeddings there (one file per batch, written atomically, keyed by the
            model and the token ids), and reuse those found: a run interrupted while embedding resumes where it
            stopped.

    Returns:
        The table; pairs whose texts tokenize identically contribute only non-diverged rows.

    Raises:
        ValueError: ``pairs`` is empty.
    """
    if not pairs:
        raise ValueError("pairs is empty: no answer pairs to compare")
    texts = sorted({text for pair in pairs for text in (pair.text_a, pair.text_b)})
    index = {text: i for i, text in enumerate(texts)}
    tokens = [embedder.tokenize(text) for text in texts]
    embeddings = _embedded(tokens, embedder, progress, cache_dir)  # list of (|z|, d)
    first = [index[pair.text_a] for pair in pairs]
    second = [index[pair.text_b] for pair in pairs]
    return table_from_embeddings(
        [tokens[i] for i in first],
        [tokens[i] for i in second],
        [embeddings[i] for i in first],
        [embeddings[i] for i in second],
        items=[pair.item for pair in pairs],
    )


def _embedded(
    tokens: list[list[int]], embedder: PrefixEmbedder, progress: bool, cache_dir: str | os.PathLike[str] | None
) -> list[torch.Tensor]:
    """``embedder.prefix_embeddings(tokens)``, with a progress bar and the batches kept in ``cache_dir``."""
    from tokenized_bandit_gym.evaluation.progress import ProgressCounter

    keys = [_sequence_key(embedder, sequence) for sequence in tokens]
    folder = Path(cache_dir) if cache_dir is not None else None
    found = _cached_embeddings(folder) if folder is not None else {}
    missing = [index for index, key in enumerate(keys) if key not in found]
    bar = ProgressCounter(len(tokens), "embedding texts", "text", enabled=progress)
    bar.update(len(tokens) - len(missing))

    def keep(batch: list[int], batch_embeddings: list[torch.Tensor]) -> None:
        bar.update(len(batch))
        if folder is None:
            return
        entries = {keys[missing[i]]: embedding.clone() for i, embedding in zip(batch, batch_embeddings, strict=True)}
        name = hashlib.blake2b("".join(sorted(entries)).encode(), digest_size=12).hexdigest()
        target = folder / f"batch-{name}{CACHE_SUFFIX}"
        save_file({key: value.contiguous() for key, value in entries.items()}, f"{target}.tmp")
        os.replace(f"{target}.tmp", target)  # atomic: a killed run leaves whole batches only

    computed = embedder.prefix_embeddings([tokens[index] for index in missing], on_batch=keep)
    bar.close()
    found |= {keys[index]: embedding for index, embedding in zip(missing, computed, strict=True)}
    return [found[key] for key in keys]


CACHE_SUFFIX = ".safetensors"
"""The embedding cache's batch files: safetensors, which hold tensors only (no pickle, no code)."""


def _cached_embeddings(folder: Path) -> dict[str, torch.Tensor]:
    """The embeddings kept in ``folder`` (created if missing), by key.

    Only ``batch-*.safetensors`` files are read. The ``batch-*.pt`` files of older versions are pickles and are
    never loaded (one printed line; their texts are embedded again), and a batch file that is not safetensors
    is skipped with one printed line.
    """
    from safetensors import SafetensorError

    folder.mkdir(parents=True, exist_ok=True)
    found: dict[str, torch.Tensor] = {}
    old = sorted(folder.glob("batch-*.pt"))
    if old:
        print(f"ignoring {len(old)} batch-*.pt files in {folder}: pickles of an older version are never loaded")
    for batch_file in sorted(folder.glob(f"batch-*{CACHE_SUFFIX}")):
        try:
            found |= load_file(batch_file, device="cpu")
        except (SafetensorError, OSError, ValueError) as error:
            print(f"ignoring {batch_file}: not a safetensors file ({error}); its texts are embedded again")
    return found


def _sequence_key(embedder: PrefixEmbedder, sequence: list[int]) -> str:
    """What a cached embedding is keyed by: the model (path or id, dtype, device type) and the token ids."""
    weights = embedder.language_model.get_input_embeddings().weight
    described = f"{embedder.model_path}|{weights.dtype}|{weights.device.type}|{','.join(map(str, sequence))}"
    return hashlib.blake2b(described.encode(), digest_size=16).hexdigest()


def table_from_embeddings(
    tokens_a: Sequence[Sequence[int]],
    tokens_b: Sequence[Sequence[int]],
    embeddings_a: Sequence[torch.Tensor],
    embeddings_b: Sequence[torch.Tensor],
    items: Sequence[int] | None = None,
) -> PrefixPairTable:
    """Build a table from precomputed prefix embeddings (for custom embedding functions and tests).

    Args:
        tokens_a: First sequence of each pair.
        tokens_b: Second sequence of each pair.
        embeddings_a: ``(|x|, d)`` prefix embeddings of each first sequence.
        embeddings_b: ``(|y|, d)`` prefix embeddings of each second sequence.
        items: Dataset item of each pair (default: one item per pair).

    Returns:
        The table.

    Raises:
        ValueError: The inputs have different numbers of pairs.
    """
    count = len(tokens_a)
    if not (len(tokens_b) == len(embeddings_a) == len(embeddings_b) == count) or count == 0:
        raise ValueError("tokens_a, tokens_b, embeddings_a, embeddings_b must hold the same, positive number of pairs")
    owners = list(range(count)) if items is None else list(items)
    if len(owners) != count:
        raise ValueError(f"items has {len(owners)} entries for {count} pairs")
    parts = []
    for number in range(count):
        suffix = common_suffix_lengths(tokens_a[number], tokens_b[number])  # (m,)
        m = suffix.shape[0]
        dist = embedding_distances(embeddings_a[number][:m], embeddings_b[number][:m]).double().numpy()  # (m, 5)
        parts.append((np.full(m, owners[number]), np.full(m, number), np.arange(1, m + 1), suffix, dist))
    return PrefixPairTable(*(np.concatenate([p[c] for p in parts]) for c in range(5)))
