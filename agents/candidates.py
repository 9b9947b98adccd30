"""Map between token ids and candidate indices (actions), shared by the token-plan agents.

An action is an index into ``observation["candidate_tokens"]`` (k candidates; k = n and the
identity map for synthetic envs, the LM's top-k tokens in LLM envs). Agents that plan in token
ids (GreedyETC, LookaheadETC, GreedyUCB, UCT) translate through these two functions.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def allowed_tokens(observation: dict[str, Any]) -> list[int]:
    """Token ids of the allowed candidates, in candidate order.

    Args:
        observation: an env observation with ``candidate_tokens`` ``(k,)`` and ``action_mask`` ``(k,)``.

    Returns:
        The ids ``candidate_tokens[i]`` for every ``i`` with ``action_mask[i] == 1``.
    """
    tokens = np.asarray(observation["candidate_tokens"])  # (k,)
    mask = np.asarray(observation["action_mask"]).astype(bool)  # (k,)
    return [int(token) for token in tokens[mask]]


def candidate_index(observation: dict[str, Any], token: int) -> int:
    """The action that appends ``token``: its index in ``candidate_tokens``.

    Raises:
        ValueError: ``token`` is not an allowed candidate of this observation (a plan made at
            another state, e.g. an LLM env whose top-k changed with the query).
    """
    tokens = np.asarray(observation["candidate_tokens"])  # (k,)
    mask = np.asarray(observation["action_mask"])  # (k,)
    if 0 <= token < tokens.shape[0] and tokens[token] == token and mask[token]:
        return token  # candidate i is token i (every synthetic env): no search
    matches = np.flatnonzero((tokens == token) & mask.astype(bool))
    if matches.size == 0:
        raise ValueError(
            f"token {token} is not an allowed candidate at position {int(observation['length']) + 1}: "
            f"allowed tokens are {tokens[mask].tolist()}"
        )
    return int(matches[0])


def is_allowed(observation: dict[str, Any], token: int) -> bool:
    """Whether ``token`` is an allowed candidate of this observation (e.g. EOS under ``fixed_length``)."""
    tokens = np.asarray(observation["candidate_tokens"])  # (k,)
    mask = np.asarray(observation["action_mask"])  # (k,)
    if 0 <= token < tokens.shape[0] and tokens[token] == token:
        return bool(mask[token])  # candidate i is token i (every synthetic env); tokens are distinct
    return bool(np.any((tokens == token) & mask.astype(bool)))
