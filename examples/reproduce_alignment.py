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

Printed and saved: cumulative regret, how often each agent's response has a higher fitted reward
``<theta, e(x, y)>`` than Misaligned greedy's on the same query, and sample responses of the first and last rounds.
The defaults are short (T = 12 rounds, one seed) so that they finish in minutes on a CPU.

    PYTHONPATH=. python examples/reproduce_alignment.py
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments
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
    """the policy model: smollm2-135m-instruct (see the README), stories260K (shipped) or a local path"""
    queries: str = "paper"
    """query source of the env (paper: the appendix-D generator)"""
    rounds: int = 12
    """rounds T per agent"""
    max_length: int = 30
    """response length L (fixed, the paper's setting)"""
    top_k: int = 15
    """top-k candidates"""
    seed: int = 0
    """seed of the query and noise streams (shared by all agents)"""
    samples: int = 2
    """responses shown from the first and from the last rounds"""
    out_dir: str = "runs/alignment"
    """where alignment.json and alignment.png are written"""


def make_agent(name: str, problem: Any) -> Any:
    from tokenized_bandit_gym import agents

    if name == "eoful":
        return agents.make("eoful")
    if name == "misaligned_greedy":
        return agents.make("misaligned_greedy")
    if name == "wrong_theta":
        return agents.make("fixed_theta_greedy", theta="negated")
    return agents.make("fixed_theta_greedy", theta=problem.theta)


def play(env: Any, agent: Any, rounds: int, seed: int) -> dict[str, Any]:
    """``rounds`` episodes with ``agent`` learning online; per round: regret, fitted reward, query and response text."""
    from tokenized_bandit_gym.task import Task

    problem = env.unwrapped.problem
    theta = problem.latent_theta.cpu().numpy()  # (d,)
    agent.reset(Task.from_env(env, rounds), seed)
    regret, fitted_reward, texts = [], [], []
    for round_index in range(rounds):
        observation, info = env.reset(seed=seed if round_index == 0 else None)
        terminated = truncated = False
        reward = 0.0
        while not (terminated or truncated):
            observation, reward, terminated, truncated, info = env.step(agent.act(observation, info))
        agent.update(observation, float(reward), info)
        regret.append(float(info["regret"]))
        embedding = np.asarray(info["response_embedding"], dtype=np.float64)[: theta.shape[0]]  # e(x, y), (d,)
        fitted_reward.append(float(embedding @ theta))
        query = problem.tokenizer.decode(
            observation["query"][: int(observation["query_length"])].tolist(), skip_special_tokens=True
        )
        texts.append({"query": query, "response": problem.decode(observation["response"])})
    return {"regret": regret, "fitted_reward": fitted_reward, "texts": texts}


def main(args: Args) -> dict[str, Any]:
    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
    from tokenized_bandit_gym.evaluation.ddmc.resources import resolve_model

    env = gym.make(
        "TokenizedAlignment-v0",
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
    runs = {name: play(env, make_agent(name, problem), args.rounds, args.seed) for name in LABELS}
    baseline = np.array(runs["misaligned_greedy"]["fitted_reward"])
    summary = {}
    for name, run in runs.items():
        preferred = float(np.mean(np.array(run["fitted_reward"]) > baseline))
        ties = float(np.mean(np.array(run["fitted_reward"]) == baseline))
        summary[name] = {"cumulative_regret": float(np.sum(run["regret"])), "preferred": preferred, "ties": ties}
        print(
            f"{LABELS[name]:<18} cumulative regret {summary[name]['cumulative_regret']:8.3f}  preferred over "
            f"Misaligned greedy by the fitted reward in {preferred:.0%} of rounds (ties {ties:.0%})"
        )
    for name, run in runs.items():
        for round_index in [*range(args.samples), *range(args.rounds - args.samples, args.rounds)]:
            text = run["texts"][round_index]
            print(f"[{LABELS[name]}, round {round_index + 1}] {text['query']!r} -> {text['response']!r}")
    results = {
        "settings": vars(args),
        "theta_source": problem.theta_source,
        "held_out_accuracy": fit.held_out_accuracy,
        "accuracy_interval": list(fit.accuracy_interval),
        "num_pairs": fit.num_pairs,
        "summary": summary,
        "runs": runs,
    }
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "alignment.json"), "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=1)
        plot(results, os.path.join(args.out_dir, "alignment.png"))
        print(f"wrote {args.out_dir}/alignment.json and alignment.png")
    return results


def plot(results: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, run in results["runs"].items():
        rounds = np.arange(1, len(run["regret"]) + 1)
        left.plot(rounds, np.cumsum(run["regret"]), label=LABELS[name])
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
