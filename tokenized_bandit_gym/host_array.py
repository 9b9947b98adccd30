"""Arrays of either backend (NumPy, or torch tensors on any device) read on the host."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def as_host_array(value: Any) -> np.ndarray:
    """``value`` as a NumPy array: a tensor copied from its device, anything else through ``np.asarray``.

    What a vector env returns with either ``array_backend`` (and what agents return) becomes
    one type for host-side code: tabular agents, run loops, benchmarks.
    """
    return value.cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
