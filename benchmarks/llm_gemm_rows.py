"""The GEMM floor of the LLM env step on a CPU: one GPT-2-small layer's matmuls on k rows vs 1 row.

The env scores k candidates per step, so every weight matrix multiplies k rows where
``model.generate`` multiplies one. On a GPU both are memory-bound (the weights are read once
either way); on a CPU thread the k-row product costs more. This times the four weight matrices
of a GPT-2-small block (``768 -> 2304`` QKV, ``768 -> 768`` output, ``768 -> 3072`` and
``3072 -> 768`` MLP; 12 blocks) plus the LM head (``768 -> 50257``, one row in both cases) with
``torch.nn.functional.linear``, alternating k-row and 1-row calls, and prints the ratio: a lower
bound on env / generate for that model on this machine, whatever the env's own overhead.

Run: ``PYTHONPATH=. python benchmarks/llm_gemm_rows.py`` (``--help`` for the options).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch

from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments

BLOCK_SHAPES = ((768, 2304), (768, 768), (768, 3072), (3072, 768))
"""(in, out) of the weight matrices of one GPT-2-small block."""


@dataclass
class Args:
    """Benchmark options."""

    rows: int = 15
    """k, rows of the candidate forward"""
    layers: int = 12
    """blocks of the model"""
    vocab: int = 50257
    """LM head outputs (applied to one row per step by both)"""
    repeats: int = 21
    """alternating timed calls of each variant; the fastest of each is reported"""
    threads: int = 1
    """torch CPU threads"""


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


@torch.no_grad()
def block_matmuls(weights: list[torch.Tensor], rows: int, layers: int) -> float:
    """Seconds for ``layers`` blocks of products of ``rows`` input rows with every block weight ``(out, in)``."""
    inputs = {weight.shape[1]: torch.ones(rows, weight.shape[1]) for weight in weights}  # (rows, in) per width
    start = time.perf_counter()
    for _ in range(layers):
        for weight in weights:
            torch.nn.functional.linear(inputs[weight.shape[1]], weight)
    return time.perf_counter() - start


def main() -> None:
    """Print the k-row and 1-row times and their ratio, with and without the one-row LM head."""
    args = parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    weights = [torch.randn(out, inp, generator=generator) for inp, out in BLOCK_SHAPES]  # (out, in)
    head = torch.randn(args.vocab, 768, generator=generator)  # (n, 768)
    one = torch.randn(1, 768, generator=generator)  # (1, 768)
    times: dict[str, list[float]] = {"k rows": [], "1 row": [], "LM head, 1 row": []}
    block_matmuls(weights, args.rows, 1)
    for _ in range(args.repeats):
        times["k rows"].append(block_matmuls(weights, args.rows, args.layers))
        times["1 row"].append(block_matmuls(weights, 1, args.layers))
        start = time.perf_counter()
        torch.nn.functional.linear(one, head)
        times["LM head, 1 row"].append(time.perf_counter() - start)
    ms = {key: 1e3 * min(values) for key, values in times.items()}  # fastest: the least the machine's load added
    print(f"load average: {os.getloadavg()}; threads={args.threads}, k={args.rows}, {args.layers} blocks")
    for key, value in ms.items():
        print(f"{key}: {value:.2f} ms")
    print(f"block matmuls, k rows / 1 row: {ms['k rows'] / ms['1 row']:.2f}x")
    with_head = (ms["k rows"] + ms["LM head, 1 row"]) / (ms["1 row"] + ms["LM head, 1 row"])
    print(f"with the one-row LM head on both: {with_head:.2f}x (lower bound on env / generate for GPT-2-small here)")


if __name__ == "__main__":
    main()
