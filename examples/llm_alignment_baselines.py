"""Decoding-time alignment on a real (tiny) LLM: baselines on TokenizedAlignment-v0, same seeds for all.

Runs each named agent online for ``rounds`` rounds on the shipped stories260K model with common
random numbers (same queries and noise for every agent) and prints its cumulative regret against
the oracle-greedy benchmark (paper section 6). Registered learners (e.g. ``eoful``) run unchanged
on the observation's ``[e : v(p)]`` features when installed.

Run: ``PYTHONPATH=. python examples/llm_alignment_baselines.py --rounds 50``
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import gymnasium as gym

import tokenized_bandit_gym  # noqa: F401  (registers the ids)
from tokenized_bandit_gym.agents import list_agents, make
from tokenized_bandit_gym.evaluation.run_online import run_online
from tokenized_bandit_gym.llm.language_model_config import Candidates, LengthRule, Reading
from tokenized_bandit_gym.script_arguments import config_option, parse_dataclass_arguments
from tokenized_bandit_gym.threads import use_small_work_threads

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@dataclass
class Args:
    """Example options."""

    agents: str = "oracle_greedy,misaligned_greedy,random,eoful"
    """comma-separated registered agent names (unregistered ones are skipped)"""
    rounds: int = 5
    """online rounds T"""
    max_length: int = config_option(LengthRule, "max_length", 8, note="the paper uses 30")
    top_k: int = config_option(Candidates, "top_k", 5, note="the paper uses 15")
    gamma: float = config_option(Reading, "gamma")
    seed: int = 0
    """seeds the query and noise streams and the agents"""


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


def main() -> None:
    """Print the cumulative regret of every agent."""
    args = parse_args()
    for name in args.agents.split(","):
        if name not in list_agents():
            print(f"{name}: not registered, skipped")
            continue
        env = gym.make(
            "TokenizedAlignment-v0", max_length=args.max_length, top_k=args.top_k, gamma=args.gamma, theta="random"
        )
        result = run_online(env, make(name), rounds=args.rounds, seed=args.seed)
        print(f"{name}: cumulative regret {result.cumulative_regret[-1]:.3f} over {args.rounds} rounds")


if __name__ == "__main__":
    use_small_work_threads()  # one torch thread unless OMP_NUM_THREADS says otherwise
    main()
