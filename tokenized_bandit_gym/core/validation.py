"""Argument checks that raise clear exceptions naming the bad value (never ``assert``)."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from numbers import Integral, Real
from typing import cast

import torch

# torch.Generator.manual_seed takes seeds up to 2**64 - 1.
MAX_SEED = 2**64 - 1


def check_int(name: str, value: object, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as a Python ``int`` (NumPy and torch integers included) or raise naming it.

    Raises:
        TypeError: ``value`` is not an integer (bools are rejected too).
        ValueError: ``value`` is below ``minimum`` or above ``maximum``.
    """
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    number = int(value)
    if minimum is not None and number < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    if maximum is not None and number > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value!r}")
    return number


def check_reset_seed(seed: object, name: str = "seed") -> int | None:
    """Return ``reset``'s ``seed`` as a Python ``int`` (NumPy integers included), None as None, or raise naming it.

    One rule for every env's ``reset`` (single, vector, arena): what the constructors take for ``instance_seed``,
    without its upper bound (reset seeds go to ``np.random.SeedSequence``, which takes any non-negative integer).

    Raises:
        TypeError: a bool (``seed=True`` is not ``seed=1``), a float, a string or any other non-integer.
        ValueError: a negative integer.
    """
    return None if seed is None else check_int(name, seed, minimum=0)


def seeded_generator(seed: object, name: str = "instance_seed") -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``seed``, an integer in ``[0, 2**64 - 1]``, or raise naming it."""
    return torch.Generator().manual_seed(check_int(name, seed, minimum=0, maximum=MAX_SEED))


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
    """Return ``value`` as a ``torch.device`` this torch can use, or raise naming it.

    Raises:
        ValueError: not a device name, or a CUDA/MPS device this build or machine does not have.
    """
    try:
        device = torch.device(cast("str | torch.device | int", value))  # torch raises a TypeError on anything else
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must name a torch device such as 'cpu' or 'cuda', got {value!r}") from error
    if device.type == "cuda":
        if not torch.cuda.is_available():
            build = "this torch build has no CUDA support" if torch.version.cuda is None else "no CUDA GPU is visible"
            raise ValueError(f"device={value!r} is not available: {build}; use device='cpu'")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device={value!r} is not available: only {torch.cuda.device_count()} CUDA devices")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device={value!r} is not available on this machine; use device='cpu'")
    elif device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'mps' (optionally with an index), got {value!r}")
    return device


def available_memory_bytes() -> int | None:
    """Memory this process can still allocate: ``MemAvailable`` capped by ``RLIMIT_AS`` (None if unknown)."""
    limits = []
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError):
        try:
            limits.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (AttributeError, OSError, ValueError):
            pass
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            limits.append(soft)
    except (ImportError, OSError, ValueError):
        pass
    return min(limits) if limits else None


def check_memory(what: str, needed_bytes: int, available: int | None = None) -> None:
    """Raise before allocating when ``what`` needs more memory than this machine has available.

    The one memory guard of the package: the instance sizes, the vector env's ``num_envs``, a
    spec's seeds, rounds and file size, a batched agent's ``batch_size`` and the query length all
    compute a lower bound of the bytes they would allocate and pass it here.

    Args:
        what: the arguments that size it, e.g. ``"vocab_size=1000000000, embedding_dim=16"``.
        needed_bytes: a lower bound of the bytes it allocates.
        available: the budget (default: :func:`available_memory_bytes`).

    Raises:
        ValueError: naming ``what``, the memory it needs and the memory available.
    """
    budget = available_memory_bytes() if available is None else available
    if budget is not None and needed_bytes > budget:
        raise ValueError(
            f"{what}: would need at least {needed_bytes / 2**30:,.1f} GiB of memory, "
            f"more than the {budget / 2**30:,.1f} GiB available; choose smaller sizes"
        )


def check_batch_memory(batch_size: int, bytes_per_round: int) -> None:
    """:func:`check_memory` for a batched agent that buffers ``batch_size`` rounds between updates.

    Raises:
        ValueError: naming ``batch_size`` and the memory its buffer would need.
    """
    check_memory(f"batch_size={batch_size} (rounds buffered between updates)", batch_size * bytes_per_round)


def check_dtype(value: object) -> torch.dtype:
    """Return a floating ``torch.dtype`` from ``value`` ('float32', 'float64' or a dtype)."""
    dtypes = {"float32": torch.float32, "float64": torch.float64}
    if isinstance(value, torch.dtype) and value in dtypes.values():
        return value
    if isinstance(value, str) and value in dtypes:
        return dtypes[value]
    raise ValueError(f"dtype must be one of {tuple(dtypes)}, got {value!r}")


def check_replay(
    queries: torch.Tensor, responses: torch.Tensor, max_length: int, num_queries: int, vocab_size: int | None = None
) -> None:
    """Refuse a replay a problem's ``state_for`` cannot play: shapes, length, query indices and token ids.

    Args:
        queries: ``(B,)`` int64 query indices, each in ``[0, num_queries)``.
        responses: ``(B, T)`` int64 token ids with ``T <= max_length`` (each in ``[0, vocab_size)`` when given).
        max_length: L.
        num_queries: Q.
        vocab_size: n, or None to leave the token ids unchecked.

    Raises:
        ValueError: naming the shape, the length, the token ids or the query indices that are out of range.
    """
    if responses.dim() != 2 or responses.shape[0] != queries.shape[0]:
        raise ValueError(f"responses must have shape (B, T) with B = {queries.shape[0]}, got {tuple(responses.shape)}")
    if responses.shape[1] > max_length:
        raise ValueError(f"responses have {responses.shape[1]} tokens, more than max_length={max_length}")
    if vocab_size is not None and responses.numel() and (responses.min() < 0 or responses.max() >= vocab_size):
        raise ValueError(f"response token ids must lie in [0, {vocab_size}), got {responses.tolist()}")
    if queries.numel() and (queries.min() < 0 or queries.max() >= num_queries):
        raise ValueError(f"query indices must lie in [0, {num_queries}), got {queries.tolist()}")
