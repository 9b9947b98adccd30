"""``tbg regime``: can an alignment task separate a learner from the LM's own decode? (issue 48).

The utility of the alignment envs is ``u = gamma * v(p) + (1 - gamma) * <theta, e>`` (paper section 5.1).
A learner can only beat the LM's own greedy decode (the paper's Misaligned greedy) when the theta-term
moves the choice between candidates, that is when greedy decoding with the true utility (the paper's
benchmark) chooses other tokens than the LM's greedy decode, and the responses it chooses are worth
clearly more. :func:`measure_regime` measures that on a problem, over a few queries, with no learner:

* the per-step spread (largest minus smallest over the allowed candidates) of ``gamma * v`` and of
  ``(1 - gamma) * <theta, e>``, averaged over the benchmark's steps that have a choice;
* the share of those steps where the benchmark's token differs from the LM's top allowed token;
* the benchmark's utility minus the LM greedy decode's, per round (query);
* the range of the utilities of both decodes.

The paper's own numbers (appendix D's sample rounds, Llama-3-8B-Instruct) are the reference:
Optimal greedy beats Misaligned greedy by 8.5, 21.1, 8.1 and 20.2, and the utilities reach +22.87
(Optimal greedy) and +56.36 (WrongTheta). A reading of the paper (``v``'s map, the pooling span,
theta's scale, whether a forced EOS is scored) whose gap is about 0 cannot test the paper's claim.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from tokenized_bandit_gym.script_arguments import int_at_least

if TYPE_CHECKING:
    from tokenized_bandit_gym.envs.language_model_bandit_env import LanguageModelBanditEnv

APPENDIX_D_GAPS = (8.54, 21.08, 8.07, 20.19)
"""Appendix D's Optimal greedy minus Misaligned greedy utilities, in its four sample rounds."""
APPENDIX_D_UTILITY_RANGE = (-41.49, 56.36)
"""The smallest and largest utility of appendix D's sample rounds (any agent)."""
SEPARATING_GAP = 1.0
"""Smallest mean benchmark - LM-greedy gap per round that separates: ten times the envs' default noise sigma (0.1),
and an eighth of appendix D's smallest gap (8.1)."""
SEPARATING_SHARE = 0.1
"""Smallest share of steps where the benchmark leaves the LM's top token: below it the two decodes are one response."""


@dataclass(frozen=True)
class RegimeDiagnostic:
    """What separates a learner from the LM's own decode on one alignment problem (:func:`measure_regime`).

    Attributes:
        rounds: queries decoded (each by the benchmark and by the LM's greedy decode).
        steps: benchmark steps with more than one allowed candidate (the steps that are choices).
        value_spread: mean over those steps of the spread of ``gamma * v(p(x, y:tau))`` over the allowed candidates.
        theta_spread: the same for ``(1 - gamma) * <theta, e(x, y:tau)>``.
        differing_share: share of those steps where the benchmark's token is not the LM's top allowed token.
        gaps: per round, the benchmark's utility minus the LM greedy decode's ``(rounds,)``.
        utility_min: smallest utility of either decode.
        utility_max: largest utility of either decode.
    """

    rounds: int
    steps: int
    value_spread: float
    theta_spread: float
    differing_share: float
    gaps: tuple[float, ...]
    utility_min: float
    utility_max: float

    @property
    def mean_gap(self) -> float:
        """Mean benchmark - LM-greedy utility gap per round."""
        return sum(self.gaps) / len(self.gaps)

    @property
    def spread_ratio(self) -> float:
        """``theta_spread / value_spread`` (inf when ``v`` does not move)."""
        return self.theta_spread / self.value_spread if self.value_spread > 0 else math.inf

    @property
    def separates(self) -> bool:
        """Whether a learner can be told from the LM's own decode.

        The two decodes part and the benchmark's is worth clearly more: mean gap >= :data:`SEPARATING_GAP` and
        differing share >= :data:`SEPARATING_SHARE`.
        """
        return self.mean_gap >= SEPARATING_GAP and self.differing_share >= SEPARATING_SHARE

    def lines(self) -> list[str]:
        """The diagnostic as text lines, beside appendix D's values, ending with the verdict."""
        paper_gaps = ", ".join(f"{gap:.1f}" for gap in APPENDIX_D_GAPS)
        low, high = APPENDIX_D_UTILITY_RANGE
        if self.separates:
            verdict = "separates: the benchmark leaves the LM's own decode and is worth more, so a learner can beat it"
        elif self.differing_share < SEPARATING_SHARE:
            verdict = (
                "does not separate: the LM's own greedy decode is (nearly) the benchmark, nothing is left to learn"
            )
        else:
            verdict = "does not separate: the benchmark leaves the LM's own decode but is not clearly worth more"
        return [
            f"per-step spread over the candidates ({self.steps} steps, {self.rounds} rounds): "
            f"gamma*v {self.value_spread:.3g}, (1-gamma)<theta,e> {self.theta_spread:.3g} "
            f"(ratio {self.spread_ratio:.3g})",
            f"steps where the benchmark leaves the LM's top token: {100 * self.differing_share:.1f}%",
            f"benchmark - LM greedy utility per round: mean {self.mean_gap:+.2f} "
            f"(min {min(self.gaps):+.2f}, max {max(self.gaps):+.2f}); appendix D: {paper_gaps}",
            f"utilities: {self.utility_min:+.2f} to {self.utility_max:+.2f}; appendix D: {low:+.2f} to {high:+.2f}",
            f"verdict: {verdict}",
        ]


def measure_regime(problem: Any, queries: Sequence[int]) -> RegimeDiagnostic:
    """Decode ``queries`` with the benchmark (greedy on the true utility) and with the LM's greedy decode; measure.

    Args:
        problem: a :class:`~tokenized_bandit_gym.llm.language_model_problem.LanguageModelProblem` with embeddings
            (the alignment envs' ``env.unwrapped.problem``).
        queries: query indices into the problem's pool, one round each (at least one).

    Returns:
        The :class:`RegimeDiagnostic` (noise-free utilities).

    Raises:
        ValueError: no queries, or a problem without embeddings (``gamma == 1``: nothing to align).
    """
    import torch

    if len(queries) == 0:
        raise ValueError("measure_regime needs at least one query")
    if not problem.embeddings:
        raise ValueError("the problem has no embeddings (gamma == 1): there is no theta-term to measure")
    indices = torch.as_tensor(list(queries), dtype=torch.int64, device=problem.device)
    benchmark, lm_greedy = problem.initial_state(indices), problem.initial_state(indices)
    value_spreads, theta_spreads, differs = [], [], []
    for _ in range(problem.max_length):
        mask = problem.action_mask(benchmark)  # (B, k)
        choice = ~benchmark.finished & (mask.sum(dim=1) > 1)  # (B,) steps with a choice
        values = problem.gamma * problem.candidate_values(benchmark)  # (B, k)
        theta_terms = problem.candidate_utilities(benchmark) - values  # (B, k)
        chosen = problem.greedy_choice(benchmark)  # (B,)
        lm_top = lm_greedy_choice(problem, benchmark)  # (B,)
        value_spreads.append(_spread(values, mask)[choice])
        theta_spreads.append(_spread(theta_terms, mask)[choice])
        differs.append((chosen != lm_top)[choice])
        benchmark = problem.advance(benchmark, chosen)
        lm_greedy = problem.advance(lm_greedy, lm_greedy_choice(problem, lm_greedy))
    benchmark_utility = problem.utility_of(benchmark).double()  # (B,)
    lm_utility = problem.utility_of(lm_greedy).double()  # (B,)
    steps = int(torch.cat(differs).numel())
    both = torch.cat([benchmark_utility, lm_utility])
    return RegimeDiagnostic(
        rounds=len(queries),
        steps=steps,
        value_spread=float(torch.cat(value_spreads).mean()) if steps else 0.0,
        theta_spread=float(torch.cat(theta_spreads).mean()) if steps else 0.0,
        differing_share=float(torch.cat(differs).double().mean()) if steps else 0.0,
        gaps=tuple(float(gap) for gap in benchmark_utility - lm_utility),
        utility_min=float(both.min()),
        utility_max=float(both.max()),
    )


def lm_greedy_choice(problem: Any, state: Any) -> Any:
    """The LM's greedy action ``(B,)``: the allowed candidate of highest ``log p(tau | x, y)`` (Misaligned greedy)."""
    logprobs = state.candidate_logprobs.double()  # (B, k)
    return logprobs.masked_fill(~problem.action_mask(state), float("-inf")).argmax(dim=1)


def _spread(scores: Any, mask: Any) -> Any:
    """Largest minus smallest of ``scores`` ``(B, k)`` over the allowed entries ``mask`` ``(B, k)``: ``(B,)``."""
    high = scores.masked_fill(~mask, float("-inf")).max(dim=1).values
    low = scores.masked_fill(~mask, float("inf")).min(dim=1).values
    return high - low


def regime_queries(num_queries: int, rounds: int, seed: int) -> list[int]:
    """``rounds`` query indices drawn without replacement (with, past the pool's size) from ``num_queries``, seeded."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [int(index) for index in rng.choice(num_queries, size=rounds, replace=rounds > num_queries)]


def environment_regime(env: Any, rounds: int = 8, seed: int = 0) -> RegimeDiagnostic:
    """:func:`measure_regime` on an alignment env's problem (single or vector env, wrapped or not)."""
    problem = env.unwrapped.problem
    return measure_regime(problem, regime_queries(problem.num_queries, rounds, seed))


REPORT_ROUNDS = 4
"""Queries the leaderboard's runs decode for the regime lines of their task (:func:`regime_summary`)."""


def regime_summary(env: Any, rounds: int = REPORT_ROUNDS) -> str | None:
    """The diagnostic's lines joined by ``"; "`` for an alignment env (a theta-term to learn), else None."""
    problem = getattr(env.unwrapped, "problem", None)
    if problem is None or not getattr(problem, "embeddings", False) or problem.gamma >= 1.0:
        return None
    return "; ".join(environment_regime(env, rounds).lines())


READING_OPTIONS = ("value_map", "pooling", "theta_scale", "score_forced_eos", "embedding_norm", "embedding_layer")
"""The env keywords that choose how the paper is read (each a ``tbg regime`` flag)."""


def add_reading_arguments(parser: argparse.ArgumentParser) -> None:
    """``tbg regime``'s reading flags (unset: the env id's defaults)."""
    parser.add_argument("--value-map", default=None, help="v: logprob, scaled_logprob, root_prob or prob")
    parser.add_argument("--pooling", default=None, help="span of e's mean pooling: query_response or response")
    parser.add_argument("--theta-scale", default=None, help="the default theta: unit (unit norm) or literal (0.5*1)")
    parser.add_argument(
        "--score-forced-eos",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="count a forced EOS's log p in v (default: the env id's)",
    )
    parser.add_argument("--embedding-norm", default=None, help="e: none (raw mean-pooled states) or l2 (unit norm)")
    parser.add_argument(
        "--embedding-layer", default=None, help="states e pools: final_norm (after the final norm) or pre_norm"
    )


def reading_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The reading keywords the user set (the others stay the env id's defaults)."""
    return {name: getattr(args, name) for name in READING_OPTIONS if getattr(args, name) is not None}


def add_regime_subcommand(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``regime`` on a CLI's subparsers; the parsed namespace's ``func`` runs it."""
    parser = subparsers.add_parser(
        "regime",
        help="can an alignment task separate a learner from the LM's own decode? (spreads, gaps, verdict)",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("model", help="local directory (safetensors), stories260K or a cached hub name")
    parser.add_argument("--env-id", default="TokenizedAlignment-v1", help="the alignment env (default -v1)")
    parser.add_argument("--rounds", type=int_at_least(1), default=8, help="queries decoded (default 8)")
    parser.add_argument("--queries", default="paper", help="query source (default: the appendix-D generator)")
    parser.add_argument("--max-length", type=int_at_least(1), default=30, help="L (default 30, the paper's)")
    parser.add_argument("--top-k", type=int_at_least(1), default=15, help="k (default 15, the paper's)")
    parser.add_argument("--gamma", type=float, default=0.8, help="weight of v (default 0.8, the paper's)")
    parser.add_argument("--seed", type=int_at_least(0), default=0, help="seeds the queries drawn")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    add_reading_arguments(parser)
    parser.set_defaults(func=regime_command)
    return parser


def regime_command(args: argparse.Namespace) -> int:
    """Run ``tbg regime``: print the diagnostic; 0 when the task separates, 1 when not, 2 on bad input."""
    import sys

    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401  (registers the env ids)

    try:
        if args.rounds < 1:
            raise ValueError(f"--rounds must be at least 1, got {args.rounds}")
        env = gym.make(
            args.env_id,
            model=args.model,
            queries=args.queries,
            max_length=args.max_length,
            top_k=args.top_k,
            gamma=args.gamma,
            device=args.device,
            **reading_overrides(args),
        )
        diagnostic = environment_regime(env, args.rounds, args.seed)
    except (ValueError, TypeError, gym.error.Error) as error:
        print(f"tbg regime: error: {error}", file=sys.stderr)
        return 2
    problem = cast("LanguageModelBanditEnv", env.unwrapped).problem  # the alignment env gym.make built
    print(
        f"regime of {args.env_id} on {args.model}: v={problem.value_map.name}, pooling={problem.pooling}, "
        f"theta={problem.theta_source}, forced EOS scored={problem.score_forced_eos}, "
        f"embedding_norm={problem.embedding_norm}, embedding_layer={problem.embedding_layer}, "
        f"L={problem.max_length}, k={problem.top_k}, gamma={problem.gamma}"
    )
    print("\n".join(diagnostic.lines()))
    return 0 if diagnostic.separates else 1
