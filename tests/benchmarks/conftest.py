"""The benchmark scripts set torch's thread count: every smoke test gives it back and checks autograd is on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _restore_torch_threads() -> Iterator[None]:
    """Restore the thread count a script set; a script must not leave autograd off."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
    assert torch.is_grad_enabled()
