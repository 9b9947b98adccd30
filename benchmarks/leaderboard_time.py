"""How long `tbg run` takes on a spec: end-to-end wall time and seconds per run (task x agent).

Run: ``PYTHONPATH=. python benchmarks/leaderboard_time.py`` (the default suite, with the agents
that are registered; the others are listed and skipped). Use it to size ``rounds`` and ``seeds``
of the shipped ``tokenized_bandit_gym/specs/leaderboard.toml`` for the README's 3-minute budget on 2 CPU cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tokenized_bandit_gym import agents
from tokenized_bandit_gym.evaluation.leaderboard_spec import load_spec
from tokenized_bandit_gym.evaluation.results_store import ResultsStore
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments
from tokenized_bandit_gym.threads import use_small_work_threads

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Args:
    """Command-line arguments."""

    spec: str = str(REPO / "tokenized_bandit_gym" / "specs" / "leaderboard.toml")
    """the spec to time"""
    workers: int = 0
    """local workers (0: all cores)"""
    rounds: int = 0
    """override T of every task (0: the spec's)"""


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


def runnable_spec_text(path: Path, rounds: int) -> str:
    """The spec's TOML with unregistered agents (and their tables) left out."""
    spec = load_spec(path, check_registry=False)
    known = set(agents.list_agents())
    missing = sorted({agent.name for agent in spec.agents} - known)
    if missing:
        print(f"skipping agents not registered yet: {missing}")
    lines = [f'title = "{spec.title} (timed)"', f"rounds = {rounds or spec.rounds}", f"seeds = {list(spec.seeds)}"]
    for task in spec.tasks:
        kwargs = ", ".join(f"{key} = {value!r}" for key, value in task.kwargs.items()).replace("'", '"')
        lines += ["[[task]]", f'id = "{task.id}"', f'label = "{task.label}"', f"kwargs = {{ {kwargs} }}"]
        lines.append(f"rounds = {rounds or task.rounds}")
    for agent in spec.agents:
        if agent.name not in known:
            continue
        kwargs = ", ".join(f"{key} = {value!r}" for key, value in agent.kwargs.items()).replace("'", '"')
        lines += ["[[agent]]", f'name = "{agent.name}"', f'label = "{agent.label}"', f"kwargs = {{ {kwargs} }}"]
        if agent.tasks is not None:
            lines.append("tasks = [" + ", ".join(f'"{label}"' for label in agent.tasks) + "]")
    return "\n".join(lines) + "\n"


def main(args: Args) -> None:
    with tempfile.TemporaryDirectory() as folder:
        spec = Path(folder) / "spec.toml"
        spec.write_text(runnable_spec_text(Path(args.spec), args.rounds))
        store, out = Path(folder) / "results.sqlite", Path(folder) / "report"
        command = [sys.executable, "-m", "tokenized_bandit_gym.evaluation.cli", "run", str(spec)]
        command += ["--store", str(store), "--out", str(out), "--no-progress"]
        if args.workers:
            command += ["--workers", str(args.workers)]
        environment = dict(os.environ, PYTHONPATH=str(REPO))
        start = time.perf_counter()
        subprocess.run(command, check=True, env=environment, stdout=subprocess.DEVNULL)
        total = time.perf_counter() - start
        with ResultsStore(store, create=False) as opened:
            records = list(opened.records())
        print(f"tbg run end to end: {total:.1f} s for {len(records)} runs (load average {os.getloadavg()[0]:.1f})")
        print(f"{'task':<16} {'agent':<16} {'rounds':>6} {'s/run':>7} {'ms/round':>9}")
        groups: dict[tuple[str, str], list] = {}
        for record in records:
            groups.setdefault((record.spec.task_label, record.spec.agent_label), []).append(record)
        for (task, agent), runs in groups.items():
            seconds = sum(run.metadata["wall_time"] for run in runs) / len(runs)
            per_round = 1000 * sum(run.arrays["wall_time"].mean() for run in runs) / len(runs)
            print(f"{task:<16} {agent:<16} {runs[0].spec.rounds:>6} {seconds:>7.2f} {per_round:>9.2f}")


if __name__ == "__main__":
    use_small_work_threads()  # one torch thread unless OMP_NUM_THREADS says otherwise
    main(parse_args())
