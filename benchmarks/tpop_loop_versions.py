"""Issue 32's ratio (T-POP's loop / our tpop agent, per round) for two checkouts of the package, side by side.

One worker process per checkout imports that checkout's package and its ``benchmarks/tpop_loop.py``, builds
the same pairwise env, agent and T-POP loop as that script and warms them up. Each repeat then times, in
ABBA order of the checkouts, one round of our agent on the env and one round of T-POP's loop in each worker.
T-POP's loop is the same code in both checkouts, so it measures the machine's load at that moment: each
checkout's ratio is the median of its per-repeat ``T-POP round / our round``, and a change of load hits both
checkouts alike. The ratio of the best rounds (best-of-N: the least the load added) is printed too, and our
round's ``after / before``.

Run: ``PYTHONPATH=. python benchmarks/tpop_loop_versions.py --before /path/to/base/checkout --after .``
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from benchmarks.llm_step_versions import CheckoutPairArgs, CheckoutWorker, abba_order
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments

_WORKER = """
import json, sys, time, torch
import benchmarks.tpop_loop as bench
import tokenized_bandit_gym
from tokenized_bandit_gym.agents.tpop import TPOP
from tokenized_bandit_gym.envs.tokenized_alignment_env import TokenizedAlignmentEnv
from tokenized_bandit_gym.llm.load_language_model import load_language_model
from tokenized_bandit_gym.task import Task
model_name, max_length, top_k, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(1)
model, tokenizer = load_language_model(model_name)
env = TokenizedAlignmentEnv(model=model, tokenizer=tokenizer, queries=[bench.QUERY], max_length=max_length,
                            top_k=top_k, fixed_length=True, feedback="pairwise", noise_scale=0.0)
problem = env.problem
query_ids = problem.query_tokens[0, : int(problem.query_lengths[0])].tolist()
agent = TPOP()
agent.reset(Task.from_env(env, rounds + 1))
loop = bench.TPOPLoop(model, tokenizer, top_k)
bench.play_env_round(env, agent, seed=0)
loop.round(query_ids, 1)
print(json.dumps({"package": tokenized_bandit_gym.__file__}), flush=True)
for _ in sys.stdin:
    start = time.perf_counter()
    bench.play_env_round(env, agent, seed=None)
    ours = time.perf_counter() - start
    start = time.perf_counter()
    loop.round(query_ids, max_length)
    print(json.dumps({"ours": ours, "theirs": time.perf_counter() - start}), flush=True)
"""


@dataclass
class Args(CheckoutPairArgs):
    """Benchmark options."""

    model: str = "stories260K"
    """the LLM, as in benchmarks/tpop_loop.py"""
    repeats: int = 6
    """interleaved repeats: each times one round of ours and one of T-POP's loop per checkout, in ABBA order"""


def main(argv: list[str] | None = None) -> str:
    """Print (and return) per checkout: ms per round on each side and the ratio; then ours after / before."""
    args = parse_dataclass_arguments(Args, __doc__, argv)
    checkouts = args.checkouts()
    header = (
        f"{args.model}, L={args.max_length}, k={args.top_k}, repeats={args.repeats}, one torch thread, "
        f"load average before: {os.getloadavg()}"
    )
    print(header, flush=True)
    arguments = (args.model, str(args.max_length), str(args.top_k), str(2 * args.repeats))
    workers = {label: CheckoutWorker(checkout, _WORKER, arguments) for label, checkout in checkouts.items()}
    ours: dict[str, list[float]] = {label: [] for label in checkouts}
    theirs: dict[str, list[float]] = {label: [] for label in checkouts}
    for repeat in range(args.repeats):
        for label in abba_order(repeat):
            times = workers[label].request("round")  # one round of each side: seconds
            ours[label].append(float(times["ours"]))
            theirs[label].append(float(times["theirs"]))
    for worker in workers.values():
        worker.close()
    lines = [
        header,
        "",
        "| checkout | ours, ms per round (best, median) | T-POP's loop, ms per round (best, median) "
        "| ratio of the bests | ratio per repeat (median, range) |",
        "|---|---:|---:|---|---|",
    ]
    for label in checkouts:
        ratios = np.array(theirs[label]) / np.array(ours[label])
        best = min(theirs[label]) / min(ours[label])
        lines.append(
            f"| {label} | {1e3 * min(ours[label]):.1f}, {1e3 * np.median(ours[label]):.1f} | "
            f"{1e3 * min(theirs[label]):.1f}, {1e3 * np.median(theirs[label]):.1f} | **{best:.2f}x** | "
            f"{np.median(ratios):.2f}x ({ratios.min():.2f}-{ratios.max():.2f}) |"
        )
    speedup = np.array(ours["after"]) / np.array(ours["before"])
    lines.append(f"\nour round, after / before: {np.median(speedup):.3f} ({speedup.min():.3f}-{speedup.max():.3f})")
    lines.append(f"load average after: {os.getloadavg()}")
    print("\n".join(lines[1:]))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
