"""GreedyETC against BatchedGreedyETC (B = 64) on the default suite's TMAB, timed side by side in one run.

Both play the shipped default spec's TMAB task (``tbg run leaderboard``: n = 3, L = 3, T = 8,000) through
the leaderboard's own run (:func:`execute_run`, one torch thread): sequential GreedyETC on the single env,
BatchedGreedyETC with 64 sub-envs on the native vector env. The two alternate for ``--repeats`` rounds of
timing, so machine load hits both alike; reported are each one's median wall time, the ratio of the
medians and each one's final regret (the same seed every repeat).

Run: ``PYTHONPATH=. python benchmarks/default_suite_greedy_etc_speed.py`` (about half a minute on a
2-core CPU).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from tokenized_bandit_gym.evaluation.execute_run import execute_run
from tokenized_bandit_gym.evaluation.leaderboard_spec import load_spec
from tokenized_bandit_gym.evaluation.run_spec import RunSpec
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments
from tokenized_bandit_gym.threads import use_small_work_threads


@dataclass
class Args:
    """Command-line arguments."""

    repeats: int = 3
    """timed repeats of each agent, alternating"""
    seed: int = 0
    """the runs' seed"""


def main() -> None:
    use_small_work_threads()
    args = parse_dataclass_arguments(Args, __doc__)
    spec = load_spec("leaderboard", check_registry=False)
    batched = next(agent for agent in spec.agents if agent.name == "batched_greedy_etc")
    task = next(task for task in spec.tasks if batched.tasks is None or task.label in batched.tasks)
    runs = {
        "GreedyETC (single env)": RunSpec(task.id, task.kwargs, "greedy_etc", {}, args.seed, task.rounds),
        f"BatchedGreedyETC {batched.kwargs}": RunSpec(
            task.id, task.kwargs, "batched_greedy_etc", batched.kwargs, args.seed, task.rounds
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    regrets: dict[str, float] = {}
    for _ in range(args.repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            record = execute_run(run)
            times[name].append(time.perf_counter() - start)
            regrets[name] = float(record.arrays["regret"].sum())
    print(f"task {task.label!r} ({task.id}, {task.kwargs}), T = {task.rounds}, seed {args.seed}, x{args.repeats}")
    print("| agent | median wall s | all wall s | final regret |")
    print("|---|---:|---:|---:|")
    for name in runs:
        walls = ", ".join(f"{value:.2f}" for value in times[name])
        print(f"| {name} | {statistics.median(times[name]):.2f} | {walls} | {regrets[name]:.1f} |")
    single, batch = (statistics.median(values) for values in times.values())
    print(f"BatchedGreedyETC is {single / batch:.1f}x faster (ratio of the medians)")


if __name__ == "__main__":
    main()
