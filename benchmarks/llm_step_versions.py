"""Env step time of two checkouts of the package, side by side: is a change slower than its base?

One worker process per checkout imports that checkout's package, loads the model as its own
``benchmarks/llm_step.py`` does and warms up with one untimed episode per forward (the oracle
benchmark cache). Each repeat then times whole L-token episodes of ``TokenizedAlignmentEnv.step``
(observation included) on the native and on the transformers forward, alternating the two workers
episode by episode in ABBA order, so that a change of machine load hits both alike. Ratios are
medians of the per-repeat ``after / before`` ratios, with their range.

Run: ``PYTHONPATH=. python benchmarks/llm_step_versions.py --before /path/to/base/checkout --after .``
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments

_WORKER = """
import json, sys, torch
import benchmarks.llm_step as bench
import tokenized_bandit_gym
args = bench.parse_args(["--max-length", sys.argv[2], "--top-k", sys.argv[3]])
torch.set_num_threads(1)
model, tokenizer = bench.load(sys.argv[1], "cpu")
envs = {name: bench.make_env(model, tokenizer, args, name) for name in bench.IMPLEMENTATIONS}
for env in envs.values():
    bench.time_episode(env)  # untimed: the oracle benchmark cache, warm-up
print(json.dumps({"package": tokenized_bandit_gym.__file__}), flush=True)
for line in sys.stdin:
    print(json.dumps({"seconds": bench.time_episode(envs[line.strip()])[0]}), flush=True)
"""


class Worker:
    """A process importing one checkout's package that times one episode per request."""

    def __init__(self, checkout: Path, model: str, args: Args) -> None:
        environment = {**os.environ, "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1"}
        command = [sys.executable, "-c", _WORKER, model, str(args.max_length), str(args.top_k)]
        self.process = subprocess.Popen(
            command, cwd=checkout, env=environment, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        package = json.loads(self._read())["package"]
        if not package.startswith(str(checkout)):
            raise RuntimeError(f"the worker imported the package from {package}, outside {checkout}")

    def _read(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the worker process ended")
        return line

    def episode(self, implementation: str) -> float:
        """Mean seconds per step of one episode on the forward ``implementation``."""
        assert self.process.stdin is not None
        self.process.stdin.write(implementation + "\n")
        self.process.stdin.flush()
        return float(json.loads(self._read())["seconds"])

    def close(self) -> None:
        """End the worker."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


@dataclass
class Args:
    """Benchmark options."""

    before: str = ""
    """checkout of the base (e.g. a ``git worktree add`` of main)"""
    after: str = "."
    """checkout of the change"""
    models: str = "stories260K,gpt2-small-random"
    """comma-separated, as in benchmarks/llm_step.py"""
    repeats: int = 40
    """interleaved repeats: each times one episode per checkout and forward, in ABBA order"""
    max_length: int = 30
    """L"""
    top_k: int = 15
    """k"""


def main(argv: list[str] | None = None) -> str:
    """Print (and return) per model and forward: before and after ms per step, and the after / before ratio."""
    args = parse_dataclass_arguments(Args, __doc__, argv)
    if not args.before:
        raise ValueError("--before must name the base checkout")
    checkouts = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    lines = [f"L={args.max_length}, k={args.top_k}, repeats={args.repeats}, load average before: {os.getloadavg()}"]
    print(lines[0], flush=True)
    for model in args.models.split(","):
        workers = {label: Worker(checkout, model, args) for label, checkout in checkouts.items()}
        samples: dict[tuple[str, str], list[float]] = {}
        for repeat in range(args.repeats):
            for implementation in ("native", "transformers"):
                order = ("before", "after", "after", "before") if repeat % 2 else ("after", "before", "before", "after")
                pair: dict[str, list[float]] = {}
                for label in order:  # ABBA: a linear drift of the load hits both alike
                    pair.setdefault(label, []).append(workers[label].episode(implementation))
                for label, values in pair.items():
                    samples.setdefault((label, implementation), []).append(float(np.mean(values)))
        for worker in workers.values():
            worker.close()
        table = [f"\n{model}\n\n| forward | before (ms/step) | after (ms/step) | after / before |\n|---|---|---|---|"]
        for implementation in ("native", "transformers"):
            before, after = np.array(samples["before", implementation]), np.array(samples["after", implementation])
            ratios = after / before
            table.append(
                f"| {implementation} | {1e3 * np.median(before):.2f} | {1e3 * np.median(after):.2f} | "
                f"**{np.median(ratios):.3f}** ({ratios.min():.3f}-{ratios.max():.3f}) |"
            )
        lines += table
        print("\n".join(table), flush=True)
    lines.append(f"\nload average after: {os.getloadavg()}")
    print(lines[-1])
    return "\n".join(lines)


if __name__ == "__main__":
    main()
