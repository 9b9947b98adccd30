"""A preallocated KV cache: a step's entries are written into spare columns, not concatenated onto the cache.

A layer's cache ``(N, h, P, hd)`` is a column view ``base[:, :, start:end]`` of a preallocated ``base``
``(N, h, C, hd)``, ``C >= P``. Appending T entries writes them into ``base[:, :, end:end + T]`` in place
and returns the wider view ``base[:, :, start:end + T]``: no copy of the P columns already there, no new
allocation. Before, each step concatenated every layer's keys and values twice (the candidates' forward,
then the chosen entry): four copies of the whole cache per layer per step.

Every base records the column its committed entries end at. An append writes in place only where the
cache it extends ends exactly there (the newest cache of its lineage) and the base has room; any other
cache (an older state advanced again, a row subset, a cache of another origin) is copied once into a new
base with room for ``reserve`` more columns, so states stay values: a cache once returned never changes.
Two kinds of append:

* committed (:func:`appended`): the columns become part of the cache (the chosen token's entry);
* scratch (``commit=False``): the columns are written past the committed end and stay uncommitted (the k
  candidates' entries, which only their own forward reads); a later append overwrites them, so whoever keeps
  them copies them out (:func:`detached`).

States that share a prefix share its base without copies (a state advanced from another reads the same
columns); the first of them to diverge keeps writing in place, the others copy once (copy-on-write).
"""

from __future__ import annotations

import torch

_COMMITTED_END = "_tbg_committed_end"
"""The attribute of a preallocated base tensor that holds the column its committed entries end at."""


def _placement(cache: torch.Tensor) -> tuple[torch.Tensor, int, int] | None:
    """``(base, start, end)`` where ``cache`` is ``base[:, :, start:end]`` of a preallocated base; else None."""
    base = cache._base
    if base is None or not hasattr(base, _COMMITTED_END) or cache.dim() != 4:
        return None
    if cache.shape[:2] != base.shape[:2] or cache.shape[3] != base.shape[3] or cache.stride() != base.stride():
        return None  # a row subset or another layout: not a column view
    offset = cache.storage_offset() - base.storage_offset()
    start, remainder = offset // base.stride(2), offset % base.stride(2)
    if remainder or start < 0:
        return None
    return base, start, start + cache.shape[2]


def appended(cache: torch.Tensor, entries: torch.Tensor, reserve: int = 0, commit: bool = True) -> torch.Tensor:
    """``cache`` ``(N, h, P, hd)`` followed by ``entries`` ``(N, h, T, hd)``: ``(N, h, P + T, hd)``.

    In place (a wider view of the same base) where ``cache`` ends at its base's committed end and the
    base has T spare columns. Otherwise a committed append copies both into a new base with ``reserve``
    spare columns after them (so the next appends are in place), and a scratch append
    (``commit=False``) concatenates them into a plain tensor.

    Args:
        cache: a layer's keys or values.
        entries: the new entries, same dtype and device.
        reserve: spare columns of a new base (committed appends).
        commit: whether the entries become the cache's (else they are scratch, overwritten by later appends).
    """
    new = entries.shape[2]
    placement = _placement(cache)
    if placement is not None:
        base, start, end = placement
        if getattr(base, _COMMITTED_END) == end and end + new <= base.shape[2]:
            base.narrow(2, end, new).copy_(entries)
            if commit:
                setattr(base, _COMMITTED_END, end + new)
            return base.narrow(2, start, end + new - start)
    if not commit:
        return torch.cat([cache, entries], dim=2)
    return preallocated(torch.cat([cache, entries], dim=2), reserve)


def preallocated(cache: torch.Tensor, reserve: int) -> torch.Tensor:
    """A copy of ``cache`` ``(N, h, P, hd)`` at the start of a new base ``(N, h, P + reserve, hd)`` (committed)."""
    width = cache.shape[2]
    base = cache.new_empty(cache.shape[0], cache.shape[1], width + reserve, cache.shape[3])
    base[:, :, :width].copy_(cache)
    setattr(base, _COMMITTED_END, width)
    return base[:, :, :width]


def commit(cache: torch.Tensor, new: int) -> None:
    """Make the last ``new`` columns of ``cache`` committed, where a scratch append just wrote them in place."""
    placement = _placement(cache)
    if placement is not None:
        base, _, end = placement
        if getattr(base, _COMMITTED_END) == end - new:
            setattr(base, _COMMITTED_END, end)


def detached(entries: torch.Tensor) -> torch.Tensor:
    """``entries`` as a tensor of their own where they are scratch columns of a base (later appends overwrite those)."""
    if entries._base is not None and hasattr(entries._base, _COMMITTED_END):
        return entries.clone()
    return entries
