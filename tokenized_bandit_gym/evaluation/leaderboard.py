"""The leaderboard: stored runs grouped into agents x tasks, with their statistics and curves.

Runs are grouped by task (env id, env kwargs and T) and agent (name and kwargs); seeds are the
replicates. Per task and agent: final cumulative regret mean, IQM and a 95% bootstrap CI of the
mean over seeds, the regret growth exponent (fitted on the mean curve over the second half of
the rounds) and the time per round. Across tasks, final regret is normalised by the task's
reference (the ``random`` agent's mean final regret when it ran on the task, else the largest
agent mean), so 0 is optimal and 1 is as bad as random; the aggregate mean and IQM get 95%
stratified bootstrap CIs (seeds resampled within tasks), and the probability of improvement of
each agent over each other is averaged over the tasks both played.

Each task states its benchmark (:data:`BENCHMARKS`, from the runs' ``benchmark`` metadata): the
exact optimum (synthetic tasks), or on LLM tasks greedy decoding or beam search with the true
utility, which are not upper bounds (an agent can beat them: regret can be negative). Agents are
ranked across tasks only when every ranked agent played the same tasks, and never on a score that
is ``n/a``. Theory's exponents (and the plots' dashed curves) appear only on tasks whose spec says
``theorem_applies = true``. The headline names each task's leader, its margin over the runner-up
and the probability of improvement between the two.

Oracles and the random baseline are *reference* rows (:data:`REFERENCE_AGENTS`, or ``reference``
in the spec): shown with their statistics but not ranked. Each row carries theory's regret
exponent ``a`` when one is known (:data:`THEORY_EXPONENTS`, or ``theory_exponent`` in the spec):
both of the paper's bounds read ``R(T) = O(T^a (log T)^(1 - a))``. A spec task with ``horizons``
also runs every agent at those smaller T; their final regrets give the horizon exponent, the
slope of log mean R(T) against log T, which is what a bound in T predicts for an agent, such as
GreedyETC, whose schedule depends on T (its curve within one run is not a bound's shape).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import numpy.typing as npt

from tokenized_bandit_gym.evaluation.leaderboard_claims import Claim, claim_task_order, measure_claims
from tokenized_bandit_gym.evaluation.robust_statistics import (
    growth_exponent,
    iqm,
    loglog_slopes,
    pointwise_bootstrap_band,
    pooled_iqm,
    pooled_mean,
    probability_of_improvement,
    stratified_bootstrap_ci,
)
from tokenized_bandit_gym.evaluation.run_record import RunRecord
from tokenized_bandit_gym.evaluation.run_spec import canonical_json

if TYPE_CHECKING:
    from tokenized_bandit_gym.evaluation.leaderboard_spec import LeaderboardSpec

# Fraction of T where the growth-exponent fit starts (the fit uses rounds [T/2, T]).
GROWTH_WINDOW_START = 0.5
Row = TypeVar("Row", "TaskAgentRow", "AggregateRow")

# Points per plotted regret curve (evenly spaced rounds, the last round included).
CURVE_POINTS = 200

# Agents shown as reference rows (not ranked) unless the spec says otherwise.
REFERENCE_AGENTS = frozenset({"random", "oracle_greedy", "oracle_optimal"})

# Theory's exponent a in R(T) = O(T^a (log T)^(1 - a)): EOFUL's O(L sqrt(d T log T)) (Theorem 3.2)
# and GreedyETC's O(n L T^(2/3) (log T)^(1/3)) (Theorem 4.2).
THEORY_EXPONENTS = {"eoful": 0.5, "batched_eoful": 0.5, "greedy_etc": 2.0 / 3.0, "batched_greedy_etc": 2.0 / 3.0}

# The benchmark regret is measured against (the env's optimal_kind, stored with each run) -> how tables name it.
BENCHMARKS = {
    "exact": "exact optimum",
    "oracle_greedy": "oracle greedy: greedy decoding with the true utility, not an upper bound (regret can be "
    "negative)",
    "oracle_beam": "oracle beam: the better of beam search and greedy decoding with the true utility, not an upper "
    "bound (regret can be negative)",
}
UNRECORDED_BENCHMARK = "not recorded with these runs"

# Run metadata shown as the report's provenance (every distinct value over the runs).
PROVENANCE_KEYS = (
    "git_commit",
    "package_version",
    "torch_version",
    "transformers_version",
    "python_version",
    "platform",
    "device",
)


@dataclass(frozen=True)
class TaskAgentRow:
    """One agent on one task, over its seeds. Regret is final cumulative regret R(T)."""

    task: str
    agent: str
    rank: int | None
    runs: int
    rounds: int
    mean: float
    iqm: float
    ci_low: float
    ci_high: float
    growth_exponent: float
    ms_per_round: float
    normalized_mean: float
    reference: bool = False
    theory_exponent: float = math.nan
    horizon_exponent: float = math.nan
    seeds_identical: bool = False


@dataclass(frozen=True)
class AggregateRow:
    """One agent across tasks: normalised final regret (0 optimal, 1 the task's reference).

    ``rank`` is 0 for a reference row and None where no rank is given (a score of ``n/a``, or
    ranked agents that did not all play the same tasks).
    """

    agent: str
    rank: int | None
    tasks: int
    runs: int
    mean: float
    mean_ci_low: float
    mean_ci_high: float
    iqm: float
    iqm_ci_low: float
    iqm_ci_high: float
    ms_per_round: float
    reference: bool = False


@dataclass(frozen=True)
class RegretCurve:
    """Mean cumulative regret over seeds at some rounds, with a 95% pointwise bootstrap band."""

    rounds: npt.NDArray[np.int64]
    mean: npt.NDArray[np.float64]
    low: npt.NDArray[np.float64]
    high: npt.NDArray[np.float64]


@dataclass(frozen=True)
class HorizonPoints:
    """Mean final regret R(T) over seeds at several horizons T, with 95% bootstrap CIs of the mean.

    ``finals`` holds each horizon's final regrets, one value per seed.
    """

    horizons: npt.NDArray[np.int64]
    mean: npt.NDArray[np.float64]
    low: npt.NDArray[np.float64]
    high: npt.NDArray[np.float64]
    seeds: int
    finals: tuple[npt.NDArray[np.float64], ...] = ()


@dataclass
class Leaderboard:
    """Everything a report shows (see the module docstring).

    ``benchmarks`` maps a task to its benchmark's kind (a key of :data:`BENCHMARKS`, or
    :data:`UNRECORDED_BENCHMARK`); ``theory_tasks`` are the tasks where theory applies;
    ``spec_given`` says whether a spec supplied caveats, roles and horizons; ``headline`` is the
    report's three opening lines (leader, margin, confidence); ``theta_sources`` maps each task whose
    runs recorded it (the LLM alignment tasks) to where its theta came from (the env's
    ``problem.theta_source``: the paper's 0.5 * 1, a random direction, or a Bradley-Terry fit with its
    held-out accuracy); ``claims`` are the paper's claims the runs test (:mod:`leaderboard_claims`), and
    ``tasks`` lists the tasks of those claims first, in the claims' order; ``regimes`` maps each alignment task
    to its regime diagnostic's lines (:func:`~tokenized_bandit_gym.evaluation.alignment_regime.regime_summary`:
    can the task separate a learner from the LM's own decode).
    """

    title: str
    tasks: list[str]
    agents: list[str]
    rows: list[TaskAgentRow]
    aggregate: list[AggregateRow]
    improvement: dict[tuple[str, str], float]
    curves: dict[str, dict[str, RegretCurve]]
    records: list[RunRecord] = field(repr=False)
    references: dict[str, str] = field(default_factory=dict)
    task_seeds: dict[str, list[int]] = field(default_factory=dict)
    reference_agents: set[str] = field(default_factory=set)
    theory_exponents: dict[str, float] = field(default_factory=dict)
    horizon_points: dict[str, dict[str, HorizonPoints]] = field(default_factory=dict)
    caveats: dict[str, str] = field(default_factory=dict)
    provenance: dict[str, list[str]] = field(default_factory=dict)
    spec_text: str = ""
    horizon_runs: int = 0
    benchmarks: dict[str, str] = field(default_factory=dict)
    theory_tasks: set[str] = field(default_factory=set)
    spec_given: bool = False
    aggregate_note: str = ""
    headline: list[str] = field(default_factory=list)
    theta_sources: dict[str, str] = field(default_factory=dict)
    claims: list[Claim] = field(default_factory=list)
    regimes: dict[str, str] = field(default_factory=dict)

    def theory_exponent(self, task: str, agent: str) -> float | None:
        """Theory's exponent of ``agent`` on ``task``, or None where none is known or the theorem does not apply."""
        return self.theory_exponents.get(agent) if task in self.theory_tasks else None

    @property
    def runs_summary(self) -> str:
        """``"N runs"``, with how many of them ran at a task's extra horizons."""
        extra = f" ({self.horizon_runs} of them at extra horizons)" if self.horizon_runs else ""
        return f"{len(self.records) + self.horizon_runs} runs{extra}"

    def rows_for(self, task: str) -> list[TaskAgentRow]:
        """The rows of one task: ranked agents best (lowest mean regret) first, then the reference rows."""
        return [row for row in self.rows if row.task == task]


# Run key -> (task labels, agent labels) that specs gave the run (ResultsStore.labels).
GivenLabels = dict[str, tuple[list[str], list[str]]]


def _stored_labels(
    records: list[RunRecord], kind: str, given: GivenLabels | None = None
) -> dict[str, tuple[int, list[str]]]:
    """Group key -> (T, every label its runs were given, sorted); ``kind`` is ``"task"`` or ``"agent"``.

    A run's labels are those of ``given`` where it lists the run, else the one its record holds.
    """
    stored: dict[str, tuple[int, set[str]]] = {}
    for record in records:
        spec = record.spec
        listed = (given or {}).get(spec.key)
        if kind == "task":
            key = canonical_json([spec.env_id, spec.env_kwargs, spec.rounds])
            names = listed[0] if listed else [spec.task_label or spec.env_id]
        else:
            key = canonical_json([spec.agent, spec.agent_kwargs])
            names = listed[1] if listed else [spec.agent_label or spec.agent]
        stored.setdefault(key, (spec.rounds, set()))[1].update(names)
    return {key: (rounds, sorted(names)) for key, (rounds, names) in stored.items()}


def _labels(records: list[RunRecord], kind: str, given: GivenLabels | None = None) -> dict[str, str]:
    """Group key -> display label, a function of the runs alone (not of the order they were stored in).

    A group stored under several labels (specs sharing a store) is named by all of them, sorted and joined
    with `` / ``; labels are made unique in the order of (T, group key): a task label met again at another T
    gets `` [T=...]``, any other repeat `` #2``, `` #3``...
    """
    labels: dict[str, str] = {}
    stored = _stored_labels(records, kind, given)
    for key in sorted(stored, key=lambda group: (stored[group][0], group)):
        rounds, names = stored[key]
        label = " / ".join(names)
        candidate = label
        if kind == "task" and candidate in labels.values():
            candidate = f"{label} [T={rounds}]"
        suffix = 2
        while candidate in labels.values():
            candidate = f"{label} #{suffix}"
            suffix += 1
        labels[key] = candidate
    return labels


def _label_notes(
    records: list[RunRecord],
    task_of: dict[str, str],
    agent_of: dict[str, str],
    tasks_of_agent: dict[str, list[str]],
    given: GivenLabels | None,
) -> dict[str, str]:
    """Task -> a sentence for each of its task or agent labels that joins several stored labels (else absent)."""
    notes: dict[str, list[str]] = {}
    for kind, names_of in (("task", task_of), ("agent", agent_of)):
        for key, (_, names) in _stored_labels(records, kind, given).items():
            if len(names) < 2 or key not in names_of:
                continue
            shown = names_of[key]
            sentence = (
                f"The {kind} {shown!r} was given {len(names)} labels by the specs run on its store "
                f"({', '.join(repr(name) for name in names)}) and is named by all of them, sorted and joined; "
                "pass --spec to report one spec's labels."
            )
            for task in [shown] if kind == "task" else tasks_of_agent.get(shown, []):
                notes.setdefault(task, []).append(sentence)
    return {task: " ".join(sentences) for task, sentences in notes.items()}


def _curve(curves: np.ndarray, resamples: int, seed: int) -> RegretCurve:
    total = curves.shape[1]
    index = np.unique(np.linspace(0, total - 1, min(CURVE_POINTS, total)).round().astype(int))  # (P,)
    low, high = pointwise_bootstrap_band(curves[:, index], resamples=resamples, seed=seed)
    return RegretCurve(rounds=index + 1, mean=curves[:, index].mean(axis=0), low=low, high=high)


def build_leaderboard(
    records: Iterable[RunRecord],
    title: str = "tokenized-bandit-gym leaderboard",
    resamples: int = 2000,
    seed: int = 0,
    spec: LeaderboardSpec | None = None,
    given_labels: GivenLabels | None = None,
) -> Leaderboard:
    """Group runs into agents x tasks and compute every statistic of the report.

    Args:
        records: finished runs (e.g. ``store.records()``).
        title: shown on top of the report.
        resamples: bootstrap resamples for the confidence intervals.
        seed: seeds the bootstrap (the same store gives the same report).
        spec: the spec the runs came from, if any: its reference flags, theory exponents, task
            caveats and text go into the report, and the runs at a task's extra ``horizons``
            give the horizon exponent instead of tables of their own.
        given_labels: every task and agent label that specs gave each run (``ResultsStore.labels()``): a
            task or agent is named by all labels its runs were given, sorted and joined, and the report
            says so. Without it, the labels the records hold.
    """
    records = list(records)
    sweep_of: dict[str, str] = {}  # run key of an extra-horizon run -> group key of its task's main runs
    if spec is not None:
        main_rounds = {task.label: task.rounds for task in spec.tasks}
        for run in spec.runs():
            if run.rounds != main_rounds[run.task_label]:
                sweep_of[run.key] = canonical_json([run.env_id, run.env_kwargs, main_rounds[run.task_label]])
    sweep_records = [record for record in records if record.spec.key in sweep_of]
    records = [record for record in records if record.spec.key not in sweep_of]
    task_of = _labels(records, "task", given_labels)
    agent_of = _labels(records + sweep_records, "agent", given_labels)
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for record in sorted(records, key=lambda item: item.spec.seed):
        run = record.spec
        task = task_of[canonical_json([run.env_id, run.env_kwargs, run.rounds])]
        agent = agent_of[canonical_json([run.agent, run.agent_kwargs])]
        groups.setdefault((task, agent), []).append(record)
    reference_agents, theory = _agent_roles(groups, spec)
    theory_tasks = _theory_tasks(spec, groups)
    horizon_points = _horizon_points(groups, sweep_records, sweep_of, task_of, agent_of, resamples, seed)
    tasks = list(dict.fromkeys(task for task, _ in groups))
    tasks_of_agent: dict[str, list[str]] = {}
    for task, agent in groups:
        tasks_of_agent.setdefault(agent, []).append(task)
    finals = {pair: np.array([record.final_regret for record in runs]) for pair, runs in groups.items()}

    references: dict[str, str] = {}
    scale: dict[str, float] = {}
    for task in tasks:
        means = {agent: float(values.mean()) for (name, agent), values in finals.items() if name == task}
        randoms = [agent for agent in means if _agent_name(groups[(task, agent)]) == "random"]
        reference = randoms[0] if randoms else max(means, key=means.__getitem__)
        references[task] = reference
        scale[task] = means[reference]

    rows: list[TaskAgentRow] = []
    curves: dict[str, dict[str, RegretCurve]] = {}
    seed_curves: dict[tuple[str, str], np.ndarray] = {}
    for task in tasks:
        task_rows = []
        for (name, agent), runs in groups.items():
            if name != task:
                continue
            values = finals[(name, agent)]
            cumulative = np.stack([np.cumsum(record.arrays["regret"]) for record in runs])  # (S, T)
            seed_curves[(name, agent)] = cumulative
            curves.setdefault(task, {})[agent] = _curve(cumulative, resamples=max(200, resamples // 2), seed=seed)
            low, high = stratified_bootstrap_ci([values], pooled_mean, resamples=resamples, seed=seed)
            per_round = np.concatenate([record.arrays["wall_time"] for record in runs])
            points = horizon_points.get(name, {}).get(agent)
            task_rows.append(
                TaskAgentRow(
                    task=task,
                    agent=agent,
                    rank=0,
                    runs=len(runs),
                    rounds=runs[0].spec.rounds,
                    mean=float(values.mean()),
                    iqm=float(iqm(values)),
                    ci_low=low,
                    ci_high=high,
                    growth_exponent=growth_exponent(cumulative.mean(axis=0), GROWTH_WINDOW_START),
                    ms_per_round=float(per_round.mean() * 1000.0),
                    normalized_mean=float(values.mean() / scale[task]) if scale[task] > 0 else math.nan,
                    reference=agent in reference_agents,
                    theory_exponent=theory.get(agent, math.nan) if task in theory_tasks else math.nan,
                    horizon_exponent=_loglog_slope(points.horizons, points.mean) if points is not None else math.nan,
                    seeds_identical=len(values) > 1 and bool(np.all(values == values[0])),
                )
            )
        task_rows.sort(key=lambda row: (row.mean, row.agent))
        rows.extend(_ranked(task_rows))

    agents_seen = list(dict.fromkeys(agent for _, agent in groups))
    aggregate = []
    for agent in agents_seen:
        samples = [finals[(task, agent)] / scale[task] for task in tasks if (task, agent) in finals and scale[task] > 0]
        runs = [record for (task, name), group in groups.items() if name == agent for record in group]
        per_round = np.concatenate([record.arrays["wall_time"] for record in runs])
        if samples:
            pooled = np.concatenate(samples)
            mean_ci = stratified_bootstrap_ci(samples, pooled_mean, resamples=resamples, seed=seed)
            iqm_ci = stratified_bootstrap_ci(samples, pooled_iqm, resamples=resamples, seed=seed)
            mean, iqm_value = float(pooled.mean()), float(iqm(pooled))
        else:
            mean = iqm_value = math.nan
            mean_ci = iqm_ci = (math.nan, math.nan)
        aggregate.append(
            AggregateRow(
                agent=agent,
                rank=0,
                tasks=len(samples),
                runs=len(runs),
                mean=mean,
                mean_ci_low=mean_ci[0],
                mean_ci_high=mean_ci[1],
                iqm=iqm_value,
                iqm_ci_low=iqm_ci[0],
                iqm_ci_high=iqm_ci[1],
                ms_per_round=float(per_round.mean() * 1000.0),
                reference=agent in reference_agents,
            )
        )
    aggregate.sort(key=lambda row: (math.isnan(row.iqm), row.iqm, row.agent))
    aggregate = _ranked(aggregate)
    aggregate, aggregate_note = _common_tasks_only(aggregate, groups, tasks, scale, references)
    agents_ordered = [row.agent for row in aggregate]

    improvement = {}
    for first in agents_ordered:
        for second in agents_ordered:
            if first == second:
                continue
            shared = [task for task in tasks if (task, first) in finals and (task, second) in finals]
            if shared:
                improvement[(first, second)] = float(
                    np.mean([probability_of_improvement(finals[(t, first)], finals[(t, second)]) for t in shared])
                )
    claims = measure_claims(
        tasks,
        {agent: _agent_name(runs) for (_, agent), runs in groups.items()},
        theory,
        theory_tasks,
        seed_curves,
        {
            (task, agent): (points.horizons, list(points.finals))
            for task, by_agent in horizon_points.items()
            for agent, points in by_agent.items()
        },
        GROWTH_WINDOW_START,
        resamples=resamples,
        seed=seed,
    )
    tasks = claim_task_order(tasks, claims)
    return Leaderboard(
        title=title,
        tasks=tasks,
        agents=agents_ordered,
        rows=rows,
        aggregate=aggregate,
        improvement=improvement,
        curves=curves,
        records=records,
        references=references,
        task_seeds={
            task: sorted({record.spec.seed for (name, _), runs in groups.items() if name == task for record in runs})
            for task in tasks
        },
        reference_agents=reference_agents,
        theory_exponents=theory,
        horizon_points=horizon_points,
        caveats=_caveats(
            spec, groups, _label_notes(records + sweep_records, task_of, agent_of, tasks_of_agent, given_labels)
        ),
        provenance=_provenance(records + sweep_records),
        spec_text=spec.text if spec is not None else "",
        horizon_runs=len(sweep_records),
        benchmarks={task: _benchmark(runs) for (task, _), runs in groups.items()},
        theory_tasks=theory_tasks,
        spec_given=spec is not None,
        aggregate_note=aggregate_note,
        headline=_headline(rows, finals, tasks),
        theta_sources={
            task: source for (task, _), runs in groups.items() if (source := _theta_source(runs)) is not None
        },
        claims=claims,
        regimes={task: regime for (task, _), runs in groups.items() if (regime := _regime(runs)) is not None},
    )


def _theta_source(runs: list[RunRecord]) -> str | None:
    """Where the runs' theta came from (``metadata["theta_source"]``), None where no run recorded it."""
    sources = sorted({str(record.metadata["theta_source"]) for record in runs if record.metadata.get("theta_source")})
    return "; ".join(sources) if sources else None


def _regime(runs: list[RunRecord]) -> str | None:
    """The task's regime lines (``metadata["regime"]``, ``tbg regime``'s diagnostic), None where no run recorded it."""
    regimes = sorted({str(record.metadata["regime"]) for record in runs if record.metadata.get("regime")})
    return regimes[0] if regimes else None


def _benchmark(runs: list[RunRecord]) -> str:
    """The benchmark kind stored with the runs (one key of :data:`BENCHMARKS`), or :data:`UNRECORDED_BENCHMARK`."""
    kinds = {str(record.metadata.get("benchmark")) for record in runs if record.metadata.get("benchmark")}
    return kinds.pop() if len(kinds) == 1 else UNRECORDED_BENCHMARK


def _theory_tasks(spec: LeaderboardSpec | None, groups: dict[tuple[str, str], list[RunRecord]]) -> set[str]:
    """The task names whose spec entry says ``theorem_applies`` (none without a spec)."""
    if spec is None:
        return set()
    applies = {canonical_json([task.id, task.kwargs, task.rounds]) for task in spec.tasks if task.theorem_applies}
    return {
        task
        for (task, _), runs in groups.items()
        if canonical_json([runs[0].spec.env_id, runs[0].spec.env_kwargs, runs[0].spec.rounds]) in applies
    }


def _common_tasks_only(
    aggregate: list[AggregateRow],
    groups: dict[tuple[str, str], list[RunRecord]],
    tasks: list[str],
    scale: dict[str, float],
    references: dict[str, str],
) -> tuple[list[AggregateRow], str]:
    """Drop the aggregate ranks unless every ranked agent has a score over the same tasks; returns the rows and why."""
    scored = [task for task in tasks if scale[task] > 0]
    notes = [
        f"{task}: its normalising agent {references[task]} has mean R(T) {scale[task]:.3g} <= 0, so no "
        "normalised score there"
        for task in tasks
        if task not in scored
    ]
    played = {
        row.agent: frozenset(task for task in scored if (task, row.agent) in groups)
        for row in aggregate
        if row.rank is not None and row.rank > 0
    }
    if len(set(played.values())) > 1:
        aggregate = [replace(row, rank=None) if row.rank else row for row in aggregate]
        notes.insert(
            0,
            "Not ranked across tasks: the agents did not all play the same tasks ("
            + "; ".join(f"{agent}: {', '.join(sorted(names)) or 'none'}" for agent, names in played.items())
            + "). Compare agents within each task's table",
        )
    return aggregate, ". ".join(notes) + ("." if notes else "")


def _headline(rows: list[TaskAgentRow], finals: dict[tuple[str, str], np.ndarray], tasks: list[str]) -> list[str]:
    """Three lines: each task's leader, its margin over the runner-up, and how sure the ordering is."""
    leaders, margins, confidences = [], [], []
    for task in tasks:
        ranked = [row for row in rows if row.task == task and row.rank]
        if not ranked:
            leaders.append(f"{task}: no ranked agent")
            continue
        first = ranked[0]
        tied = [row.agent for row in ranked if row.rank == first.rank]
        leaders.append(f"{task}: {' and '.join(tied)}" + (" (tied)" if len(tied) > 1 else ""))
        if len(ranked) < 2:
            margins.append(f"{task}: {first.agent} is the only ranked agent (mean R(T) {first.mean:.2f})")
            continue
        second = ranked[1]
        margins.append(
            f"{task}: mean R(T) {first.mean:.2f} for {first.agent} against {second.mean:.2f} for {second.agent} "
            f"(runner-up), {second.mean - first.mean:.2f} lower"
        )
        probability = probability_of_improvement(finals[(task, first.agent)], finals[(task, second.agent)])
        overlap = first.ci_high >= second.ci_low
        confidences.append(
            f"{task}: P({first.agent} < {second.agent}) = {probability:.2f} over {first.runs} x {second.runs} "
            f"seed pairs; the 95% CIs of the means {'overlap' if overlap else 'do not overlap'}"
        )
    return [
        "Leader: " + "; ".join(leaders) + ".",
        "Margin: " + ("; ".join(margins) if margins else "no runner-up to compare with") + ".",
        "Confidence: " + ("; ".join(confidences) if confidences else "no runner-up to compare with") + ".",
    ]


def _agent_roles(
    groups: dict[tuple[str, str], list[RunRecord]], spec: LeaderboardSpec | None
) -> tuple[set[str], dict[str, float]]:
    """Which agent labels are reference rows, and theory's exponent per agent label (spec first, then defaults)."""
    entries = {} if spec is None else {canonical_json([entry.name, entry.kwargs]): entry for entry in spec.agents}
    reference: set[str] = set()
    theory: dict[str, float] = {}
    for (_, agent), runs in groups.items():
        run = runs[0].spec
        entry = entries.get(canonical_json([run.agent, run.agent_kwargs]))
        is_reference = entry.reference if entry is not None and entry.reference is not None else None
        if is_reference if is_reference is not None else run.agent in REFERENCE_AGENTS:
            reference.add(agent)
        exponent = entry.theory_exponent if entry is not None else None
        exponent = exponent if exponent is not None else THEORY_EXPONENTS.get(run.agent)
        if exponent is not None:
            theory[agent] = exponent
    return reference, theory


def _horizon_points(
    groups: dict[tuple[str, str], list[RunRecord]],
    sweep_records: list[RunRecord],
    sweep_of: dict[str, str],
    task_of: dict[str, str],
    agent_of: dict[str, str],
    resamples: int,
    seed: int,
) -> dict[str, dict[str, HorizonPoints]]:
    """Per task and agent: mean final regret at each horizon (extra horizons and the task's T)."""
    finals: dict[tuple[str, str], dict[int, list[float]]] = {}
    for record in sweep_records:
        task = task_of.get(sweep_of[record.spec.key])
        if task is None:  # the task's main runs are not in the store yet
            continue
        agent = agent_of[canonical_json([record.spec.agent, record.spec.agent_kwargs])]
        finals.setdefault((task, agent), {}).setdefault(record.spec.rounds, []).append(record.final_regret)
    points: dict[str, dict[str, HorizonPoints]] = {}
    for (task, agent), by_horizon in finals.items():
        if (task, agent) not in groups:
            continue
        main_runs = groups[(task, agent)]
        by_horizon[main_runs[0].spec.rounds] = [record.final_regret for record in main_runs]
        horizons = np.array(sorted(by_horizon))  # (H,)
        intervals = [
            stratified_bootstrap_ci([np.array(by_horizon[h])], pooled_mean, resamples=resamples, seed=seed)
            for h in horizons
        ]
        points.setdefault(task, {})[agent] = HorizonPoints(
            horizons=horizons,
            mean=np.array([np.mean(by_horizon[h]) for h in horizons]),
            low=np.array([low for low, _ in intervals]),
            high=np.array([high for _, high in intervals]),
            seeds=min(len(by_horizon[h]) for h in horizons),
            finals=tuple(np.array(by_horizon[h], dtype=np.float64) for h in horizons),
        )
    return points


def _loglog_slope(horizons: np.ndarray, values: np.ndarray) -> float:
    """Least-squares slope of log value against log horizon; NaN with < 2 points or a value <= 0."""
    if horizons.size < 2 or np.any(values <= 0):
        return math.nan
    return float(loglog_slopes(horizons, values))


def _caveats(
    spec: LeaderboardSpec | None, groups: dict[tuple[str, str], list[RunRecord]], label_notes: dict[str, str]
) -> dict[str, str]:
    """Task name -> the spec's caveat for it (tasks matched by env id, kwargs and T), then its ``label_notes``."""
    by_identity = (
        {}
        if spec is None
        else {canonical_json([task.id, task.kwargs, task.rounds]): task.caveat for task in spec.tasks}
    )
    caveats = {}
    for (task, _), runs in groups.items():
        run = runs[0].spec
        parts = [by_identity.get(canonical_json([run.env_id, run.env_kwargs, run.rounds])), label_notes.get(task)]
        caveat = " ".join(part for part in parts if part)
        if caveat:
            caveats[task] = caveat
    return caveats


def _provenance(records: list[RunRecord]) -> dict[str, list[str]]:
    """Every distinct value of each :data:`PROVENANCE_KEYS` entry of the runs' metadata."""
    provenance = {}
    for key in PROVENANCE_KEYS:
        values = sorted({str(record.metadata[key]) for record in records if record.metadata.get(key) is not None})
        if values:
            provenance[key] = values
    return provenance


def _agent_name(runs: list[RunRecord]) -> str:
    return runs[0].spec.agent


def _ranked(rows: list[Row]) -> list[Row]:
    """Copies of ``rows`` (sorted best first) with ``rank`` set; equal scores share a rank.

    Task rows are ranked by mean final regret, aggregate rows by IQM of normalised regret.
    Reference rows are not ranked (rank 0) and follow the ranked rows, in the same order; a row
    whose score is ``n/a`` (NaN) gets no rank (None) and follows the ranked ones.
    """
    ranked: list[Row] = []
    unscored: list[Row] = []
    previous_score = math.nan
    for row in rows:
        if row.reference:
            continue
        score = row.mean if isinstance(row, TaskAgentRow) else row.iqm
        if math.isnan(score):
            unscored.append(replace(row, rank=None))
            continue
        rank = ranked[-1].rank if ranked and score == previous_score else len(ranked) + 1
        ranked.append(replace(row, rank=rank))
        previous_score = score
    return ranked + unscored + [replace(row, rank=0) for row in rows if row.reference]
