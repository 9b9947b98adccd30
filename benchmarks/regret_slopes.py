"""Fitted slope of log cumulative regret vs log T for GreedyETC (Theorem 4.2: T^(2/3) up to logs).

For every horizon T on a log grid, GreedyETC (with its default ``N = T^(2/3) (log T)^(1/3)``)
plays T rounds of a TMAB instance and the cumulative regret R(T) is recorded; the slope of a
least-squares line through ``(log T, log R(T))`` is reported, over the whole grid and over its
upper half.

Millions of rounds are out of reach of the Gymnasium env (about 5 ms per round on a 2-core
CPU), so rounds are played by a lean loop that calls the real agent's ``act``/``update`` with
observations built in numpy and rewards ``u(y) + N(0, sigma^2)`` read from the instance's exact
utility (cached per response). Once GreedyETC has committed it submits the committed response
forever (tested in ``tests/agents/test_greedy_etc.py``), so the remaining rounds' regret is
added in closed form. The lean loop is checked against ``run_online`` on the real env first:
noise-free, both give the same cumulative regret.

Run: ``PYTHONPATH=. python benchmarks/regret_slopes.py`` (add ``--help`` for the options).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym.agents.greedy_etc import GreedyETC, default_exploration_rounds
from tokenized_bandit_gym.evaluation.run_online import run_online
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments
from tokenized_bandit_gym.task import Task
from tokenized_bandit_gym.threads import use_small_work_threads


@dataclasses.dataclass
class Args:
    """Options (each field is a command-line flag)."""

    env_id: str = "TokenizedMultiArmedBandit-v0"
    """the registered TMAB id (its default kwargs are the 'default TMAB')"""
    env_kwargs: str = ""
    """extra env keywords as k=v,k=v (ints, floats, strings), e.g. vocab_size=3,max_length=3"""
    min_exponent: float = 3.0
    """smallest horizon is 10**min_exponent"""
    max_exponent: float = 6.0
    """largest horizon is 10**max_exponent"""
    points: int = 7
    """number of horizons on the log grid"""
    seeds: int = 3
    """independent runs per horizon (regret averaged)"""
    check_rounds: int = 300
    """rounds of the lean-loop vs run_online check (0 skips it)"""


def parse_kwargs(text: str) -> dict[str, Any]:
    """``"a=1,b=0.5,c=x"`` -> ``{"a": 1, "b": 0.5, "c": "x"}``."""
    kwargs: dict[str, Any] = {}
    for item in filter(None, text.split(",")):
        key, value = item.split("=")
        for cast in (int, float):
            try:
                kwargs[key] = cast(value)
                break
            except ValueError:
                continue
        else:
            kwargs[key] = value
    return kwargs


class LeanTMAB:
    """Plays GreedyETC on a TMAB instance without the Gymnasium shell (early EOS allowed)."""

    def __init__(self, env: gym.Env[Any, Any], horizon: int) -> None:
        self.problem = env.unwrapped.problem
        if self.problem.fixed_length:
            raise ValueError("the lean loop assumes fixed_length=False")
        self.task = Task.from_env(env, horizon)
        self.n, self.length, self.eos = self.problem.vocab_size, self.problem.max_length, self.problem.eos_token_id
        self.noise_scale = float(env.unwrapped.noise_model.scale)
        query = torch.zeros(1, dtype=torch.int64)
        self.optimum = float(self.problem.optimal(query).utility[0])
        self._utilities: dict[tuple[int, ...], float] = {}
        self._all = np.ones(self.n, dtype=np.int8)
        self._only_eos = np.zeros(self.n, dtype=np.int8)
        self._only_eos[self.eos] = 1
        self._candidates = np.arange(self.n, dtype=np.int64)

    def utility(self, response: tuple[int, ...]) -> float:
        """Exact u(y) of a complete response (cached)."""
        if response not in self._utilities:
            padded = list(response) + [self.eos] * (self.length - len(response))
            value = self.problem.utility(torch.zeros(1, dtype=torch.int64), torch.tensor([padded]))
            self._utilities[response] = float(value[0])
        return self._utilities[response]

    def cumulative_regret(self, agent: GreedyETC, horizon: int, seed: int) -> float:
        """R(T) of ``agent`` over ``horizon`` rounds with Gaussian noise seeded by ``seed``."""
        rng = np.random.default_rng(seed)
        agent.reset(self.task, seed)
        total = 0.0
        for round_index in range(horizon):
            if agent.committed_response is not None:
                return total + (horizon - round_index) * (self.optimum - self.utility(agent.committed_response))
            response = np.zeros(self.length, dtype=np.int64)
            played: list[int] = []
            while not played or played[-1] != self.eos:
                observation = {
                    "response": response,
                    "length": np.int64(len(played)),
                    "candidate_tokens": self._candidates,
                    "action_mask": self._all if len(played) < self.length - 1 else self._only_eos,
                }
                token = int(self._candidates[agent.act(observation, {"query_index": 0})])
                response[len(played)] = token
                played.append(token)
            utility = self.utility(tuple(played))
            agent.update({}, utility + self.noise_scale * rng.standard_normal(), {})
            total += self.optimum - utility
        return total


def check_against_run_online(args: Args) -> None:
    """Noise-free, the lean loop and ``run_online`` on the env give the same cumulative regret."""
    kwargs = {**parse_kwargs(args.env_kwargs), "noise_scale": 0.0}
    env = gym.make(args.env_id, **kwargs)
    agent = GreedyETC(exploration_rounds=2)
    reference = run_online(env, agent, args.check_rounds, seed=0).regret.sum()
    lean = LeanTMAB(env, args.check_rounds).cumulative_regret(GreedyETC(exploration_rounds=2), args.check_rounds, 0)
    if not np.isclose(reference, lean, rtol=1e-9, atol=1e-9):
        raise RuntimeError(f"lean loop regret {lean} != run_online regret {reference}")
    print(f"check: lean loop == run_online over {args.check_rounds} noise-free rounds (R = {lean:.4f})")


def fitted_slope(horizons: np.ndarray, regrets: np.ndarray) -> float:
    """Least-squares slope of log R(T) against log T."""
    return float(np.polyfit(np.log(horizons), np.log(regrets), 1)[0])


def main(args: Args) -> None:
    """Measure R(T) on the grid and print a markdown table and the fitted slopes."""
    if args.check_rounds:
        check_against_run_online(args)
    env = gym.make(args.env_id, **parse_kwargs(args.env_kwargs))
    problem = env.unwrapped.problem
    horizons = np.unique(np.round(np.logspace(args.min_exponent, args.max_exponent, args.points)).astype(int))
    print(f"{args.env_id} {args.env_kwargs or '(defaults)'}: n={problem.vocab_size}, L={problem.max_length}")
    print("| T | N | (L-1) n N | R(T) mean | R(T) / T | committed (all seeds) | seconds |")
    print("|---|---|---|---|---|---|---|")
    regrets = []
    for horizon in horizons:
        start = time.perf_counter()
        lean = LeanTMAB(env, int(horizon))
        values, commits = [], []
        for seed in range(args.seeds):
            agent = GreedyETC()
            values.append(lean.cumulative_regret(agent, int(horizon), seed))
            commits.append(agent.committed_response is not None)
        regrets.append(float(np.mean(values)))
        budget = (problem.max_length - 1) * problem.vocab_size * default_exploration_rounds(int(horizon))
        print(
            f"| {horizon} | {default_exploration_rounds(int(horizon))} | {budget} | {regrets[-1]:.1f} | "
            f"{regrets[-1] / horizon:.4f} | {all(commits)} | {time.perf_counter() - start:.1f} |",
            flush=True,
        )
    regrets_array = np.array(regrets)
    half = len(horizons) // 2
    print(f"slope over the whole grid: {fitted_slope(horizons, regrets_array):.3f}")
    upper = fitted_slope(horizons[half:], regrets_array[half:])
    print(f"slope over the upper half (T >= {horizons[half]}): {upper:.3f}")


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


if __name__ == "__main__":
    use_small_work_threads()  # one torch thread unless OMP_NUM_THREADS says otherwise
    main(parse_args())
