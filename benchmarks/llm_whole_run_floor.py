"""A whole reproduction command against its compute floor, with the machine's matmul rate measured side by side.

Issue 28 item 4 asks for the paper's Figure-2 run within 1.3x of its compute floor, "measured with the
machine's own matmul throughput side by side". This runs ``examples/reproduce_regret.py`` with the given
options in a fresh process, as a user runs it (into a new temporary ``--out-dir``, so nothing is resumed),
and samples the machine's throughput just before and just after it, on the run's torch threads:
``--rate-samples`` calls of ``llm_step.matmul_flops_per_second`` (each the fastest of 5 fp32 1024^3
matmuls) on each side. The median of all samples is the rate; the slowest and fastest are printed too,
since a shared machine moves them, and the ratio at the fastest (the shortest floor: the conservative one).

The floor is the command's forward work at that rate: every step of every (agent, seed) run and of each
distinct query's oracle-greedy benchmark forwards the k candidates through every decoder weight and the chosen
row through the LM head, ``k x 2 x (decoder weights) + 2 x (LM head)`` FLOPs (``llm_step.step_flops``), L steps
a round (the env's fixed length). Query prefills are not counted, so the floor is a little low; rows that
several runs share are counted once per run, as the issue counts them. ``--keep-results DIR`` copies the run's
regret.json and regret.png there. Prints the options and one markdown row (RESULTS.md's rows were measured under
``--env-id TokenizedAlignment-v0``, the script's default before -v1)::

    PYTHONPATH=. python benchmarks/llm_whole_run_floor.py -- --real-llm                 # T = 100, seeds 0, 1, 2
    PYTHONPATH=. python benchmarks/llm_whole_run_floor.py --keep-results runs/T1000 -- --real-llm --rounds 1000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from benchmarks.llm_step import matmul_flops_per_second, step_flops
from tokenized_bandit_gym.evaluation import alignment_regret
from tokenized_bandit_gym.evaluation.alignment_regret import AlignmentRegretOptions
from tokenized_bandit_gym.evaluation.runs_as_rows import queries_of_runs
from tokenized_bandit_gym.threads import use_small_work_threads

REPOSITORY = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Floor:
    """The forward work a reproduction command must do: steps of L candidates' forwards and their FLOPs."""

    runs: int
    """(agent, seed) runs"""
    rounds: int
    """rounds T of each run"""
    benchmarks: int
    """distinct queries over every run's rounds: one oracle-greedy decode each"""
    max_length: int
    """L: steps a round (fixed length)"""
    flops_per_step: int
    """``k x 2 x (decoder weights) + 2 x (LM head)``"""

    @property
    def flops(self) -> int:
        """Every step of every run and benchmark decode."""
        return (self.runs * self.rounds + self.benchmarks) * self.max_length * self.flops_per_step


def command_floor(options: AlignmentRegretOptions) -> Floor:
    """The :class:`Floor` of ``reproduce_regret.py`` with ``options`` (builds its env once to count the queries)."""
    env = alignment_regret.make_env(options, 1)
    try:
        seeds = alignment_regret.seed_list(options)
        problem = env.unwrapped.problem
        return Floor(
            runs=len(seeds) * len(alignment_regret.agent_names(options)),
            rounds=options.rounds,
            benchmarks=len(queries_of_runs(env, seeds, options.rounds)),
            max_length=options.max_length,
            flops_per_step=step_flops(problem.model, options.top_k),
        )
    finally:
        env.close()


def rate_samples(count: int) -> list[float]:
    """``count`` samples of the fp32 1024^3 matmul rate on the current torch threads, FLOP/s."""
    return [matmul_flops_per_second("cpu") for _ in range(count)]


def main(argv: list[str]) -> str:
    """Run the command, print and return the options line and the markdown row."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate-samples", type=int, default=7, help="matmul rate samples before and after the run")
    parser.add_argument(
        "--keep-results",
        default="",
        help="a folder to copy the run's regret.json and regret.png into (the run writes to a new temporary one)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="reproduce_regret.py's options, after --")
    args = parser.parse_args(argv)
    command = [part for part in args.command if part != "--"]
    if any(part == "--out-dir" or part.startswith("--out-dir=") for part in command):
        raise SystemExit("--out-dir is chosen here (a new temporary folder, so that nothing is resumed)")
    options = alignment_regret.parse_options(command)
    use_small_work_threads(options.threads or None)  # the threads the command itself will run on
    floor = command_floor(options)
    with tempfile.TemporaryDirectory(prefix="tbg-whole-run-") as out_dir:
        before = rate_samples(args.rate_samples)
        paths = [str(REPOSITORY), os.environ.get("PYTHONPATH", "")]
        environment = os.environ | {"PYTHONPATH": os.pathsep.join(path for path in paths if path)}
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, str(REPOSITORY / "examples/reproduce_regret.py"), *command, "--out-dir", out_dir],
            check=True,
            env=environment,
        )
        wall = time.perf_counter() - start
        if args.keep_results:
            shutil.copytree(out_dir, args.keep_results, dirs_exist_ok=True)
        after = rate_samples(args.rate_samples)
    samples = before + after
    rate = statistics.median(samples)
    floor_seconds = floor.flops / rate
    load = os.getloadavg()
    header = (
        f"reproduce_regret.py {' '.join(command)}: model {options.model}, T = {options.rounds}, "
        f"L = {options.max_length}, top-{options.top_k}, {floor.runs} runs, {floor.benchmarks} benchmark decodes; "
        f"torch threads {torch.get_num_threads()}; load average at the end {load[0]:.1f} {load[1]:.1f}\n"
        "| runs x T + benchmarks | floor TFLOP | matmul GFLOP/s, median (slowest-fastest) | floor s | wall s "
        "| wall / floor | at the fastest rate |\n"
        "|---|---:|---:|---:|---:|---:|---:|"
    )
    row = (
        f"| {floor.runs} x {floor.rounds} + {floor.benchmarks} | {floor.flops / 1e12:.1f} | {rate / 1e9:.0f} "
        f"({min(samples) / 1e9:.0f}-{max(samples) / 1e9:.0f}) | {floor_seconds:.4g} | {wall:.4g} | "
        f"**{wall / floor_seconds:.2f}x** | {wall * max(samples) / floor.flops:.2f}x |"
    )
    print(header, row, sep="\n", flush=True)
    return f"{header}\n{row}"


if __name__ == "__main__":
    main(sys.argv[1:])
