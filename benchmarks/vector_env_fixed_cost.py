"""The native vector env's step against a minimal NumPy step of the same shapes, and the roofline.

The minimal step (:class:`MinimalTlbStep`) is what a TLB step cannot avoid, written as plain
NumPy (fancy indexing, arithmetic, ``astype``; no ``out=`` buffers) with no checks, no info and
no copies beyond the observation: the chosen token's carry (a gather of ``c * phi`` and
``alpha * e + c * phi``, float64), the utilities of the rows whose round ended (``<theta, e>``),
a restart of those rows on a pre-drawn query, the mask (a row of the mask table) and the
float32 candidate embeddings of every row (a gather of the feature rows, the add, the cast).
Its rows end rounds as the env's do, under the same random allowed policy. The native env
(NumPy backend, ``NEXT_STEP`` autoreset, every info entry) is stepped by the throughput
benchmark's :class:`~benchmarks.vector_env_stepper.VectorEnvStepper`.

A second minimal step writes into reused buffers (``out=``): plain NumPy's fresh temporaries
cost, from N = 1,024 on, the page faults of megabytes a step. A third ("chunked") computes the
observation by chunks of rows whose gathered rows stay in the cache, added to in the table's
dtype and rounded once by a copy, into a reused float32 buffer: the fastest NumPy way (the env's
own until its carry-table step was compiled, :mod:`tokenized_bandit_gym.envs.carry_table_kernels`).
A fourth ("compiled") is the same work as one Numba loop over the rows writing into reused
buffers: the cost of the work itself, so native / compiled is what the env's contract (checks,
infos, fresh outputs) costs beyond it.
The five are timed side by side in one process, interleaved, best chunk kept. The roofline is one
core's copy bandwidth (``np.copyto`` of a 64 MiB float32 array, bytes read plus bytes written)
over the bytes a TLB token-step must move: the observation's row written (``(n, d)`` float32
embeddings, the mask and the token ids), and the ``(n, d)`` float64 feature rows it reads.

Run: ``PYTHONPATH=. python benchmarks/vector_env_fixed_cost.py`` (about two minutes on a loaded
2-core CPU); ``--num-envs 64 1024 --seconds 0.3`` is quicker; ``--dtype float32`` times a float32
instance (its table, carries and sums in the observation's dtype); ``--clock cpu`` times each step
in this thread's CPU time (``time.thread_time``) instead of wall time, so the other processes of a
loaded machine do not inflate it (the rates are then token-steps per CPU second).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import gymnasium as gym
import numba
import numpy as np
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the ids)
from benchmarks.vector_env_stepper import VectorEnvStepper, random_allowed
from benchmarks.vector_env_throughput import warm_caches
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments

OBSERVE_CHUNK_BYTES = 1 << 18
"""The chunked minimal step gathers the table rows by chunks of this many bytes, then adds (from the cache)."""


@dataclasses.dataclass
class Args:
    """Command-line arguments (each field's docstring is its ``--help``)."""

    num_envs: tuple[int, ...] = (64, 256, 1024, 4096, 16384)
    """N, the number of sub-envs"""
    seconds: float = 1.0
    """time to step each of the three per N, over all chunks"""
    repeats: int = 3
    """interleaved chunks; the best rate of each is kept"""
    seed: int = 0
    """seeds the envs and the random policies"""
    dtype: str = "float64"
    """the instance's floating dtype (``float32``: the observation's, so the env adds in it)"""
    clock: str = "wall"
    """``wall`` (``time.perf_counter``) or ``cpu`` (``time.thread_time``: this thread's CPU time)"""


class MinimalTlbStep:
    """The work of a TLB vector step and nothing else (see the module docstring), on the env's instance.

    Args:
        problem: the env's :class:`~tokenized_bandit_gym.core.discounted_problem.DiscountedProblem`.
        num_envs: N.
        seed: seeds the pre-drawn queries and the policy.
        buffered: write the observation into reused buffers (``out=``) instead of plain NumPy's
            fresh temporaries (which, from N = 1,024 on, cost the page faults of megabytes a step).
        chunked: with ``buffered``, compute the observation the env's way: by chunks of
            :data:`OBSERVE_CHUNK_BYTES` of gathered rows,
            added to in place in the table's dtype and rounded to float32 by a copy.
        compiled: the whole step as one compiled loop over the rows (:func:`compiled_minimal_step`).
        clock: what a step is timed with (wall time, or ``time.thread_time``: this thread's CPU time).
    """

    def __init__(
        self,
        problem: object,
        num_envs: int,
        seed: int,
        buffered: bool = False,
        chunked: bool = False,
        compiled: bool = False,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.clock = clock
        self.compiled = compiled
        n, length, d = problem.vocab_size, problem.max_length, problem.embedding_dim
        self.n, self.length, self.eos = n, length, problem.eos_token_id
        self.alpha = problem.alpha
        table = (problem.scale * problem._feature_table).numpy()  # (Q, L + 1, n, d) c * phi
        self.feature_rows = np.ascontiguousarray(table.reshape(-1, n, d))  # (Q * (L + 1), n, d)
        self.theta = problem.theta.numpy()  # (d,)
        self.mask_table = np.zeros((length + 1, n), dtype=np.int8)  # (L + 1, n) by length
        self.mask_table[:length] = 1
        self.mask_table[length - 1] = 0
        self.mask_table[length - 1, self.eos] = 1
        self.rng = np.random.default_rng(seed)
        self.pool = self.rng.integers(problem.num_queries, size=1 << 16)  # pre-drawn queries
        self.drawn = 0
        self.rows = np.arange(num_envs)
        self.queries = self.pool[:num_envs].copy()
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        self.carry = np.zeros((num_envs, d), dtype=table.dtype)
        self.embeddings = np.zeros((num_envs, n, d), dtype=np.float32)
        self.chunked = chunked
        self.chunk = max(1, OBSERVE_CHUNK_BYTES // self.feature_rows[0].nbytes) if chunked else num_envs
        self.gathered = np.empty((min(self.chunk, num_envs), n, d), dtype=table.dtype) if buffered else None
        self.masks = self.mask_table[self.lengths]

    def step(self, tokens: np.ndarray) -> np.ndarray:
        """One step of every row (``tokens`` ``(N,)``); returns the utilities of the ended rows."""
        if self.compiled:
            utilities, self.drawn = compiled_minimal_step(
                tokens,
                self.queries,
                self.lengths,
                self.carry,
                self.feature_rows,
                self.theta,
                self.alpha,
                self.eos,
                self.pool,
                self.drawn,
                self.mask_table,
                self.masks,
                self.embeddings,
            )
            return utilities
        table_rows = self.queries * (self.length + 1) + self.lengths  # (N,)
        chosen = self.feature_rows[table_rows, tokens]  # (N, d)
        self.carry = self.alpha * self.carry + chosen  # (N, d)
        self.lengths += 1
        ended = np.flatnonzero((tokens == self.eos) | (self.lengths == self.length))  # (E,)
        utilities = self.carry[ended] @ self.theta  # (E,)
        start = self.drawn % (len(self.pool) - len(ended))
        self.queries[ended] = self.pool[start : start + len(ended)]
        self.drawn += len(ended)
        self.lengths[ended] = 0
        self.carry[ended] = 0.0
        self.masks = np.take(self.mask_table, self.lengths, axis=0)  # (N, n)
        table_rows = self.queries * (self.length + 1) + self.lengths  # (N,)
        if self.gathered is None:
            candidates = self.feature_rows[table_rows] + (self.alpha * self.carry)[:, None, :]  # (N, n, d) float64
            self.embeddings = candidates.astype(np.float32)  # the observation
        elif not self.chunked:  # into reused buffers: a gather, then one add that writes float32
            gathered = np.take(self.feature_rows, table_rows, axis=0, out=self.gathered, mode="clip")
            np.add(gathered, (self.alpha * self.carry)[:, None, :], out=self.embeddings)
        else:  # the env's way: by chunks that stay in the cache, added to in place, rounded by a copy
            discounted = (self.alpha * self.carry)[:, None, :]  # (N, 1, d)
            in_place = self.feature_rows.dtype == np.float32  # the observation's dtype: no rounding copy
            for start in range(0, len(self.rows), self.chunk):
                stop = min(start + self.chunk, len(self.rows))
                observed = self.embeddings[start:stop]
                gathered = observed if in_place else self.gathered[: stop - start]
                self.feature_rows.take(table_rows[start:stop], axis=0, out=gathered, mode="clip")
                gathered += discounted[start:stop]
                if not in_place:
                    observed[...] = gathered
        return utilities

    def run(self, seconds: float, min_steps: int = 2) -> float:
        """Step for at least ``seconds`` of :attr:`clock`; return token-steps per second (policy draws untimed)."""
        elapsed, steps = 0.0, 0
        while steps < min_steps or elapsed < seconds:
            actions = random_allowed(self.rng, self.masks)
            start = self.clock()
            self.step(actions)
            elapsed += self.clock() - start
            steps += 1
        return steps * len(self.rows) / elapsed


@numba.njit(cache=True)
def compiled_minimal_step(
    tokens: np.ndarray,
    queries: np.ndarray,
    lengths: np.ndarray,
    carry: np.ndarray,
    feature_rows: np.ndarray,
    theta: np.ndarray,
    alpha: float,
    eos: int,
    pool: np.ndarray,
    drawn: int,
    mask_table: np.ndarray,
    masks: np.ndarray,
    embeddings: np.ndarray,
) -> tuple[np.ndarray, int]:
    """:meth:`MinimalTlbStep.step`'s work as one loop over the rows, into the reused ``masks`` and ``embeddings``.

    Returns:
        The utilities of the ended rows ``(E,)`` and the count of pre-drawn queries used.
    """
    num_rows, num_actions, width = embeddings.shape
    length = mask_table.shape[0] - 1
    utilities = np.empty(num_rows)
    ended = 0
    for row in range(num_rows):
        token = tokens[row]
        table_row = queries[row] * (length + 1) + lengths[row]
        for index in range(width):
            carry[row, index] = alpha * carry[row, index] + feature_rows[table_row, token, index]
        lengths[row] += 1
        if token == eos or lengths[row] == length:
            value = 0.0
            for index in range(width):
                value += carry[row, index] * theta[index]
            utilities[ended] = value
            ended += 1
            queries[row] = pool[drawn % pool.shape[0]]
            drawn += 1
            lengths[row] = 0
            carry[row, :] = 0.0
        masks[row, :] = mask_table[lengths[row], :]
        table_row = queries[row] * (length + 1) + lengths[row]
        for action in range(num_actions):
            for index in range(width):
                embeddings[row, action, index] = feature_rows[table_row, action, index] + alpha * carry[row, index]
    return utilities[:ended], drawn


def copy_bandwidth(clock: Callable[[], float] = time.perf_counter, repeats: int = 5) -> float:
    """One core's copy bandwidth, bytes read plus written per second of ``clock`` (best of ``repeats``)."""
    source = np.ones(1 << 24, dtype=np.float32)  # 64 MiB
    target = np.empty_like(source)
    best = np.inf
    for _ in range(repeats):
        start = clock()
        np.copyto(target, source)
        best = min(best, clock() - start)
    return 2 * source.nbytes / best


def main(args: Args) -> None:
    env_id = "TokenizedLinearBandit-v0"
    clocks = {"wall": time.perf_counter, "cpu": time.thread_time}
    if args.clock not in clocks:
        raise ValueError(f"--clock must be one of {sorted(clocks)}, got {args.clock!r}")
    clock = clocks[args.clock]
    bandwidth = copy_bandwidth(clock)  # in the steps' clock, so the roofline fraction compares like with like
    print(
        f"copy bandwidth: {bandwidth / 1e9:.1f} GB/s (read + write), best of {args.repeats} interleaved chunks, "
        f"{args.clock} clock"
    )
    print(
        "| N | native (tok/s) | minimal, plain (tok/s) | minimal, buffered (tok/s) | minimal, chunked (tok/s) "
        "| minimal, compiled (tok/s) | native / plain | native / buffered | native / chunked | native / compiled "
        "| roofline (tok/s) | native / roofline |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for num_envs in args.num_envs:
        envs = gym.make_vec(env_id, num_envs, "vector_entry_point", dtype=args.dtype)
        problem = envs.unwrapped.problem
        n, d, length = problem.vocab_size, problem.embedding_dim, problem.max_length
        feature_bytes = n * d * np.dtype(args.dtype).itemsize
        step_bytes = n * d * 4 + n + n * 8 + length * 8 + feature_bytes  # observation written + feature rows read
        steppers = {
            "native": VectorEnvStepper(envs, args.seed, warm_caches, warm_up_steps=2, clock=clock),
            "plain": MinimalTlbStep(problem, num_envs, args.seed, clock=clock),
            "buffered": MinimalTlbStep(problem, num_envs, args.seed, buffered=True, clock=clock),
            "chunked": MinimalTlbStep(problem, num_envs, args.seed, buffered=True, chunked=True, clock=clock),
            "compiled": MinimalTlbStep(problem, num_envs, args.seed, compiled=True, clock=clock),
        }
        best = dict.fromkeys(steppers, 0.0)
        for name, stepper in steppers.items():
            if name != "native":
                stepper.run(0.0)
        for _ in range(args.repeats):  # interleaved, so load changes hit the four alike
            chunk = args.seconds / args.repeats
            for name, stepper in steppers.items():
                best[name] = max(best[name], stepper.run(chunk, 2))
        roofline = bandwidth / step_bytes
        native = best["native"]
        print(
            f"| {num_envs:,} | {native:,.0f} | {best['plain']:,.0f} | {best['buffered']:,.0f} | {best['chunked']:,.0f} "
            f"| {best['compiled']:,.0f} | {native / best['plain']:.2f}x | {native / best['buffered']:.2f}x "
            f"| {native / best['chunked']:.2f}x | {native / best['compiled']:.2f}x "
            f"| {roofline:,.0f} | {native / roofline:.1%} |",
            flush=True,
        )
        envs.close()


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


if __name__ == "__main__":
    torch.set_num_threads(1)  # one core, as the minimal step runs
    with torch.no_grad():
        main(parse_args())
