"""Common-suffix lengths of aligned prefix pairs: the grouping of the paper's DDMC validation (section 6.1).

The paper groups the aligned prefix pairs ``(x^(1:k), y^(1:k))`` of two token sequences by "the number of
common tokens in its suffix". Its example, ``x = (a, b, c, d, e, f)`` and ``y = (a, x, y, d, e, f)``, puts
``k = 2, 3`` in group 0, ``k = 1, 4`` in group 1, ``k = 5`` in group 2 and ``k = 6`` in group 3. The rule that
reproduces it: the group of ``k`` is the length of the longest common suffix of the two length-``k`` prefixes,
i.e. the number of consecutive positions ``k, k-1, ...`` at which ``x`` and ``y`` agree. It obeys the recursion
``c_k = c_{k-1} + 1`` if ``x_k == y_k`` else ``0`` (with ``c_0 = 0``), so all ``k`` are computed in one pass.

Sequences of different lengths are compared on their aligned prefixes only, ``k = 1 .. min(|x|, |y|)``, as
the paper's example (equal lengths) implies; tokens past the shorter length are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def common_suffix_lengths(x: Sequence[int] | np.ndarray, y: Sequence[int] | np.ndarray) -> np.ndarray:
    """Return the common-suffix length of every aligned prefix pair ``(x^(1:k), y^(1:k))``.

    Args:
        x: First token sequence, shape ``(|x|,)``.
        y: Second token sequence, shape ``(|y|,)``.

    Returns:
        ``(m,)`` int64 array, ``m = min(|x|, |y|)``; entry ``k - 1`` is the length of the longest common suffix
        of ``x[:k]`` and ``y[:k]`` (between 0 and ``k``).

    Raises:
        ValueError: ``x`` or ``y`` is not one-dimensional.
    """
    xs = np.asarray(x)
    ys = np.asarray(y)
    if xs.ndim != 1 or ys.ndim != 1:
        raise ValueError(f"x and y must be one-dimensional token sequences, got shapes {xs.shape} and {ys.shape}")
    m = min(xs.shape[0], ys.shape[0])
    equal = xs[:m] == ys[:m]  # (m,)
    positions = np.arange(1, m + 1)  # (m,) 1-based k
    # Last mismatch position at or before k (0 when none): c_k = k - last_mismatch(k).
    last_mismatch = np.maximum.accumulate(np.where(equal, 0, positions))  # (m,)
    return (positions - last_mismatch).astype(np.int64)


def diverged_mask(x: Sequence[int] | np.ndarray, y: Sequence[int] | np.ndarray) -> np.ndarray:
    """Return, for each aligned prefix length ``k``, whether ``x^(1:k)`` and ``y^(1:k)`` differ somewhere.

    A pair has *diverged* when its first differing token is at or before ``k``; equivalently its common-suffix
    length is below ``k``. Identical prefixes (e.g. the shared query) have distance 0 by construction, so the
    diagnostics report the diverged pairs beside the paper's grouping of all pairs.

    Args:
        x: First token sequence, shape ``(|x|,)``.
        y: Second token sequence, shape ``(|y|,)``.

    Returns:
        ``(m,)`` bool array, ``m = min(|x|, |y|)``.
    """
    lengths = common_suffix_lengths(x, y)  # (m,)
    return lengths < np.arange(1, lengths.shape[0] + 1)
