"""Random-weight helpers shared by the LLM tests (models are built from configs, nothing downloaded)."""

from __future__ import annotations

from typing import Any

import torch


def randomised(model: Any, seed: int) -> Any:
    """``model`` in eval mode with every parameter drawn from a seeded generator (no global RNG).

    Vectors (norm weights, biases) get ``1 + 0.1 * noise``, matrices ``0.2 * noise``, so biases and
    norms are not the trivial initialisation a test could pass by accident.
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            noise = torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype)
            parameter.copy_(1.0 + 0.1 * noise if parameter.dim() == 1 else 0.2 * noise)
    return model.eval()
