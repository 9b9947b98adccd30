"""EOFUL as the paper states it and as a practitioner runs it, on one figure (issue 48, item 4).

The paper's EOFUL (Algorithm 1) uses the radius ``sqrt(beta_t)`` of eq. update-c, which assumes ``||e|| <= 1``.
A practitioner divides the features by one constant so that they are (``feature_scale="first_observation"``)
and shrinks the radius by a multiplier. This script chooses the multiplier on a tuning seed that is never
reported (the lowest final regret over ``--multipliers``), then plays, on the reported seeds, the theory EOFUL,
the practitioner's EOFUL and Misaligned greedy (examples/reproduce_regret.py, one folder each, so a rerun
resumes), and plots their mean cumulative regret with min-max bands on one figure (1200 px wide).

    PYTHONPATH=. python examples/eoful_radius.py --rounds 100 --theta 5.4           # stories260K, v1
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from examples import reproduce_regret
from tokenized_bandit_gym.evaluation.atomic_files import write_json_atomically
from tokenized_bandit_gym.llm.language_model_config import Candidates, LengthRule
from tokenized_bandit_gym.script_arguments import config_option, run_script


@dataclass
class Args(reproduce_regret.Args):
    """reproduce_regret.py's options, plus the tuning's (each field's docstring is its --help)."""

    multipliers: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0)
    """radius multipliers tried on the tuning seed (with the features scaled to the unit ball)"""
    tuning_seed: int = 100
    """the seed the multiplier is chosen on (never one of --seeds)"""
    seeds: str = "0,1,2"
    """the reported seeds"""
    max_length: int = config_option(LengthRule, "max_length", note="the paper's")
    top_k: int = config_option(Candidates, "top_k", note="the paper's")
    rounds: int = 100
    """rounds T"""
    out_dir: str = "runs/eoful_radius"
    """one reproduce_regret.py folder per run set, eoful_radius.json and eoful_radius.png"""


def variant(args: Args, name: str, **changes: Any) -> reproduce_regret.Args:
    """reproduce_regret.py's options for one run set, in its own folder ``out_dir/name``."""
    return reproduce_regret.script_args(args, out_dir=os.path.join(args.out_dir, name), **changes)


def parse_args(argv: list[str] | None = None) -> Args:
    """The command line's options (``argv``; None reads ``sys.argv``).

    reproduce_regret.py's presets (``--real-llm``, ``--paper``) fill what is unset; this script's defaults hold.
    """
    return reproduce_regret.parse_options(argv, __doc__, Args)


def main(args: Args) -> dict[str, Any]:
    if str(args.tuning_seed) in args.seeds.split(","):
        raise SystemExit(f"--tuning-seed {args.tuning_seed} must not be a reported seed ({args.seeds})")
    tuned = {}
    for multiplier in args.multipliers:
        options = variant(
            args,
            f"tune_{multiplier:g}",
            agents="eoful",
            seeds=str(args.tuning_seed),
            beta=multiplier,
            feature_scale="first_observation",
        )
        tuned[multiplier] = reproduce_regret.main(options)["agents"]["eoful"]["final_cumulative_regret"]
    chosen = min(tuned, key=tuned.__getitem__)
    print(f"multiplier chosen on seed {args.tuning_seed}: {chosen:g} ({tuned})")
    theory = reproduce_regret.main(variant(args, "theory", agents="eoful,misaligned_greedy", beta=1.0))
    practice = reproduce_regret.main(
        variant(args, "practice", agents="eoful,misaligned_greedy", beta=chosen, feature_scale="first_observation")
    )
    curves = {
        "EOFUL (theory radius, raw features)": theory["agents"]["eoful"],
        f"EOFUL (||e|| <= 1, radius x {chosen:g})": practice["agents"]["eoful"],
        "Misaligned greedy": theory["agents"]["misaligned_greedy"],
    }
    summary = {
        "settings": dataclasses.asdict(args),
        "tuning": {f"{key:g}": value for key, value in tuned.items()},
        "chosen": chosen,
        "final": {label: entry["final_cumulative_regret_per_seed"] for label, entry in curves.items()},
        "curves": {label: {key: entry[key] for key in CURVE_KEYS} for label, entry in curves.items()},
    }
    if args.out_dir:
        write_json_atomically(os.path.join(args.out_dir, "eoful_radius.json"), summary)
        plot(summary, os.path.join(args.out_dir, "eoful_radius.png"))
        print(f"wrote {args.out_dir}/eoful_radius.json and eoful_radius.png")
    return summary


CURVE_KEYS = ("cumulative_regret", "cumulative_regret_min", "cumulative_regret_max")
"""What eoful_radius.json keeps of each curve: the mean cumulative regret and its band over the seeds, (T,) each."""


def plot(summary: dict[str, Any], path: str) -> None:
    """Mean cumulative regret of each of ``summary["curves"]`` with its min-max band over the seeds (1200 px)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(12, 5), dpi=100)
    for label, entry in summary["curves"].items():
        t = np.arange(1, len(entry["cumulative_regret"]) + 1)
        (line,) = axis.plot(t, entry["cumulative_regret"], label=label)
        axis.fill_between(
            t, entry["cumulative_regret_min"], entry["cumulative_regret_max"], color=line.get_color(), alpha=0.2
        )
    axis.axhline(0.0, color="k", linewidth=0.6)
    axis.set_xlabel("round t")
    axis.set_ylabel("cumulative regret (mean; band: min-max over seeds)")
    axis.legend()
    settings = summary["settings"]
    figure.suptitle(
        f"EOFUL as stated and as run in practice: {settings['model']}, {settings['env_id']}, "
        f"T = {settings['rounds']} rounds, seeds {settings['seeds']}, L={settings['max_length']}, "
        f"top-{settings['top_k']}; multiplier {summary['chosen']:g} chosen on seed {settings['tuning_seed']}",
        fontsize=10,
    )
    figure.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    figure.savefig(path)
    plt.close(figure)


if __name__ == "__main__":
    run_script(lambda: parse_args(sys.argv[1:]), main)
