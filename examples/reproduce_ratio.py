"""Reproduce the paper's check of Assumption 4 for EOFUL (section 6.2, Figure 2 right).

Assumption 4 asks for a constant c with ``||y^(1:l)||_{Sigma_t} <= c ||y||_{Sigma_t}`` for every prefix of a
complete response. Running EOFUL on ``TokenizedAlignment-v0``, this script records, per round t, the ratios
``rho^l_t = ||y_t^(1:l)||_{Sigma_t} / ||y_t||_{Sigma_t}`` over positions l of the response EOFUL submitted
(embeddings of the prefixes from the env's oracle, Sigma_t the design matrix before the round's update), and
plots their maximum and mean over l. The paper reports the ratio "universally upper bounded by 1.25, even after
taking maximum over every token position" (Llama-3-8B-Instruct, L = 30, top-15, gamma = 0.8).

EOFUL exposes the ratios as ``prefix_ratio_max`` and ``prefix_ratio_mean`` (one float per round); an agent with
``ratio_history`` (a list of ``(max, mean)`` per round) is read too.

    PYTHONPATH=. python examples/reproduce_ratio.py
    PYTHONPATH=. python examples/reproduce_ratio.py --paper --model meta-llama/Meta-Llama-3-8B-Instruct --device cuda
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments

ENV_ID = "TokenizedAlignment-v0"


@dataclass
class Args:
    """Command-line options (each field's docstring is its --help)."""

    paper: bool = False
    """use the paper's settings (L=30, top-15, T=10,000) for unset options"""
    model: str = "stories260K"
    """Hugging Face causal LM: stories260K (shipped), a local path, or a model id"""
    queries: str = "paper"
    """query source of the env (paper: the appendix-D generator)"""
    rounds: int = 0
    """rounds T (0: 10,000 with --paper, else 150)"""
    max_length: int = 0
    """response length L (0: 30 with --paper, else 10)"""
    top_k: int = 0
    """top-k candidates (0: 15 with --paper, else 8)"""
    gamma: float = 0.8
    """weight of v(p) in the utility"""
    value_map: str = "logprob"
    """the env's v: logprob (paper default), scaled_logprob, root_prob, prob"""
    embedding_norm: str = "none"
    """the env's embedding normalisation: l2 (unit norm) or none (raw mean-pooled hidden states)"""
    beta: float = 1.0
    """EOFUL's multiplier on sqrt(beta_t)"""
    noise_scale: float = 0.1
    """reward noise sigma"""
    threshold: float = 1.25
    """the paper's reported upper bound on the ratio"""
    seed: int = 0
    """seed of the query and noise streams"""
    device: str = "cpu"
    """torch device"""
    out_dir: str = "runs/ratio"
    """where ratio.png and ratio.json are written ('' for none)"""


PAPER = {"rounds": 10_000, "max_length": 30, "top_k": 15}
QUICK = {"rounds": 150, "max_length": 10, "top_k": 8}


def parse_args(argv: list[str] | None = None) -> Args:
    args = parse_dataclass_arguments(Args, __doc__, argv)
    for name, value in (PAPER if args.paper else QUICK).items():
        if not getattr(args, name):
            setattr(args, name, value)
    return args


def require(what: str, error: Exception) -> SystemExit:
    """A clear exit for a missing piece of the project (the env or EOFUL not installed/merged)."""
    return SystemExit(
        f"reproduce_ratio.py needs {what}, which is not available here ({type(error).__name__}: {error}). "
        "It ships with the LLM envs (TokenizedAlignment-v0) and the linear agents (eoful); install a "
        "tokenized-bandit-gym that has them."
    )


def ratio_series(agent: Any) -> tuple[np.ndarray, np.ndarray]:
    """Return the per-round ``(max, mean)`` ratios an EOFUL-like agent recorded, as two ``(T,)`` arrays."""
    if hasattr(agent, "prefix_ratio_max") and hasattr(agent, "prefix_ratio_mean"):
        return np.asarray(agent.prefix_ratio_max, dtype=float), np.asarray(agent.prefix_ratio_mean, dtype=float)
    if hasattr(agent, "ratio_history"):
        history = np.asarray(agent.ratio_history, dtype=float).reshape(-1, 2)
        return history[:, 0], history[:, 1]
    raise SystemExit(
        f"agent {type(agent).__name__} records no Assumption 4 ratios "
        "(expected prefix_ratio_max/prefix_ratio_mean or ratio_history)"
    )


def main(args: Args) -> dict[str, Any]:
    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
    from tokenized_bandit_gym.evaluation import run_online
    from tokenized_bandit_gym.evaluation.ddmc.resources import resolve_model

    try:
        env = gym.make(
            ENV_ID,
            model=resolve_model(args.model),
            queries=args.queries,
            top_k=args.top_k,
            gamma=args.gamma,
            max_length=args.max_length,
            value_map=args.value_map,
            embedding_norm=args.embedding_norm,
            noise_scale=args.noise_scale,
            device=args.device,
        )
    except gym.error.Error as error:
        raise require(f"the env {ENV_ID}", error) from error
    try:
        from tokenized_bandit_gym import agents

        agent = agents.make("eoful", beta=args.beta)
    except (ImportError, ValueError) as error:
        raise require("the agent 'eoful'", error) from error
    run_online(env, agent, rounds=args.rounds, seed=args.seed)
    ratio_max, ratio_mean = ratio_series(agent)
    finite = np.isfinite(ratio_max)
    summary = {
        "settings": dataclasses.asdict(args),
        "ratio_max": ratio_max.tolist(),
        "ratio_mean": ratio_mean.tolist(),
        "max_of_max": float(np.max(ratio_max[finite])) if finite.any() else float("nan"),
        "mean_of_mean": float(np.mean(ratio_mean[finite])) if finite.any() else float("nan"),
        "share_rounds_max_below_threshold": float(np.mean(ratio_max[finite] <= args.threshold))
        if finite.any()
        else float("nan"),
    }
    print(
        f"rounds {args.rounds}: max ratio over all rounds {summary['max_of_max']:.3f}, "
        f"mean ratio {summary['mean_of_mean']:.3f}, share of rounds with max ratio <= {args.threshold}: "
        f"{summary['share_rounds_max_below_threshold']:.3f}"
    )
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        plot(ratio_max, ratio_mean, args, os.path.join(args.out_dir, "ratio.png"))
        with open(os.path.join(args.out_dir, "ratio.json"), "w", encoding="utf-8") as handle:
            json.dump(summary, handle)
        print(f"wrote {args.out_dir}/ratio.png and ratio.json")
    return summary


def plot(ratio_max: np.ndarray, ratio_mean: np.ndarray, args: Args, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.arange(1, ratio_max.shape[0] + 1)
    figure, axis = plt.subplots(figsize=(4.5, 3.2))
    axis.plot(t, ratio_max, label="Max Ratio", linewidth=0.8)
    axis.plot(t, ratio_mean, label="Mean Ratio", linewidth=0.8)
    axis.axhline(args.threshold, color="k", linestyle="--", linewidth=0.8, label=f"{args.threshold} (paper)")
    axis.set_xlabel("round t")
    axis.set_ylabel("rho = ||y^(1:l)||_Sigma / ||y||_Sigma")
    axis.set_title(f"EOFUL, L={args.max_length}, top-{args.top_k}, gamma={args.gamma}", fontsize=9)
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


if __name__ == "__main__":
    try:
        main(parse_args())
    except SystemExit as stop:
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
            sys.exit(2)
        raise
