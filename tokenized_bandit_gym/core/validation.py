"""Argument checks that raise clear exceptions naming the bad value (never ``assert``)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Integral, Real

import torch


def check_int(name: str, value: object, minimum: int | None = None) -> int:
    """Return ``value`` as an ``int`` or raise naming it.

    Raises:
        TypeError: ``value`` is not an integer (bools are rejected too).
        ValueError: ``value`` is below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)


def check_real(
    name: str,
    value: object,
    low: float | None = None,
    high: float | None = None,
) -> float:
    """Return ``value`` as a finite ``float`` in ``[low, high]`` or raise naming it.

    Raises:
        TypeError: ``value`` is not a real number.
        ValueError: ``value`` is NaN, infinite or outside ``[low, high]``.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and number < low:
        raise ValueError(f"{name} must be >= {low}, got {value!r}")
    if high is not None and number > high:
        raise ValueError(f"{name} must be <= {high}, got {value!r}")
    return number


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices`` or raise naming it and the choices."""
    options = tuple(choices)
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


def check_device(value: object) -> torch.device:
    """Return ``value`` as a ``torch.device`` or raise naming it."""
    try:
        return torch.device(value)  # type: ignore[arg-type]
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must name a torch device such as 'cpu' or 'cuda', got {value!r}") from error


def check_dtype(value: object) -> torch.dtype:
    """Return a floating ``torch.dtype`` from ``value`` ('float32', 'float64' or a dtype)."""
    dtypes = {"float32": torch.float32, "float64": torch.float64}
    if isinstance(value, torch.dtype) and value in dtypes.values():
        return value
    if isinstance(value, str) and value in dtypes:
        return dtypes[value]
    raise ValueError(f"dtype must be one of {tuple(dtypes)}, got {value!r}")
