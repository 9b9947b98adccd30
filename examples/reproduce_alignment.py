"""Align to a preference learned from human comparisons: theta fitted by Bradley-Terry on HH-RLHF pairs.

The env is ``TokenizedAlignment-v0`` with ``theta="hh-rlhf"``: theta is a linear reward head fitted on the
policy model's own mean-pooled embeddings of the shipped HH-RLHF chosen/rejected pairs (not a claim about human
values; its held-out pairwise accuracy is printed next to chance). In the paper's fixed-length setting (L = 30,
top-15, gamma = 0.8) four agents play the same queries and noise (common random numbers):

* EOFUL (learns theta online),
* Misaligned greedy (greedy on the LM probability alone),
* WrongTheta (greedy with the negated theta, the paper's baseline),
* an ARGS-style oracle: reward-guided greedy decoding that knows the fitted theta, scoring each candidate by
  ``gamma * log p + (1 - gamma) * <theta, e>`` (``fixed_theta_greedy`` with the true ``theta'``; it is the
  env's regret benchmark, so its regret is 0 by construction).

Printed and saved: cumulative regret (mean over seeds, with each seed's curve), how often each agent's response has
a higher fitted reward ``<theta, e(x, y)>`` than Misaligned greedy's on the same query and seed, and sample
responses of the first and last rounds. Each (agent, seed) run is written to ``out_dir/runs/`` as it ends
(atomically), so an interrupted command resumes where it stopped and a rerun with more seeds plays only the new
ones (each run file records the code that made it, package version and git commit: runs of other code are played
again, and one printed line names both versions); a progress bar counts the rounds. The defaults are short
(T = 12 rounds, one seed) so that they finish in minutes on a CPU; the section 5 figure of docs/REPRODUCTION.md is
``--rounds 30 --seeds 0 1``.

    PYTHONPATH=. python examples/reproduce_alignment.py
    PYTHONPATH=. python examples/reproduce_alignment.py --rounds 30 --seeds 0 1
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenized_bandit_gym.evaluation import provenance
from tokenized_bandit_gym.evaluation.atomic_files import write_json_atomically
from tokenized_bandit_gym.llm.language_model_config import Candidates, LengthRule
from tokenized_bandit_gym.script_arguments import config_option, parse_dataclass_arguments
from tokenized_bandit_gym.threads import use_small_work_threads

LABELS = {
    "eoful": "EOFUL",
    "misaligned_greedy": "Misaligned greedy",
    "wrong_theta": "WrongTheta",
    "args_oracle": "ARGS-style oracle",
}


@dataclass
class Args:
    """Command-line options (each field's docstring is its --help)."""

    model: str = "smollm2-135m-instruct"
    """the policy model: smollm2-135m-instruct (see docs/LLM.md), stories260K (shipped) or a local path"""
    queries: str = "paper"
    """query source of the env (paper: the appendix-D generator)"""
    rounds: int = 12
    """rounds T per agent"""
    max_length: int = config_option(LengthRule, "max_length", note="fixed length, the paper's setting")
    top_k: int = config_option(Candidates, "top_k")
    seeds: tuple[int, ...] = (0,)
    """seeds of the query and noise streams (each shared by all agents)"""
    samples: int = 2
    """responses shown from the first and from the last rounds"""
    out_dir: str = "runs/alignment"
    """where alignment.json, alignment.png and the finished runs (runs/, read back on a rerun) are written"""


def make_agent(name: str, problem: Any) -> Any:
    from tokenized_bandit_gym import agents

    if name == "eoful":
        return agents.make("eoful")
    if name == "misaligned_greedy":
        return agents.make("misaligned_greedy")
    if name == "wrong_theta":
        return agents.make("fixed_theta_greedy", theta="negated")
    return agents.make("fixed_theta_greedy", theta=problem.theta)


def play_runs(env: Any, runs: list[tuple[str, int]], rounds: int) -> list[dict[str, Any]]:
    """Play the (agent, seed) ``runs`` as the rows of the vector env ``env``: one forward of all candidates a step.

    Each round's benchmark is decoded by rows of the same forward. Row i plays what the single env reset
    with its seed plays with its own agent, to float rounding
    (:mod:`~tokenized_bandit_gym.evaluation.runs_as_rows`).

    Returns:
        Per run and round: regret, fitted reward ``<theta, e(x, y)>``, query and response text.
    """
    from tokenized_bandit_gym.evaluation.runs_as_rows import play_rows

    problem = env.unwrapped.problem
    theta = problem.latent_theta.cpu().numpy()  # (d,)
    fitted_reward = np.zeros((len(runs), rounds))  # (N, T)
    texts: list[list[dict[str, str]]] = [[] for _ in runs]

    def keep(ended: np.ndarray, played: np.ndarray, observations: dict[str, Any], final: dict[str, Any]) -> None:
        embeddings = np.asarray(final["response_embedding"], dtype=np.float64)[:, : theta.shape[0]]  # (E, d)
        for position, row in enumerate(ended):
            fitted_reward[row, played[row] - 1] = float(embeddings[position] @ theta)
            query = observations["query"][position][: int(observations["query_length"][position])]
            text = problem.tokenizer.decode(query.tolist(), skip_special_tokens=True)
            texts[row].append({"query": text, "response": problem.decode(observations["response"][position])})

    seeds = [seed for _, seed in runs]
    agents = [make_agent(name, problem) for name, _ in runs]
    label = ", ".join(f"{LABELS[name]}/{seed}" for name, seed in runs)
    regret = play_rows(env, agents, seeds, rounds, label=label, on_rounds_ended=keep)
    return [
        {"regret": regret[row].tolist(), "fitted_reward": fitted_reward[row].tolist(), "texts": texts[row]}
        for row in range(len(runs))
    ]


def run_settings(args: Args) -> dict[str, Any]:
    """What determines a run's results besides its agent and seed (a stored run is reused only if they match)."""
    return {key: getattr(args, key) for key in ("model", "queries", "rounds", "max_length", "top_k")}


def stored_runs(args: Args, settings: dict[str, Any]) -> tuple[dict[str, dict[int, Any]], list[tuple[str, int]]]:
    """The runs of ``args`` kept in ``out_dir/runs`` by this code with these settings, and the (agent, seed) left.

    A run file of other settings is ignored; runs of the same settings made by other code (or recording none) are
    played again, with one printed line per other version naming it and this one.

    Returns:
        The runs read back (agent -> seed -> run) and the (agent, seed) pairs to play, seeds outermost.
    """
    stored = {(name, seed): _read_run(_run_path(args, name, seed)) for seed in args.seeds for name in LABELS}
    same_settings = {key: run for key, run in stored.items() if run is not None and run.get("settings") == settings}
    recorded = [run.get("code_version") for run in same_settings.values()]
    versions = [made_by for index, made_by in enumerate(recorded) if made_by not in recorded[:index]]
    reusable = [
        made_by
        for made_by in versions
        if provenance.made_by_this_code(made_by, f"{recorded.count(made_by)} runs in {args.out_dir}/runs")
    ]
    runs: dict[str, dict[int, Any]] = {name: {} for name in LABELS}
    missing = []
    for (name, seed), run in stored.items():
        if (name, seed) in same_settings and run.get("code_version") in reusable:
            runs[name][seed] = run
        else:
            missing.append((name, seed))
    return runs, missing


def main(args: Args) -> dict[str, Any]:
    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
    from tokenized_bandit_gym.evaluation.ddmc.resources import resolve_model

    settings = run_settings(args)
    version = provenance.code_version()
    runs, missing = stored_runs(args, settings)
    if len(missing) < len(LABELS) * len(args.seeds):
        print(f"resuming: {len(LABELS) * len(args.seeds) - len(missing)} runs read back from {args.out_dir}/runs")
    env = gym.make_vec(
        "TokenizedAlignment-v0",
        num_envs=max(1, len(missing)),  # every run left is a row of one vector env
        model=resolve_model(args.model),
        queries=args.queries,
        theta="hh-rlhf",
        max_length=args.max_length,
        top_k=args.top_k,
        fixed_length=True,
    )
    problem = env.unwrapped.problem
    fit = problem.preference_fit
    print(f"theta: {problem.theta_source}", flush=True)
    if missing:
        for (name, seed), played in zip(missing, play_runs(env, missing, args.rounds), strict=True):
            runs[name][seed] = {**played, "settings": settings, "code_version": version}
            if args.out_dir:
                write_json_atomically(_run_path(args, name, seed), runs[name][seed])
    summary = {}
    for name, by_seed in runs.items():
        rewards = np.array([by_seed[seed]["fitted_reward"] for seed in args.seeds])  # (seeds, T)
        baseline = np.array([runs["misaligned_greedy"][seed]["fitted_reward"] for seed in args.seeds])
        totals = [float(np.sum(by_seed[seed]["regret"])) for seed in args.seeds]
        summary[name] = {
            "cumulative_regret": float(np.mean(totals)),
            "cumulative_regret_per_seed": totals,
            "preferred": float(np.mean(rewards > baseline)),
            "ties": float(np.mean(rewards == baseline)),
        }
        print(
            f"{LABELS[name]:<18} cumulative regret {summary[name]['cumulative_regret']:8.3f} (mean of "
            f"{len(totals)} seeds)  preferred over Misaligned greedy by the fitted reward in "
            f"{summary[name]['preferred']:.0%} of rounds (ties {summary[name]['ties']:.0%})"
        )
    first = args.seeds[0]
    for name, by_seed in runs.items():
        for round_index in [*range(args.samples), *range(args.rounds - args.samples, args.rounds)]:
            text = by_seed[first]["texts"][round_index]
            print(f"[{LABELS[name]}, seed {first}, round {round_index + 1}] {text['query']!r} -> {text['response']!r}")
    results = {
        "settings": vars(args),
        "code_version": version,
        "theta_source": problem.theta_source,
        "held_out_accuracy": fit.held_out_accuracy,
        "accuracy_interval": list(fit.accuracy_interval),
        "num_pairs": fit.num_pairs,
        "summary": summary,
        "runs": {name: {str(seed): run for seed, run in by_seed.items()} for name, by_seed in runs.items()},
    }
    if args.out_dir:
        write_json_atomically(os.path.join(args.out_dir, "alignment.json"), results)
        plot(results, os.path.join(args.out_dir, "alignment.png"))
        print(f"wrote {args.out_dir}/alignment.json and alignment.png")
    return results


def _run_path(args: Args, name: str, seed: int) -> str:
    """Where the finished run of agent ``name`` and ``seed`` is kept ("" without an output folder)."""
    return os.path.join(args.out_dir, "runs", f"{name}-seed{seed}.json") if args.out_dir else ""


def _read_run(path: str) -> dict[str, Any] | None:
    """A finished run written earlier to ``path``, or None (none there, or unreadable: it is played again)."""
    return provenance.read_results_json(path)


def plot(results: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for index, (name, by_seed) in enumerate(results["runs"].items()):
        curves = np.cumsum([run["regret"] for run in by_seed.values()], axis=1)  # (seeds, T)
        rounds = np.arange(1, curves.shape[1] + 1)
        color = f"C{index}"
        left.plot(rounds, curves.mean(axis=0), color=color, label=f"{LABELS[name]} (mean of {len(curves)})")
        for curve in curves if len(curves) > 1 else []:
            left.plot(rounds, curve, color=color, linewidth=0.6, alpha=0.35)
    left.set_xlabel("round t")
    left.set_ylabel("cumulative regret")
    left.set_title("Regret against reward-guided greedy (fitted theta)")
    left.legend(fontsize=8)
    names = list(results["summary"])
    right.bar([LABELS[name] for name in names], [results["summary"][name]["preferred"] for name in names])
    right.axhline(0.5, color="gray", linestyle="--", linewidth=1)
    right.set_ylabel("preferred over Misaligned greedy")
    right.set_title("Fitted reward: response beats Misaligned greedy's")
    right.tick_params(axis="x", labelsize=7)
    low, high = results["accuracy_interval"]
    figure.suptitle(
        f"theta: Bradley-Terry on HH-RLHF, held-out accuracy {results['held_out_accuracy']:.2f} "
        f"[{low:.2f}, {high:.2f}] (chance 0.5)",
        fontsize=9,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


if __name__ == "__main__":
    use_small_work_threads()
    main(parse_dataclass_arguments(Args, __doc__, sys.argv[1:]))
