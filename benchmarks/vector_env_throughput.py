"""Token-steps per second: the native vector env against Gymnasium's SyncVectorEnv over single envs.

Both are measured side by side in one run, on the same policy (a uniformly random allowed
token, drawn outside the timed region), for the default TLB and TMAB ids. A token-step is one
sub-env appending one token; the autoreset steps of NEXT_STEP mode do not count (both vector
envs spend them alike). SyncVectorEnv runs the single envs unwrapped: their infos have fixed
shapes (``response`` padded to L, ``response_length`` beside it).

Each configuration (id, N) runs in a fresh Python process (``--no-isolate``: all in this one), so
what one configuration leaves in the process (the Sync baseline's 1024 single envs and their
prefix memos, the heap they fragmented) is not charged to the next: measured in one process, the
TMAB configuration ran 5-12% slower after the TLB one than alone, on either version of the code.

Run: ``PYTHONPATH=. python benchmarks/vector_env_throughput.py`` (defaults take several
minutes on a 2-core CPU); ``--num-envs 1 64`` and ``--seconds 0.2`` make it quicker.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the ids)
from benchmarks.vector_env_stepper import VectorEnvStepper
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments


@dataclasses.dataclass
class Args:
    """Command-line arguments (each field's docstring is its ``--help``)."""

    env_ids: tuple[str, ...] = ("TokenizedLinearBandit-v0", "TokenizedMultiArmedBandit-v0")
    """ids to measure (their default kwargs)"""
    num_envs: tuple[int, ...] = (1, 64, 1024, 4096)
    """N, the number of sub-envs"""
    seconds: float = 1.5
    """time to spend stepping each native configuration (after warm-up), over all chunks"""
    sync_seconds: float = 1.5
    """time to spend stepping each SyncVectorEnv configuration, over all chunks"""
    min_steps: int = 2
    """steps per chunk at least, however long they take"""
    repeats: int = 3
    """interleaved chunks per configuration; the best rate of each env is kept"""
    device: str = "cpu"
    """torch device of the native env ("cuda" when a GPU is lent)"""
    seed: int = 0
    """seeds the envs and the random policy"""
    threads: int = 1
    """torch intra-op threads (1: a shared 2-core machine thrashes with more)"""
    isolate: bool = True
    """measure each configuration in a fresh Python process"""
    sync: bool = True
    """measure the SyncVectorEnv baseline too (--no-sync: native only, e.g. N = 65,536 on a GPU)"""


def warm_caches(envs: gym.vector.VectorEnv) -> None:
    """Compute each instance's cached optimum and oracle-greedy decode before timing."""
    base = envs.unwrapped
    problems = [env.unwrapped.problem for env in base.envs] if hasattr(base, "envs") else [base.problem]
    for problem in problems:
        queries = torch.zeros(1, dtype=torch.int64, device=problem.device)
        problem.optimal(queries)
        problem.oracle_greedy(queries)


def make_stepper(envs: gym.vector.VectorEnv, seed: int) -> VectorEnvStepper:
    """A stepper over ``envs`` with the caches warm and two untimed steps."""
    return VectorEnvStepper(envs, seed, warm_caches, warm_up_steps=2)


def measure(args: Args, env_id: str, num_envs: int) -> dict[str, float]:
    """The best token-steps per second of the native (NumPy and torch backends) and Sync vector envs."""
    native = "vector_entry_point"
    steppers = {
        "numpy": make_stepper(gym.make_vec(env_id, num_envs, native, device=args.device), args.seed),
        "torch": make_stepper(
            gym.make_vec(env_id, num_envs, native, array_backend="torch", device=args.device), args.seed
        ),
    }
    if args.sync:
        steppers["sync"] = make_stepper(gym.make_vec(env_id, num_envs, "sync"), args.seed)
    best = dict.fromkeys(steppers, 0.0)
    for _ in range(args.repeats):  # interleaved, so load changes hit all three alike
        for name, stepper in steppers.items():
            seconds = args.sync_seconds if name == "sync" else args.seconds
            best[name] = max(best[name], stepper.run(seconds / args.repeats, args.min_steps))
    for stepper in steppers.values():
        stepper.envs.close()
    return best


def measure_in_fresh_process(args: Args, env_id: str, num_envs: int) -> dict[str, float]:
    """:func:`measure` in a new Python process running this script (its rates, read back as JSON)."""
    settings = dataclasses.replace(args, env_ids=(env_id,), num_envs=(num_envs,), isolate=False)
    command = [sys.executable, __file__, "--json", json.dumps(dataclasses.asdict(settings))]
    root = str(Path(__file__).resolve().parents[1])  # the child imports benchmarks.vector_env_stepper from it
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    output = subprocess.run(command, check=True, capture_output=True, text=True, env=environment).stdout
    return json.loads(output.strip().splitlines()[-1])


def main(args: Args) -> None:
    torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}, device: {args.device}, best of {args.repeats} interleaved chunks")
    header = "| env | N | native numpy (tok/s) | native torch (tok/s) | SyncVectorEnv (tok/s) | native numpy / sync |"
    print(header)
    print("|---|---|---|---|---|---|")
    for env_id in args.env_ids:
        for num_envs in args.num_envs:
            isolate = measure_in_fresh_process if args.isolate else measure
            best = isolate(args, env_id, num_envs)
            sync, ratio = "-", "-"
            if "sync" in best:
                sync, ratio = f"{best['sync']:,.0f}", f"{best['numpy'] / best['sync']:,.1f}x"
            print(
                f"| {env_id} | {num_envs} | {best['numpy']:,.0f} | {best['torch']:,.0f} | {sync} | {ratio} |",
                flush=True,
            )


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


if __name__ == "__main__":
    with torch.no_grad():
        if sys.argv[1:2] == ["--json"]:  # one configuration, for measure_in_fresh_process
            settings = json.loads(sys.argv[2])
            settings.update((key, tuple(value)) for key, value in settings.items() if isinstance(value, list))
            child = Args(**settings)
            torch.set_num_threads(child.threads)
            print(json.dumps(measure(child, child.env_ids[0], child.num_envs[0])))
        else:
            main(parse_args())
