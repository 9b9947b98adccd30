"""The small-work thread policy: one torch thread unless the user chose a count."""

from __future__ import annotations

import numpy  # noqa: F401  (its BLAS loaded, as in a script)
import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from tokenized_bandit_gym import threads


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    before = torch.get_num_threads()
    blas = {pool["prefix"]: pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}
    yield
    torch.set_num_threads(before)
    threadpool_limits(limits=blas)  # NumPy's BLAS pools as they were


def _numpy_blas_threads() -> set[int]:
    """The thread counts of the BLAS libraries loaded (NumPy's OpenBLAS here; torch's MKL is linked in)."""
    return {int(pool["num_threads"]) for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_one_thread_unless_the_user_set_a_thread_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in threads.USER_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    torch.set_num_threads(2)
    assert threads.use_small_work_threads() == threads.SMALL_WORK_THREADS == torch.get_num_threads()
    torch.set_num_threads(2)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert threads.use_small_work_threads() == 2  # the user's choice stands


def test_an_explicit_count_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert threads.use_small_work_threads(2) == 2 == torch.get_num_threads()


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (1.5, TypeError), (True, TypeError)])
def test_a_bad_count_is_refused(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="threads"):
        threads.use_small_work_threads(value)  # type: ignore[arg-type]


def test_numpy_blas_on_one_thread_unless_the_user_set_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in threads.BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    threadpool_limits(limits=2, user_api="blas")
    assert threads.use_small_work_threads() == 1
    assert _numpy_blas_threads() <= {1}  # empty where NumPy's BLAS is not a separate library
    threadpool_limits(limits=2, user_api="blas")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    threads.use_small_work_threads()
    assert _numpy_blas_threads() <= {2}  # the user's choice stands
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    threadpool_limits(limits=2, user_api="blas")
    assert threads.use_small_work_threads(3) == 3 == torch.get_num_threads()
    assert _numpy_blas_threads() <= {1}  # an explicit count is torch's: BLAS's spinning workers stay off its cores
