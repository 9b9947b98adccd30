"""Brute-force enumeration of complete responses (the exact optimum when n^L is small)."""

from __future__ import annotations

import itertools

import torch

from tokenized_bandit_gym.core.validation import check_int

MAX_ENUMERATED_RESPONSES = 2_000_000


def count_complete_responses(vocab_size: int, max_length: int, fixed_length: bool) -> int:
    """Number of complete responses: ``sum_m (n-1)^(m-1)`` over allowed lengths m (EOS last)."""
    lengths = [max_length] if fixed_length else range(1, max_length + 1)
    return sum((vocab_size - 1) ** (m - 1) for m in lengths)


def complete_responses(
    vocab_size: int,
    max_length: int,
    eos_token_id: int,
    fixed_length: bool = False,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Every complete response of at most ``max_length`` tokens, padded with EOS.

    A complete response is ``m - 1`` non-EOS tokens followed by EOS, for every allowed length
    ``m`` (only ``m = L`` when ``fixed_length``).

    Returns:
        ``(S, L)`` int64 token ids, S = :func:`count_complete_responses`.

    Raises:
        ValueError: S exceeds ``MAX_ENUMERATED_RESPONSES`` (enumeration would not fit).
    """
    check_int("vocab_size", vocab_size, minimum=2)
    check_int("max_length", max_length, minimum=1)
    total = count_complete_responses(vocab_size, max_length, fixed_length)
    if total > MAX_ENUMERATED_RESPONSES:
        raise ValueError(
            f"enumerating {total} complete responses (vocab_size={vocab_size}, "
            f"max_length={max_length}) exceeds the limit {MAX_ENUMERATED_RESPONSES}"
        )
    tokens = [t for t in range(vocab_size) if t != eos_token_id]
    rows = []
    lengths = [max_length] if fixed_length else range(1, max_length + 1)
    for m in lengths:
        for prefix in itertools.product(tokens, repeat=m - 1):
            rows.append(list(prefix) + [eos_token_id] * (max_length - m + 1))
    return torch.tensor(rows, dtype=torch.int64, device=device)  # (S, L)
