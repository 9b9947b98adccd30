"""Memory a run keeps per round (tracemalloc), at two horizons: flat in T means the same bytes per round.

``run_online`` plays EOFUL on a small TLB (so that 1e5 rounds take seconds) with and without its
Assumption 4 ratios (``record_ratios``). What stays allocated when the run returns, its result
held, less what was allocated before, divided by T, is the memory kept per round: the result's
six float64 columns (48 bytes), plus 32 bytes of ratios when they are asked for, plus the env's
prefix memo (bounded, so its share shrinks as T grows). tracemalloc sees Python objects and NumPy
arrays; torch's CPU tensors are allocated outside it, but nothing here keeps one per round.

Run: ``python benchmarks/memory_per_round.py [--rounds 10000 100000]``.
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc


def kept_bytes(rounds: int, record_ratios: bool, size: dict[str, int]) -> tuple[int, int]:
    """``(bytes still allocated after the run, its result held, peak bytes during it)``, beyond the baseline."""
    import gymnasium as gym

    from tokenized_bandit_gym import agents
    from tokenized_bandit_gym.evaluation import run_online

    env = gym.make("TokenizedLinearBandit-v0", **size)
    agent = agents.make("eoful", record_ratios=record_ratios)
    run_online(env, agent, 2, seed=0)  # first-use allocations (the optima, the tables) are not per round
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    result = run_online(env, agent, rounds, seed=0)
    gc.collect()
    after, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(result.regret) == rounds and len(agent.prefix_ratio_max) == (rounds if record_ratios else 0)
    return after - before, peak - before


def main(argv: list[str] | None = None) -> dict[tuple[int, bool], int]:
    """Print and return the bytes kept per ``(rounds, record_ratios)``."""
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--vocab-size", type=int, default=4)
    parser.add_argument("--embedding-dim", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    size = {"vocab_size": args.vocab_size, "embedding_dim": args.embedding_dim, "max_length": args.max_length}
    print(f"EOFUL on TokenizedLinearBandit-v0 {size}")
    print(f"{'T':>8} {'record_ratios':>13} {'kept bytes':>11} {'per round':>10} {'peak bytes':>11}")
    kept = {}
    for rounds in args.rounds:
        for record_ratios in (False, True):
            after, peak = kept_bytes(rounds, record_ratios, size)
            kept[rounds, record_ratios] = after
            print(f"{rounds:>8} {record_ratios!s:>13} {after:>11,} {after / rounds:>10.1f} {peak:>11,}", flush=True)
    return kept


if __name__ == "__main__":
    main()
