"""Reproduce the paper's check of Assumption 4 for EOFUL (section 6.2, Figure 2 right), in both norms.

Assumption 4 asks for a constant c with ``||y^(1:l)||_{Sigma_t} <= c ||y||_{Sigma_t}`` for every prefix of a
complete response. Theorem 3.2's proof, however, applies it to the confidence width
``w_t(x) = sqrt(x^T Sigma_t^-1 x)``: ``w_t(y^(1:k)) <= c w_t(y_t)``. Running EOFUL on the alignment env
(``--env-id``: ``TokenizedAlignment-v1`` by default, ``TokenizedAlignment-v0`` for the earlier reading; every
reading option is a flag, as in ``reproduce_regret.py``), this script records, per round t and over the positions
l of the response EOFUL submitted (embeddings of the prefixes from the env's oracle, Sigma_t the design matrix
before the round's update), both ratios

    rho^l_t = ||y_t^(1:l)||_{Sigma_t} / ||y_t||_{Sigma_t}              (the assumption as stated)
    w^l_t   = ||y_t^(1:l)||_{Sigma_t^-1} / ||y_t||_{Sigma_t^-1}        (what the proof needs)

and plots their maximum and mean over l side by side. The paper reports the ratio "universally upper bounded by
1.25, even after taking maximum over every token position" (Llama-3-8B-Instruct, L = 30, top-15, gamma = 0.8).

EOFUL built with ``record_ratios=True`` exposes the ratios as ``prefix_ratio_max`` / ``prefix_ratio_mean`` and
``prefix_inverse_ratio_max`` / ``prefix_inverse_ratio_mean`` (one float per round each). The run shows a progress
bar and, first, its expected duration (timed on three warm-up rounds).

``--real-llm`` is the paper's setting on SmolLM2-135M-Instruct, short (T = 100, every core); a finished run is
not repeated (its ratio.json in ``--out-dir`` is plotted again) when this code made it: ratio.json records the
package version and git commit of the code that made its ratios, and a run of other code is played again, with
one printed line naming both versions. The ratios of ``reproduce_regret.py``'s EOFUL runs come for free with
``--from-regret`` (ratio.json then records the code version of that regret.json).

    PYTHONPATH=. python examples/reproduce_ratio.py
    PYTHONPATH=. python examples/reproduce_ratio.py --real-llm --out-dir runs/ratio_smollm2
    PYTHONPATH=. python examples/reproduce_ratio.py --paper --model meta-llama/Meta-Llama-3-8B-Instruct --device cuda
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenized_bandit_gym.envs.language_model_config import Rewards
from tokenized_bandit_gym.evaluation import provenance
from tokenized_bandit_gym.evaluation.alignment_regret import (
    ENV_ID,
    READING_FIELDS,
    READING_FLAGS,
    reading_keywords,
    use_real_llm,
)
from tokenized_bandit_gym.evaluation.atomic_files import write_json_atomically
from tokenized_bandit_gym.llm.language_model_config import Reading
from tokenized_bandit_gym.script_arguments import config_option, parse_dataclass_arguments, run_script

EARLIER_ENV_ID = "TokenizedAlignment-v0"
"""The env of a regret.json that records none (made before ``--env-id``): every such run was ``-v0``'s."""


@dataclass
class _Options:
    """Command-line options but the reading's (each field's docstring is its --help)."""

    env_id: str = ENV_ID
    """the alignment env: TokenizedAlignment-v1 (the calibrated reading) or TokenizedAlignment-v0 (the earlier one)"""
    paper: bool = False
    """use the paper's settings (L=30, top-15, T=10,000) for unset options"""
    real_llm: bool = False
    """the paper's settings on the real instruct model smollm2-135m-instruct, short: T=100 (unset options);
    --rounds 1000 for the horizon of reproduce_regret.py's T=1000 run"""
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
    gamma: float = config_option(Reading, "gamma")
    beta: float = 1.0
    """EOFUL's multiplier on sqrt(beta_t)"""
    noise_scale: float = config_option(Rewards, "noise_scale", note="reward noise")
    threshold: float = 1.25
    """the paper's reported upper bound on the ratio"""
    seed: int = 0
    """seed of the query and noise streams"""
    device: str = "cpu"
    """torch device"""
    threads: int = 0
    """torch threads (0: one, or what OMP_NUM_THREADS says; --real-llm: every core)"""
    out_dir: str = "runs/ratio"
    """where ratio.png and ratio.json are written ('' for none); a ratio.json there with the same settings is
    plotted again, not rerun (rerun the command to resume)"""
    from_regret: str = ""
    """a regret.json of reproduce_regret.py: plot the ratios its EOFUL run of --seed recorded (its settings
    replace the env options here) instead of running EOFUL again"""


Args = dataclasses.make_dataclass(
    "Args", READING_FIELDS, bases=(_Options,), namespace={"__doc__": "Command-line options, the reading's included."}
)
"""The options: ``_Options`` and one flag per reading option of the env ('': the env id's default)."""


PAPER = {"rounds": 10_000, "max_length": 30, "top_k": 15}
QUICK = {"rounds": 150, "max_length": 10, "top_k": 8}
REAL_LLM = {**PAPER, "rounds": 100}


def parse_args(argv: list[str] | None = None) -> Args:
    args = parse_dataclass_arguments(Args, __doc__, argv)
    use_real_llm(args, argv)
    for name, value in (REAL_LLM if args.real_llm else PAPER if args.paper else QUICK).items():
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


NORMS = {"sigma": "prefix_ratio", "sigma_inverse": "prefix_inverse_ratio"}
NORM_LABELS = {"sigma": "||.||_Sigma_t (Assumption 4)", "sigma_inverse": "||.||_Sigma_t^-1 (proof of Thm 3.2)"}


def ratio_series(agent: Any, norm: str) -> tuple[np.ndarray, np.ndarray]:
    """The per-round ``(max, mean)`` ratios an EOFUL-like agent recorded in ``norm`` (a key of NORMS), two ``(T,)``."""
    prefix = NORMS[norm]
    if not (hasattr(agent, f"{prefix}_max") and hasattr(agent, f"{prefix}_mean")):
        raise SystemExit(f"agent {type(agent).__name__} records no Assumption 4 ratios ({prefix}_max/_mean)")
    return np.asarray(getattr(agent, f"{prefix}_max"), dtype=float), np.asarray(getattr(agent, f"{prefix}_mean"))


def summarize(ratio_max: np.ndarray, ratio_mean: np.ndarray, threshold: float) -> dict[str, float]:
    """Max of the per-round maxima, mean of the per-round means, share of rounds with max <= threshold."""
    finite = np.isfinite(ratio_max)
    if not finite.any():
        return {"max_of_max": math.nan, "mean_of_mean": math.nan, "share_rounds_max_below_threshold": math.nan}
    return {
        "max_of_max": float(np.max(ratio_max[finite])),
        "mean_of_mean": float(np.mean(ratio_mean[finite])),
        "share_rounds_max_below_threshold": float(np.mean(ratio_max[finite] <= threshold)),
    }


def recorded_run(args: Args) -> tuple[Any, str, Any]:
    """EOFUL's ratios from a regret.json (as attributes, like the agent's), its formatting and its code version.

    The code version is the one that made the regret.json (None when it records none); its settings are copied.
    """
    from types import SimpleNamespace

    with open(args.from_regret, encoding="utf-8") as handle:
        regret = json.load(handle)
    run = regret.get("runs", {}).get(f"eoful/{args.seed}")
    if run is None or "prefix_inverse_ratio_mean" not in run:
        raise SystemExit(f"{args.from_regret} has no EOFUL run of seed {args.seed} with its recorded ratios")
    settings = regret["settings"]
    for name in ("model", "queries", "max_length", "top_k", "gamma", "beta"):
        setattr(args, name, settings[name])
    args.env_id = settings.get("env_id", EARLIER_ENV_ID)
    for name in READING_FLAGS:  # a flag an older regret.json does not record was unset (its env id's)
        setattr(args, name, settings.get(name, ""))
    args.rounds = len(run["prefix_ratio_max"])
    return SimpleNamespace(**run), regret.get("formatting", ""), regret.get("code_version")


def finished_run(args: Args) -> tuple[Any, str] | None:
    """The ratios of an earlier run of this code in ``--out-dir``'s ratio.json with these settings, or None.

    None with ``--from-regret`` too: that regret.json is read again (nothing to run).
    """
    from types import SimpleNamespace

    path = os.path.join(args.out_dir, "ratio.json") if args.out_dir and not args.from_regret else ""
    earlier = provenance.read_results_json(path)
    if earlier is None:
        return None
    if {**earlier.get("settings", {}), "threads": args.threads} != dataclasses.asdict(args):
        return None
    if not provenance.made_by_this_code(earlier.get("code_version"), path):
        return None
    print(f"resuming: the run in {path} has these settings; plotted again, not rerun")
    ratios = {f"{NORMS[norm]}_{kind}": earlier[norm][f"ratio_{kind}"] for norm in NORMS for kind in ("max", "mean")}
    return SimpleNamespace(**ratios), earlier.get("formatting", "")


def main(args: Args) -> dict[str, Any]:
    finished = finished_run(args)
    made_by = provenance.code_version()
    if finished is not None:
        agent, formatting = finished
    elif args.from_regret:
        agent, formatting, made_by = recorded_run(args)
    else:
        agent, formatting = run_eoful(args)
    summary: dict[str, Any] = {"settings": dataclasses.asdict(args), "code_version": made_by, "formatting": formatting}
    print(f"queries: {summary['formatting']}")
    for norm in NORMS:
        ratio_max, ratio_mean = ratio_series(agent, norm)
        stats = summarize(ratio_max, ratio_mean, args.threshold)
        summary[norm] = {"ratio_max": ratio_max.tolist(), "ratio_mean": ratio_mean.tolist(), **stats}
        print(
            f"{NORM_LABELS[norm]:<36} max ratio over all rounds {stats['max_of_max']:.3f}, mean ratio "
            f"{stats['mean_of_mean']:.3f}, share of rounds with max ratio <= {args.threshold}: "
            f"{stats['share_rounds_max_below_threshold']:.3f}"
        )
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        plot(summary, os.path.join(args.out_dir, "ratio.png"))
        path = os.path.join(args.out_dir, "ratio.json")
        write_json_atomically(path, summary)
        print(f"wrote {args.out_dir}/ratio.png and ratio.json")
    return summary


def run_eoful(args: Args) -> tuple[Any, str]:
    """Run EOFUL on the env of ``args``; return the agent (its recorded ratios) and the env's prompt formatting."""
    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
    from tokenized_bandit_gym.evaluation import run_online
    from tokenized_bandit_gym.evaluation.ddmc.resources import resolve_model

    try:
        env = gym.make(
            args.env_id,
            model=resolve_model(args.model),
            queries=args.queries,
            top_k=args.top_k,
            gamma=args.gamma,
            max_length=args.max_length,
            noise_scale=args.noise_scale,
            device=args.device,
            **reading_keywords(args),
        )
    except gym.error.Error as error:
        raise require(f"the env {args.env_id}", error) from error
    try:
        from tokenized_bandit_gym import agents

        warmup = run_online(env, agents.make("eoful", beta=args.beta), rounds=3, seed=args.seed)
        agent = agents.make("eoful", beta=args.beta, record_ratios=True)
    except (ImportError, ValueError) as error:
        raise require("the agent 'eoful'", error) from error
    per_round = float(np.median(warmup.wall_time))  # the first round also pays one-off setup
    print(
        f"EOFUL, {args.rounds} rounds, L={args.max_length}, top-{args.top_k}: expected run time about "
        f"{per_round * args.rounds / 60:.1f} min ({per_round:.2f} s a round, median of 3 warm-ups)",
        flush=True,
    )
    run_online(env, agent, rounds=args.rounds, seed=args.seed, progress=True)
    return agent, env.unwrapped.problem.prompt_formatting


def plot(summary: dict[str, Any], path: str) -> None:
    """One panel per norm: the per-round max and mean ratio over positions, and the paper's threshold; 1,100 px wide.

    ``summary`` is ratio.json's content (``main``'s return value).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = summary["settings"]
    threshold = settings["threshold"]
    figure, axes = plt.subplots(1, len(NORMS), figsize=(11.0, 4.4), squeeze=False)
    for axis, norm in zip(axes[0], NORMS, strict=True):
        ratio_max, ratio_mean = np.asarray(summary[norm]["ratio_max"]), np.asarray(summary[norm]["ratio_mean"])
        t = np.arange(1, ratio_max.shape[0] + 1)
        axis.plot(t, ratio_max, color="#0072B2", label="max ratio", linewidth=1.4)
        axis.plot(t, ratio_mean, color="#E69F00", label="mean ratio", linewidth=1.4)
        axis.axhline(threshold, color="k", linestyle="--", linewidth=1.0, label=f"{threshold} (paper)")
        axis.set_xlabel("round t", fontsize=11)
        axis.set_ylabel("ratio over positions l", fontsize=11)
        axis.tick_params(labelsize=11)
        axis.set_title(NORM_LABELS[norm], fontsize=11)
        axis.legend(fontsize=10)
    figure.suptitle(
        f"Assumption 4's ratio: EOFUL on {settings['model']}, L = {settings['max_length']}, "
        f"top-{settings['top_k']}, gamma = {settings['gamma']}; one run, seed {settings['seed']}\n"
        f"{reading_label(settings)}; max and mean over positions l in each round",
        fontsize=12,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def reading_label(settings: dict[str, Any]) -> str:
    """The env id and the reading flags a run set, e.g. ``TokenizedAlignment-v0, value_map=root_prob``."""
    chosen = [f"{name}={settings[name]}" for name in READING_FLAGS if settings.get(name)]
    return ", ".join([settings.get("env_id", EARLIER_ENV_ID), *chosen])


if __name__ == "__main__":
    run_script(parse_args, main)
