"""EOFUL, TokenizedLinTS, GreedyUCB and 2-Lookahead-EOFUL against plain NumPy loops across d, n and L, side by side.

The NumPy loops are the independent references of ``benchmarks/sequential_vs_numpy.py`` (same
instance, same query and noise streams; TokenizedLinTS is handed torch's normal stream, as in
``tests/benchmarks/test_sequential_reference.py``) and, for GreedyUCB, :func:`greedy_ucb_loop`
below (played on the same TLB instances: GreedyUCB reads token ids and rewards only), and for
k-Lookahead-EOFUL (k = 2, the agent's default) :func:`lookahead_eoful_loop` (n = 512 is left out:
the agent refuses its 262,144 blocks per decision, more than its ``max_blocks``). For every
size the package and the reference play the same rounds, interleaved (ABAB), best of the
repeats, on one thread, timed in CPU time (``time.process_time``: on a shared, loaded machine
wall time mostly measures the waits for a core, which neither loop controls); the script checks
that both loops make the same decisions (per-round regrets equal to 1e-9) and prints the cost per
round of each and their ratio. One size varies at a time around the defaults n = 16, d = 16, L = 8.

Run: ``python benchmarks/linear_agents_size_sweep.py [--repeats 3] [--seconds 1.0] [--agents eoful]
[--max-rounds 600] [--warm-benchmarks]``. By default each run pays its one-time work (the env's pool
benchmarks: exact optimum and oracle greedy utility of every query, in torch; the loop's optima, in
NumPy); ``--warm-benchmarks`` computes both before the timing, leaving the steady per-round cost.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Callable

import numpy as np
from sequential_vs_numpy import ReferenceInstance, RidgeState, eoful_loop, lin_ts_loop, play, reference_instance

DEFAULT_SIZE = {"vocab_size": 16, "embedding_dim": 16, "max_length": 8}
AGENTS = ("eoful", "tokenized_lin_ts", "greedy_ucb", "lookahead_eoful")
LOOKAHEAD_K, LOOKAHEAD_MAX_BLOCKS = 2, 100_000  # LookaheadEOFUL's defaults: it refuses n^k > max_blocks
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


def greedy_ucb_loop(instance: ReferenceInstance, rounds: int, seed: int, exploration: float = 1.0) -> np.ndarray:
    """GreedyUCB: per level, UCB1 over the stopped responses ``y:t:EOS``; commit when confident or at ``n N`` rounds."""
    explore = max(1, math.ceil(rounds ** (2 / 3) * math.log(rounds) ** (1 / 3)))  # GreedyETC's N for T = rounds
    log_horizon = math.log(max(rounds, 2))
    prefix: list[int] = [] if instance.length > 1 else [instance.eos]
    level: dict[str, object] = {"tokens": None, "arm": 0, "committed": instance.length == 1}

    def choose(e: np.ndarray, mask: np.ndarray, j: int) -> int:
        if j < len(prefix):
            return prefix[j]
        if j > len(prefix) or level["committed"]:
            return instance.eos
        if level["tokens"] is None:
            level["tokens"] = np.flatnonzero(mask).tolist()
            level["sums"], level["counts"] = np.zeros(int(mask.sum())), np.zeros(int(mask.sum()))
        counts, sums = level["counts"], level["sums"]
        unplayed = np.flatnonzero(counts == 0)
        bonus = exploration * np.sqrt(2.0 * log_horizon / np.maximum(counts, 1))
        level["arm"] = int(unplayed[0]) if unplayed.size else int(np.argmax(sums / counts + bonus))
        return level["tokens"][level["arm"]]

    def learn(y: np.ndarray, reward: float) -> None:
        if level["committed"] or level["tokens"] is None:
            return
        sums, counts, tokens = level["sums"], level["counts"], level["tokens"]
        sums[level["arm"]] += reward
        counts[level["arm"]] += 1
        if np.any(counts == 0):
            return
        means, radius = sums / counts, exploration * np.sqrt(2.0 * log_horizon / counts)
        leader = int(np.argmax(means))
        others = np.delete(means + radius, leader)
        confident = others.size == 0 or means[leader] - radius[leader] >= others.max()
        if not confident and counts.sum() < len(tokens) * explore:
            return
        prefix.append(tokens[leader if confident else int(np.argmax(counts))])
        if prefix[-1] == instance.eos:
            level["committed"] = True
        elif len(prefix) == instance.length - 1:
            prefix.append(instance.eos)
            level["committed"] = True
        level["tokens"] = None

    return play(instance, rounds, seed, choose, learn)


def lookahead_eoful_loop(instance: ReferenceInstance, rounds: int, seed: int, k: int = 2) -> np.ndarray:
    """k-Lookahead-EOFUL: at each decision, the allowed k-token block maximising EOFUL's UCB of ``e(x, y:z)``.

    Blocks are the continuations of ``min(k, L - |y|)`` tokens, cut after their first EOS and
    deduplicated, in lexicographic order of token ids (ties go to the first); a non-EOS token is
    allowed before position L, EOS anywhere. ``e(x, y:z)`` follows the family's recursion from
    ``e(x, y)``; the block's tokens are then emitted one a step.
    """
    ridge = RidgeState(instance.theta.shape[0], instance.length)
    n, length, eos = instance.n, instance.length, instance.eos
    blocks: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # |y| -> ((N, w) padded with EOS, (N,) lengths)
    round_state: dict[str, object] = {}

    def blocks_at(m: int) -> tuple[np.ndarray, np.ndarray]:
        if m not in blocks:
            distinct: dict[tuple[int, ...], None] = {}
            for sequence in itertools.product(range(n), repeat=min(k, length - m)):
                block = sequence[: sequence.index(eos) + 1] if eos in sequence else sequence
                if all(token == eos or m + offset + 1 < length for offset, token in enumerate(block)):
                    distinct.setdefault(block)
            width = max(len(block) for block in distinct)
            padded = np.array([list(block) + [eos] * (width - len(block)) for block in distinct])  # (N, w)
            blocks[m] = padded, np.array([len(block) for block in distinct])
        return blocks[m]

    def start(x: int) -> None:
        round_state.update(x=x, e=np.zeros(ridge.d), pending=[])

    def choose(e: np.ndarray, mask: np.ndarray, j: int) -> int:
        x, pending = round_state["x"], round_state["pending"]
        if not pending:
            block, block_lengths = blocks_at(j)
            embedding = np.broadcast_to(round_state["e"], (block.shape[0], ridge.d))  # (N, d) e(x, y)
            for offset in range(block.shape[1]):
                extended = instance.alpha * embedding + instance.phi[x, j + offset, block[:, offset]]  # (N, d)
                embedding = np.where((offset < block_lengths)[:, None], extended, embedding)
            scores = embedding @ ridge.theta_hat
            if ridge.t > 0:
                widths = np.sqrt(np.maximum(((embedding @ ridge.inverse) * embedding).sum(1), 0.0))
                scores = scores + math.sqrt(ridge.beta()) * widths
            best = int(np.argmax(scores))
            pending.extend(block[best, : block_lengths[best]].tolist())
        token = pending.pop(0)
        round_state["e"] = instance.alpha * round_state["e"] + instance.phi[x, j, token]
        return token

    return play(instance, rounds, seed, choose, ridge.learn, start=start)


def _reference(agent: str, instance: object, rounds: int, seed: int) -> np.ndarray:
    if agent == "eoful":
        return eoful_loop(instance, rounds, seed)  # type: ignore[arg-type]
    if agent == "greedy_ucb":
        return greedy_ucb_loop(instance, rounds, seed)  # type: ignore[arg-type]
    if agent == "lookahead_eoful":
        return lookahead_eoful_loop(instance, rounds, seed)  # type: ignore[arg-type]
    return lin_ts_loop(instance, rounds, seed, _torch_normal(seed))  # type: ignore[arg-type]


def measure(
    agent: str,
    size: dict[str, int],
    repeats: int,
    seconds: float,
    max_rounds: int = 2000,
    warm_benchmarks: bool = False,
) -> tuple[int, float, float]:
    """``(rounds, package s/round, numpy s/round)`` for one agent and size, best of ``repeats``.

    With ``warm_benchmarks`` each side's per-query benchmarks are computed before the timing (the
    env's pool benchmarks: exact optimum and oracle greedy utility of every query; the loop's
    optima): the steady per-round cost. Without (the default), each run pays its own once.

    Raises:
        AssertionError: the two loops' per-round regrets differ by more than 1e-9.
    """
    import gymnasium as gym

    from tokenized_bandit_gym import agents
    from tokenized_bandit_gym.evaluation import run_online

    def fresh() -> tuple[object, object]:
        env = gym.make("TokenizedLinearBandit-v0", **size)
        instance = reference_instance(env)
        if warm_benchmarks:
            env.unwrapped.rounds.tables.benchmarks()  # type: ignore[attr-defined]
            instance.optimum  # noqa: B018  (computed on first use)
        return env, instance

    _, instance = fresh()
    _reference(agent, instance, 2, 0)  # the optima, computed on first use
    start = time.process_time()
    _reference(agent, instance, 20, 0)
    per_round = (time.process_time() - start) / 20
    rounds = int(min(max_rounds, max(min(100, 3.0 / per_round), seconds / per_round, 20)))  # >= 100 below 30 ms
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
    parser.add_argument(
        "--agents", nargs="+", default=["eoful", "tokenized_lin_ts", "greedy_ucb", "lookahead_eoful"], choices=AGENTS
    )
    parser.add_argument("--max-rounds", type=int, default=2000, help="rounds per run at most")
    parser.add_argument("--sizes", nargs="+", default=list(SWEEP), choices=list(SWEEP))
    parser.add_argument(
        "--warm-benchmarks", action="store_true", help="compute each side's per-query benchmarks before timing"
    )
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
                size = {**DEFAULT_SIZE, name: value}
                if agent == "lookahead_eoful" and size["vocab_size"] ** LOOKAHEAD_K > LOOKAHEAD_MAX_BLOCKS:
                    print(f"{agent:<17} {name:<14} {value:>6}  refused: n^k blocks > max_blocks", flush=True)
                    continue
                rounds, package, reference = measure(
                    agent, size, args.repeats, args.seconds, args.max_rounds, args.warm_benchmarks
                )
                rows.append((agent, name, value, rounds, package, reference))
                print(
                    f"{agent:<17} {name:<14} {value:>6} {rounds:>7} {package * 1e3:>11.3f} {reference * 1e3:>9.3f} "
                    f"{package / reference:>5.2f}x",
                    flush=True,
                )
    return rows


if __name__ == "__main__":
    main()
