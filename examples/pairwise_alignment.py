"""Preference feedback as users give it: comparisons against scalar rewards, on the paper's alignment env.

``TokenizedAlignment-v0`` in the paper's fixed-length setting (L = 30, top-15, ``fixed_length=True``),
four agents on the same queries (common random numbers):

* EOFUL with scalar feedback (reward ``u + eta``, the paper's protocol);
* dueling_eoful with pairwise feedback (``feedback="pairwise"``: two responses a round, the reward
  one Bradley-Terry comparison ``sigma((u1 - u2) / tau)``);
* tpop (T-POP's arms with a linear reward head on the env's features) with pairwise feedback;
* Misaligned greedy (greedy on the LM probability alone) as the reference response.

The user's latent theta is by default the Bradley-Terry fit on the shipped HH-RLHF pairs (as in
``examples/reproduce_alignment.py``; a linear reward head on the model's own features, not a claim
about human values).

Reported (printed, saved as JSON and a figure):

* regret curves: EOFUL's and Misaligned greedy's regret, the pairwise agents' dueling regret
  ``u* - (u1 + u2) / 2`` and the regret of their first response (the exploit arm: what a
  pairwise agent would deploy), each against the env's benchmark (greedy with the true utility);
* how often each agent's response (a pairwise agent's first) is preferred over Misaligned
  greedy's on the same query: the Bradley-Terry probability ``sigma((u - u_mg) / tau)`` averaged
  over rounds, and the fraction of rounds with a strictly higher utility;
* the cost of comparisons at equal rounds: the cumulative regret of the pairwise agents' first
  responses over EOFUL's with scalar feedback; the same on a small fixed-length TLB, where the
  learners converge within the default ``tlb_rounds`` (seconds).

The defaults use the shipped stories260K and a few rounds so that they finish in minutes on a CPU.
On stories260K the paper's ``v = log p`` with gamma = 0.8 makes the LM term dominate the utility, so
that every greedy decoder (Misaligned greedy included) returns the benchmark's response; the
defaults weigh the two terms evenly (gamma = 0.5, ``v = log p / L``) so that theta matters:

    PYTHONPATH=. python examples/pairwise_alignment.py

(``--model smollm2-135m-instruct --queries paper`` runs the real instruct model on the appendix-D queries, the
paper's; much slower on a CPU.)

The agents of one feedback are the rows of one native vector env (one forward of all their candidates a
step, each round's benchmark decoded by rows of that forward), with a progress bar over their
rounds; their runs are saved in ``--out-dir``'s pairwise.json (atomically) as soon as they finish, so
rerunning an interrupted command with the same settings keeps them and plays only the others (unless another
code version made them: pairwise.json records the package version and git commit, and a file of other code is not
reused, with one printed line naming both versions).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenized_bandit_gym.envs.language_model_config import Feedback
from tokenized_bandit_gym.evaluation import provenance
from tokenized_bandit_gym.evaluation.atomic_files import write_json_atomically
from tokenized_bandit_gym.llm.language_model_config import Candidates, LengthRule, ModelSource, Reading
from tokenized_bandit_gym.script_arguments import config_option, parse_dataclass_arguments
from tokenized_bandit_gym.threads import use_small_work_threads

AGENTS = {  # name -> (label, feedback)
    "eoful": ("EOFUL (scalar)", "scalar"),
    "dueling_eoful": ("dueling_eoful (pairwise)", "pairwise"),
    "tpop": ("tpop (pairwise)", "pairwise"),
    "misaligned_greedy": ("Misaligned greedy", "scalar"),
}
FEEDBACKS = ("scalar", "pairwise")
"""The feedback channels, in the order they are played (the agents of one are the rows of one vector env)."""
RUN_KEYS = ("device", "out_dir", "figure")
"""Options that do not change a run's numbers: a saved run with equal other settings is kept (resumed)."""


@dataclass
class Args:
    """Command-line options (each field's docstring is its --help)."""

    model: str = "stories260K"
    """the policy model: stories260K (shipped), smollm2-135m-instruct (see docs/LLM.md) or a local path"""
    queries: str = "default"
    """query source: default (the env's story openings), paper (the appendix-D generator, the paper's), stories, or
    a TruthfulQA/HH-RLHF file"""
    rounds: int = 12
    """rounds T per agent"""
    max_length: int = config_option(LengthRule, "max_length", note="fixed length, the paper's setting")
    top_k: int = config_option(Candidates, "top_k")
    preference_temperature: float = config_option(Feedback, "preference_temperature")
    theta: str = "hh-rlhf"
    """the user's latent theta: hh-rlhf (Bradley-Terry on the shipped HH-RLHF pairs), random, or the env's default"""
    gamma: float = config_option(
        Reading, "gamma", 0.5, note="the paper's 0.8 leaves stories260K's LM term dominant: every greedy coincides"
    )
    value_map: str = config_option(Reading, "value_map", "scaled_logprob")
    seed: int = 0
    """seed of the query and noise streams (shared by all agents)"""
    device: str = config_option(ModelSource, "device")
    out_dir: str = "runs/pairwise"
    """where pairwise.json and pairwise.png are written (empty: nothing written)"""
    figure: str = ""
    """also write the figure to this path (e.g. docs/figures/pairwise_stories260K.png)"""
    tlb_rounds: int = 2000
    """rounds of the same comparison on a small fixed-length TLB, where the learners converge (0: skip)"""


def play(env: Any, names: list[str], rounds: int, seed: int) -> dict[str, dict[str, list[float]]]:
    """``rounds`` rounds of each agent in ``names``, learning online, as the rows of the native vector env ``env``.

    Row i is played by agent ``names[i]``, each reset with ``seed`` (the same queries
    and noise: common random numbers): what a single env played by each agent in turn gives, to float
    rounding, with one forward of every row's candidates per step on an LLM env (``runs_as_rows``), where
    each round's oracle-greedy benchmark is decoded by rows of that forward. Per agent and round: the regret
    (pairwise: the dueling regret), the first response's utility and regret, and the reward (the preference
    bit ``1 - preferred`` for pairwise feedback, ``u + eta`` for scalar).
    """
    from tokenized_bandit_gym import agents
    from tokenized_bandit_gym.evaluation.runs_as_rows import play_rows

    record = {
        name: {key: [0.0] * rounds for key in ("regret", "first_regret", "first_utility", "reward")} for name in names
    }

    def keep(ended: np.ndarray, played: np.ndarray, observations: Any, final: dict[str, Any]) -> None:
        for position, row in enumerate(ended.tolist()):
            run, t = record[names[row]], int(played[row]) - 1
            if "utilities" in final:
                first_utility = float(final["utilities"][position][0])
                run["reward"][t] = 1.0 - float(final["preferred"][position])
            else:
                first_utility = float(final["utility"][position])
                run["reward"][t] = first_utility + float(final["noise"][position])
            run["regret"][t] = float(final["regret"][position])
            run["first_utility"][t] = first_utility
            run["first_regret"][t] = float(final["optimal_utility"][position]) - first_utility

    label = ", ".join(AGENTS[name][0] for name in names)
    play_rows(
        env, [agents.make(name) for name in names], [seed] * len(names), rounds, label=label, on_rounds_ended=keep
    )
    return record


def resumable_runs(path: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The runs saved in ``path`` by an earlier call of this code with these ``settings`` (``RUN_KEYS`` aside)."""
    earlier = provenance.read_results_json(path)
    if earlier is None:
        return {}
    if earlier.get("settings") != settings or not provenance.made_by_this_code(earlier.get("code_version"), path):
        return {}
    return dict(earlier.get("runs", {}))


def make_envs(args: Args) -> dict[str, Any]:
    """The scalar and the pairwise native vector env of ``args`` (two rows each), sharing one loaded model."""
    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
    from tokenized_bandit_gym.evaluation.ddmc.resources import resolve_model

    common = {
        "max_length": args.max_length,
        "top_k": args.top_k,
        "fixed_length": True,
        "gamma": args.gamma,
        "value_map": args.value_map,
        "device": args.device,
        "vectorization_mode": "vector_entry_point",
    }
    if args.theta != "default":
        common["theta"] = args.theta
    if args.queries != "default":
        common["queries"] = args.queries
    rows = {feedback: sum(1 for _, kind in AGENTS.values() if kind == feedback) for feedback in FEEDBACKS}
    scalar = gym.make_vec("TokenizedAlignment-v0", rows["scalar"], model=resolve_model(args.model), **common)
    problem = scalar.unwrapped.problem
    pairwise = gym.make_vec(
        "TokenizedAlignment-v0",
        rows["pairwise"],
        model=problem.model,
        tokenizer=problem.tokenizer,
        **common,
        feedback="pairwise",
        preference_temperature=args.preference_temperature,
    )
    return {"scalar": scalar, "pairwise": pairwise}


def main(args: Args) -> dict[str, Any]:
    settings = {key: value for key, value in dataclasses.asdict(args).items() if key not in RUN_KEYS}
    path = os.path.join(args.out_dir, "pairwise.json") if args.out_dir else ""
    version = provenance.code_version()
    runs = resumable_runs(path, settings)
    if runs:
        print(f"resuming: {', '.join(runs)} kept from {path}")
    envs: dict[str, Any] = {}
    for feedback in FEEDBACKS:
        names = [name for name, (_, kind) in AGENTS.items() if kind == feedback]
        if not all(name in runs for name in names):
            envs = envs or make_envs(args)
            runs |= play(envs[feedback], names, args.rounds, args.seed)
            if path:
                write_json_atomically(path, {"settings": settings, "code_version": version, "runs": runs})
    for name, (label, _) in AGENTS.items():
        print(f"{label:<26} cumulative regret {np.sum(runs[name]['regret']):9.3f}", flush=True)
    baseline = np.array(runs["misaligned_greedy"]["first_utility"])
    summary = {}
    for name, run in runs.items():
        utilities = np.array(run["first_utility"])
        margin = (utilities - baseline) / args.preference_temperature
        summary[name] = {
            "cumulative_regret": float(np.sum(run["regret"])),
            "first_response_cumulative_regret": float(np.sum(run["first_regret"])),
            "preference_probability_over_misaligned": float(np.mean(1.0 / (1.0 + np.exp(-margin)))),
            "higher_utility_than_misaligned": float(np.mean(utilities > baseline)),
        }
    scalar_regret = summary["eoful"]["first_response_cumulative_regret"]
    for name in ("dueling_eoful", "tpop"):
        summary[name]["comparison_cost_vs_scalar_eoful"] = (
            summary[name]["first_response_cumulative_regret"] / scalar_regret if scalar_regret > 0 else float("nan")
        )
    for name, values in summary.items():
        line = ", ".join(f"{key} {value:.3f}" for key, value in values.items())
        print(f"{AGENTS[name][0]:<26} {line}")
    results = {"settings": settings, "code_version": version, "summary": summary, "runs": runs}
    if args.tlb_rounds:
        results["tlb"] = tlb_comparison(args)
    if path:
        write_json_atomically(path, results)
        plot(results, os.path.join(args.out_dir, "pairwise.png"))
        print(f"wrote {args.out_dir}/pairwise.json and pairwise.png")
    if args.figure:
        plot(results, args.figure)
        print(f"wrote {args.figure}")
    return results


def tlb_comparison(args: Args) -> dict[str, float]:
    """Cumulative regret at equal rounds on a small fixed-length TLB: EOFUL (scalar) against the pairwise agents.

    ``vocab_size=8, max_length=4, embedding_dim=3``, exact DDMC (greedy with the true utility is
    optimal), scalar noise sigma = 0.1, comparisons at tau = 0.2; the pairwise agents' first
    response and dueling regrets.
    """
    import gymnasium as gym

    instance = {"vocab_size": 8, "max_length": 4, "embedding_dim": 3, "fixed_length": True}
    scalar = gym.make_vec("TokenizedLinearBandit-v0", 1, vectorization_mode="vector_entry_point", **instance)
    pairwise = gym.make_vec(
        "TokenizedLinearBandit-v0",
        2,
        vectorization_mode="vector_entry_point",
        **instance,
        feedback="pairwise",
        preference_temperature=0.2,
    )
    comparison = {"eoful_scalar": float(np.sum(play(scalar, ["eoful"], args.tlb_rounds, args.seed)["eoful"]["regret"]))}
    for name, run in play(pairwise, ["dueling_eoful", "tpop"], args.tlb_rounds, args.seed).items():
        comparison[f"{name}_first_response"] = float(np.sum(run["first_regret"]))
        comparison[f"{name}_dueling"] = float(np.sum(run["regret"]))
    line = ", ".join(f"{key} {value:.2f}" for key, value in comparison.items())
    print(f"small TLB, cumulative regret over {args.tlb_rounds} rounds: {line}")
    return comparison


def plot(results: dict[str, Any], path: str) -> None:
    """Cumulative regret curves (dueling and first-response) and the preference rates over Misaligned greedy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 5))
    colours = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00")  # Okabe-Ito: colour-blind safe
    for index, (name, run) in enumerate(results["runs"].items()):
        rounds = np.arange(1, len(run["regret"]) + 1)
        colour = colours[index % len(colours)]
        line = left.plot(rounds, np.cumsum(run["regret"]), color=colour, linewidth=2, label=AGENTS[name][0])[0]
        if AGENTS[name][1] == "pairwise":
            left.plot(
                rounds,
                np.cumsum(run["first_regret"]),
                linestyle="--",
                color=line.get_color(),
                label=f"{AGENTS[name][0]}: first response",
            )
    left.set_xlabel("round t", fontsize=11)
    left.set_ylabel("cumulative regret", fontsize=11)
    left.set_title("Regret\n(pairwise: dueling regret; dashed: first response)", fontsize=11)
    left.legend(fontsize=10)
    left.tick_params(labelsize=10)
    names = list(results["summary"])
    right.bar(
        [AGENTS[name][0].replace(" (", "\n(") for name in names],
        [results["summary"][name]["preference_probability_over_misaligned"] for name in names],
        color="#0072B2",
    )
    right.axhline(0.5, color="gray", linestyle="--", linewidth=1)
    right.set_ylabel("P(preferred over Misaligned greedy)", fontsize=11)
    right.set_title("Bradley-Terry preference\nover Misaligned greedy's response", fontsize=11)
    right.tick_params(labelsize=10)
    settings = results["settings"]
    figure.suptitle(
        f"{settings['model']}, L = {settings['max_length']} (fixed), top-{settings['top_k']}, "
        f"T = {settings['rounds']}, tau = {settings['preference_temperature']}",
        fontsize=12,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


if __name__ == "__main__":
    use_small_work_threads()
    main(parse_dataclass_arguments(Args, __doc__, sys.argv[1:]))
