"""Distances between prefix embeddings used by the DDMC diagnostics (paper section 6.1 and appendix D).

``d1`` is the paper's ``<theta, x - y>`` with ``theta = 1`` (the all-ones vector), reported as an absolute value
because DDMC bounds the utility *gap* ``|u(x) - u(y)|``; ``d2`` is ``||x - y||_2``; ``l1``, ``l3``, ``l4`` are
the ``p``-norms of ``x - y`` from appendix D.
"""

from __future__ import annotations

import torch

DISTANCE_NAMES: tuple[str, ...] = ("d1", "d2", "l1", "l3", "l4")
"""Names of the distances, in the order of the columns returned by :func:`embedding_distances`."""

DISTANCE_LABELS: dict[str, str] = {
    "d1": "d1 = |<1, x - y>|",
    "d2": "d2 = ||x - y||_2",
    "l1": "||x - y||_1",
    "l3": "||x - y||_3",
    "l4": "||x - y||_4",
}


def embedding_distances(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return the five DDMC distances between rows of ``x`` and ``y``.

    Args:
        x: Embeddings, shape ``(m, d)``.
        y: Embeddings, shape ``(m, d)``.

    Returns:
        ``(m, 5)`` tensor, columns in the order of :data:`DISTANCE_NAMES`.

    Raises:
        ValueError: ``x`` and ``y`` are not two-dimensional tensors of the same shape.
    """
    if x.ndim != 2 or x.shape != y.shape:
        raise ValueError(f"x and y must be (m, d) tensors of the same shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    diff = x - y  # (m, d)
    absdiff = diff.abs()  # (m, d)
    return torch.stack(
        [
            diff.sum(dim=-1).abs(),  # (m,) |<1, x - y>|
            torch.linalg.vector_norm(diff, ord=2, dim=-1),  # (m,)
            absdiff.sum(dim=-1),  # (m,)
            torch.linalg.vector_norm(diff, ord=3, dim=-1),  # (m,)
            torch.linalg.vector_norm(diff, ord=4, dim=-1),  # (m,)
        ],
        dim=-1,
    )  # (m, 5)
