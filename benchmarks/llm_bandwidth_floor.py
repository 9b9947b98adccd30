"""Per-step time of the LLM core on a Llama-3-8B-shaped model against the floor ``weight bytes / bandwidth``.

Issue 4's GPU benchmark: a Llama-3-8B-shaped model (32 layers, hidden 4,096, GQA 32/8 heads,
MLP 14,336, vocabulary 128,256, untied head) with random weights in bfloat16, built on the device
from its config (nothing downloaded). Every step reads every weight matrix once (the k
candidates of a row, and the B rows of a batch, share the read; the LM head runs on the chosen
rows only), so a memory-bound step cannot beat ``floor = weight bytes read per step / memory
bandwidth``, with the bandwidth measured here by a device-to-device copy (read + write bytes over
time) and the input embedding table left out of the bytes (a step gathers B * k of its rows).
Target: the B = 1 step within 1.5x of the floor. B = 64 rows batched in one forward per step are
timed too (same floor per step, 64 tokens per step).

Measured per batch size B: the core's step (``LanguageModelProblem.advance`` then the k candidates'
``[e : v]`` features, what the envs return), median over the steps of ``repeats`` episodes of
``max_length`` tokens, the device synchronised around each step; for B = 1 also
``model.generate`` per token (greedy, KV cache). ``--shape tiny`` runs the same code on a 2-layer
model on any device (the smoke test runs it on the CPU).

Run on a GPU: ``PYTHONPATH=. python benchmarks/llm_bandwidth_floor.py`` (``--help`` for options).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from benchmarks.generate_timing import generate_seconds_per_token, synchronise
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments
from tokenized_bandit_gym.threads import use_small_work_threads

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SHAPES: dict[str, dict[str, Any]] = {
    "llama3-8b": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
    },
    "tiny": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 512,
        "max_position_embeddings": 256,
    },
}


@dataclass
class Args:
    """Benchmark options."""

    device: str = "cuda"
    """torch device (the issue's target is a GPU)"""
    shape: str = "llama3-8b"
    """model shape: llama3-8b (the issue's) or tiny (2 layers, for a smoke run anywhere)"""
    dtype: str = "bfloat16"
    """weight dtype"""
    batch_sizes: str = "1,64"
    """comma-separated B: rounds stepped together in one forward"""
    max_length: int = 30
    """L, tokens per episode"""
    top_k: int = 15
    """k, candidates per step"""
    repeats: int = 3
    """episodes timed per batch size"""
    forward_implementation: str = "auto"
    """the core's forward: auto (native for Llama), native or transformers"""
    bandwidth_bytes: int = 1 << 30
    """size of the tensor copied to measure the memory bandwidth"""


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


def build_model(args: Args) -> Any:
    """The random-weight Llama of shape ``args.shape``, created directly on the device in ``args.dtype``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from tokenized_bandit_gym.llm.load_language_model import resolve_dtype

    if args.shape not in SHAPES:
        raise ValueError(f"shape must be one of {tuple(SHAPES)}, got {args.shape!r}")
    config = LlamaConfig(**SHAPES[args.shape], bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    default_dtype = torch.get_default_dtype()
    torch.manual_seed(0)
    try:
        torch.set_default_dtype(resolve_dtype(args.dtype))
        with torch.device(args.device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(default_dtype)
    return model.eval().requires_grad_(False)


def bytes_read_per_step(model: Any) -> int:
    """Bytes of every weight a step reads: all parameters but the input embedding table."""
    embedding = model.get_input_embeddings().weight
    total = sum(parameter.numel() * parameter.element_size() for parameter in model.parameters())
    return total - embedding.numel() * embedding.element_size()


def measure_bandwidth(device: torch.device, size: int, repeats: int = 10) -> float:
    """Bytes per second of a device-to-device copy of ``size`` bytes (read + write), best of ``repeats``."""
    source = torch.empty(size, dtype=torch.uint8, device=device).fill_(1)
    target = torch.empty_like(source)
    best = float("inf")
    for _ in range(repeats):
        synchronise(device)
        start = time.perf_counter()
        target.copy_(source)
        synchronise(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size / best


@torch.no_grad()
def time_core_steps(problem: Any, batch: int, args: Args) -> float:
    """Median seconds of one step of B rounds: advance, then the next candidates' features."""
    device = problem.device
    queries = torch.arange(batch, device=device) % problem.num_queries
    samples = []
    for _ in range(args.repeats + 1):  # the first episode warms up
        state = problem.initial_state(queries)
        episode = []
        while not bool(state.finished.all()):
            mask = problem.action_mask(state)  # (B, k)
            non_eos = mask & (state.candidate_tokens != problem.eos_token_id)
            actions = torch.where(non_eos.any(dim=1), non_eos.float().argmax(dim=1), mask.float().argmax(dim=1))
            synchronise(device)
            start = time.perf_counter()
            state = problem.advance(state, actions)
            problem.candidate_embeddings(state)
            synchronise(device)
            episode.append(time.perf_counter() - start)
        samples.append(episode)
    return float(np.median(np.concatenate(samples[1:])))


@torch.no_grad()
def time_generate(model: Any, args: Args) -> float:
    """Seconds per token of ``model.generate`` (greedy, KV cache), prefill excluded; median of ``repeats``."""
    ids = torch.arange(3, 19, device=next(model.parameters()).device)[None]  # (1, 16)
    generate_seconds_per_token(model, ids, 2)  # warm-up
    return float(np.median([generate_seconds_per_token(model, ids, args.max_length) for _ in range(args.repeats)]))


def benchmark(args: Args) -> str:
    """The markdown table of the run."""
    from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem
    from tokenized_bandit_gym.llm.load_language_model import load_language_model
    from tokenized_bandit_gym.llm.query_sources import resolve_queries

    device = torch.device(args.device)
    model = build_model(args)
    _, tokenizer = load_language_model()  # stories260K's tokenizer: its ids (< 512) drive the random model
    problem = LanguageModelProblem(
        model,
        tokenizer,
        resolve_queries(None),
        max_length=args.max_length,
        top_k=args.top_k,
        forward_implementation=args.forward_implementation,
        embedding_norm="l2",  # the problem's own defaults when the recorded figures were taken
        fixed_length=False,
    )
    weight_bytes = bytes_read_per_step(model)
    bandwidth = measure_bandwidth(device, args.bandwidth_bytes)
    floor_ms = 1e3 * weight_bytes / bandwidth
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    lines = [
        f"device: {name}; shape {args.shape}, {args.dtype}, forward {problem.forward_implementation}; "
        f"L={args.max_length}, k={args.top_k}",
        f"weights read per step: {weight_bytes / 2**30:.2f} GiB; measured copy bandwidth "
        f"{bandwidth / 1e9:.0f} GB/s; floor {floor_ms:.3f} ms per step",
        "",
        "| B | ms per step | tokens per second | step / floor |",
        "|---|---|---|---|",
    ]
    for batch in (int(size) for size in args.batch_sizes.split(",")):
        step_ms = 1e3 * time_core_steps(problem, batch, args)
        lines.append(f"| {batch} | {step_ms:.3f} | {batch * 1e3 / step_ms:.0f} | **{step_ms / floor_ms:.2f}x** |")
    generate_ms = 1e3 * time_generate(model, args)
    lines.append(f"| generate, B=1 | {generate_ms:.3f} | {1e3 / generate_ms:.0f} | {generate_ms / floor_ms:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    """Print and return the table."""
    table = benchmark(parse_args(argv))
    print(table)
    return table


if __name__ == "__main__":
    use_small_work_threads()  # one torch thread unless OMP_NUM_THREADS says otherwise
    main()
