"""The regret comparison of the paper's section 6.2 on the alignment env, shared by scripts and benchmarks.

``examples/reproduce_regret.py`` (Figure 2 left, Figure 3) and the benchmarks that time its work
(``benchmarks/llm_figure2_rows.py``, ``benchmarks/llm_whole_run_floor.py``,
``benchmarks/llm_rows_step_profile.py``) play the same runs: :class:`AlignmentRegretOptions` says which, with
the paper's presets applied by :func:`parse_options`; :func:`env_kwargs` and :func:`make_env` build the env
(``make_env``: its runs as the rows of one native vector env), :func:`make_agent` the agents, and
:func:`play_rows` plays (agent, seed) runs as those rows, with progress files and a resumable checkpoint.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, overload

import numpy as np

from tokenized_bandit_gym.envs.language_model_config import Rewards
from tokenized_bandit_gym.evaluation.atomic_files import write_json_atomically
from tokenized_bandit_gym.llm.language_model_config import ModelSource, Reading
from tokenized_bandit_gym.script_arguments import (
    config_option,
    parse_dataclass_arguments,
    unset_flag_fields,
    yes_or_no,
)

ENV_ID = "TokenizedAlignment-v1"
"""The env the script runs by default (``--env-id``): the calibrated reading."""
AGENT_LABELS = {"eoful": "EOFUL", "fixed_theta_greedy": "WrongTheta", "misaligned_greedy": "Misaligned greedy"}


@dataclass
class _RunOptions:
    """Options of a regret comparison on the alignment env but the reading's (each field's docstring is its --help)."""

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
    gamma: float = config_option(Reading, "gamma")
    theta: float = 0.0
    """0: the env's default theta (0.5 * 1 scaled to unit norm; 0.5 with --paper); else this value in every
    coordinate"""
    wrong_theta: float = 0.0
    """0: WrongTheta's theta' = -theta (the paper's convention); else this value in every coordinate"""
    beta: float = 1.0
    """EOFUL's multiplier on sqrt(beta_t) (1: the paper's radius)"""
    feature_scale: str = ""
    """EOFUL's feature scale S (it runs on e / S): a number, or first_observation ('': 1, the paper's EOFUL)"""
    noise_scale: float = config_option(Rewards, "noise_scale", note="reward noise")
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
    device: str = config_option(ModelSource, "device")
    step_mode: str = "eager"
    """the vector env's step: eager, or captured (the static-shape step, a CUDA graph on CUDA; equal to eager to
    float rounding; docs/GPU_SUITE.md)"""
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


READING_FIELDS = unset_flag_fields(Reading, "the env id's")
"""The reading's options as flags, read from the config's reading part (:class:`~tokenized_bandit_gym.llm.
language_model_config.Reading`: every choice and yes/no field; '' leaves the env id's): a reading option added
there is a flag here with nothing else to write."""
READING_FLAGS = tuple(name for name, _, _ in READING_FIELDS)
"""The reading options passed on to the env when set."""

if TYPE_CHECKING:

    @dataclass
    class AlignmentRegretOptions(_RunOptions):
        """Options of a regret comparison on the alignment env, the reading's flags included."""

        def __getattr__(self, name: str) -> str: ...  # a reading flag

else:
    AlignmentRegretOptions = dataclasses.make_dataclass(
        "AlignmentRegretOptions",
        READING_FIELDS,
        bases=(_RunOptions,),
        namespace={
            "__doc__": "Options of a regret comparison on the alignment env, the reading's flags included.",
            "__module__": __name__,
        },
    )


Options = TypeVar("Options", bound=AlignmentRegretOptions)
"""Options of a regret comparison, or of a script that adds its own to them."""

PAPER = {"rounds": 10_000, "max_length": 30, "top_k": 15, "theta": 0.5}
QUICK = {"rounds": 150, "max_length": 10, "top_k": 8}
REAL_LLM = {**PAPER, "rounds": 100, "seeds": "0,1,2"}
REAL_LLM_MODEL = "smollm2-135m-instruct"
RUN_KEYS = ("seed", "seeds", "agents", "out_dir", "runs_per_forward", "threads", "checkpoint_every")
"""Options that say which runs to make and where, not how: runs resume across them."""


@overload
def parse_options(argv: Sequence[str] | None = None, description: str | None = None) -> AlignmentRegretOptions: ...


@overload
def parse_options(argv: Sequence[str] | None, description: str | None, options: type[Options]) -> Options: ...


def parse_options(
    argv: Sequence[str] | None = None, description: str | None = None, options: type[Any] | None = None
) -> Any:
    """The options of a command line (``argv``; None reads ``sys.argv``), unset ones from the presets.

    ``--real-llm`` sets the real instruct model and every core (:func:`use_real_llm`) and every run a row of one
    forward; ``--paper`` (or neither) fills the unset (zero or empty) options from ``PAPER`` (``QUICK``).
    ``description`` is the ``--help`` text (its first line is used), e.g. the calling script's ``__doc__``.
    ``options`` is the options class (default :class:`AlignmentRegretOptions`), or a subclass of it a script built
    on these adds its options to (the presets fill only what it leaves unset, so its own defaults hold).
    """
    args = parse_dataclass_arguments(options or AlignmentRegretOptions, description, argv)
    use_real_llm(args, argv)
    for name, value in (REAL_LLM if args.real_llm else PAPER if args.paper else QUICK).items():
        if not getattr(args, name):
            setattr(args, name, value)
    if args.real_llm and not args.runs_per_forward:  # more rows a forward: closer to the compute floor
        args.runs_per_forward = len(agent_names(args)) * len(seed_list(args))
    return args


def use_real_llm(args: Any, argv: Sequence[str] | None) -> None:
    """With ``--real-llm``: the real instruct model unless ``--model`` names one, and every core unless ``--threads``.

    ``args`` holds the parsed ``real_llm``, ``model`` and ``threads``; ``argv`` is the command line they came from
    (None: ``sys.argv``), read to tell a named model from the default.
    """
    if not args.real_llm:
        return
    words = sys.argv[1:] if argv is None else argv
    if not any(word == "--model" or word.startswith("--model=") for word in words):
        args.model = REAL_LLM_MODEL
    if not args.threads:
        args.threads = os.cpu_count() or 1


def options_of(args: AlignmentRegretOptions, **changes: Any) -> AlignmentRegretOptions:
    """These options from those of a script built on them (an ``AlignmentRegretOptions`` subclass), with ``changes``."""
    fields = {field.name for field in dataclasses.fields(AlignmentRegretOptions)}
    kept = {name: value for name, value in dataclasses.asdict(args).items() if name in fields}
    return AlignmentRegretOptions(**(kept | changes))


def require(what: str, error: Exception) -> SystemExit:
    """A clear exit for a missing piece of the project (the env or an agent not installed/merged)."""
    return SystemExit(
        f"reproduce_regret.py needs {what}, which is not available here ({type(error).__name__}: {error}). "
        "It ships with the LLM envs (TokenizedAlignment-v0, misaligned_greedy) and the linear agents "
        "(eoful, fixed_theta_greedy); install a tokenized-bandit-gym that has them."
    )


def env_kwargs(args: AlignmentRegretOptions) -> dict[str, Any]:
    """The keywords of ``--env-id`` for these options (unset reading flags and fixed length: the env id's defaults)."""
    from tokenized_bandit_gym.evaluation.ddmc.resources import resolve_model

    return {
        "model": resolve_model(args.model),
        "queries": args.queries,
        "top_k": args.top_k,
        "gamma": args.gamma,
        "max_length": args.max_length,
        "theta": [args.theta] * _hidden_size(args.model) if args.theta else None,
        "noise_scale": args.noise_scale,
        "device": args.device,
        **reading_keywords(args),
    }


def reading_keywords(args: Any) -> dict[str, Any]:
    """The env keywords of the reading flags ``args`` sets (``READING_FLAGS``; unset ones keep the env id's).

    ``args`` is any options object with the flags as attributes (``""``: unset); a yes/no flag becomes a bool.
    """
    flags = {name: getattr(args, name) for name in READING_FLAGS if getattr(args, name)}
    yes_no = {item.name for item in dataclasses.fields(Reading) if isinstance(item.default, bool)}
    return {name: yes_or_no(name, text) if name in yes_no else text for name, text in flags.items()}


def make_env(args: AlignmentRegretOptions, num_rows: int, **loaded: Any) -> Any:
    """The native vector env of ``num_rows`` rows: row i is the single env, one batched forward steps them all.

    ``loaded`` (``model=``, ``tokenizer=``) passes an already loaded model instead of loading ``args.model``.
    """
    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401  (registers the env ids)

    try:
        kwargs = env_kwargs(args) | loaded
        return gym.make_vec(
            args.env_id, num_rows, vectorization_mode="vector_entry_point", step_mode=args.step_mode, **kwargs
        )
    except gym.error.Error as error:
        raise require(f"the env {args.env_id}", error) from error


def _hidden_size(model: str) -> int:
    from transformers import AutoConfig

    from tokenized_bandit_gym.evaluation.ddmc.resources import resolve_model

    return int(AutoConfig.from_pretrained(resolve_model(model)).hidden_size)


def make_agent(name: str, env: Any, args: AlignmentRegretOptions) -> Any:
    """The registry agent ``name`` with these options' settings (EOFUL's radius and ratios, WrongTheta's theta')."""
    from tokenized_bandit_gym.registration import make_agent as make_registered_agent

    kwargs: dict[str, Any] = {}
    if name == "eoful":
        kwargs.update(beta=args.beta, record_ratios=True)
        if args.feature_scale:
            scale = args.feature_scale
            kwargs["feature_scale"] = scale if scale == "first_observation" else float(scale)
    elif name == "fixed_theta_greedy":
        kwargs["theta"] = "negated" if args.wrong_theta == 0.0 else wrong_theta(env.unwrapped.problem, args.wrong_theta)
    try:
        return make_registered_agent(name, **kwargs)
    except ImportError as error:
        raise require("the agents package", error) from error
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


def agent_names(args: AlignmentRegretOptions) -> list[str]:
    """The registry names of ``--agents``, in order."""
    return [name.strip() for name in args.agents.split(",") if name.strip()]


def seed_list(args: AlignmentRegretOptions) -> list[int]:
    """The seeds to run: ``--seeds`` if given, else ``--seed`` alone."""
    try:
        seeds = [int(part) for part in args.seeds.split(",") if part.strip()] if args.seeds else [args.seed]
    except ValueError as error:
        raise SystemExit(f"--seeds must be comma-separated integers, got {args.seeds!r}") from error
    if not seeds or min(seeds) < 0:
        raise SystemExit(f"--seeds must name non-negative seeds, got {args.seeds!r}")
    return seeds


PROGRESS_EVERY = 25
"""Rounds between two writes of a group's progress file (``play_rows``)."""

RATIO_ATTRIBUTES = ("prefix_ratio_max", "prefix_ratio_mean", "prefix_inverse_ratio_max", "prefix_inverse_ratio_mean")
"""EOFUL's Assumption 4 ratios (``record_ratios=True``), one float per round each, kept with its run."""


def checkpoint_path(args: AlignmentRegretOptions) -> str:
    """The group in progress's checkpoint file ('' without ``--out-dir``)."""
    return os.path.join(args.out_dir, "checkpoint.npz") if args.out_dir else ""


OLD_CHECKPOINT = "checkpoint.pkl"
"""The checkpoint of older versions, a pickle: never loaded (unpickling a shared folder's file runs its code)."""


def say_old_checkpoint_is_ignored(args: AlignmentRegretOptions) -> None:
    """Print one line when ``--out-dir`` holds an older version's pickled checkpoint, which is never read."""
    old = os.path.join(args.out_dir, OLD_CHECKPOINT) if args.out_dir else ""
    if old and os.path.exists(old):
        print(f"ignoring {old}: a pickled checkpoint of an older version is never loaded; its group is played again")


def play_rows(
    env: Any,
    runs: list[tuple[str, int]],
    args: AlignmentRegretOptions,
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
