"""The preallocated KV cache: appends in place where the cache is its base's newest, copies otherwise."""

from __future__ import annotations

import torch

from tokenized_bandit_gym.llm.static_kv_cache import appended, commit, detached, preallocated


def entries(columns: int, fill: float) -> torch.Tensor:
    """``(2, 3, columns, 4)`` entries all equal to ``fill``."""
    return torch.full((2, 3, columns, 4), fill)


def test_appends_write_in_place_and_earlier_caches_never_change() -> None:
    cache = preallocated(entries(5, 0.0), reserve=4)
    first = appended(cache, entries(1, 1.0))
    second = appended(first, entries(2, 2.0))
    assert second.shape == (2, 3, 8, 4)
    assert second.data_ptr() == cache.data_ptr()  # the same base: no copy of the columns already there
    assert torch.equal(second, torch.cat([entries(5, 0.0), entries(1, 1.0), entries(2, 2.0)], dim=2))
    assert torch.equal(first, torch.cat([entries(5, 0.0), entries(1, 1.0)], dim=2))


def test_an_older_cache_appended_again_is_copied_not_overwritten() -> None:
    cache = preallocated(entries(3, 0.0), reserve=4)
    newest = appended(cache, entries(1, 1.0))
    branch = appended(cache, entries(1, 7.0))  # copy-on-write: the newest lineage keeps its column
    assert torch.equal(newest[:, :, 3:], entries(1, 1.0))
    assert torch.equal(branch[:, :, 3:], entries(1, 7.0))
    assert branch.data_ptr() != cache.data_ptr()
    full = appended(appended(newest, entries(3, 2.0)), entries(1, 3.0))  # past the reserve: a new base
    assert torch.equal(full[:, :, -1:], entries(1, 3.0)) and full.shape[2] == 8


def test_scratch_columns_are_overwritten_by_the_next_append_unless_detached_or_committed() -> None:
    cache = preallocated(entries(2, 0.0), reserve=4)
    scratch = appended(cache, entries(3, 5.0), commit=False)
    kept = detached(scratch[:, :, 2:])
    appended(cache, entries(1, 1.0))  # writes column 2: the scratch view sees it, the detached copy does not
    assert torch.equal(scratch[:, :, 2:3], entries(1, 1.0))
    assert torch.equal(kept, entries(3, 5.0))
    tokens = appended(appended(cache, entries(1, 1.0), reserve=4), entries(1, 9.0), commit=False)  # older: copied
    appended(tokens[:, :, :3], entries(1, 8.0), commit=False)  # scratch over the same column
    assert torch.equal(tokens[:, :, 3:], entries(1, 8.0))
    uncommitted = appended(tokens[:, :, :3], entries(1, 9.0), commit=False)
    commit(uncommitted, 1)  # the forced token's entry stays: the next append extends it in place
    grown = appended(uncommitted, entries(1, 4.0))
    assert grown.data_ptr() == uncommitted.data_ptr()
    assert torch.equal(grown[:, :, 3:], torch.cat([entries(1, 9.0), entries(1, 4.0)], dim=2))


def test_row_subsets_and_plain_tensors_are_concatenated() -> None:
    cache = preallocated(entries(2, 0.0), reserve=4)
    rows = cache[:1]
    grown = appended(rows, torch.ones(1, 3, 1, 4))
    assert grown.shape == (1, 3, 3, 4) and torch.equal(cache, entries(2, 0.0))
    assert torch.equal(appended(entries(2, 0.0), entries(1, 1.0), commit=False)[:, :, 2:], entries(1, 1.0))


def test_scratch_appends_on_evenly_spaced_rows_write_in_place_and_leave_the_other_rows() -> None:
    cache = preallocated(torch.arange(4 * 3 * 2 * 4, dtype=torch.float32).view(4, 3, 2, 4), reserve=3)
    cache._base[:, :, 2:] = 7.0  # the spare columns
    before = cache.clone()
    rows = cache[1::2]  # rows 1 and 3: a view, as a row index map reads them
    scratch = appended(rows, torch.full((2, 3, 2, 4), -1.0), commit=False)
    assert scratch.shape == (2, 3, 4, 4) and scratch._base is cache._base  # the prefix was not copied
    assert torch.equal(scratch[:, :, :2], before[1::2]) and torch.equal(
        scratch[:, :, 2:], torch.full((2, 3, 2, 4), -1.0)
    )
    assert torch.equal(cache, before)  # the committed columns of every row are unchanged
    assert torch.equal(cache._base[0::2, :, 2:], torch.full((2, 3, 3, 4), 7.0))  # the other rows' spare columns too
    committed = appended(rows, torch.ones(2, 3, 1, 4))  # a committed append on a row subset: copied
    assert committed._base is not cache._base and torch.equal(cache, before)
    gathered = cache.index_select(0, torch.tensor([0, 3]))  # not a view: concatenated
    assert appended(gathered, torch.ones(2, 3, 1, 4), commit=False)._base is None
