"""The action mask of every decoding position, tabulated on the host."""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import torch

from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.tokenized_problem import TokenizedProblem

Rows = TypeVar("Rows", np.ndarray, torch.Tensor)


class ActionMaskTable:
    """:meth:`TokenizedProblem.action_mask` for one round, read by length instead of computed.

    The mask depends only on the response length and on whether the response is complete, so
    the ``L + 2`` possible masks are computed once, by the problem's own ``action_mask`` on a
    batch holding one state of each kind, and a batch-of-one env looks its mask up.

    Args:
        problem: the instance.

    Attributes:
        allowed: ``(L + 2, n)`` bool, read-only: row ``m`` (``0 <= m <= L``) for an unfinished
            response of length m, row ``L + 1`` for a complete one.
        allowed_int8: the same as int8 (the observation's ``action_mask``).
    """

    def __init__(self, problem: TokenizedProblem) -> None:
        length = problem.max_length
        rows = length + 2
        lengths = torch.arange(rows, device=problem.device).clamp(max=length)  # (L + 2,)
        finished = torch.arange(rows, device=problem.device) == length + 1  # (L + 2,)
        queries = torch.zeros(rows, dtype=torch.int64, device=problem.device)
        states = DecodingState(
            queries=queries,
            tokens=torch.full((rows, length), problem.eos_token_id, dtype=torch.int64, device=problem.device),
            lengths=lengths,
            finished=finished,
            carry=torch.zeros(rows, device=problem.device),
            last_tokens=queries,
        )  # only lengths and finished matter to the mask
        self.max_length = length
        self.allowed = problem.action_mask(states).cpu().numpy().copy()  # (L + 2, n)
        self.allowed_int8 = self.allowed.astype(np.int8)  # (L + 2, n)
        self.allowed.flags.writeable = False
        self.allowed_int8.flags.writeable = False

    def row(self, length: int, finished: bool) -> int:
        """The table row of a response of ``length`` tokens (``0 <= length <= L``)."""
        if not 0 <= length <= self.max_length:
            raise ValueError(f"length must lie in [0, {self.max_length}], got {length}")
        return self.max_length + 1 if finished else length

    def rows(self, lengths: Rows, finished: Rows) -> Rows:
        """The table rows ``(N,)`` of N responses: :meth:`row` of each (NumPy arrays or tensors alike, unchecked)."""
        if isinstance(lengths, np.ndarray):
            return np.where(finished, self.max_length + 1, lengths)
        return torch.where(finished, self.max_length + 1, lengths)
