"""A yardstick for any learner: the cumulative regret of Random and EOFUL over the same rounds and seeds.

Every RL example (SB3, TorchRL, Tianshou, CleanRL-style, Minari) ends with :func:`yardstick_line`, so a
reader sees at once whether the deep-RL agent learned: below Random it learned something, near EOFUL it
learned what the paper's algorithm learns in the same number of rounds.

    >>> from tokenized_bandit_gym.evaluation.yardstick import yardstick_line
    >>> print(yardstick_line("PPO", 3.1, "TokenizedLinearBandit-v0", rounds=20, seeds=[0]))  # doctest: +SKIP
    yardstick, TokenizedLinearBandit-v0, 20 rounds, seed 0: cumulative regret PPO 3.10 | Random 3.32 | EOFUL 2.49

Random never learns: its regret grows linearly. EOFUL (paper Algorithm 1) needs candidate embeddings; where
the env has none (a TMAB) GreedyETC (Algorithm 2) stands in, or UCT where GreedyETC cannot play either
(a fixed-length LLM decoding task), and the line names it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

REFERENCE_AGENTS = ("random", "eoful")
"""The agents every learner is measured against, by registered name."""

STAND_INS = {"eoful": ("greedy_etc", "uct")}
"""A reference agent -> the agents that take its place, first that plays, on an env it cannot play (EOFUL on a TMAB)."""

_LABELS = {"random": "Random", "eoful": "EOFUL", "greedy_etc": "GreedyETC", "uct": "UCT"}


@dataclass(frozen=True)
class Yardstick:
    """The reference agents' cumulative regret on one env over ``rounds`` rounds, averaged over ``seeds``.

    Attributes:
        env_id: the registered id played.
        env_kwargs: the keywords it was made with.
        rounds: T, rounds each reference agent played per seed (learning online from round 1).
        seeds: the seeds (each seeds the env streams and the agent).
        regret: agent name -> mean over seeds of the cumulative regret after ``rounds`` rounds.
        stand_ins: a reference agent that cannot play the env -> the agent that played in its place.
    """

    env_id: str
    env_kwargs: dict[str, Any]
    rounds: int
    seeds: tuple[int, ...]
    regret: dict[str, float]
    stand_ins: dict[str, str] = field(default_factory=dict)

    def line(self, learner: str, learner_regret: float) -> str:
        """One line: the learner's cumulative regret beside each reference agent's (same rounds and seeds)."""
        seeds = f"seed {self.seeds[0]}" if len(self.seeds) == 1 else f"seeds {list(self.seeds)}"
        columns = [f"{learner} {learner_regret:.2f}"]
        for name, regret in self.regret.items():
            replaced = next((original for original, stand_in in self.stand_ins.items() if stand_in == name), None)
            note = f" (for {_LABELS.get(replaced, replaced)}, which cannot play this env)" if replaced else ""
            columns.append(f"{_LABELS.get(name, name)} {regret:.2f}{note}")
        return f"yardstick, {self.env_id}, {self.rounds} rounds, {seeds}: cumulative regret " + " | ".join(columns)


def _checked_rounds_and_seeds(rounds: int, seeds: Sequence[int]) -> tuple[int, ...]:
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    seeds = tuple(seeds)
    if not seeds or any(isinstance(seed, bool) or not isinstance(seed, int) or seed < 0 for seed in seeds):
        raise ValueError(f"seeds must be a non-empty list of non-negative integers, got {list(seeds)!r}")
    return seeds


def measure_yardstick(
    env_id: str, rounds: int, seeds: Sequence[int], env_kwargs: Mapping[str, Any] | None = None
) -> Yardstick:
    """Play each of :data:`REFERENCE_AGENTS` online for ``rounds`` rounds on ``env_id``, once per seed.

    Each run is :func:`~tokenized_bandit_gym.evaluation.run_online.run_online` on the single env (made
    once: each run's ``reset(seed)`` reseeds its streams), so the agents see the same queries and noise
    (common random numbers). A reference agent that cannot
    play the env (its ``reset`` refuses it, as ``tbg list`` reports) is replaced by the first of its
    :data:`STAND_INS` that can.

    Args:
        env_id: a registered id.
        rounds: T >= 1, the rounds the learner was scored over.
        seeds: the learner's seeds.
        env_kwargs: keywords for ``gym.make`` (those the learner's env was made with).

    Returns:
        The mean cumulative regret of each reference agent over the seeds.

    Raises:
        ValueError: ``rounds`` or ``seeds`` are not valid, or neither a reference agent nor any of its
            stand-ins can play the env.
    """
    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
    from tokenized_bandit_gym.evaluation.agent_support import one_line, reset_as_a_run_does
    from tokenized_bandit_gym.evaluation.run_online import run_online
    from tokenized_bandit_gym.registration import make_agent
    from tokenized_bandit_gym.task import Task

    seeds = _checked_rounds_and_seeds(rounds, seeds)
    kwargs = dict(env_kwargs or {})
    regret: dict[str, float] = {}
    stand_ins: dict[str, str] = {}
    env = gym.make(env_id, **kwargs)  # one instance for every run: reset(seed) reseeds its streams, as a fresh env's
    try:
        task = Task.from_env(env, rounds)
        for name in REFERENCE_AGENTS:
            refusals = []
            for candidate in (name, *STAND_INS.get(name, ())):
                try:
                    reset_as_a_run_does(make_agent(candidate), task, seeds[0])
                    break
                except (TypeError, ValueError) as error:
                    refusals.append(f"{candidate}: {one_line(error)}")
            else:
                raise ValueError(f"no reference agent for {name!r} plays {env_id!r} ({'; '.join(refusals)})")
            if candidate != name:
                stand_ins[name] = candidate
            finals = [run_online(env, make_agent(candidate), rounds, seed=seed).cumulative_regret[-1] for seed in seeds]
            regret[candidate] = float(sum(finals) / len(finals))
    finally:
        env.close()
    return Yardstick(env_id, kwargs, rounds, seeds, regret, stand_ins)


def yardstick_line(
    learner: str,
    learner_regret: float,
    env_id: str,
    rounds: int,
    seeds: Sequence[int],
    env_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """:func:`measure_yardstick`, then its :meth:`Yardstick.line` for the learner (what the RL examples print).

    Args:
        learner: the learner's name in the line ("PPO (TorchRL)").
        learner_regret: its cumulative regret over its first ``rounds`` rounds (summed over seeds, averaged).
        env_id: the env it learned on.
        rounds: T, the rounds its regret is summed over.
        seeds: its seeds.
        env_kwargs: the keywords its env was made with.
    """
    return measure_yardstick(env_id, rounds, seeds, env_kwargs).line(learner, learner_regret)
