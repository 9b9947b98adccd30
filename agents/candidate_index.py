"""Map a token id to its action (an index into the observation's candidates)."""

from __future__ import annotations

from typing import Any

import numpy as np


def candidate_index(observation: dict[str, Any], token: int) -> int:
    """The index of ``token`` in ``observation["candidate_tokens"]`` (the action that emits it).

    Raises:
        ValueError: the token is not among the candidates.
    """
    candidates = np.asarray(observation["candidate_tokens"])
    matches = np.flatnonzero(candidates == token)
    if matches.size == 0:
        raise ValueError(f"token {token} is not among the candidates {candidates.tolist()}")
    return int(matches[0])
