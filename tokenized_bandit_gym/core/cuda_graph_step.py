"""A step over state tensors it updates in place, captured once as a CUDA graph and replayed.

Used by the static-shape steps of the LLM core
(:class:`~tokenized_bandit_gym.llm.captured_step.StaticLanguageModelStep`) and of the synthetic vector envs
(:class:`~tokenized_bandit_gym.envs.static_round_step.StaticRoundStep`): a step of fixed shapes that reads
nothing back to the host is recorded once and each later call is one graph replay, so its time no longer grows
with the hundreds of kernel launches a step of small tensors makes.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

Outputs = torch.Tensor | tuple[torch.Tensor, ...]
"""What a step returns: one tensor or a tuple of tensors."""


class CapturedStep:
    """``step(*inputs) -> outputs`` over state tensors it updates in place, captured once as a CUDA graph.

    On a CUDA device the step runs ``warm_up`` times on a side stream, the state is restored, and one call is
    captured; each call then copies its inputs into the graph's input tensors, replays the graph and returns
    copies of its outputs. Where capture fails (an operation that cannot be captured) the step runs eagerly and
    says so once (a ``RuntimeWarning`` naming the error); off CUDA it runs eagerly.

    Args:
        step: the step; it must read its state from, and write it to, the same tensors on every call.
        examples: inputs of the shapes, dtypes and device of every later call.
        state: every tensor the step writes (restored after the warm-up runs).
        warm_up: eager runs before the capture.

    Attributes:
        captured: whether calls replay a CUDA graph.
    """

    def __init__(
        self,
        step: Callable[..., Outputs],
        examples: Sequence[torch.Tensor],
        state: Sequence[torch.Tensor],
        warm_up: int = 2,
    ) -> None:
        self.step = step
        self.captured = False
        self._graph: Any = None
        self._outputs: Outputs = ()
        device = examples[0].device
        if device.type != "cuda":
            return
        saved = [tensor.clone() for tensor in state]
        self._inputs = [example.clone() for example in examples]
        try:
            stream = torch.cuda.Stream(device)
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):
                for _ in range(warm_up):
                    step(*self._inputs)
            torch.cuda.current_stream(device).wait_stream(stream)
            _restore(state, saved)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._outputs = step(*self._inputs)
            self._graph, self.captured = graph, True
        except RuntimeError as error:
            warnings.warn(
                f"the step could not be captured as a CUDA graph; it runs eagerly ({error})",
                RuntimeWarning,
                stacklevel=2,
            )
        _restore(state, saved)  # the capture ran no kernels, the warm-up did

    def __call__(self, *inputs: torch.Tensor) -> Outputs:
        """The step's outputs for ``inputs`` (new tensors)."""
        if not self.captured:
            return self.step(*inputs)
        for static, given in zip(self._inputs, inputs, strict=True):
            static.copy_(given)
        self._graph.replay()
        if isinstance(self._outputs, torch.Tensor):
            return self._outputs.clone()
        return tuple(output.clone() for output in self._outputs)


def _restore(state: Sequence[torch.Tensor], saved: Sequence[torch.Tensor]) -> None:
    """Copy ``saved`` back into ``state``, tensor by tensor."""
    for tensor, value in zip(state, saved, strict=True):
        tensor.copy_(value)
