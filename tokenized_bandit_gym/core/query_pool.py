"""Random query pools (the contexts x_t of the TLB) for the synthetic families."""

from __future__ import annotations

import torch

from tokenized_bandit_gym.core.validation import check_int


def random_query_pool(
    generator: torch.Generator,
    num_queries: int,
    query_length: int,
    vocab_size: int,
    eos_token_id: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``num_queries`` queries of 1 to ``query_length`` non-EOS tokens.

    Args:
        generator: CPU generator seeded from the instance seed.
        num_queries: Q >= 1.
        query_length: the longest query, >= 1.
        vocab_size: n.
        eos_token_id: the EOS id (never drawn; used as padding).

    Returns:
        ``(Q, query_length)`` int64 token ids padded with EOS, and ``(Q,)`` int64 lengths.
    """
    check_int("num_queries", num_queries, minimum=1)
    check_int("query_length", query_length, minimum=1)
    lengths = torch.randint(1, query_length + 1, (num_queries,), generator=generator)  # (Q,)
    raw = torch.randint(0, vocab_size - 1, (num_queries, query_length), generator=generator)  # (Q, Lq)
    tokens = raw + (raw >= eos_token_id).long()  # skip the EOS id
    padding = torch.arange(query_length)[None, :] >= lengths[:, None]  # (Q, Lq)
    return tokens.masked_fill(padding, eos_token_id), lengths
