"""Prefix embeddings for the DDMC diagnostics: one forward + cumulative sum vs a forward of every prefix.

Embeds the tokenized ``query:answer`` texts of the first TruthfulQA questions with the shipped stories260K
both ways, side by side in one run, checks they agree, and prints the speed ratio.

    PYTHONPATH=. python benchmarks/ddmc_prefix_embeddings.py --questions 10
"""

from __future__ import annotations

import argparse
import time

import torch

from tokenized_bandit_gym.evaluation.ddmc import PrefixEmbedder, load_answer_pairs, resolve_dataset
from tokenized_bandit_gym.threads import use_small_work_threads


def naive(embedder: PrefixEmbedder, sequences: list[list[int]]) -> list[torch.Tensor]:
    out = []
    with torch.no_grad():
        for sequence in sequences:
            rows = []
            for k in range(1, len(sequence) + 1):
                hidden = embedder.model(input_ids=torch.tensor([sequence[:k]])).last_hidden_state[0]  # (k, d)
                rows.append(hidden.mean(dim=0))
            out.append(torch.stack(rows))  # (|z|, d)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    embedder = PrefixEmbedder("stories260K")
    pairs = load_answer_pairs(resolve_dataset("truthfulqa"), max_items=args.questions)
    texts = sorted({t for p in pairs for t in (p.text_a, p.text_b)})
    sequences = [embedder.tokenize(t) for t in texts]
    tokens = sum(len(s) for s in sequences)
    fast_times, slow_times = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        fast = embedder.prefix_embeddings(sequences)
        fast_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        slow = naive(embedder, sequences)
        slow_times.append(time.perf_counter() - start)
    error = max(float((a - b).abs().max()) for a, b in zip(fast, slow, strict=True))
    fast_s, slow_s = min(fast_times), min(slow_times)
    print(f"{len(sequences)} sequences, {tokens} prefixes; max abs difference {error:.2e}")
    print(f"cumsum (batched, one forward per sequence): {fast_s:.3f} s")
    print(f"naive (one forward per prefix):             {slow_s:.3f} s")
    print(f"speed-up: {slow_s / fast_s:.1f}x")


if __name__ == "__main__":
    use_small_work_threads()  # one torch thread unless OMP_NUM_THREADS says otherwise
    main()
