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
columns); the first of them to diverge keeps writing in place, the others copy once (copy-on-write). Rows of one
state that hold the same prefix (equal rows, whose candidates the core forwards once) are read as a view of evenly
spaced rows where they are so spaced (a row index map that copies nothing; scratch appends write those rows' spare
columns in place), else gathered.
"""

from __future__ import annotations

import torch

_COMMITTED_END = "_tbg_committed_end"
"""The attribute of a preallocated base tensor that holds the column its committed entries end at."""


def _placement(cache: torch.Tensor, rows: bool = False) -> tuple[torch.Tensor, slice, int, int] | None:
    """``(base, row_slice, start, end)`` where ``cache`` is ``base[row_slice, :, start:end]`` of a preallocated base.

    None where it is not such a view. Without ``rows`` only views of every row (``row_slice`` the whole batch)
    count; with ``rows``, views of evenly spaced rows too (``base[a:b:s]``, as a row index map that copies nothing).
    """
    base = cache._base
    if base is None or not hasattr(base, _COMMITTED_END) or cache.dim() != 4:
        return None
    if cache.shape[1] != base.shape[1] or cache.shape[3] != base.shape[3] or cache.stride()[1:] != base.stride()[1:]:
        return None  # another layout: not a column view
    offset = int(cache.storage_offset()) - int(base.storage_offset())  # elements from the base's start
    first_row, remainder = divmod(offset, base.stride(0))
    start, remainder = divmod(remainder, base.stride(2))
    if remainder or first_row < 0 or start + cache.shape[2] > base.shape[2]:
        return None
    count = cache.shape[0]
    step, uneven = divmod(cache.stride(0), base.stride(0)) if count > 1 else (1, 0)
    if uneven or step < 1 or first_row + (count - 1) * step >= base.shape[0]:
        return None
    row_slice = slice(first_row, first_row + (count - 1) * step + 1, step)
    if not rows and (first_row, count, step) != (0, base.shape[0], 1):
        return None  # a row subset
    return base, row_slice, start, start + cache.shape[2]


def appended(cache: torch.Tensor, entries: torch.Tensor, reserve: int = 0, commit: bool = True) -> torch.Tensor:
    """``cache`` ``(N, h, P, hd)`` followed by ``entries`` ``(N, h, T, hd)``: ``(N, h, P + T, hd)``.

    In place (a wider view of the same base) where ``cache`` ends at its base's committed end and the
    base has T spare columns. Otherwise a committed append copies both into a new base with ``reserve``
    spare columns after them (so the next appends are in place), and a scratch append
    (``commit=False``) concatenates them into a plain tensor. A scratch append is in place on evenly spaced
    rows of a base too (``base[a:b:s]``: the rows a forward reads through a row index map, their prefix not
    copied); a committed one needs every row (the other rows would see the columns committed).

    Args:
        cache: a layer's keys or values.
        entries: the new entries, same dtype and device.
        reserve: spare columns of a new base (committed appends).
        commit: whether the entries become the cache's (else they are scratch, overwritten by later appends).
    """
    new = entries.shape[2]
    placement = _placement(cache, rows=not commit)
    if placement is not None:
        base, rows, start, end = placement
        if getattr(base, _COMMITTED_END) == end and end + new <= base.shape[2]:
            base[rows].narrow(2, end, new).copy_(entries)
            if commit:
                setattr(base, _COMMITTED_END, end + new)
            return base[rows].narrow(2, start, end + new - start)
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
        base, _, _, end = placement
        if getattr(base, _COMMITTED_END) == end - new:
            setattr(base, _COMMITTED_END, end)


def detached(entries: torch.Tensor) -> torch.Tensor:
    """``entries`` as a tensor of their own where they are scratch columns of a base (later appends overwrite those)."""
    if entries._base is not None and hasattr(entries._base, _COMMITTED_END):
        return entries.clone()
    return entries
