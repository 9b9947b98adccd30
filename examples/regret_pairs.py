"""Paired comparison of the agents of a reproduce_regret.py run: per seed, mean, paired 95% intervals, per quarter.

The agents of one seed share its queries and noise (common random numbers), so the difference of two agents'
regret on one seed is the unit of comparison: the interval is Student's t over the per-seed differences
(:func:`~tokenized_bandit_gym.evaluation.robust_statistics.paired_interval`). Each agent's regret per round in
each quarter of the horizon says whether its regret is still linear (a flat rate) or sublinear (a falling one).

    PYTHONPATH=. python examples/regret_pairs.py --regret-json runs/regret_smollm2/regret.json
"""

from __future__ import annotations

import itertools
import json
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenized_bandit_gym.evaluation.robust_statistics import paired_interval, quarter_rates
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments

AGENT_LABELS = {"eoful": "EOFUL", "fixed_theta_greedy": "WrongTheta", "misaligned_greedy": "Misaligned greedy"}


@dataclass
class Args:
    """Command-line options (each field's docstring is its --help)."""

    regret_json: str = "runs/regret/regret.json"
    """the regret.json a reproduce_regret.py run wrote"""


def per_seed_curves(data: dict[str, Any]) -> tuple[list[str], list[int], dict[str, np.ndarray]]:
    """The agents, the seeds and, per agent, the cumulative regret ``(S, T)`` of every seed that all agents ran."""
    names = [name.strip() for name in str(data["settings"]["agents"]).split(",") if name.strip()]
    seeds = [int(seed) for seed in data["settings"]["seeds"]]
    runs = data["runs"]
    complete = [seed for seed in seeds if all(f"{name}/{seed}" in runs for name in names)]
    if not complete:
        raise SystemExit("no seed has a finished run of every agent")
    curves = {name: np.array([runs[f"{name}/{seed}"]["cumulative_regret"] for seed in complete]) for name in names}
    return names, complete, curves


def summary_lines(data: dict[str, Any]) -> list[str]:
    """The comparison as text: per agent, per seed and mean final regret and per-quarter rates; then every pair."""
    names, seeds, curves = per_seed_curves(data)
    rounds = curves[names[0]].shape[1]
    lines = [
        f"horizon T = {rounds} rounds, seeds {seeds}, env {data['settings'].get('env_id', 'TokenizedAlignment-v0')}"
    ]
    for name in names:
        finals = curves[name][:, -1]
        rates = quarter_rates(curves[name]).mean(axis=0)  # (4,) mean over seeds
        lines.append(
            f"{AGENT_LABELS.get(name, name):<18} final {finals.mean():+9.2f} (per seed "
            f"{', '.join(f'{value:+.2f}' for value in finals)}); regret per round by quarter "
            f"{' '.join(f'{rate:+.3f}' for rate in rates)}"
        )
    for first, second in itertools.combinations(names, 2):
        mean, low, high = paired_interval(curves[first][:, -1], curves[second][:, -1])
        last = paired_interval(quarter_rates(curves[first])[:, -1], quarter_rates(curves[second])[:, -1])
        lines.append(
            f"{AGENT_LABELS.get(first, first)} - {AGENT_LABELS.get(second, second)}: final {mean:+.2f} "
            f"[{low:+.2f}, {high:+.2f}] (paired 95%); last-quarter rate {last[0]:+.3f} [{last[1]:+.3f}, {last[2]:+.3f}]"
        )
    return lines


def main(args: Args) -> list[str]:
    with open(args.regret_json, encoding="utf-8") as handle:
        lines = summary_lines(json.load(handle))
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main(parse_dataclass_arguments(Args, __doc__, sys.argv[1:]))
