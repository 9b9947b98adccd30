"""Deep RL against bandit algorithms on the same token tasks: PPO, MaskablePPO and DQN vs EOFUL and GreedyETC.

Every agent learns online on the same stream of queries and noise (same seed: common random
numbers), its regret counted from round 1: the SB3 agents get no pre-training. EOFUL plays the
tokenized linear bandit (TLB), GreedyETC the tokenized multi-armed bandit (TMAB); the random agent
is the floor every learner must beat. The script prints each agent's cumulative regret, saves a
plot of cumulative regret against rounds, and ends with the yardstick line of each SB3 agent: its
cumulative regret beside Random's and EOFUL's over the same rounds and seed
(:mod:`tokenized_bandit_gym.evaluation.yardstick`; GreedyETC stands in for EOFUL on the TMAB).

    PYTHONPATH=. python examples/sb3_vs_eoful.py --rounds 300
    PYTHONPATH=. python examples/sb3_vs_eoful.py --arena   # all agents side by side in the PettingZoo arena

Agents not registered in ``tokenized_bandit_gym.registration`` (e.g. ``eoful`` before it is merged) are skipped with
a message; the run goes on with the others.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import gymnasium as gym
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import tokenized_bandit_gym  # noqa: E402, F401  (registers the env ids)
from tokenized_bandit_gym import agents  # noqa: E402
from tokenized_bandit_gym.adapters.pettingzoo_arena import TokenizedBanditArena  # noqa: E402
from tokenized_bandit_gym.evaluation.online_result import OnlineResult  # noqa: E402
from tokenized_bandit_gym.evaluation.run_arena import run_arena  # noqa: E402
from tokenized_bandit_gym.evaluation.run_online import run_online  # noqa: E402
from tokenized_bandit_gym.evaluation.yardstick import REFERENCE_AGENTS, STAND_INS, measure_yardstick  # noqa: E402
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments  # noqa: E402
from tokenized_bandit_gym.threads import use_small_work_threads


@dataclass
class Args:
    """Command-line arguments (each field's ``help`` is its ``--help`` line)."""

    rounds: int = field(default=60, metadata={"help": "rounds (episodes) T each agent plays"})
    seed: int = field(default=0, metadata={"help": "seed of the query/noise streams and of every agent"})
    tlb_env: str = field(default="TokenizedLinearBandit-v0", metadata={"help": "TLB env id"})
    tmab_env: str = field(default="TokenizedMultiArmedBandit-v0", metadata={"help": "TMAB env id"})
    tlb_agents: str = field(
        default="ppo,maskable_ppo,dqn,eoful,random", metadata={"help": "comma-separated agent names for TLB"}
    )
    tmab_agents: str = field(
        default="ppo,maskable_ppo,dqn,greedy_etc,random", metadata={"help": "comma-separated agent names for TMAB"}
    )
    arena: bool = field(default=False, metadata={"help": "play each task's agents side by side in the arena"})
    plot: str = field(default="runs/sb3_vs_eoful.png", metadata={"help": "where to save the regret plot ('' for none)"})


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


def available(names: str) -> list[str]:
    """The names that are registered; a message for each that is not."""
    known = agents.list_agents()
    chosen = []
    for name in (part.strip() for part in names.split(",") if part.strip()):
        if name in known:
            chosen.append(name)
        else:
            print(f"skipping agent {name!r}: not a registered agent (registered: {', '.join(known)})")
    return chosen


def play(env_id: str, names: list[str], args: Args) -> dict[str, OnlineResult]:
    """Every agent in ``names`` learns online on ``env_id`` for ``args.rounds`` rounds, same seed."""
    if args.arena:
        arena = TokenizedBanditArena(env_id, names)
        return run_arena(arena, {name: agents.make(name) for name in names}, args.rounds, seed=args.seed)
    results = {}
    for name in names:
        start = time.perf_counter()
        results[name] = run_online(gym.make(env_id), agents.make(name), args.rounds, seed=args.seed)
        print(f"  {env_id} {name}: {time.perf_counter() - start:.1f} s")
    return results


def main(args: Args) -> dict[str, dict[str, OnlineResult]]:
    tasks = {args.tlb_env: available(args.tlb_agents), args.tmab_env: available(args.tmab_agents)}
    results = {env_id: play(env_id, names, args) for env_id, names in tasks.items() if names}
    for env_id, by_agent in results.items():
        print(f"\n{env_id}: cumulative regret after {args.rounds} rounds (seed {args.seed})")
        for name, result in sorted(by_agent.items(), key=lambda item: item[1].cumulative_regret[-1]):
            print(f"  {name:>14s}  {result.cumulative_regret[-1]:9.3f}")
    if args.plot and results:
        figure, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4), squeeze=False)
        for axis, (env_id, by_agent) in zip(axes[0], results.items(), strict=True):
            for name, result in by_agent.items():
                axis.plot(range(1, result.rounds + 1), result.cumulative_regret, label=name)
            axis.set_title(env_id)
            axis.set_xlabel("round t")
            axis.set_ylabel("cumulative regret")
            axis.legend()
        figure.tight_layout()
        os.makedirs(os.path.dirname(args.plot) or ".", exist_ok=True)
        figure.savefig(args.plot, dpi=120)
        plt.close(figure)
        print(f"\nsaved {args.plot}")
    for env_id, by_agent in results.items():
        references = {*REFERENCE_AGENTS, *(name for stand_ins in STAND_INS.values() for name in stand_ins)}
        learners = [name for name in by_agent if name not in references and not name.startswith("oracle")]
        if learners:
            yardstick = measure_yardstick(env_id, args.rounds, [args.seed])
            for name in learners:
                print(yardstick.line(f"{name} (SB3)", float(by_agent[name].cumulative_regret[-1])))
    return results


if __name__ == "__main__":
    use_small_work_threads()  # one torch thread unless OMP_NUM_THREADS says otherwise
    main(parse_args())
