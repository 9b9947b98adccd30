"""The sizes and placement every synthetic family's instance is built with (one frozen value, passed down)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class InstanceSizes:
    """What every synthetic family's constructor takes besides its own options.

    The env configs (:mod:`tokenized_bandit_gym.envs.synthetic_config`) hold the defaults and build
    this value; :func:`~tokenized_bandit_gym.core.problem_factory.checked_sizes` checks it (types,
    device, dtype, memory) before a family is built from it.

    Attributes:
        vocab_size: n, EOS included (EOS is id ``n - 1``).
        max_length: L, the longest response.
        embedding_dim: d, the dimension of ``e(x, y)`` (families without features ignore it).
        num_queries: Q, the size of the query pool.
        query_length: the longest query of the pool.
        instance_seed: seeds every random draw of the instance, in ``[0, 2**64 - 1]``.
        fixed_length: EOS only at position L.
        device: where every tensor of the instance lives (a name until checked).
        dtype: the floating dtype of utilities and embeddings (a name until checked).
    """

    vocab_size: int
    max_length: int
    embedding_dim: int
    num_queries: int
    query_length: int
    instance_seed: int
    fixed_length: bool
    device: torch.device | str
    dtype: torch.dtype | str
