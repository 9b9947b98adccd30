"""The small-work thread policy: one torch thread unless the user chose a count."""

from __future__ import annotations

import pytest
import torch

from tokenized_bandit_gym import threads


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


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
