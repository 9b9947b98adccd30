"""Where does EOFUL beat the LM's own decode? A phase diagram over the theta-term / v-term spread ratio (issue 48).

The alignment utility is ``u = gamma * v(p) + (1 - gamma) * <theta, e>``. How much the theta-term moves the choice
between candidates, against the v-term, decides whether a learner has anything to learn: the ratio of their
per-step spreads over the candidates (``tbg regime``). This script scales theta by a factor c (theta = c times
the env id's default, which keeps its direction), measures the ratio reached at each c with the regime
diagnostic, and plays EOFUL and Misaligned greedy (greedy on the LM alone) there, every (agent, seed) a row of
one forward (examples/reproduce_regret.py, which this calls once per point, each into its own folder, so an
interrupted sweep resumes). It plots each agent's regret per round over the last quarter of the horizon against
the ratio, with 95% intervals over the seeds, and the paired 95% interval of EOFUL minus Misaligned greedy (the
agents of one seed share its queries and noise). Below zero there, EOFUL beats the model's own decode.

    PYTHONPATH=. python examples/alignment_phase_diagram.py                                    # stories260K
    PYTHONPATH=. python examples/alignment_phase_diagram.py --model smollm2-135m-instruct --rounds 200 --threads 2

The target ratios are reached approximately: c = target / ratio(c = 1), and the ratio measured at that c is the
one plotted. Options of reproduce_regret.py (the reading flags, --env-id, --rounds, --seeds, ...) apply.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from examples import reproduce_regret
from tokenized_bandit_gym.evaluation.atomic_files import write_json_atomically
from tokenized_bandit_gym.evaluation.robust_statistics import paired_interval, quarter_rates
from tokenized_bandit_gym.llm.language_model_config import Candidates, LengthRule
from tokenized_bandit_gym.script_arguments import config_option, run_script

AGENTS = "eoful,misaligned_greedy"


@dataclass
class Args(reproduce_regret.Args):
    """reproduce_regret.py's options, plus the sweep's (each field's docstring is its --help)."""

    ratios: tuple[float, ...] = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
    """target ratios of the theta-term's per-step spread to the v-term's"""
    regime_rounds: int = 4
    """queries the regime diagnostic decodes at each point"""
    agents: str = AGENTS
    """the two agents compared: EOFUL and the LM's own greedy decode"""
    seeds: str = "0,1,2"
    """seeds (paired across the agents)"""
    max_length: int = config_option(LengthRule, "max_length", note="the paper's")
    top_k: int = config_option(Candidates, "top_k", note="the paper's")
    rounds: int = 150
    """rounds T at every point"""
    out_dir: str = "runs/phase_diagram"
    """the sweep's folder: one reproduce_regret.py folder per point, phase_diagram.json and phase_diagram.png"""


def point_args(args: Args, scale: float, coordinate: float) -> reproduce_regret.Args:
    """reproduce_regret.py's options at the point where theta is ``scale`` times its default.

    ``coordinate`` is every coordinate of the default theta; the point has its own folder under ``--out-dir``.
    """
    rows = args.runs_per_forward or len(reproduce_regret.agent_names(args)) * len(reproduce_regret.seed_list(args))
    folder = os.path.join(args.out_dir, f"scale_{scale:.6g}")
    return reproduce_regret.script_args(args, theta=scale * coordinate, out_dir=folder, runs_per_forward=rows)


def measured_ratio(args: reproduce_regret.Args, rounds: int) -> dict[str, float]:
    """The regime diagnostic at these options: the spreads, their ratio, the mean gap (one env of one row)."""
    from tokenized_bandit_gym.evaluation.alignment_regime import environment_regime

    env = reproduce_regret.make_env(args, 1)
    diagnostic = environment_regime(env, rounds)
    return {
        "ratio": diagnostic.spread_ratio,
        "value_spread": diagnostic.value_spread,
        "theta_spread": diagnostic.theta_spread,
        "mean_gap": diagnostic.mean_gap,
        "differing_share": diagnostic.differing_share,
    }


def default_coordinate(args: Args) -> float:
    """Every coordinate of the env id's default theta (``0.5`` literal, ``1 / sqrt(d)`` unit-normed), or --theta."""
    if args.theta:
        return args.theta
    env = reproduce_regret.make_env(args, 1)
    return float(env.unwrapped.problem.latent_theta[0])


def point_summary(results: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """Per agent, last-quarter regret per round per seed, and the paired interval of the first minus the second."""
    seeds = results["settings"]["seeds"]
    rates = {
        name: quarter_rates(np.array([results["runs"][f"{name}/{seed}"]["cumulative_regret"] for seed in seeds]))[:, -1]
        for name in names
    }
    mean, low, high = paired_interval(rates[names[0]], rates[names[1]])
    return {
        "last_quarter_rate": {name: values.tolist() for name, values in rates.items()},
        "paired_difference": {"mean": mean, "low": low, "high": high},
    }


def parse_args(argv: list[str] | None = None) -> Args:
    """The command line's options (``argv``; None reads ``sys.argv``).

    reproduce_regret.py's presets (``--real-llm``, ``--paper``) fill what is unset; this script's defaults hold.
    """
    return reproduce_regret.parse_options(argv, __doc__, Args)


def main(args: Args) -> dict[str, Any]:
    names = reproduce_regret.agent_names(args)
    if len(names) != 2:
        raise SystemExit(f"--agents must name two agents (EOFUL and the one it is paired with), got {args.agents!r}")
    coordinate = default_coordinate(args)
    base = measured_ratio(point_args(args, 1.0, coordinate), args.regime_rounds)
    print(f"at theta's default scale: ratio {base['ratio']:.3g} (theta-term / v-term per-step spread)")
    if not math.isfinite(base["ratio"]) or base["ratio"] <= 0:
        raise SystemExit(f"the ratio at theta's default scale is {base['ratio']}: theta cannot be scaled to a ratio")
    points = []
    for target in args.ratios:
        scale = target / base["ratio"]
        options = point_args(args, scale, coordinate)
        regime = measured_ratio(options, args.regime_rounds)
        print(f"target ratio {target:g}: theta x {scale:.4g}, measured ratio {regime['ratio']:.3g}", flush=True)
        results = reproduce_regret.main(options)
        points.append({"target": target, "scale": scale, **regime, **point_summary(results, names)})
    summary = {"settings": dataclasses.asdict(args), "agents": names, "rounds": args.rounds, "points": points}
    if args.out_dir:
        write_json_atomically(os.path.join(args.out_dir, "phase_diagram.json"), summary)
        plot(summary, os.path.join(args.out_dir, "phase_diagram.png"))
        print(f"wrote {args.out_dir}/phase_diagram.json and phase_diagram.png")
    for point in points:
        difference = point["paired_difference"]
        print(
            f"ratio {point['ratio']:8.3g}: last-quarter regret per round "
            + ", ".join(
                f"{reproduce_regret.AGENT_LABELS.get(name, name)} {np.mean(point['last_quarter_rate'][name]):+.3f}"
                for name in names
            )
            + f"; difference {difference['mean']:+.3f} [{difference['low']:+.3f}, {difference['high']:+.3f}]"
        )
    return summary


def plot(summary: dict[str, Any], path: str) -> None:
    """Last-quarter regret per round of both agents against the ratio, and their paired difference (1200 px wide)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy import stats

    points = sorted(summary["points"], key=lambda point: point["ratio"])
    ratios = np.array([point["ratio"] for point in points])
    figure, (rates_axis, difference_axis) = plt.subplots(1, 2, figsize=(12, 4.8), dpi=100)
    for name in summary["agents"]:
        values = np.array([point["last_quarter_rate"][name] for point in points])  # (P, S)
        mean = values.mean(axis=1)
        seeds = values.shape[1]
        half = (
            stats.t.ppf(0.975, seeds - 1) * values.std(axis=1, ddof=1) / math.sqrt(seeds)
            if seeds > 1
            else np.zeros_like(mean)
        )
        label = reproduce_regret.AGENT_LABELS.get(name, name)
        rates_axis.errorbar(ratios, mean, yerr=half, marker="o", capsize=3, label=label)
    rates_axis.axhline(0.0, color="k", linewidth=0.6)
    rates_axis.set_xscale("log")
    rates_axis.set_xlabel("theta-term / v-term per-step spread over the candidates")
    rates_axis.set_ylabel("regret per round, last quarter (95% t over seeds)")
    rates_axis.legend()
    difference = np.array([[point["paired_difference"][key] for key in ("mean", "low", "high")] for point in points])
    first, second = (reproduce_regret.AGENT_LABELS.get(name, name) for name in summary["agents"])
    difference_axis.errorbar(
        ratios,
        difference[:, 0],
        yerr=[difference[:, 0] - difference[:, 1], difference[:, 2] - difference[:, 0]],
        marker="o",
        capsize=3,
        color="C2",
    )
    difference_axis.axhline(0.0, color="k", linewidth=0.6)
    difference_axis.set_xscale("log")
    difference_axis.set_xlabel("theta-term / v-term per-step spread over the candidates")
    difference_axis.set_ylabel(f"{first} - {second}, last quarter (paired 95%)")
    settings = summary["settings"]
    figure.suptitle(
        f"Where {first} beats the LM's own decode: {settings['model']}, {settings['env_id']}, "
        f"T = {summary['rounds']} rounds, seeds {settings['seeds']}, L={settings['max_length']}, "
        f"top-{settings['top_k']} (below 0 on the right: {first} wins)",
        fontsize=10,
    )
    figure.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    figure.savefig(path)
    plt.close(figure)


if __name__ == "__main__":
    run_script(lambda: parse_args(sys.argv[1:]), main)
