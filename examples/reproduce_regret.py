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
from typing import Any

import numpy as np

from tokenized_bandit_gym.evaluation import provenance
from tokenized_bandit_gym.evaluation.alignment_regret import (
    AGENT_LABELS,
    RATIO_ATTRIBUTES,
    RUN_KEYS,
    AlignmentRegretOptions,
    agent_names,
    checkpoint_path,
    make_env,
    options_of,
    parse_options,
    play_rows,
    seed_list,
)

# read here by the scripts and tests built on this one (``X as X``: re-exported)
from tokenized_bandit_gym.evaluation.alignment_regret import ENV_ID as ENV_ID
from tokenized_bandit_gym.evaluation.alignment_regret import READING_FLAGS as READING_FLAGS
from tokenized_bandit_gym.evaluation.alignment_regret import env_kwargs as env_kwargs
from tokenized_bandit_gym.evaluation.alignment_regret import make_agent as make_agent
from tokenized_bandit_gym.evaluation.alignment_regret import wrong_theta as wrong_theta
from tokenized_bandit_gym.evaluation.atomic_files import write_json_atomically
from tokenized_bandit_gym.script_arguments import run_script

Args = AlignmentRegretOptions
"""Command-line options (each field's docstring is its --help)."""
script_args = options_of
"""This script's options from those of a script built on it (an ``Args`` subclass), with changes."""


def parse_args(argv: list[str] | None = None) -> Args:
    """The command line's options (``argv``; None reads ``sys.argv``), unset ones from the presets."""
    return parse_options(argv, __doc__)


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
