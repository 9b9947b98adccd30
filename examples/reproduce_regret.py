"""Reproduce the paper's regret comparison on decoding-time LLM alignment (section 6.2, Figure 2 left, Figure 3).

EOFUL learns the user's theta online on ``TokenizedAlignment-v1`` (``--env-id``; utility
``u = gamma * v(p(x, y)) + (1 - gamma) * <theta, e(x, y)>``, the paper's reduction to a TLB over ``[e : v(p)]``);
it is compared with the paper's two baselines, WrongTheta (greedy with the wrong ``theta' = -theta``, the
``fixed_theta_greedy`` agent) and Misaligned greedy (greedy on the LM probability alone, ``misaligned_greedy``),
and with the theoretical bound ``c L sqrt(d T log T)`` of Theorem 3.2 scaled by 0.1, as the paper plots it.
Regret is measured against the oracle greedy decode with the true utility (``optimal_kind="oracle_greedy"``),
so it can be negative when an agent beats greedy. All agents see the same queries and noise (common random
numbers: one env, reset with the same seed for each agent).

The reading of the paper (docs/ALIGNMENT_REGIME.md): ``-v1`` by default, whose defaults are
``v = log p / L`` without a forced EOS's term, ``e`` pooled over the response and the literal
``theta = 0.5 * 1``; ``--env-id TokenizedAlignment-v0`` reproduces the earlier numbers. Every
reading option is a flag (``--value-map``, ``--pooling``, ``--theta-scale``, ``--score-forced-eos``,
``--embedding-norm``, ``--embedding-layer``); unset, it is the env id's default. ``tbg regime MODEL`` says whether a
reading can separate a learner from the LM's own decode before anything is run.

One convention for theta, the paper's: WrongTheta's ``theta'`` is ``-theta`` (the paper's ``theta = 0.5 * 1``
and ``theta' = -0.5 * 1``). By default theta is the env id's (``-v1``: the literal ``0.5 * 1``; ``-v0``: scaled to
unit norm); ``--paper`` (or ``--theta 0.5``) passes the literal ``0.5 * 1``. ``--wrong-theta w`` sets every
coordinate of ``theta'`` to w instead.

How it runs fast: the runs of one seed (one per agent; ``--runs-per-forward`` sets how many runs, of any seeds) are
the rows of one native vector env, so every step is one forward of all their candidates (3 x k rows, not k), which
uses the CPU's matmul well; the rows of one seed share each query's prefill, and rows that are still the same
partial response are forwarded once; each row plays what ``run_online`` plays on a single env with that seed (to
float rounding). Each round's oracle-greedy benchmark is decoded by one more row of the same forward (greedy
decoding with the true utility; while an agent chooses as greedy does, its row and that one are one row), not
on its own. ``--threads`` sets torch's threads (``--real-llm``: every core). Each
finished group of runs is saved at once, and a group in progress keeps a checkpoint (``checkpoint.npz``, every
``--checkpoint-every`` rounds; it holds no pickle, and a ``checkpoint.pkl`` of older code is never loaded), so an
interrupted call resumes there. Each file records the code that made it
(package version and git commit); a file of other code is not reused (one printed line names both versions) and its
runs are played again, so a figure never mixes two versions' numbers.

Defaults run in about 12 s on a quiet 2-core CPU with the shipped 260K-parameter model (short responses, few
rounds; a few times longer on a busy machine); the script prints its expected run time after the first round
and shows a progress bar per group of runs. The paper's settings: ``--paper`` (L = 30, top-15,
gamma = 0.8, theta = 0.5 * 1, T = 10,000, the appendix-D query generator); Figure 3 is ``--paper --top-k 10``.
The paper used Llama-3-8B-Instruct (``--model``, ``--device``).

    PYTHONPATH=. python examples/reproduce_regret.py
    PYTHONPATH=. python examples/reproduce_regret.py --real-llm --out-dir runs/regret_smollm2      # T = 100, 3 seeds
    PYTHONPATH=. python examples/reproduce_regret.py --real-llm --rounds 1000 --out-dir runs/regret_smollm2_T1000
    PYTHONPATH=. python examples/reproduce_regret.py --paper --model meta-llama/Meta-Llama-3-8B-Instruct --device cuda
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenized_bandit_gym.evaluation import provenance
from tokenized_bandit_gym.evaluation.atomic_files import write_json_atomically
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments, run_script

ENV_ID = "TokenizedAlignment-v1"
"""The env the script runs by default (``--env-id``): the calibrated reading."""
AGENT_LABELS = {"eoful": "EOFUL", "fixed_theta_greedy": "WrongTheta", "misaligned_greedy": "Misaligned greedy"}


@dataclass
class Args:
    """Command-line options (each field's docstring is its --help)."""

    env_id: str = ENV_ID
    """the alignment env: TokenizedAlignment-v1 (the calibrated reading) or TokenizedAlignment-v0 (the earlier one)"""
    paper: bool = False
    """use the paper's settings (L=30, top-15, T=10,000, theta=0.5*1) for unset options"""
    real_llm: bool = False
    """the paper's settings on the real instruct model smollm2-135m-instruct, short: T=100, seeds 0,1,2, every
    run a row of one forward (unset options); --rounds 1000 for docs/REPRODUCTION.md's T = 1000 run (the paper's
    horizon is T = 10,000; 1,000 is the number of appendix D's queries)"""
    model: str = "stories260K"
    """Hugging Face causal LM: stories260K (shipped), smollm2-135m-instruct (see docs/LLM.md), a local path, or a
    model id"""
    queries: str = "paper"
    """query source of the env: paper (appendix-D generator), stories, a TruthfulQA/HH-RLHF file, ..."""
    rounds: int = 0
    """rounds T (0: 10,000 with --paper, else 150)"""
    max_length: int = 0
    """response length L (0: 30 with --paper, else 10)"""
    top_k: int = 0
    """top-k candidate truncation (0: 15 with --paper, else 8); Figure 3 uses 10"""
    gamma: float = 0.8
    """weight of v(p) in the utility"""
    theta: float = 0.0
    """0: the env's default theta (0.5 * 1 scaled to unit norm; 0.5 with --paper); else this value in every
    coordinate"""
    wrong_theta: float = 0.0
    """0: WrongTheta's theta' = -theta (the paper's convention); else this value in every coordinate"""
    value_map: str = ""
    """the env's v: logprob, scaled_logprob, root_prob, prob ('': the env id's)"""
    pooling: str = ""
    """span of e's mean pooling: query_response or response ('': the env id's)"""
    theta_scale: str = ""
    """the env's default theta: unit (0.5*1 unit-normed) or literal (0.5*1) ('': the env id's)"""
    score_forced_eos: str = ""
    """count a forced EOS's log p in v: yes or no ('': the env id's)"""
    embedding_norm: str = ""
    """the env's embedding normalisation: l2 (unit norm) or none (raw mean-pooled hidden states) ('': the env id's)"""
    embedding_layer: str = ""
    """the hidden states e pools: final_norm (after the decoder's final norm) or pre_norm ('': the env id's)"""
    beta: float = 1.0
    """EOFUL's multiplier on sqrt(beta_t) (1: the paper's radius)"""
    feature_scale: str = ""
    """EOFUL's feature scale S (it runs on e / S): a number, or first_observation ('': 1, the paper's EOFUL)"""
    noise_scale: float = 0.1
    """reward noise sigma"""
    bound_scale: float = 0.1
    """the theoretical bound is plotted times this (the paper: 0.1)"""
    bound_c: float = 1.0
    """Assumption 4's constant c in the bound c L sqrt(d T log T)"""
    agents: str = "eoful,fixed_theta_greedy,misaligned_greedy"
    """comma-separated registry names of the agents to compare"""
    seed: int = 0
    """seed of the query and noise streams (shared by all agents)"""
    seeds: str = ""
    """comma-separated seeds to run and average (overrides --seed), e.g. 0,1,2"""
    device: str = "cpu"
    """torch device"""
    runs_per_forward: int = 0
    """(agent, seed) runs stepped together as the rows of one vector env, one forward per step (0: the agents of
    one seed; --real-llm: every run); each finished group is saved, so an interrupted call resumes from the last
    finished group"""
    checkpoint_every: int = 25
    """rounds between two saves of the group in progress (out_dir/checkpoint.npz: the agents, regrets and rounds
    played), which an interrupted call with the same settings resumes from"""
    threads: int = 0
    """torch threads (0: one, or what OMP_NUM_THREADS says; --real-llm: every core)"""
    out_dir: str = "runs/regret"
    """where regret.png and regret.json are written ('' for none); a run whose (agent, seed) is already in
    regret.json with the same settings is kept, not repeated (rerun the command to resume)"""


PAPER = {"rounds": 10_000, "max_length": 30, "top_k": 15, "theta": 0.5}
QUICK = {"rounds": 150, "max_length": 10, "top_k": 8}
REAL_LLM = {**PAPER, "rounds": 100, "seeds": "0,1,2"}
REAL_LLM_MODEL = "smollm2-135m-instruct"
RUN_KEYS = ("seed", "seeds", "agents", "out_dir", "runs_per_forward", "threads", "checkpoint_every")
"""Options that say which runs to make and where, not how: runs resume across them."""


def parse_args(argv: list[str] | None = None) -> Args:
    args = parse_dataclass_arguments(Args, __doc__, argv)
    if args.real_llm and args.model == Args.model:
        args.model = REAL_LLM_MODEL
    if args.real_llm and not args.threads:
        args.threads = os.cpu_count() or 1
    for name, value in (REAL_LLM if args.real_llm else PAPER if args.paper else QUICK).items():
        if not getattr(args, name):
            setattr(args, name, value)
    if args.real_llm and not args.runs_per_forward:  # more rows a forward: closer to the compute floor
        args.runs_per_forward = len(agent_names(args)) * len(seed_list(args))
    return args


def script_args(args: Args, **changes: Any) -> Args:
    """This script's options from those of a script built on it (an ``Args`` subclass), with ``changes``."""
    fields = {field.name for field in dataclasses.fields(Args)}
    return Args(**({name: value for name, value in dataclasses.asdict(args).items() if name in fields} | changes))


def require(what: str, error: Exception) -> SystemExit:
    """A clear exit for a missing piece of the project (the env or an agent not installed/merged)."""
    return SystemExit(
        f"reproduce_regret.py needs {what}, which is not available here ({type(error).__name__}: {error}). "
        "It ships with the LLM envs (TokenizedAlignment-v0, misaligned_greedy) and the linear agents "
        "(eoful, fixed_theta_greedy); install a tokenized-bandit-gym that has them."
    )


READING_FLAGS = ("value_map", "pooling", "theta_scale", "embedding_norm", "embedding_layer")
"""The reading options passed on when set (``score_forced_eos`` is a yes/no flag, read apart)."""


def env_kwargs(args: Args) -> dict[str, Any]:
    """The keywords of ``--env-id`` for these options (unset reading flags and fixed length: the env id's defaults)."""
    from tokenized_bandit_gym.evaluation.ddmc.resources import resolve_model

    reading: dict[str, Any] = {name: getattr(args, name) for name in READING_FLAGS if getattr(args, name)}
    if args.score_forced_eos:
        if args.score_forced_eos not in ("yes", "no"):
            raise SystemExit(f"--score-forced-eos must be yes or no, got {args.score_forced_eos!r}")
        reading["score_forced_eos"] = args.score_forced_eos == "yes"
    return {
        "model": resolve_model(args.model),
        "queries": args.queries,
        "top_k": args.top_k,
        "gamma": args.gamma,
        "max_length": args.max_length,
        "theta": [args.theta] * _hidden_size(args.model) if args.theta else None,
        "noise_scale": args.noise_scale,
        "device": args.device,
        **reading,
    }


def make_env(args: Args, num_rows: int, **loaded: Any) -> Any:
    """The native vector env of ``num_rows`` rows: row i is the single env, one batched forward steps them all.

    ``loaded`` (``model=``, ``tokenizer=``) passes an already loaded model instead of loading ``args.model``.
    """
    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401  (registers the env ids)

    try:
        kwargs = env_kwargs(args) | loaded
        return gym.make_vec(args.env_id, num_rows, vectorization_mode="vector_entry_point", **kwargs)
    except gym.error.Error as error:
        raise require(f"the env {args.env_id}", error) from error


def _hidden_size(model: str) -> int:
    from transformers import AutoConfig

    from tokenized_bandit_gym.evaluation.ddmc.resources import resolve_model

    return int(AutoConfig.from_pretrained(resolve_model(model)).hidden_size)


def make_agent(name: str, env: Any, args: Args) -> Any:
    try:
        from tokenized_bandit_gym import agents
    except ImportError as error:
        raise require("the agents package", error) from error
    kwargs: dict[str, Any] = {}
    if name == "eoful":
        kwargs.update(beta=args.beta, record_ratios=True)
        if args.feature_scale:
            scale = args.feature_scale
            kwargs["feature_scale"] = scale if scale == "first_observation" else float(scale)
    elif name == "fixed_theta_greedy":
        kwargs["theta"] = "negated" if args.wrong_theta == 0.0 else wrong_theta(env.unwrapped.problem, args.wrong_theta)
    try:
        return agents.make(name, **kwargs)
    except ValueError as error:
        raise require(f"the agent {name!r}", error) from error


def wrong_theta(problem: Any, coordinate: float = 0.0) -> Any:
    """WrongTheta's ``theta'`` in the env's features ``[e : v(p)]``: ``-theta`` (coordinate 0) or ``coordinate * 1``.

    ``theta'`` is set in the user's coordinates (``problem.latent_theta``, ``(d,)``) and mapped to the
    features with ``problem.reduced_theta``, ``[(1 - gamma) theta' : gamma]`` ``(d + 1,)``.
    """
    import torch

    latent = problem.latent_theta  # (d,)
    wrong = -latent if coordinate == 0.0 else torch.full_like(latent, coordinate)
    return problem.reduced_theta(wrong)


def theoretical_bound(rounds: np.ndarray, length: int, dim: int, c: float) -> np.ndarray:
    """Theorem 3.2's ``c L sqrt(d T log T)`` (with delta = 1/T), at each ``T`` in ``rounds``."""
    t = np.maximum(rounds.astype(np.float64), 2.0)
    return c * length * np.sqrt(dim * t * np.log(t))


def loglog_slope(cumulative: np.ndarray) -> float:
    """Slope of log cumulative regret vs log t over the second half of the rounds (1: linear; 0.5: sqrt)."""
    t = np.arange(1, cumulative.shape[0] + 1)
    half = slice(cumulative.shape[0] // 2, None)
    if np.any(cumulative[half] <= 0) or cumulative.shape[0] < 4:
        return math.nan
    return float(np.polyfit(np.log(t[half]), np.log(cumulative[half]), 1)[0])


def agent_names(args: Args) -> list[str]:
    """The registry names of ``--agents``, in order."""
    return [name.strip() for name in args.agents.split(",") if name.strip()]


def seed_list(args: Args) -> list[int]:
    """The seeds to run: ``--seeds`` if given, else ``--seed`` alone."""
    try:
        seeds = [int(part) for part in args.seeds.split(",") if part.strip()] if args.seeds else [args.seed]
    except ValueError as error:
        raise SystemExit(f"--seeds must be comma-separated integers, got {args.seeds!r}") from error
    if not seeds or min(seeds) < 0:
        raise SystemExit(f"--seeds must name non-negative seeds, got {args.seeds!r}")
    return seeds


def resumable_runs(path: str, settings: dict[str, Any]) -> dict[str, Any]:
    """An earlier call's regret.json when its settings (seeds and agents aside) and its code are these, else {}.

    Its ``runs`` are keyed by agent and seed, so runs made by separate calls (one agent or seed each, in parallel,
    each to its own ``--out-dir``) combine by merging their ``runs`` into one regret.json and calling again with
    all of them (calls of one code version: the file keeps one ``code_version``); a call with nothing left to run
    reads the feature dimension and formatting there, loading no model.
    """
    earlier = provenance.read_results_json(path)
    if earlier is None:
        return {}
    same = {key: value for key, value in earlier.get("settings", {}).items() if key not in RUN_KEYS}
    if same != settings or not provenance.made_by_this_code(earlier.get("code_version"), path):
        return {}
    return earlier


def main(args: Args) -> dict[str, Any]:
    seeds = seed_list(args)
    settings = {key: value for key, value in dataclasses.asdict(args).items() if key not in RUN_KEYS}
    json_path = os.path.join(args.out_dir, "regret.json") if args.out_dir else ""
    progress_path = os.path.join(args.out_dir, "progress.json") if args.out_dir else ""
    earlier = resumable_runs(json_path, settings)
    runs = dict(earlier.get("runs", {}))
    names = agent_names(args)
    todo = [(name, seed) for seed in seeds for name in names if f"{name}/{seed}" not in runs]
    if runs:
        print(f"resuming: {len(runs)} finished runs kept from {json_path}, {len(todo)} to go")
    group = args.runs_per_forward or len(names)
    if group < 1:
        raise SystemExit(f"--runs-per-forward must be >= 0, got {args.runs_per_forward}")
    groups = [todo[start : start + group] for start in range(0, len(todo), group)]
    env = make_env(args, len(groups[0])) if todo or "feature_dim" not in earlier else None
    dim = int(env.single_observation_space["candidate_embeddings"].shape[-1]) if env else earlier["feature_dim"]
    formatting = env.unwrapped.problem.prompt_formatting if env is not None else earlier.get("formatting", "")
    results: dict[str, Any] = {"settings": {**settings, "seeds": seeds, "agents": args.agents}, "feature_dim": dim}
    results["code_version"] = provenance.code_version()
    results |= {"agents": {}, "formatting": formatting, "runs": runs}
    print(f"queries: {formatting}")
    for index, runs_of_group in enumerate(groups):
        if index and len(runs_of_group) != env.num_envs:  # a smaller last group: the same model, fewer rows
            problem = env.unwrapped.problem
            env = make_env(args, len(runs_of_group), model=problem.model, tokenizer=problem.tokenizer)
        start = time.perf_counter()
        played = play_rows(env, runs_of_group, args, len(groups) if index == 0 else 0, progress_path, settings)
        seconds = round(time.perf_counter() - start, 1)
        for (name, seed), (cumulative, agent) in zip(runs_of_group, played, strict=True):
            entry = {"cumulative_regret": cumulative.tolist(), "seconds": seconds, "runs_per_forward": env.num_envs}
            for attribute in RATIO_ATTRIBUTES:
                if hasattr(agent, attribute):
                    entry[attribute] = [float(v) for v in getattr(agent, attribute)]
            runs[f"{name}/{seed}"] = entry
        if json_path:
            write_json_atomically(json_path, results)
            if os.path.exists(checkpoint_path(args)):
                os.remove(checkpoint_path(args))
    t = np.arange(1, args.rounds + 1)
    for name in names:
        per_seed = np.array([runs[f"{name}/{seed}"]["cumulative_regret"] for seed in seeds])  # (S, T)
        cumulative = per_seed.mean(axis=0)  # (T,)
        regret = np.diff(per_seed, axis=1, prepend=0.0)  # (S, T) per-round regret
        entry = {
            "cumulative_regret": cumulative.tolist(),
            "cumulative_regret_min": per_seed.min(axis=0).tolist(),
            "cumulative_regret_max": per_seed.max(axis=0).tolist(),
            "final_cumulative_regret": float(cumulative[-1]),
            "final_cumulative_regret_per_seed": per_seed[:, -1].tolist(),
            "mean_regret_last_20pct": float(regret[:, -max(1, args.rounds // 5) :].mean()),
            "loglog_slope_second_half": loglog_slope(cumulative),
        }
        results["agents"][name] = entry
        print(
            f"{AGENT_LABELS.get(name, name):<18} cumulative regret {entry['final_cumulative_regret']:9.3f} "
            f"(mean of {len(seeds)} seeds; per seed {', '.join(f'{v:.2f}' for v in per_seed[:, -1])})  "
            f"mean regret last 20% {entry['mean_regret_last_20pct']:+.4f}  "
            f"log-log slope {entry['loglog_slope_second_half']:.2f}"
        )
    bound = args.bound_scale * theoretical_bound(t, args.max_length, dim, args.bound_c)
    results["scaled_bound_final"] = float(bound[-1])
    print(f"{args.bound_scale} x bound c L sqrt(d T log T) at T={args.rounds}: {bound[-1]:.1f}")
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        plot(results, os.path.join(args.out_dir, "regret.png"))
        write_json_atomically(json_path, results)
        print(f"wrote {args.out_dir}/regret.png and regret.json")
    return results


PROGRESS_EVERY = 25
"""Rounds between two writes of a group's progress file (``play_rows``)."""

RATIO_ATTRIBUTES = ("prefix_ratio_max", "prefix_ratio_mean", "prefix_inverse_ratio_max", "prefix_inverse_ratio_mean")
"""EOFUL's Assumption 4 ratios (``record_ratios=True``), one float per round each, kept with its run."""


def checkpoint_path(args: Args) -> str:
    """The group in progress's checkpoint file ('' without ``--out-dir``)."""
    return os.path.join(args.out_dir, "checkpoint.npz") if args.out_dir else ""


OLD_CHECKPOINT = "checkpoint.pkl"
"""The checkpoint of older versions, a pickle: never loaded (unpickling a shared folder's file runs its code)."""


def say_old_checkpoint_is_ignored(args: Args) -> None:
    """Print one line when ``--out-dir`` holds an older version's pickled checkpoint, which is never read."""
    old = os.path.join(args.out_dir, OLD_CHECKPOINT) if args.out_dir else ""
    if old and os.path.exists(old):
        print(f"ignoring {old}: a pickled checkpoint of an older version is never loaded; its group is played again")


def play_rows(
    env: Any,
    runs: list[tuple[str, int]],
    args: Args,
    groups: int = 0,
    progress_path: str = "",
    settings: dict[str, Any] | None = None,
) -> list[tuple[Any, Any]]:
    """Play the (agent, seed) ``runs`` for ``args.rounds`` rounds each as the rows of the vector env ``env``.

    Row i is the single env reset with its run's seed, played by its own agent (reset with the same seed): what
    ``run_online(single env, agent, T, seed)`` plays, to float rounding, but the rows' candidates go through one
    forward per step, rows of one seed share each query's prefill (common random numbers: the same queries), and
    rows that are still the same partial response share one forward of their candidates, and each round's
    benchmark is decoded by rows of that forward; see :mod:`~tokenized_bandit_gym.evaluation.runs_as_rows`. With
    ``groups`` > 0, the expected time of that many such groups is printed after the first round.
    With ``progress_path``, the group's cumulative regret so far (every run's first ``t`` rounds, ``t`` the fewest
    any run has played) is written there atomically every ``PROGRESS_EVERY`` rounds: a call stopped before the
    group ends (a time limit) still leaves its curves up to ``t``. With ``settings`` (the options that say what
    the runs are) and ``--out-dir``, the group keeps a checkpoint every ``--checkpoint-every`` rounds, and a call
    with the same settings and runs resumes from it (``runs_as_rows.RowsCheckpoint``).

    Returns:
        Per run, its cumulative regret ``(T,)`` and its agent.
    """
    from tokenized_bandit_gym.evaluation.runs_as_rows import RowsCheckpoint
    from tokenized_bandit_gym.evaluation.runs_as_rows import play_rows as play_runs_as_rows

    agents = [make_agent(name, env, args) for name, _ in runs]
    start = time.perf_counter()

    def print_expected_time(ended: np.ndarray, played: np.ndarray, *_: Any) -> None:
        nonlocal groups
        if groups and played.min() == 1:
            per_round = time.perf_counter() - start
            print(
                f"{groups} groups of {len(runs)} runs (agent x seed as rows of one forward) x {args.rounds} "
                f"rounds, L={args.max_length}, top-{args.top_k}: expected run time about "
                f"{per_round * args.rounds * groups / 60:.1f} min ({per_round:.2f} s for the first round, its "
                "benchmarks included)",
                flush=True,
            )
            groups = 0

    so_far = np.zeros((len(runs), args.rounds))  # (N, T) per-round regret recorded so far (play_rows fills it)
    written = 0

    def on_rounds_ended(ended: np.ndarray, played: np.ndarray, observations: Any, final: dict[str, Any]) -> None:
        nonlocal written
        print_expected_time(ended, played)
        reached = int(played.min())
        if progress_path and (reached - written >= PROGRESS_EVERY or reached == args.rounds) and reached > written:
            written = reached
            curves = {
                f"{name}/{seed}": np.cumsum(so_far[row, :reached]).tolist() for row, (name, seed) in enumerate(runs)
            }
            write_json_atomically(
                progress_path, {"rounds_played": reached, "seconds": time.perf_counter() - start, "runs": curves}
            )

    label = ", ".join(f"{AGENT_LABELS.get(name, name)}/{seed}" for name, seed in runs)
    seeds = [seed for _, seed in runs]
    checkpoint = None
    say_old_checkpoint_is_ignored(args)
    if settings is not None and checkpoint_path(args):
        identity = {"settings": settings, "runs": [list(run) for run in runs]}
        checkpoint = RowsCheckpoint(checkpoint_path(args), args.checkpoint_every, identity)
    regret = play_runs_as_rows(
        env, agents, seeds, args.rounds, label, on_rounds_ended, checkpoint=checkpoint, out=so_far
    )
    return [(np.cumsum(regret[row]), agent) for row, agent in enumerate(agents)]


def plot(results: dict[str, Any], path: str) -> None:
    """Each agent's mean cumulative regret (band: min-max over seeds) and the scaled bound, 1,100 px wide.

    ``results`` is regret.json's content; where it has ``rounds`` (the rounds its curves are given at, as
    in docs/results/ where only a table's checkpoints were kept) the curves are drawn at those rounds,
    else at every round. The y-range is set by the agents: the scaled bound, far above them at this
    scale, is drawn clipped and its legend entry says where it ends.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = results["settings"]
    seeds = settings["seeds"]
    agents = results["agents"]
    first = next(iter(agents.values()))["cumulative_regret"]
    t = np.asarray(results.get("rounds", np.arange(1, len(first) + 1)), dtype=np.float64)
    shape = np.sqrt(np.maximum(t, 2.0) * np.log(np.maximum(t, 2.0)))  # c L sqrt(d t log t) up to its constant
    bound = results["scaled_bound_final"] * shape / shape[-1]
    figure, axis = plt.subplots(figsize=(10.0, 5.0))
    marker = "o" if "rounds" in results else None
    colours = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00")
    values = []
    for index, (name, entry) in enumerate(agents.items()):
        colour = colours[index % len(colours)]
        axis.plot(
            t,
            entry["cumulative_regret"],
            marker=marker,
            color=colour,
            linewidth=2.2,
            label=AGENT_LABELS.get(name, name),
        )
        values.append(entry["cumulative_regret"])
        if len(seeds) > 1 and "cumulative_regret_min" in entry:
            low, high = entry["cumulative_regret_min"], entry["cumulative_regret_max"]
            axis.fill_between(t, low, high, color=colour, alpha=0.15, linewidth=0)
            values += [low, high]
        if "final_cumulative_regret_per_seed" in entry:
            finals = entry["final_cumulative_regret_per_seed"]
            axis.scatter([t[-1]] * len(finals), finals, color=colour, marker="x", s=40, zorder=3)
            values.append(finals)
    low, high = (
        float(np.min(np.concatenate([np.ravel(v) for v in values]))),
        float(np.max(np.concatenate([np.ravel(v) for v in values]))),
    )
    span = max(high - min(low, 0.0), 1e-9)
    top = high + 0.1 * span
    off_scale = bound[-1] > top
    bound_label = f"{settings['bound_scale']} x bound c L sqrt(d T log T)"
    bound_label += f" (off scale: {bound[-1]:,.0f} at T = {int(t[-1]):,})" if off_scale else ""
    axis.plot(t, bound, "k--", linewidth=1.2, label=bound_label)
    axis.set_ylim(min(low, 0.0) - 0.1 * span, top)
    axis.axhline(0.0, color="#999999", linewidth=0.8)
    axis.set_xlabel("round t", fontsize=12)
    axis.set_ylabel("cumulative regret vs oracle greedy", fontsize=12)
    axis.tick_params(labelsize=11)
    axis.grid(alpha=0.3)
    banded = any("cumulative_regret_min" in entry for entry in agents.values())
    runs = (
        f"mean of seeds {', '.join(str(s) for s in seeds)} ({'band: min-max; ' if banded else ''}x: each seed's R(T))"
    )
    runs = runs if len(seeds) > 1 else f"one run, seed {seeds[0]}"
    source = f"\n{results['source']}" if results.get("source") else ""
    env_id = f" ({settings['env_id']})" if "env_id" in settings else ""
    axis.set_title(
        f"Regret on {settings['model']}{env_id}, L = {settings['max_length']}, top-{settings['top_k']}, "
        f"gamma = {settings['gamma']}\n{runs}{source}",
        fontsize=12,
    )
    axis.legend(fontsize=11, loc="best")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


if __name__ == "__main__":
    run_script(parse_args, main)
