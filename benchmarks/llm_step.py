"""Per-step wall time of the LLM env vs model.generate with a KV cache and vs naive recomputation.

Measured side by side in one run (ratios; these machines are noisy):

* env: ``TokenizedAlignmentEnv.step`` over a whole L-token episode, observation included (the k
  candidates' ``[e : v]`` features, log-probs, mask); one batched forward of the k candidates over
  the prefix KV cache per step, with the candidates under a 4-D mask (default) and with the cache
  expanded along the batch.
* (a) ``model.generate`` per token with the KV cache, greedy, same model and device:
  ``(t(L new tokens) - t(1 new token)) / (L - 1)``, so the prefill is excluded as it is for the env.
* (b) naive: every step recomputes each candidate's full ``x:y:tau`` without a cache (the k
  sequences batched in one forward), mean-pools the last-layer hidden states and reads the next
  log-probs; averaged over ``naive_positions`` positions spread over the episode.

Run: ``PYTHONPATH=. python benchmarks/llm_step.py`` (``--help`` for the options).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@dataclass
class Args:
    """Benchmark options."""

    models: str = "stories260K,gpt2-small-random"
    """comma-separated: stories260K (shipped, pretrained) and/or gpt2-small-random (124M, random weights)"""
    max_length: int = 30
    """L, tokens per episode"""
    top_k: int = 15
    """k, candidates per step"""
    repeats: int = 3
    """episodes (and generate calls) timed; the median is reported"""
    naive_positions: int = 6
    """positions of the episode at which the naive recomputation is timed"""
    threads: int = 1
    """torch CPU threads (1 avoids oversubscription on a shared 2-core machine)"""
    device: str = "cpu"
    """torch device"""


def parse_args() -> Args:
    """Args from the command line (one ``--field value`` per dataclass field)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in dataclasses.fields(Args):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=type(field.default), default=field.default)
    return Args(**vars(parser.parse_args()))


def load(name: str, device: str) -> tuple[Any, Any]:
    """The model and tokenizer named ``name``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from tokenized_bandit_gym.llm.load_language_model import load_language_model

    model, tokenizer = load_language_model(device=device)
    if name == "stories260K":
        return model, tokenizer
    if name == "gpt2-small-random":
        config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
        config.eos_token_id = tokenizer.eos_token_id
        torch.manual_seed(0)
        return GPT2LMHeadModel(config).to(device).eval(), tokenizer  # stories260K ids (< 512) drive it
    raise ValueError(f"unknown model {name!r}")


def time_env(model: Any, tokenizer: Any, args: Args, batching: str) -> tuple[float, list[int], list[int]]:
    """Median seconds per env step over whole episodes that never pick EOS early; the query and response ids."""
    from tokenized_bandit_gym.envs.tokenized_alignment_env import TokenizedAlignmentEnv

    env = TokenizedAlignmentEnv(
        model=model,
        tokenizer=tokenizer,
        queries=["Once upon a time, there was a little girl named Lily."],
        max_length=args.max_length,
        top_k=args.top_k,
        noise_scale=0.0,
        candidate_batching=batching,
    )
    eos = env.unwrapped.eos_token_id
    per_step = []
    for repeat in range(args.repeats + 1):  # the first episode also fills the oracle benchmark cache
        observation, _ = env.reset(seed=repeat)
        terminated, elapsed, steps = False, 0.0, 0
        while not terminated:
            allowed = np.flatnonzero(observation["action_mask"] & (observation["candidate_tokens"] != eos))
            action = int(allowed[0]) if allowed.size else int(np.flatnonzero(observation["action_mask"])[0])
            start = time.perf_counter()
            observation, _, terminated, _, info = env.step(action)
            elapsed += time.perf_counter() - start
            steps += 1
        if repeat:
            per_step.append(elapsed / steps)
    query = env.unwrapped.problem.query_tokens[0, : int(env.unwrapped.problem.query_lengths[0])].tolist()
    return float(np.median(per_step)), query, [int(t) for t in info["response"]]


def time_generate(model: Any, query: list[int], args: Args) -> float:
    """Median seconds per generated token of ``model.generate`` (greedy, KV cache), prefill excluded."""
    ids = torch.tensor([query], device=args.device)

    def run(new_tokens: int) -> float:
        start = time.perf_counter()
        model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            use_cache=True,
            pad_token_id=0,
        )
        return time.perf_counter() - start

    run(2)
    samples = [(run(args.max_length) - run(1)) / (args.max_length - 1) for _ in range(args.repeats)]
    return float(np.median(samples))


@torch.no_grad()
def time_naive(model: Any, query: list[int], response: list[int], args: Args) -> float:
    """Mean seconds per step of recomputing the k candidates' full sequences without a cache."""
    positions = np.unique(np.linspace(0, len(response) - 1, args.naive_positions).astype(int))
    base, head = model.base_model, model.get_output_embeddings()
    elapsed = []
    for position in positions:
        prefix = torch.tensor(query + response[:position], device=args.device)
        start = time.perf_counter()
        logits = head(base(input_ids=prefix[None]).last_hidden_state[:, -1]).float()  # next-token distribution
        candidates = logits.log_softmax(-1).topk(args.top_k).indices[0]  # (k,)
        sequences = torch.cat([prefix.expand(args.top_k, -1), candidates[:, None]], dim=1)  # (k, T + 1)
        hidden = base(input_ids=sequences).last_hidden_state  # (k, T + 1, H)
        pooled = hidden.mean(dim=1)  # (k, H)
        pooled = pooled / pooled.norm(dim=-1, keepdim=True)
        head(hidden[:, -1]).float().log_softmax(-1)  # next distribution of every candidate
        elapsed.append(time.perf_counter() - start)
    return float(np.mean(elapsed))


def main() -> None:
    """Print one markdown table row per model."""
    args = parse_args()
    torch.set_num_threads(args.threads)
    print(f"L={args.max_length}, k={args.top_k}, device={args.device}, threads={args.threads}")
    print(
        "| model | env step, 4-D mask (ms) | env step, expanded cache (ms) | (a) generate / token (ms) "
        "| (b) naive step (ms) | env / (a) | (b) / env |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        model, tokenizer = load(name, args.device)
        env_step, query, response = time_env(model, tokenizer, args, "mask")
        expanded, _, _ = time_env(model, tokenizer, args, "expand")
        generate = time_generate(model, query, args)
        naive = time_naive(model, query, response, args)
        print(
            f"| {name} | {1e3 * env_step:.1f} | {1e3 * expanded:.1f} | {1e3 * generate:.1f} | {1e3 * naive:.1f} | "
            f"{env_step / generate:.2f}x | {naive / env_step:.1f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
