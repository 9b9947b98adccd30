"""The paper's claims a leaderboard's runs can test, each beside what was measured and a plain verdict.

Two kinds of claim:

- **A regret bound** (Theorem 3.2, EOFUL: ``O(L sqrt(d T log T))``; Theorem 4.2, GreedyETC:
  ``O(n L T^(2/3) (log T)^(1/3))``): on every task whose spec says ``theorem_applies``, for every agent
  with a theory exponent ``a``. The measured exponent is the horizon exponent (slope of log mean R(T)
  against log T over the task's horizons) where the agent ran at several horizons, else the growth
  exponent within one run (slope of log R(t) against log t over the second half of the rounds); its 95%
  interval is a percentile bootstrap over seeds (resampled within each horizon). A bound's shape
  ``T^a (log T)^(1 - a)`` has a local log-log slope above ``a`` (the log factor adds ``(1 - a) / log T``),
  so the measured exponent is compared with that slope over the same window, give or take
  :data:`EXPONENT_TOLERANCE`.
- **The alignment comparison** (section 6.2, Figure 2): on a task where EOFUL played beside the paper's
  baselines (WrongTheta, ``fixed_theta_greedy``; Misaligned greedy, ``misaligned_greedy``), EOFUL ends
  with lower regret than each. Measured: EOFUL's mean R(T) minus each baseline's, with a stratified
  bootstrap 95% interval of the difference (seeds resampled within each agent).

Verdicts (:data:`VERDICTS`): "consistent" where the whole interval agrees with the claim, "not
consistent" where the whole interval contradicts it, "not settled" where the interval straddles the
line (or nothing could be measured). A bound is an upper bound: an exponent below the bound's is
consistent with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from tokenized_bandit_gym.evaluation.robust_statistics import (
    bound_shape,
    growth_exponent,
    growth_exponent_interval,
    horizon_exponent_interval,
    loglog_slopes,
    stratified_bootstrap_ci,
)

CONSISTENT = "consistent"
NOT_CONSISTENT = "not consistent"
NOT_SETTLED = "not settled"
VERDICTS = (CONSISTENT, NOT_CONSISTENT, NOT_SETTLED)

# How far a measured exponent may exceed the bound's local slope and still read as consistent: finite-T slopes
# carry lower-order terms (an exploration schedule rounded to whole rounds, a burn-in) that a bound hides.
EXPONENT_TOLERANCE = 0.1

# Where the paper states each agent's bound (registered agent name -> source).
THEOREMS = {
    "eoful": "Theorem 3.2",
    "batched_eoful": "Theorem 3.2",
    "greedy_etc": "Theorem 4.2",
    "batched_greedy_etc": "Theorem 4.2",
}
LEARNERS = frozenset({"eoful", "batched_eoful"})
# The paper's alignment baselines (section 6.2), by registered name.
ALIGNMENT_BASELINES = frozenset({"fixed_theta_greedy", "misaligned_greedy"})


@dataclass(frozen=True)
class Claim:
    """One claim of the paper beside what the runs measured.

    ``measured``, ``ci_low`` and ``ci_high`` are an exponent (bound claims) or a difference of mean final
    regret (comparison claims); ``expected`` says in words what would agree with the claim, ``detail`` how
    the number was measured.
    """

    source: str
    statement: str
    task: str
    agents: tuple[str, ...]
    quantity: str
    measured: float
    ci_low: float
    ci_high: float
    expected: str
    verdict: str
    detail: str

    @property
    def measured_text(self) -> str:
        """``"0.52 [0.47, 0.58]"``: the measured value and its 95% interval (``n/a`` where not measured)."""
        if math.isnan(self.measured):
            return "n/a"
        interval = "n/a" if math.isnan(self.ci_low) else f"{self.ci_low:.2f}, {self.ci_high:.2f}"
        return f"{self.measured:.2f} [{interval}]"


def _fraction_text(exponent: float) -> str:
    """``"2/3"`` for an exponent that is a fraction with a small denominator, else ``"0.42"``."""
    fraction = Fraction(exponent).limit_denominator(12)
    return str(fraction) if abs(float(fraction) - exponent) <= 1e-9 else f"{exponent:.2g}"


def exponent_text(exponent: float) -> str:
    """``"sqrt(T)"`` for 0.5, ``"T^(2/3)"`` for 2/3, else ``"T^(0.42)"``."""
    return "sqrt(T)" if _fraction_text(exponent) == "1/2" else f"T^({_fraction_text(exponent)})"


def bound_slope(points: np.ndarray, exponent: float) -> float:
    """The log-log slope of ``T^a (log T)^(1 - a)`` fitted over ``points`` ``(P,)`` (a bound's exponent there)."""
    return float(loglog_slopes(points, bound_shape(points, exponent)))


def _bound_verdict(low: float, high: float, slope: float) -> str:
    if math.isnan(low) or math.isnan(high):
        return NOT_SETTLED
    if high <= slope + EXPONENT_TOLERANCE:
        return CONSISTENT
    return NOT_CONSISTENT if low > slope + EXPONENT_TOLERANCE else NOT_SETTLED


def bound_claim(
    task: str,
    agent: str,
    agent_name: str,
    exponent: float,
    measured: float,
    interval: tuple[float, float],
    window: np.ndarray,
    quantity: str,
) -> Claim:
    """A bound claim: ``agent`` (registered as ``agent_name``) on ``task``, its exponent measured over ``window``.

    Args:
        task: the task's label.
        agent: the agent's label.
        agent_name: the agent's registered name (names the theorem).
        exponent: theory's ``a`` in ``O(T^a (log T)^(1 - a))``.
        measured: the measured exponent (the table's growth or horizon exponent).
        interval: its 95% interval.
        window: ``(P,)`` the rounds or horizons the exponent was fitted over.
        quantity: what was measured, in words.
    """
    slope = bound_slope(window, exponent)
    if math.isnan(measured):
        interval = (math.nan, math.nan)
    verdict = _bound_verdict(*interval, slope)
    detail = (
        f"{quantity}; the bound's shape T^{exponent:.2g} (log T)^{1 - exponent:.2g} has slope {slope:.2f} there; "
        f"consistent: the 95% interval lies at or below {slope + EXPONENT_TOLERANCE:.2f} (that slope + "
        f"{EXPONENT_TOLERANCE:g}); not consistent: it lies wholly above"
    )
    return Claim(
        source=THEOREMS.get(agent_name, "the spec's theory exponent"),
        statement=f"{agent}'s regret grows like {exponent_text(exponent)} up to logs",
        task=task,
        agents=(agent,),
        quantity=quantity,
        measured=measured,
        ci_low=interval[0],
        ci_high=interval[1],
        expected=f"a = {_fraction_text(exponent)}: slope {slope:.2f} with the log factor",
        verdict=verdict,
        detail=detail,
    )


def comparison_claim(
    task: str, learner: str, baselines: Mapping[str, np.ndarray], learner_finals: np.ndarray, resamples: int, seed: int
) -> Claim:
    """The alignment comparison: ``learner`` (EOFUL) ends with lower regret than every baseline on ``task``.

    Args:
        task: the task's label.
        learner: EOFUL's label.
        baselines: each baseline's label -> its final regrets ``(seeds,)``.
        learner_finals: EOFUL's final regrets ``(seeds,)``.
        resamples: bootstrap resamples.
        seed: seeds the bootstrap.

    The measured value is the difference to the baseline EOFUL is closest to beating (the largest upper
    end of the interval), so that "consistent" means EOFUL is below every baseline.
    """
    differences = {}
    for label, finals in baselines.items():
        low, high = stratified_bootstrap_ci(
            [learner_finals, finals],
            lambda first, second, axis=-1: first.mean(axis=axis) - second.mean(axis=axis),
            resamples=resamples,
            seed=seed,
        )
        differences[label] = (float(learner_finals.mean() - finals.mean()), low, high)
    hardest = max(differences, key=lambda label: (np.nan_to_num(differences[label][2], nan=np.inf), label))
    value, low, high = differences[hardest]
    if math.isnan(low):
        verdict = NOT_SETTLED
    elif all(upper < 0 for _, _, upper in differences.values()):
        verdict = CONSISTENT
    elif any(lower > 0 for _, lower, _ in differences.values()):
        verdict = NOT_CONSISTENT
    else:
        verdict = NOT_SETTLED
    names = " and ".join(baselines)
    detail = "; ".join(
        f"R(T) {learner} - {label}: {mean:.2f} [{lower:.2f}, {upper:.2f}]"
        for label, (mean, lower, upper) in differences.items()
    )
    return Claim(
        source="Section 6.2 (Figure 2)",
        statement=f"{learner}, learning theta online, ends with lower regret than {names}",
        task=task,
        agents=(learner, *baselines),
        quantity=f"mean R(T) of {learner} minus {hardest}'s",
        measured=value,
        ci_low=low,
        ci_high=high,
        expected="difference < 0 against every baseline",
        verdict=verdict,
        detail=detail + " (95% bootstrap intervals over seeds)",
    )


def measure_claims(
    tasks: list[str],
    agent_names: Mapping[str, str],
    theory_exponents: Mapping[str, float],
    theory_tasks: set[str],
    cumulative: Mapping[tuple[str, str], np.ndarray],
    horizons: Mapping[tuple[str, str], tuple[np.ndarray, list[np.ndarray]]],
    start_fraction: float,
    resamples: int = 2000,
    seed: int = 0,
) -> list[Claim]:
    """Every claim the runs can test: bound claims by theorem, then comparisons, each group in the order of ``tasks``.

    Args:
        tasks: the task labels.
        agent_names: agent label -> registered agent name.
        theory_exponents: agent label -> theory's exponent a.
        theory_tasks: the task labels where the spec says a theorem applies.
        cumulative: ``(task, agent)`` -> cumulative regret of each seed ``(seeds, T)``.
        horizons: ``(task, agent)`` -> ``(horizons (H,), final regrets per horizon)`` where the agent ran at
            several horizons.
        start_fraction: where the growth exponent's window starts, as a fraction of T.
        resamples: bootstrap resamples.
        seed: seeds the bootstraps.
    """
    claims: list[Claim] = []
    for task in tasks:
        if task not in theory_tasks:
            continue
        for agent, exponent in theory_exponents.items():
            if (task, agent) not in cumulative:
                continue
            if (task, agent) in horizons:
                points, finals = horizons[(task, agent)]
                means = np.array([values.mean() for values in finals])
                measured = float(loglog_slopes(points, means)) if np.all(means > 0) else math.nan
                interval = horizon_exponent_interval(points, finals, resamples=resamples, seed=seed)
                quantity = "horizon exponent: slope of log mean R(T) over T = " + ", ".join(
                    f"{int(h):,}" for h in points
                )
                window = points
            else:
                curves = cumulative[(task, agent)]  # (S, T)
                total = curves.shape[1]
                rounds = np.arange(1, total + 1, dtype=np.float64)
                window = rounds[rounds >= start_fraction * total]
                measured = growth_exponent(curves.mean(axis=0), start_fraction)
                interval = growth_exponent_interval(curves, start_fraction, resamples=resamples, seed=seed)
                quantity = f"growth exponent: slope of log R(t) over t = {int(window[0]):,} .. {total:,} of one run"
            claims.append(bound_claim(task, agent, agent_names[agent], exponent, measured, interval, window, quantity))
    claims.sort(key=lambda claim: claim.source)  # Theorem 3.2 before 4.2, whatever the tasks' order
    for task in tasks:
        played = {agent: agent_names[agent] for (name, agent) in cumulative if name == task}
        learners = [agent for agent, name in played.items() if name in LEARNERS]
        baselines = [agent for agent, name in played.items() if name in ALIGNMENT_BASELINES]
        if not learners or not baselines:
            continue
        final = {agent: cumulative[(task, agent)][:, -1] for agent in (learners[0], *baselines)}
        claims.append(
            comparison_claim(
                task, learners[0], {label: final[label] for label in baselines}, final[learners[0]], resamples, seed
            )
        )
    return claims


def claim_task_order(tasks: list[str], claims: list[Claim]) -> list[str]:
    """``tasks`` with the tasks of ``claims`` first, in the claims' order, then the others as they were."""
    return list(dict.fromkeys([claim.task for claim in claims if claim.task in tasks] + tasks))
