"""The additive 4-D attention mask of new tokens over a left-padded KV cache."""

from __future__ import annotations

import torch


def additive_attention_mask(attention_mask: torch.Tensor, new_tokens: int, dtype: torch.dtype) -> torch.Tensor:
    """The additive mask ``(N, 1, T, S)`` for a 0/1 mask ``(N, S)`` whose last T columns are the new tokens.

    New token i sees column j when ``attention_mask[:, j] == 1`` and ``j <= S - T + i`` (causal).
    Blocked entries hold ``finfo(dtype).min``, not ``-inf``, so a row that sees nothing (left
    padding) stays finite.
    """
    columns = attention_mask.shape[1]
    first_new = columns - new_tokens
    rows = torch.arange(new_tokens, device=attention_mask.device)[:, None] + first_new  # (T, 1)
    causal = torch.arange(columns, device=attention_mask.device)[None, :] <= rows  # (T, S)
    allowed = causal[None, None] & attention_mask.bool()[:, None, None, :]  # (N, 1, T, S)
    return torch.zeros(allowed.shape, dtype=dtype, device=attention_mask.device).masked_fill_(
        ~allowed, torch.finfo(dtype).min
    )
