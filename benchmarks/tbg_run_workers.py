"""`tbg run` with one worker, with two, and with the default worker count, side by side.

Each mode runs the same spec end to end (a fresh store, no report) in turn, the order rotated
every repeat, best of the repeats; the script prints each mode's wall time, its ratio to one
worker and the load average. The default plays the first run in the parent, timed, and starts
workers on the idle cores only when the work left outweighs their start-up, so it should never
be slower than one worker (up to noise), and near the two-worker time when workers pay off.

Run: ``PYTHONPATH=. python benchmarks/tbg_run_workers.py [--rounds 0] [--repeats 2]`` (rounds 0:
the spec's; a small ``--rounds`` shows the case where workers cannot pay off).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from leaderboard_time import runnable_spec_text

from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments

REPO = Path(__file__).resolve().parents[1]
MODES = {"1 worker": ["--workers", "1"], "2 workers": ["--workers", "2"], "default": []}


@dataclass
class Args:
    """Command-line arguments."""

    spec: str = str(REPO / "examples" / "leaderboard.toml")
    """the spec to run"""
    rounds: int = 0
    """override T of every task (0: the spec's)"""
    repeats: int = 2
    """runs of each mode (best kept)"""


def run_once(spec: Path, folder: Path, flags: list[str]) -> float:
    """Wall time of one ``tbg run`` of ``spec`` on a fresh store, in seconds."""
    store = folder / f"results-{time.monotonic_ns()}.sqlite"
    command = [sys.executable, "-m", "tokenized_bandit_gym.evaluation.cli", "run", str(spec), "--store", str(store)]
    command += ["--no-progress", "--no-report", *flags]
    environment = dict(os.environ, PYTHONPATH=str(REPO))
    start = time.perf_counter()
    subprocess.run(command, check=True, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(args: Args) -> dict[str, float]:
    """Best wall time of each mode, in seconds."""
    best = dict.fromkeys(MODES, math.inf)
    loads = []
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        spec = folder / "spec.toml"
        spec.write_text(runnable_spec_text(Path(args.spec), args.rounds))
        order = list(MODES)
        for repeat in range(args.repeats):
            for mode in order[repeat % len(order) :] + order[: repeat % len(order)]:
                best[mode] = min(best[mode], run_once(spec, folder, MODES[mode]))
                loads.append(os.getloadavg()[0])
    print(f"load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores; best of {args.repeats}")
    for mode, seconds in best.items():
        print(f"{mode:<10} {seconds:7.1f} s  {seconds / best['1 worker']:.2f}x one worker's time")
    return best


if __name__ == "__main__":
    main(parse_dataclass_arguments(Args, __doc__, None))
