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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


class CheckoutWorker:
    """A process running ``script`` on one checkout's package: it answers each request line with one JSON line.

    The script's first line names the package it imported (``{"package": ...}``), checked to lie in the checkout,
    and is kept (:attr:`first`).

    Args:
        checkout: the checkout's root (its ``PYTHONPATH`` and working directory).
        script: Python source, run with ``-c``.
        arguments: the script's ``sys.argv[1:]``.
    """

    def __init__(self, checkout: Path, script: str, arguments: Sequence[str]) -> None:
        environment = {**os.environ, "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", script, *arguments],
            cwd=checkout,
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.first = self._read()  # the script's first line: the package, and whatever else it reports
        package = self.first["package"]
        if not package.startswith(str(checkout)):
            raise RuntimeError(f"the worker imported the package from {package}, outside {checkout}")

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the worker process ended")
        return json.loads(line)

    def request(self, line: str) -> dict[str, Any]:
        """Send ``line`` and return the worker's JSON answer."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        """End the worker."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def abba_order(repeat: int) -> tuple[str, str, str, str]:
    """The checkouts' order in repeat ``repeat`` (ABBA, then BAAB): a linear drift of the load hits both alike."""
    return ("before", "after", "after", "before") if repeat % 2 else ("after", "before", "before", "after")


@dataclass
class CheckoutPairArgs:
    """The options of a benchmark that compares two checkouts on one LLM episode shape."""

    before: str = ""
    """checkout of the base (e.g. a ``git worktree add`` or ``git archive`` of main)"""
    after: str = "."
    """checkout of the change"""
    max_length: int = 30
    """L"""
    top_k: int = 15
    """k"""

    def checkouts(self) -> dict[str, Path]:
        """``{"before": path, "after": path}``, resolved.

        Raises:
            ValueError: no ``--before``.
        """
        if not self.before:
            raise ValueError("--before must name the base checkout")
        return {"before": Path(self.before).resolve(), "after": Path(self.after).resolve()}


@dataclass
class Args(CheckoutPairArgs):
    """Benchmark options."""

    models: str = "stories260K,gpt2-small-random"
    """comma-separated, as in benchmarks/llm_step.py"""
    repeats: int = 40
    """interleaved repeats: each times one episode per checkout and forward, in ABBA order"""


def main(argv: list[str] | None = None) -> str:
    """Print (and return) per model and forward: before and after ms per step, and the after / before ratio."""
    args = parse_dataclass_arguments(Args, __doc__, argv)
    checkouts = args.checkouts()
    lines = [f"L={args.max_length}, k={args.top_k}, repeats={args.repeats}, load average before: {os.getloadavg()}"]
    print(lines[0], flush=True)
    for model in args.models.split(","):
        arguments = (model, str(args.max_length), str(args.top_k))
        workers = {label: CheckoutWorker(checkout, _WORKER, arguments) for label, checkout in checkouts.items()}
        samples: dict[tuple[str, str], list[float]] = {}
        for repeat in range(args.repeats):
            for implementation in ("native", "transformers"):
                pair: dict[str, list[float]] = {}
                for label in abba_order(repeat):
                    pair.setdefault(label, []).append(float(workers[label].request(implementation)["seconds"]))
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
