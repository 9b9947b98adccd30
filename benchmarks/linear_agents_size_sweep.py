"""EOFUL and TokenizedLinTS against plain NumPy loops across the sizes d, n and L, side by side.

The NumPy loops are the independent references of ``benchmarks/sequential_vs_numpy.py`` (same
instance, same query and noise streams; TokenizedLinTS is handed torch's normal stream, as in
``tests/benchmarks/test_sequential_reference.py``). For every size the package and the reference
play the same rounds, interleaved (ABAB), best of the repeats, on one thread, timed in CPU time
(``time.process_time``: on a shared, loaded machine wall time mostly measures the waits for a
core, which neither loop controls); the script checks
that both loops make the same decisions (per-round regrets equal to 1e-9) and prints the cost per
round of each and their ratio. One size varies at a time around the defaults n = 16, d = 16, L = 8.

Run: ``python benchmarks/linear_agents_size_sweep.py [--repeats 3] [--seconds 1.0] [--agents eoful]``.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
from sequential_vs_numpy import eoful_loop, lin_ts_loop, reference_instance

DEFAULT_SIZE = {"vocab_size": 16, "embedding_dim": 16, "max_length": 8}
SWEEP = {
    "embedding_dim": (8, 16, 32, 64, 65, 128, 256, 512, 1024),
    "vocab_size": (8, 32, 128, 512),
    "max_length": (4, 16, 32, 64),
}


def _torch_normal(seed: int) -> Callable[[int], np.ndarray]:
    """TokenizedLinTS's posterior noise: the standard normals of ``torch.Generator().manual_seed(seed)``."""
    import torch

    generator = torch.Generator()
    generator.manual_seed(seed)
    return lambda d: torch.randn(1, d, generator=generator, dtype=torch.float64)[0].numpy()


def _reference(agent: str, instance: object, rounds: int, seed: int) -> np.ndarray:
    if agent == "eoful":
        return eoful_loop(instance, rounds, seed)  # type: ignore[arg-type]
    return lin_ts_loop(instance, rounds, seed, _torch_normal(seed))  # type: ignore[arg-type]


def measure(agent: str, size: dict[str, int], repeats: int, seconds: float) -> tuple[int, float, float]:
    """``(rounds, package s/round, numpy s/round)`` for one agent and size, best of ``repeats``.

    Raises:
        AssertionError: the two loops' per-round regrets differ by more than 1e-9.
    """
    import gymnasium as gym

    from tokenized_bandit_gym import agents
    from tokenized_bandit_gym.evaluation import run_online

    def fresh() -> tuple[object, object]:
        env = gym.make("TokenizedLinearBandit-v0", **size)
        return env, reference_instance(env)

    _, instance = fresh()
    _reference(agent, instance, 2, 0)  # the optima, computed on first use
    start = time.process_time()
    _reference(agent, instance, 20, 0)
    per_round = (time.process_time() - start) / 20
    rounds = int(min(2000, max(min(100, 3.0 / per_round), seconds / per_round, 20)))  # >= 100 below 30 ms
    best = {"package": math.inf, "numpy": math.inf}
    for repeat in range(repeats):
        env, instance = fresh()  # built untimed; nothing the env memoises carries over between repeats
        regrets = {}
        for side in ("package", "numpy") if repeat % 2 == 0 else ("numpy", "package"):
            start = time.process_time()
            if side == "package":
                regrets[side] = run_online(env, agents.make(agent), rounds, seed=repeat).regret
            else:
                regrets[side] = _reference(agent, instance, rounds, repeat)
            best[side] = min(best[side], (time.process_time() - start) / rounds)
        difference = float(np.max(np.abs(regrets["package"] - regrets["numpy"])))
        assert difference <= 1e-9, f"{agent} at {size}: the loops' regrets differ by {difference:.3g}"
    return rounds, best["package"], best["numpy"]


def main(argv: list[str] | None = None) -> list[tuple[str, str, int, int, float, float]]:
    """Print and return ``(agent, swept size, value, rounds, package s/round, numpy s/round)`` rows."""
    import torch
    from threadpoolctl import threadpool_limits

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="target time of one NumPy run")
    parser.add_argument("--agents", nargs="+", default=["eoful", "tokenized_lin_ts"])
    parser.add_argument("--sizes", nargs="+", default=list(SWEEP), choices=list(SWEEP))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):  # NumPy's BLAS on one thread too
        return _sweep(args)


def _sweep(args: argparse.Namespace) -> list[tuple[str, str, int, int, float, float]]:
    """:func:`main`'s rows for the parsed ``args``."""
    rows = []
    print(f"{'agent':<17} {'size':<14} {'value':>6} {'rounds':>7} {'package ms':>11} {'numpy ms':>9} {'ratio':>6}")
    for agent in args.agents:
        for name in args.sizes:
            for value in SWEEP[name]:
                rounds, package, reference = measure(agent, {**DEFAULT_SIZE, name: value}, args.repeats, args.seconds)
                rows.append((agent, name, value, rounds, package, reference))
                print(
                    f"{agent:<17} {name:<14} {value:>6} {rounds:>7} {package * 1e3:>11.3f} {reference * 1e3:>9.3f} "
                    f"{package / reference:>5.2f}x",
                    flush=True,
                )
    return rows


if __name__ == "__main__":
    main()
