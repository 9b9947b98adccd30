"""The vector envs' own ``step``, ``step_mode="eager"`` against ``"captured"``, side by side in one process.

* The synthetic vector env (``--env-id``, default TLB; the torch backend) at each ``--num-envs`` N, in each
  ``--autoreset-modes``: token-steps per second of ``envs.step`` (the first allowed token each step, so every
  round runs to L; the actions are made before the timed region).
* The LLM vector env (``TokenizedAlignment-v0`` on the shipped stories260K, native forward; ``--llm-rows`` rounds,
  L = ``--max-length``, k = ``--top-k``, fixed length, the top candidate each step): milliseconds per
  ``envs.step``, averaged over whole rounds (the captured mode builds its static step again after each restart,
  which the average includes), every query's oracle-greedy benchmark decoded first (a long run's steady state).

Each repeat times the two modes in ABBA order (eager, captured, captured, eager, ...) so that a change of the
machine's load hits both alike; the ratio is the median of the per-repeat ``captured / eager`` time ratios. Off
CUDA the captured mode runs its static step eagerly (no CUDA graph), so on the CPU this measures what the static
step's fixed shapes cost or save; ``benchmarks/gpu_suite.py`` measures the modes on CUDA.

Run: ``PYTHONPATH=. python benchmarks/captured_step_mode.py`` (about a minute on a 2-core CPU).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the ids)
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments


@dataclasses.dataclass
class Args:
    """Command-line arguments (each field's docstring is its ``--help``)."""

    env_id: str = "TokenizedLinearBandit-v0"
    """the synthetic id (its default kwargs)"""
    num_envs: tuple[int, ...] = (4096, 65536)
    """N of the synthetic vector env"""
    autoreset_modes: tuple[str, ...] = ("SameStep", "NextStep")
    """the synthetic vector env's autoreset modes"""
    steps: int = 16
    """synthetic steps timed per mode per repeat"""
    llm_rows: int = 9
    """N of the LLM vector env (Figure 2's: 9)"""
    max_length: int = 30
    """L of the LLM vector env"""
    top_k: int = 15
    """k of the LLM vector env"""
    llm_rounds: int = 1
    """whole LLM rounds timed per mode per repeat"""
    repeats: int = 4
    """ABBA repeats"""
    device: str = "cpu"
    """torch device"""


def timed(step: Callable[[], Any], calls: int, device: torch.device) -> float:
    """Seconds per call of ``step`` over ``calls`` calls (the device synchronised at both ends)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - start) / calls


def side_by_side(steps: dict[str, Callable[[], Any]], calls: int, repeats: int, device: torch.device) -> dict[str, Any]:
    """Median seconds a call per mode over ABBA repeats, and the median per-repeat captured / eager ratio."""
    for step in steps.values():  # warm-up
        timed(step, 2, device)
    samples: dict[str, list[float]] = {"eager": [], "captured": []}
    for repeat in range(repeats):
        order = ("eager", "captured") if repeat % 2 == 0 else ("captured", "eager")
        for mode in order:
            samples[mode].append(timed(steps[mode], calls, device))
    ratios = np.array(samples["captured"]) / np.array(samples["eager"])
    return {
        "eager_seconds": float(np.median(samples["eager"])),
        "captured_seconds": float(np.median(samples["captured"])),
        "ratio": float(np.median(ratios)),
        "ratio_range": [float(ratios.min()), float(ratios.max())],
    }


def synthetic(args: Args, device: torch.device) -> list[dict[str, Any]]:
    """The synthetic vector env's step per N and autoreset mode, both step modes."""
    rows = []
    for mode in args.autoreset_modes:
        for num_envs in args.num_envs:
            steps, envs = {}, []
            for step_mode in ("eager", "captured"):
                env = gym.make_vec(
                    args.env_id,
                    num_envs=num_envs,
                    vectorization_mode="vector_entry_point",
                    array_backend="torch",
                    autoreset_mode=mode,
                    step_mode=step_mode,
                    device=str(device),
                )
                env.reset(seed=0)
                actions = env.unwrapped.rounds.mask.int().argmax(dim=1)  # (N,) the first allowed token
                steps[step_mode] = lambda env=env, actions=actions: env.step(actions)
                envs.append(env)
            result = side_by_side(steps, args.steps, args.repeats, device)
            result.update(autoreset_mode=mode, num_envs=num_envs)
            result["eager_token_steps_per_second"] = num_envs / result["eager_seconds"]
            result["captured_token_steps_per_second"] = num_envs / result["captured_seconds"]
            rows.append(result)
            for env in envs:
                env.close()
    return rows


def language_model(args: Args, device: torch.device) -> dict[str, Any]:
    """The LLM vector env's step (ms), both step modes, over whole rounds."""
    steps = {}
    for step_mode in ("eager", "captured"):
        env = gym.make_vec(
            "TokenizedAlignment-v0",
            num_envs=args.llm_rows,
            array_backend="torch",
            autoreset_mode="SameStep",
            step_mode=step_mode,
            max_length=args.max_length,
            top_k=args.top_k,
            device=str(device),
        )
        problem = env.unwrapped.problem
        problem.oracle_greedy(torch.arange(problem.num_queries, device=device))  # every benchmark cached: steady state
        env.reset(seed=0)
        actions = torch.zeros(args.llm_rows, dtype=torch.int64, device=device)  # the top candidate
        steps[step_mode] = lambda env=env, actions=actions: env.step(actions)
    result = side_by_side(steps, args.llm_rounds * args.max_length, args.repeats, device)
    result.update(rows=args.llm_rows, max_length=args.max_length, top_k=args.top_k)
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Print (and return) both tables."""
    args = parse_dataclass_arguments(Args, __doc__, argv)
    device = torch.device(args.device)
    results = {"synthetic": synthetic(args, device), "llm": language_model(args, device)}
    lines = [
        f"{args.env_id}, torch backend, {device}, {torch.get_num_threads()} torch thread(s), "
        f"{args.repeats} ABBA repeats; load average {os.getloadavg()}",
        "",
        "| autoreset | N | eager M token-steps/s | captured M token-steps/s | captured / eager time |",
        "|---|---|---|---|---|",
    ]
    for row in results["synthetic"]:
        low, high = row["ratio_range"]
        lines.append(
            f"| {row['autoreset_mode']} | {row['num_envs']:,} | {row['eager_token_steps_per_second'] / 1e6:.2f} | "
            f"{row['captured_token_steps_per_second'] / 1e6:.2f} | {row['ratio']:.2f} ({low:.2f}-{high:.2f}) |"
        )
    llm = results["llm"]
    low, high = llm["ratio_range"]
    lines += [
        "",
        f"TokenizedAlignment-v0 (stories260K), N = {llm['rows']}, L = {llm['max_length']}, k = {llm['top_k']}: "
        f"eager {1e3 * llm['eager_seconds']:.2f} ms a step, captured {1e3 * llm['captured_seconds']:.2f} ms; "
        f"captured / eager {llm['ratio']:.2f} ({low:.2f}-{high:.2f})",
    ]
    print("\n".join(lines))
    return results


if __name__ == "__main__":
    torch.set_num_threads(1)  # two threads on a shared 2-core VM spin against its other jobs
    main()
