"""Seconds per token of ``model.generate`` with the KV cache, the reference the LLM step benchmarks compare with.

Shared by ``llm_step.py`` and ``llm_bandwidth_floor.py``; they import it as
``benchmarks.generate_timing``, so run them from the repository root with ``PYTHONPATH=.``.
"""

from __future__ import annotations

import time
from typing import Any

import torch


def synchronise(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def generate_seconds_per_token(model: Any, ids: torch.Tensor, new_tokens: int) -> float:
    """``(t(new_tokens) - t(1)) / (new_tokens - 1)`` of greedy ``model.generate`` on ``ids`` ``(1, P)``.

    The difference leaves out the prefill, as the env's step does; the device is synchronised
    around each call.
    """

    def run(tokens: int) -> float:
        synchronise(ids.device)
        start = time.perf_counter()
        model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=tokens,
            min_new_tokens=tokens,
            do_sample=False,
            use_cache=True,
            pad_token_id=0,
        )
        synchronise(ids.device)
        return time.perf_counter() - start

    return (run(new_tokens) - run(1)) / (new_tokens - 1)
