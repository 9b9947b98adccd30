"""A static step of two checkouts, side by side on the CPU: operations and bytes a step, and the time.

``--step round``: the TLB torch backend's ``StaticRoundStep``, on the vector env ``benchmarks/gpu_suite.py`` builds
(``TokenizedLinearBandit-v0``, the torch backend, ``SAME_STEP``, N rounds). ``--step llm``: the LLM core's
``StaticLanguageModelStep`` of B rounds on the suite's random Llama (``--shape tiny`` or ``smollm2``, L = 30,
k = 15, the top candidate chosen each step). ``--step eager``: the LLM core's own ``advance`` then
``candidate_embeddings`` on the same rounds (rows i and i + Q are equal: the core scores them once).

One worker process per checkout imports that checkout's package, builds the step and warms up. It first reports
what one step dispatches, counted under a ``TorchDispatchMode``: the torch operations that run a kernel (views
and allocations left out) and the bytes of their tensor arguments and results (an input read through a stride-0
broadcast counts its storage once; an indexed table counts no more than the rows its result holds; an in-place
``index_copy_`` or ``scatter_`` counts its source twice, not the tensor it writes into), a proxy for
the kernels and the memory traffic of the step on a GPU. It counts the step twice: as it runs on the CPU, and
with the branches it takes off the CPU (``torch.compiler.is_compiling`` patched to True while counting: no host
checks, no CPU-only shortcuts). Each repeat then times ``--steps`` steps per checkout in ABBA order, so a change
of machine load hits both alike; the ratio is the median of the per-repeat ``after / before`` ratios.

Run: ``PYTHONPATH=. python benchmarks/static_step_versions.py --before /path/to/base/checkout --after . --step llm``
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from benchmarks.llm_step_versions import CheckoutWorker, abba_order
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments

_COUNTING = """
import collections, json, sys, time
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
import tokenized_bandit_gym

torch.set_num_threads(1)

def tensor_bytes(tensor, limit=None):
    size = tensor.numel() * tensor.element_size()
    try:
        size = min(size, tensor.untyped_storage().nbytes())
    except NotImplementedError:  # an opaque tensor (a weight packed for MKL) has no storage to read
        pass
    return size if limit is None else min(size, limit)

class Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops, self.bytes = collections.Counter(), collections.Counter()
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func._schema.returns and func._schema.returns[0].alias_info is not None and not func._schema.is_mutable:
            return result  # a view: no kernel
        name = func.__name__.split(".")[0]
        if name.startswith(("empty", "new_empty")) or name == "_unsafe_view":
            return result  # an allocation, or a view: no kernel
        if name in ("index_copy_", "index_put_", "scatter_"):  # writes the source's entries into its first argument
            source = [t for t in tree_flatten((args[1:], kwargs))[0] if isinstance(t, torch.Tensor)]
            self.ops[name] += 1
            self.bytes[name] += 2 * sum(tensor_bytes(t) for t in source)
            return result
        outputs = [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor)]
        written = sum(tensor_bytes(t) for t in outputs)
        read = sum(tensor_bytes(t, written if "index" in func.__name__ or "gather" in func.__name__ else None)
                   for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor))
        self.ops[name] += 1
        self.bytes[name] += read + written
        return result

def counted(step):
    with Count() as count:
        step()
    return {"ops": sum(count.ops.values()), "bytes": sum(count.bytes.values()),
            "by_op": {name: [count.ops[name], count.bytes[name]]
                      for name in sorted(count.bytes, key=count.bytes.get, reverse=True)}}

def report_counts(step):
    on_cpu = counted(step)
    is_compiling = torch.compiler.is_compiling
    torch.compiler.is_compiling = lambda: True  # the branches a GPU takes (no host checks, no CPU-only shortcuts)
    as_on_gpu = counted(step)
    torch.compiler.is_compiling = is_compiling
    print(json.dumps({"package": tokenized_bandit_gym.__file__, "cpu": on_cpu, "gpu": as_on_gpu}), flush=True)
"""

_ROUND_WORKER = (
    _COUNTING
    + """
import gymnasium as gym
from tokenized_bandit_gym.envs.static_round_step import StaticRoundStep

num_envs, steps = int(sys.argv[1]), int(sys.argv[2])
envs = gym.make_vec("TokenizedLinearBandit-v0", num_envs=num_envs, vectorization_mode="vector_entry_point",
                    array_backend="torch", autoreset_mode="SameStep", device="cpu")
envs.reset(seed=0)
rounds = envs.unwrapped.rounds
actions = rounds.mask.int().argmax(dim=1)
generator = torch.Generator().manual_seed(0)
queries = torch.randint(0, envs.unwrapped.problem.num_queries, (num_envs,), generator=generator)
noise = torch.zeros(num_envs, dtype=torch.float64)
static = StaticRoundStep(rounds)
for _ in range(3):
    static.step(actions, queries, noise)
report_counts(lambda: static.step(actions, queries, noise))
for line in sys.stdin:
    start = time.perf_counter()
    for _ in range(steps):
        static.step(actions, queries, noise)
    print(json.dumps({"seconds": (time.perf_counter() - start) / steps}), flush=True)
"""
)

_LLM_WORKER = (
    _COUNTING
    + """
from transformers import LlamaConfig, LlamaForCausalLM
import benchmarks.gpu_suite as suite
from tokenized_bandit_gym.llm.captured_step import StaticLanguageModelStep

rows, steps, shape, eager = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "eager"
args = suite.parse_args(["--device", "cpu", "--shape", "full" if shape == "smollm2" else "tiny"])
shapes = suite.TINY_SMOLLM2_SHAPES
if shape == "smollm2":
    shapes = {**suite.SMOLLM2_SHAPES, "vocab_size": suite.SMOLLM2_VOCABULARY}
config = LlamaConfig(**shapes, bos_token_id=1, eos_token_id=2, tie_word_embeddings=True)
torch.manual_seed(0)
model = LlamaForCausalLM(config).eval().requires_grad_(False)
problem, _ = suite.language_model_problem(model, args)
initial = problem.initial_state(torch.arange(rows) % problem.num_queries)
actions = torch.zeros(rows, dtype=torch.int64)


def eager_episode():
    # the core's own step, as benchmarks/llm_bandwidth_floor.py times it: the top candidate that is not EOS
    state, seconds = initial, []
    while not bool(state.finished.all()) and len(seconds) < steps:
        mask = problem.action_mask(state)
        non_eos = mask & (state.candidate_tokens != problem.eos_token_id)
        chosen = torch.where(non_eos.any(dim=1), non_eos.float().argmax(dim=1), mask.float().argmax(dim=1))
        start = time.perf_counter()
        state = problem.advance(state, chosen)
        problem.candidate_embeddings(state)
        seconds.append(time.perf_counter() - start)
    return sum(seconds) / len(seconds)


if eager:
    eager_episode()  # warm-up
    report_counts(lambda: problem.candidate_embeddings(problem.advance(initial, actions)))
    for line in sys.stdin:
        print(json.dumps({"seconds": eager_episode()}), flush=True)
    sys.exit(0)
with torch.no_grad():
    static = StaticLanguageModelStep(problem, initial)
    static.step(actions)
    report_counts(lambda: static.step(actions))
    for line in sys.stdin:
        static = StaticLanguageModelStep(problem, initial)
        static.step(actions)  # warm-up
        start = time.perf_counter()
        for _ in range(steps):
            static.step(actions)
        print(json.dumps({"seconds": (time.perf_counter() - start) / steps}), flush=True)
"""
)


@dataclass
class Args:
    """Benchmark options."""

    before: str = ""
    """checkout of the base (e.g. a ``git archive`` of main, unpacked)"""
    after: str = "."
    """checkout of the change"""
    step: str = "round"
    """round (the TLB torch backend's StaticRoundStep), llm (the LLM core's StaticLanguageModelStep) or eager (the
    LLM core's own advance then candidate_embeddings, the top candidate that is not EOS chosen)"""
    num_envs: int = 65536
    """N, the rounds of ``--step round``"""
    rows: int = 9
    """B, the rounds of ``--step llm`` or ``eager`` (Figure 2's: 9); row i's query is i mod Q"""
    shape: str = "tiny"
    """the model of ``--step llm`` or ``eager``: tiny (2 layers, vocabulary 512) or smollm2 (SmolLM2-135M's)"""
    steps: int = 3
    """steps timed per request"""
    repeats: int = 6
    """interleaved repeats, ABBA"""


def main(argv: list[str] | None = None) -> str:
    """Print (and return) per checkout: operations and bytes a step, ms a step, and the after / before ratio."""
    from pathlib import Path

    args = parse_dataclass_arguments(Args, __doc__, argv)
    if not args.before:
        raise ValueError("--before must name the base checkout")
    checkouts = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    if args.step == "round":
        script, arguments, rows = _ROUND_WORKER, (str(args.num_envs), str(args.steps)), args.num_envs
        what = f"StaticRoundStep, N = {args.num_envs:,}"
    elif args.step in ("llm", "eager"):
        script, arguments, rows = _LLM_WORKER, (str(args.rows), str(args.steps), args.shape, args.step), args.rows
        name = "StaticLanguageModelStep" if args.step == "llm" else "the eager core's advance + candidate_embeddings"
        what = f"{name}, {args.shape} shapes, B = {args.rows} (L = 30, k = 15)"
    else:
        raise ValueError(f"--step must be round, llm or eager, got {args.step!r}")
    workers, counts = {}, {}
    for label, checkout in checkouts.items():
        workers[label] = CheckoutWorker(checkout, script, arguments)
        counts[label] = workers[label].first
    samples: dict[str, list[float]] = {"before": [], "after": []}
    for repeat in range(args.repeats):
        pair: dict[str, list[float]] = {}
        for label in abba_order(repeat):
            pair.setdefault(label, []).append(float(workers[label].request("step")["seconds"]))
        for label, values in pair.items():
            samples[label].append(float(np.mean(values)))
    for worker in workers.values():
        worker.close()
    before, after = np.array(samples["before"]), np.array(samples["after"])
    ratios = after / before
    lines = [
        f"{what}, {args.repeats} repeats of {args.steps} steps, load average {os.getloadavg()}",
        "",
        "| checkout | CPU ms a step | operations a step (CPU path / GPU path) | bytes a row (CPU path / GPU path) |",
        "|---|---|---|---|",
    ]
    for label, times in (("before", before), ("after", after)):
        cpu, gpu = counts[label]["cpu"], counts[label]["gpu"]
        lines.append(
            f"| {label} | {1e3 * np.median(times):.1f} | {cpu['ops']} / {gpu['ops']} | "
            f"{cpu['bytes'] / rows:,.0f} / {gpu['bytes'] / rows:,.0f} |"
        )
    lines.append(f"\nCPU time after / before: **{np.median(ratios):.3f}** ({ratios.min():.3f}-{ratios.max():.3f})")
    for label in ("before", "after"):
        top = list(counts[label]["gpu"]["by_op"].items())[:8]
        lines.append(
            f"{label}, GPU path, the most bytes: "
            + ", ".join(f"{name} {n}x {b / rows:,.0f} B/row" for name, (n, b) in top)
        )
    print("\n".join(lines))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
