"""EOFUL and GreedyETC against baselines on the default TLB and TMAB, with cumulative-regret plots.

Run: ``python examples/eoful_vs_greedy_etc.py`` (about a minute on a CPU with the defaults);
``--rounds 2000`` for longer curves. Every agent sees the same queries and noise (same seed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import tokenized_bandit_gym  # noqa: E402, F401  (registers the env ids)
from tokenized_bandit_gym import agents  # noqa: E402
from tokenized_bandit_gym.evaluation import run_online  # noqa: E402
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments  # noqa: E402
from tokenized_bandit_gym.threads import use_small_work_threads

TASKS = {
    "TokenizedLinearBandit-v0": ["eoful", "tokenized_lin_ts", "greedy_etc", "oracle_greedy", "random"],
    "TokenizedMultiArmedBandit-v0": ["greedy_etc", "greedy_ucb", "uct", "oracle_greedy", "random"],
}


@dataclass
class Args:
    """Command-line arguments."""

    rounds: int = 300
    """rounds (episodes) per agent and task"""
    seeds: int = 2
    """number of seeds (0 .. seeds-1); curves show the mean"""
    out: str = "runs/eoful_vs_greedy_etc.png"
    """where the plot is written"""


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


def main(args: Args) -> dict[str, dict[str, float]]:
    figure, axes = plt.subplots(1, len(TASKS), figsize=(6 * len(TASKS), 4))
    finals: dict[str, dict[str, float]] = {}
    for axis, (env_id, names) in zip(axes, TASKS.items(), strict=True):
        finals[env_id] = {}
        for name in names:
            if name not in agents.list_agents():
                print(f"skipping {name}: not registered")
                continue
            curves = []
            for seed in range(args.seeds):
                result = run_online(gym.make(env_id), agents.make(name), rounds=args.rounds, seed=seed)
                curves.append(result.cumulative_regret)
            mean_curve = sum(curves) / len(curves)
            finals[env_id][name] = float(mean_curve[-1])
            axis.plot(range(1, args.rounds + 1), mean_curve, label=name)
            print(f"{env_id:>32} {name:>18}: cumulative regret {mean_curve[-1]:8.2f}")
        axis.set(title=env_id, xlabel="round t", ylabel="cumulative regret")
        axis.legend()
    figure.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.out, dpi=100)
    print(f"plot written to {args.out}")
    return finals


if __name__ == "__main__":
    use_small_work_threads()  # one torch thread unless OMP_NUM_THREADS says otherwise
    main(parse_args())
