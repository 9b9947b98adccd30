"""Token-steps per second of the LLM envs: the native vector env against SyncVectorEnv over single envs.

The shipped ``stories260K`` model at small L and k, for ``TokenizedAlignment-v0`` and
``TokenizedDecoding-v0``; the native vector env (NumPy and torch backends) and Gymnasium's
``SyncVectorEnv`` over N single envs are stepped side by side in one run, in interleaved
chunks, under the same policy (a uniformly random allowed candidate, drawn outside the timed
region). A token-step is one sub-env appending one token (autoreset steps do not count).
Every instance's benchmark (oracle greedy, or beam) is computed for every query before timing,
so the timed steps are the env's own work: one batched forward per step for the native env,
N forwards of one row for SyncVectorEnv, plus the query encodings of the rounds that start.

Run: ``PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/llm_vector_env_throughput.py`` (about
two minutes on a 2-core CPU).
"""

from __future__ import annotations

import dataclasses
import os

import gymnasium as gym
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the ids)
from benchmarks.vector_env_stepper import VectorEnvStepper
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments


@dataclasses.dataclass
class Args:
    """Command-line arguments (each field's docstring is its ``--help``)."""

    env_ids: tuple[str, ...] = ("TokenizedAlignment-v0", "TokenizedDecoding-v0")
    """LLM ids to measure (shipped stories260K)"""
    num_envs: tuple[int, ...] = (1, 8, 32)
    """N, the number of sub-envs"""
    max_length: int = 8
    """L"""
    top_k: int = 4
    """k"""
    seconds: float = 1.5
    """time to spend stepping each configuration (after warm-up), over all chunks"""
    min_steps: int = 2
    """steps per chunk at least, however long they take"""
    repeats: int = 3
    """interleaved chunks per configuration; the best rate of each env is kept"""
    device: str = "cpu"
    """torch device of the model"""
    seed: int = 0
    """seeds the envs and the random policy"""
    threads: int = 1
    """torch intra-op threads (1: a shared 2-core machine thrashes with more)"""


def warm_benchmarks(envs: gym.vector.VectorEnv) -> None:
    """Compute every instance's benchmark for every query before timing (they are cached per query)."""
    base = envs.unwrapped
    singles = [env.unwrapped for env in base.envs] if hasattr(base, "envs") else [base]
    for single in singles:
        problem = single.problem
        queries = torch.arange(problem.num_queries, device=problem.device)
        problem.oracle_greedy(queries)
        if single.optimal_kind == "oracle_beam":
            problem.oracle_beam(queries, single.beam_width)


def make_stepper(envs: gym.vector.VectorEnv, seed: int) -> VectorEnvStepper:
    """A stepper over ``envs`` with every benchmark computed and three untimed steps."""
    return VectorEnvStepper(envs, seed, warm_benchmarks, warm_up_steps=3)


def main(args: Args) -> list[tuple[str, int, dict[str, float]]]:
    """Print one table row per (id, N) and return ``(id, N, best rates)``."""
    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    print(
        f"stories260K, L = {args.max_length}, k = {args.top_k}, torch threads {torch.get_num_threads()}, "
        f"device {args.device}, best of {args.repeats} interleaved chunks, load average {load[0]:.2f} {load[1]:.2f}"
    )
    print("| env | N | native numpy (tok/s) | native torch (tok/s) | SyncVectorEnv (tok/s) | native numpy / sync |")
    print("|---|---|---|---|---|---|")
    kwargs = {"max_length": args.max_length, "top_k": args.top_k, "device": args.device}
    rows = []
    for env_id in args.env_ids:
        for num_envs in args.num_envs:
            native = "vector_entry_point"
            steppers = {
                "numpy": make_stepper(gym.make_vec(env_id, num_envs, native, **kwargs), args.seed),
                "torch": make_stepper(
                    gym.make_vec(env_id, num_envs, native, array_backend="torch", **kwargs), args.seed
                ),
                "sync": make_stepper(gym.make_vec(env_id, num_envs, "sync", **kwargs), args.seed),
            }
            best = dict.fromkeys(steppers, 0.0)
            for _ in range(args.repeats):  # interleaved, so load changes hit all three alike
                for name, stepper in steppers.items():
                    best[name] = max(best[name], stepper.run(args.seconds / args.repeats, args.min_steps))
            print(
                f"| {env_id} | {num_envs} | {best['numpy']:,.0f} | {best['torch']:,.0f} | {best['sync']:,.0f} | "
                f"{best['numpy'] / best['sync']:,.1f}x |",
                flush=True,
            )
            rows.append((env_id, num_envs, best))
            for stepper in steppers.values():
                stepper.envs.close()
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return rows


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


if __name__ == "__main__":
    with torch.no_grad():
        main(parse_args())
