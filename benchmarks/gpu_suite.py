"""One prepared GPU suite (issue 51): every GPU check and measurement in one call of at most 8 minutes.

On a machine with a CUDA GPU it runs these parts, each measured against a floor taken in the same run:

* the synthetic vector env (TLB, the torch backend, SAME_STEP autoreset) at N = 4,096 and 65,536: the vector env's
  own ``step`` (eager), its static step captured (``StaticRoundStep`` in ``CapturedStep``), and the vector env's own
  ``step`` with ``step_mode="captured"`` (what a user gets: the whole contract, infos and ``final_obs`` included),
  in token-steps per second;
* the LLM vector env (``TokenizedAlignment-v0`` on the shipped stories260K, nine rounds, SAME_STEP, the top
  candidate each step): its own ``step``, ``step_mode="eager"`` and ``"captured"``, in ms a step over whole rounds;
* the SmolLM2-135M-shaped nine-row step (the Figure-2 rows: 3 agents x 3 seeds; float32, SmolLM2's 49,152-token
  vocabulary), eager and captured, and the whole T = 1000 run it implies (1000 rounds x L steps; the
  benchmark decodes are not counted);
* the Llama-3-8B-shaped step (random weights, bfloat16, built on the device, nothing downloaded) at B = 1 and
  B = 64 rounds: the eager core (``advance`` then the candidates' ``[e : v]``), the static-shape step captured
  as a CUDA graph (``StaticLanguageModelStep`` in ``CapturedStep``), and transformers' ``generate`` per token,
  against the bytes floor (weights read per step / measured copy bandwidth) and, at B = 64, the FLOPs floor
  (the step's FLOPs / the measured bf16 matmul rate);
* ``pytest -m gpu`` on the test files that hold GPU tests (CUDA backend against the CPU, the captured steps
  against the eager ones; ``--no-pytest`` skips it);
* the vector env at N = 1,048,576, last (its host-side reset alone takes about 80 s).

Each part runs on its own (one that raises is recorded, the others still run), within ``--budget-seconds``.
It prints one table, the device named, with each of issue 51's targets and its ratio, and writes every figure
to one JSON file (atomically). ``--device cpu --shape tiny`` runs the same code on 2-layer models and small N
on the CPU in seconds: the smoke test (``tests/benchmarks/test_gpu_suite_smoke.py``). There "captured" is the
static step run eagerly (no CUDA graph off CUDA).

Run on a GPU (``docs/GPU_SUITE.md``): ``PYTHONPATH=. python benchmarks/gpu_suite.py --out gpu_suite.json``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.generate_timing import synchronise
from benchmarks.llm_bandwidth_floor import SHAPES, bytes_read_per_step, measure_bandwidth, time_core_steps
from benchmarks.llm_bandwidth_floor import Args as FloorArgs
from benchmarks.llm_bandwidth_floor import build_model as build_floor_model
from benchmarks.llm_bandwidth_floor import time_generate as time_generate_per_token
from benchmarks.llm_rows_step_profile import SMOLLM2_SHAPES
from benchmarks.llm_step import step_flops
from tokenized_bandit_gym.evaluation.atomic_files import write_json_atomically
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SMOLLM2_VOCABULARY = 49152
"""SmolLM2-135M's vocabulary (its LM head is a large part of a step)."""
TINY_SMOLLM2_SHAPES = {**SHAPES["tiny"], "vocab_size": 512}
"""The nine-row model of ``--shape tiny``."""


@dataclasses.dataclass
class Args:
    """Command-line arguments (each field's docstring is its ``--help``)."""

    device: str = "cuda"
    """torch device"""
    shape: str = "full"
    """full (Llama-3-8B and SmolLM2 shapes, N up to 1,048,576) or tiny (2-layer models, small N: a smoke run)"""
    out: str = "gpu_suite.json"
    """the JSON file written (atomically)"""
    pytest: bool = True
    """run ``pytest -m gpu`` first (on a CUDA device only)"""
    repeats: int = 2
    """timed episodes per LLM configuration (after one warm-up episode)"""
    max_length: int = 30
    """L, tokens per episode"""
    top_k: int = 15
    """k, candidates per step"""
    env_seconds: float = 1.0
    """seconds stepping each vector env configuration"""
    pytest_timeout: int = 240
    """seconds ``pytest -m gpu`` may take (less if the budget has less left)"""
    budget_seconds: float = 450.0
    """the whole suite's time: a part that would start with under 20 s left is skipped, and says so"""


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    args = parse_dataclass_arguments(Args, __doc__, argv)
    if args.shape not in ("full", "tiny"):
        raise ValueError(f"shape must be 'full' or 'tiny', got {args.shape!r}")
    return args


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's architecture."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({os.cpu_count()} cores, {torch.get_num_threads()} torch threads)"


def run_gpu_tests(args: Args, seconds_left: float) -> dict[str, Any]:
    """``pytest -m gpu`` in a subprocess, for at most ``seconds_left``: its exit status and summary line.

    Skipped off CUDA.
    """
    if not args.pytest or torch.device(args.device).type != "cuda":
        return {"ran": False, "why": "not a CUDA device" if args.pytest else "--no-pytest"}
    root = Path(__file__).resolve().parents[1]
    files = sorted(
        str(path.relative_to(root))
        for path in (root / "tests").rglob("test_*.py")
        if "mark.gpu" in path.read_text(encoding="utf-8")
    )  # only the files with GPU tests: the others may import what a GPU machine lacks (SB3, PettingZoo)
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", *files]
    timeout = max(1.0, min(args.pytest_timeout, seconds_left))
    try:
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ran": True, "returncode": None, "summary": f"timed out after {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    result = {"ran": True, "returncode": done.returncode, "summary": lines[-1] if lines else done.stderr[-500:]}
    if done.returncode:
        result["tail"] = "\n".join(lines[-60:]) + done.stderr[-2000:]  # the failures, for the record
    return result


def matmul_rate(device: torch.device, dtype: torch.dtype, size: int) -> float:
    """FLOPs per second of a ``size``^3 matmul in ``dtype``, best of 5, the device synchronised around each."""
    left = torch.randn(size, size, device=device, dtype=dtype)
    right = torch.randn(size, size, device=device, dtype=dtype)
    torch.mm(left, right)
    return 2 * size**3 / best_seconds(lambda: torch.mm(left, right), device, 5)


def best_seconds(call: Callable[[], Any], device: torch.device, calls: int) -> float:
    """Fastest of ``calls`` calls in seconds, the device synchronised around each."""
    best = float("inf")
    for _ in range(calls):
        synchronise(device)
        start = time.perf_counter()
        call()
        synchronise(device)
        best = min(best, time.perf_counter() - start)
    return best


@torch.no_grad()
def time_captured_steps(problem: Any, batch: int, args: Args) -> tuple[float, bool]:
    """Median seconds of a step of the static step in :class:`CapturedStep`, and whether it was captured."""
    from tokenized_bandit_gym.core.cuda_graph_step import CapturedStep
    from tokenized_bandit_gym.llm.captured_step import StaticLanguageModelStep

    device = problem.device
    queries = torch.arange(batch, device=device) % problem.num_queries
    actions = torch.zeros(batch, dtype=torch.int64, device=device)  # the top candidate: the shapes are static
    samples, captured = [], False
    for episode in range(args.repeats + 1):  # the first episode warms up
        static = StaticLanguageModelStep(problem, problem.initial_state(queries))
        step = CapturedStep(static.step, [actions], static.buffers())
        captured = step.captured
        for _ in range(problem.max_length):
            synchronise(device)
            start = time.perf_counter()
            step(actions)
            synchronise(device)
            if episode:
                samples.append(time.perf_counter() - start)
    return float(np.median(samples)), captured


def problem_settings(args: Args) -> dict[str, Any]:
    """The problem's sizes, and the problem's own defaults when the recorded figures were taken (before issue 50)."""
    return {"max_length": args.max_length, "top_k": args.top_k, "embedding_norm": "l2", "fixed_length": False}


def language_model_problem(model: Any, args: Args, queries_source: str | None) -> tuple[Any, str | None]:
    """The core on ``model`` on the native forward, and why its probe refused that forward if it did (else None).

    The queries (``queries_source``, :func:`resolve_queries`) are tokenized by the shipped stories260K tokenizer
    (its ids drive the random model). The static
    step needs the native forward. On a random-weight model in bfloat16 the probe against the model's own forward
    can fail on rounding through 32 layers (it did on the H200: the core then ran transformers' forward); this
    suite times paths, not fidelity (``pytest -m gpu`` checks that), so it then installs the native
    forward anyway and records the probe's reason beside the figures.
    """
    from tokenized_bandit_gym.llm.decoder_forward import select_decoder_forward
    from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem
    from tokenized_bandit_gym.llm.load_language_model import load_language_model
    from tokenized_bandit_gym.llm.native_decoder_forward import NativeDecoderForward
    from tokenized_bandit_gym.llm.query_sources import resolve_queries

    _, tokenizer = load_language_model()
    queries = resolve_queries(queries_source)
    try:
        problem = LanguageModelProblem(
            model, tokenizer, queries, forward_implementation="native", **problem_settings(args)
        )
        return problem, None
    except ValueError as error:
        refusal = str(error)
    problem = LanguageModelProblem(  # transformers' forward (what "auto" falls back to, without probing native again)
        model, tokenizer, queries, forward_implementation="transformers", **problem_settings(args)
    )
    problem._forward, problem.forward_implementation = select_decoder_forward(model, "native"), "native"
    problem._memo.clear()
    if not isinstance(problem._forward, NativeDecoderForward):
        raise ValueError(f"no native forward for this model: {refusal}")
    return problem, refusal


def llama_floor(args: Args, device: torch.device) -> dict[str, Any]:
    """The 8B-shaped step at B = 1 and B = 64, eager and captured, beside ``generate``, and its floors."""
    full = args.shape == "full"
    floor_args = FloorArgs(
        device=args.device,
        shape="llama3-8b" if full else "tiny",
        dtype="bfloat16" if full else "float32",
        max_length=args.max_length,
        top_k=args.top_k,
        repeats=args.repeats,
    )
    model = build_floor_model(floor_args)
    # the appendix-D generator's 1000 queries: B = 64 rows are 64 different rounds (with the 16 default queries the
    # eager core merged the rows that repeat one, and scored a quarter of the candidates the static step scores)
    problem, refusal = language_model_problem(model, args, "paper")
    dtype = model.get_output_embeddings().weight.dtype
    weight_bytes = bytes_read_per_step(model)
    bandwidth = measure_bandwidth(device, (1 << 30) if full else (1 << 24))
    rate = matmul_rate(device, dtype, 8192 if device.type == "cuda" else 256)
    result: dict[str, Any] = {
        "shape": floor_args.shape,
        "dtype": str(dtype),
        "weight_bytes": weight_bytes,
        "bandwidth_bytes_per_second": bandwidth,
        "matmul_flops_per_second": rate,
        "bytes_floor_ms": 1e3 * weight_bytes / bandwidth,
        "native_forward_probe_refusal": refusal,
        "batches": {},
    }
    for batch in (1, 64) if full else (1, 4):
        flops_floor_ms = 1e3 * batch * step_flops(model, args.top_k) / rate
        eager_ms = 1e3 * time_core_steps(problem, batch, floor_args)
        captured_seconds, captured = time_captured_steps(problem, batch, args)
        result["batches"][str(batch)] = {
            "eager_ms": eager_ms,
            "captured_ms": 1e3 * captured_seconds,
            "captured": captured,
            "flops_floor_ms": flops_floor_ms,
            "floor_ms": max(result["bytes_floor_ms"], flops_floor_ms),
        }
    result["generate_ms_per_token"] = 1e3 * time_generate_per_token(model, floor_args)
    del model, problem
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def nine_rows(args: Args, device: torch.device) -> dict[str, Any]:
    """The SmolLM2-shaped step of the Figure-2 rows (9 rounds), eager and captured, and the T = 1000 run it implies."""
    from transformers import LlamaConfig, LlamaForCausalLM

    shapes = {**SMOLLM2_SHAPES, "vocab_size": SMOLLM2_VOCABULARY} if args.shape == "full" else TINY_SMOLLM2_SHAPES
    config = LlamaConfig(**shapes, bos_token_id=1, eos_token_id=2, tie_word_embeddings=True)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).eval().requires_grad_(False)
    problem, refusal = language_model_problem(model, args, None)  # nine rows, nine of the 16 default queries
    floor_args = FloorArgs(device=args.device, max_length=args.max_length, top_k=args.top_k, repeats=args.repeats)
    eager_ms = 1e3 * time_core_steps(problem, 9, floor_args)
    captured_seconds, captured = time_captured_steps(problem, 9, args)
    best_ms = min(eager_ms, 1e3 * captured_seconds)
    return {
        "vocab_size": shapes["vocab_size"],
        "native_forward_probe_refusal": refusal,
        "eager_ms": eager_ms,
        "captured_ms": 1e3 * captured_seconds,
        "captured": captured,
        "t1000_run_minutes_projected": best_ms * args.max_length * 1000 / 6e4,
    }


def llm_vector_env(args: Args, device: torch.device) -> dict[str, Any]:
    """The LLM vector env's own step (stories260K, 9 rounds, SAME_STEP), both step modes: ms a step over whole rounds.

    What a user of ``gym.make_vec("TokenizedAlignment-v0", ..., step_mode=...)`` gets, the host's share included
    (on stories260K almost all of it); the captured mode builds (and captures) its static step again after each
    restart, which the average includes. Every query's oracle-greedy benchmark is decoded first (a long run's
    steady state: no benchmark rows ride in the step).
    """
    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401  (registers the ids)

    results: dict[str, Any] = {}
    for step_mode in ("eager", "captured"):
        envs = gym.make_vec(
            "TokenizedAlignment-v0",
            num_envs=9,
            array_backend="torch",
            autoreset_mode="SameStep",
            step_mode=step_mode,
            max_length=args.max_length,
            top_k=args.top_k,
            device=str(device),
        )
        problem = envs.unwrapped.problem
        problem.oracle_greedy(torch.arange(problem.num_queries, device=device))  # every benchmark cached: steady state
        envs.reset(seed=0)
        actions = torch.zeros(9, dtype=torch.int64, device=device)  # the top candidate: every round runs to L
        for _ in range(args.max_length):  # one round's warm-up (the captures of the first round included)
            envs.step(actions)
        samples = []
        for _ in range(args.repeats):  # each a whole round: its restart and the static step's rebuild included
            synchronise(device)
            start = time.perf_counter()
            for _ in range(args.max_length):
                envs.step(actions)
            synchronise(device)
            samples.append((time.perf_counter() - start) / args.max_length)
        results[f"{step_mode}_ms"] = 1e3 * float(np.median(samples))
        if step_mode == "captured":
            results["captured"] = bool(envs.unwrapped.rounds.static_advance.captured)
        envs.close()
    return results


def vector_envs(args: Args, device: torch.device) -> dict[str, Any]:
    """The TLB torch backend at N = 4,096 and 65,536 (64 and 1,024 with ``--shape tiny``)."""
    return vector_envs_at(args, device, (4096, 65536) if args.shape == "full" else (64, 1024))


def vector_envs_large(args: Args, device: torch.device) -> dict[str, Any]:
    """The TLB torch backend at N = 1,048,576 (4,096 with ``--shape tiny``).

    Its own part, run last: seeding a million rounds' NumPy streams (one per sub-env, so that sub-env i replays a
    single env seeded alike) is host work of about 80 s at reset, whatever the device.
    """
    return vector_envs_at(args, device, (1048576,) if args.shape == "full" else (4096,), env_step_mode=False)


def vector_envs_at(
    args: Args, device: torch.device, sizes: tuple[int, ...], env_step_mode: bool = True
) -> dict[str, Any]:
    """Token-steps per second of the TLB torch backend at each N: the vector env's step and the captured step.

    With ``env_step_mode``, also the vector env's own step with ``step_mode="captured"`` (a second env, reset
    alike: at N = 1,048,576 its host-side reset would cost another 80 s, so the large part leaves it out).
    """
    from tokenized_bandit_gym.core.cuda_graph_step import CapturedStep
    from tokenized_bandit_gym.envs.static_round_step import StaticRoundStep

    results = {}
    for num_envs in sizes:
        envs = tlb_vector_env(device, num_envs, "eager")
        rounds = envs.unwrapped.rounds
        actions = rounds.mask.int().argmax(dim=1)  # (N,) an allowed token (not EOS before L)
        eager = steps_per_second(functools.partial(envs.step, actions), device, args.env_seconds)
        generator = torch.Generator(device=device).manual_seed(0)
        queries = torch.randint(0, envs.unwrapped.problem.num_queries, (num_envs,), generator=generator, device=device)
        noise = torch.zeros(num_envs, dtype=torch.float64, device=device)
        static = StaticRoundStep(rounds)
        step = CapturedStep(static.step, [actions, queries, noise], static.buffers())
        captured = steps_per_second(functools.partial(step, actions, queries, noise), device, args.env_seconds)
        results[str(num_envs)] = {
            "eager_token_steps_per_second": eager * num_envs,
            "captured_token_steps_per_second": captured * num_envs,
            "captured": step.captured,
        }
        envs.close()
        del envs, static, step
        if env_step_mode:
            results[str(num_envs)].update(env_step_mode_captured(args, device, num_envs))
    return results


def tlb_vector_env(device: torch.device, num_envs: int, step_mode: str) -> Any:
    """The TLB's native torch vector env of ``num_envs`` rows (SAME_STEP autoreset), reset with seed 0."""
    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401  (registers the ids)

    envs = gym.make_vec(
        "TokenizedLinearBandit-v0",
        num_envs=num_envs,
        vectorization_mode="vector_entry_point",
        array_backend="torch",
        autoreset_mode="SameStep",
        step_mode=step_mode,
        device=str(device),
    )
    envs.reset(seed=0)
    return envs


def env_step_mode_captured(args: Args, device: torch.device, num_envs: int) -> dict[str, Any]:
    """Token-steps per second of the TLB vector env's own ``step`` with ``step_mode="captured"`` (SAME_STEP)."""
    envs = tlb_vector_env(device, num_envs, "captured")
    actions = envs.unwrapped.rounds.mask.int().argmax(dim=1)  # (N,) an allowed token (not EOS before L)
    rate = steps_per_second(functools.partial(envs.step, actions), device, args.env_seconds)
    result = {"env_captured_token_steps_per_second": rate * num_envs, "env_captured": envs.unwrapped._captured.captured}
    envs.close()
    return result


def steps_per_second(step: Callable[[], Any], device: torch.device, seconds: float) -> float:
    """Calls per second of ``step`` over about ``seconds`` (after 3 warm-up calls), the device synchronised around."""
    for _ in range(3):
        step()
    calls = 3
    while True:
        synchronise(device)
        start = time.perf_counter()
        for _ in range(calls):
            step()
        synchronise(device)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds / 4 or calls >= 1 << 16:
            return calls / elapsed
        calls *= 4


def measured_vector_envs(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each N measured (by ``vector_envs`` and ``vector_envs_large``), smallest first: its figures."""
    measured = {**results.get("vector_envs", {}), **results.get("vector_envs_large", {})}
    return {size: measured[size] for size in sorted((size for size in measured if size.isdigit()), key=int)}


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 51's targets: what each measures, its value, its bound and the ratio (value / floor where one applies).

    A part of the suite that failed or was skipped contributes no target.
    """
    rows_out = []
    floor = results.get("llama", {})
    if "batches" in floor:
        batches = list(floor["batches"])
        for batch, bound, what in ((batches[0], 1.5, "bytes floor"), (batches[1], 2.0, "max(bytes, FLOPs) floor")):
            entry = floor["batches"][batch]
            best = min(entry["eager_ms"], entry["captured_ms"])
            rows_out.append(
                {
                    "target": f"{floor['shape']} step, B = {batch}, within {bound}x of the {what}",
                    "value": f"{best:.3f} ms (floor {entry['floor_ms']:.3f} ms)",
                    "ratio": best / entry["floor_ms"],
                    "bound": bound,
                    "met": best / entry["floor_ms"] <= bound,
                }
            )
    rows = results.get("nine_rows", {})
    if "eager_ms" in rows:
        best_rows = min(rows["eager_ms"], rows["captured_ms"])
        rows_out.append(
            {
                "target": "SmolLM2-shaped nine-row step at most 3 ms",
                "value": f"{best_rows:.3f} ms",
                "ratio": best_rows / 3.0,
                "bound": 1.0,
                "met": best_rows <= 3.0,
            }
        )
    envs = measured_vector_envs(results)
    sizes = list(envs)
    for size in sizes:
        entry = envs[size]
        rate = max(entry["eager_token_steps_per_second"], entry["captured_token_steps_per_second"])
        wanted = 10e6 if size == sizes[0] else 200e6
        rows_out.append(
            {
                "target": f"TLB torch backend at N = {int(size):,}: at least {wanted / 1e6:.0f} M token-steps/s",
                "value": f"{rate / 1e6:.2f} M token-steps/s",
                "ratio": wanted / rate,
                "bound": 1.0,
                "met": rate >= wanted,
            }
        )
    if "eager_ms" in rows:
        minutes = rows["t1000_run_minutes_projected"]
        rows_out.append(
            {
                "target": "T = 1000 Figure-2 run under 5 minutes (projected from the nine-row step; no decodes)",
                "value": f"{minutes:.2f} min",
                "ratio": minutes / 5.0,
                "bound": 1.0,
                "met": minutes < 5.0,
            }
        )
    return rows_out


def table(results: dict[str, Any]) -> str:
    """The markdown report: the device, the measurements, then the targets with their ratios."""
    lines = [
        f"device: {results['device']}; torch {results['torch']}; {results['seconds']:.0f} s in all",
        f"pytest -m gpu: {results.get('gpu_tests')}",
    ]
    for part in PARTS:
        problem = results.get(part, {}).get("error") or results.get(part, {}).get("skipped")
        if problem:
            lines.append(f"{part}: {problem.strip().splitlines()[-1]}")
    floor, rows = results.get("llama", {}), results.get("nine_rows", {})
    if "batches" in floor:
        lines.append(
            f"{floor['shape']} ({floor['dtype']}): {floor['weight_bytes'] / 2**30:.2f} GiB read a step, copy "
            f"bandwidth {floor['bandwidth_bytes_per_second'] / 1e9:.0f} GB/s, matmul "
            f"{floor['matmul_flops_per_second'] / 1e12:.1f} TFLOP/s, bytes floor {floor['bytes_floor_ms']:.3f} ms"
        )
    for what, part in (("8B-shaped", floor), ("nine-row", rows)):
        if part.get("native_forward_probe_refusal"):
            refusal = part["native_forward_probe_refusal"]
            lines.append(f"{what} model: native forward installed though its probe refused it ({refusal[-300:]})")
    lines += ["", "| what | eager | captured | floor | eager / floor | captured / floor |", "|---|---|---|---|---|---|"]
    for batch, entry in floor.get("batches", {}).items():
        captured = f"{entry['captured_ms']:.3f} ms" + ("" if entry["captured"] else " (not a graph)")
        lines.append(
            f"| {floor['shape']} step, B = {batch} | {entry['eager_ms']:.3f} ms | {captured} | {entry['floor_ms']:.3f} "
            f"ms | {entry['eager_ms'] / entry['floor_ms']:.2f}x | {entry['captured_ms'] / entry['floor_ms']:.2f}x |"
        )
    if "generate_ms_per_token" in floor:
        generate = floor["generate_ms_per_token"]
        lines.append(
            f"| generate, B = 1, per token | {generate:.3f} ms | - | {floor['bytes_floor_ms']:.3f} ms | "
            f"{generate / floor['bytes_floor_ms']:.2f}x | - |"
        )
    if "eager_ms" in rows:
        lines.append(
            f"| nine-row step (vocabulary {rows['vocab_size']:,}) | {rows['eager_ms']:.3f} ms | "
            f"{rows['captured_ms']:.3f} ms{'' if rows['captured'] else ' (not a graph)'} | - | - | - |"
        )
    for size, entry in measured_vector_envs(results).items():
        lines.append(
            f"| TLB torch backend, N = {int(size):,} (M token-steps/s) | "
            f"{entry['eager_token_steps_per_second'] / 1e6:.2f} | "
            f"{entry['captured_token_steps_per_second'] / 1e6:.2f}"
            f"{'' if entry['captured'] else ' (not a graph)'} | - | - | - |"
        )
        if "env_captured_token_steps_per_second" in entry:
            lines.append(
                f"| TLB vector env's step, N = {int(size):,}, step_mode eager / captured (M token-steps/s) | "
                f"{entry['eager_token_steps_per_second'] / 1e6:.2f} | "
                f"{entry['env_captured_token_steps_per_second'] / 1e6:.2f}"
                f"{'' if entry['env_captured'] else ' (not a graph)'} | - | - | - |"
            )
    llm_env = results.get("llm_vector_env", {})
    if "eager_ms" in llm_env:
        lines.append(
            f"| LLM vector env's step (stories260K, N = 9), step_mode eager / captured | "
            f"{llm_env['eager_ms']:.3f} ms | {llm_env['captured_ms']:.3f} ms"
            f"{'' if llm_env['captured'] else ' (not a graph)'} | - | - | - |"
        )
    lines += ["", "| target | measured | ratio | met |", "|---|---|---|---|"]
    for target in results["targets"]:
        lines.append(f"| {target['target']} | {target['value']} | {target['ratio']:.2f} | {target['met']} |")
    return "\n".join(lines)


PARTS: dict[str, Callable[[Args, torch.device], dict[str, Any]]] = {
    "vector_envs": vector_envs,
    "llm_vector_env": llm_vector_env,
    "nine_rows": nine_rows,
    "llama": llama_floor,
    "vector_envs_large": vector_envs_large,
}
"""The measured parts, the most informative a second first, so that a short loan gets the most of them.

``pytest -m gpu`` runs before ``vector_envs_large`` (whose host-side reset alone takes about 80 s).
"""

MINIMUM_SECONDS_FOR_A_PART = {"vector_envs_large": 150.0}
"""A part that would start with less of the budget left than this (20 s unless named) is skipped, and says so."""


def run_tests(args: Args, results: dict[str, Any], start: float) -> None:
    """``pytest -m gpu`` into ``results["gpu_tests"]``, with the budget left (less 30 s), and the JSON rewritten."""
    print(f"[{time.perf_counter() - start:6.1f} s] pytest -m gpu ...", flush=True)
    results["gpu_tests"] = run_gpu_tests(args, args.budget_seconds - (time.perf_counter() - start) - 30)
    write_json_atomically(args.out, results)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the suite: print the table, write the JSON, return the results.

    Each part runs on its own: one that raises is recorded with its traceback and the others still run, and the
    JSON is rewritten after each part, so a run cut short still leaves what it measured.
    """
    args = parse_args(argv)
    device = torch.device(args.device)
    start = time.perf_counter()
    results: dict[str, Any] = {
        "device": device_name(device),
        "torch": torch.__version__,
        "args": dataclasses.asdict(args),
    }
    caught: list[warnings.WarningMessage] = []
    for name, part in PARTS.items():
        if name == "vector_envs_large":
            run_tests(args, results, start)
        seconds_left = args.budget_seconds - (time.perf_counter() - start)
        if seconds_left < MINIMUM_SECONDS_FOR_A_PART.get(name, 20.0):
            results[name] = {"skipped": f"{seconds_left:.0f} s of the budget left"}
            continue
        print(f"[{time.perf_counter() - start:6.1f} s] {name} ...", flush=True)
        with warnings.catch_warnings(record=True) as caught_here:
            warnings.simplefilter("always", RuntimeWarning)
            try:
                results[name] = part(args, device)
            except Exception:  # noqa: BLE001  (recorded: the other parts still run)
                results[name] = {"error": traceback.format_exc()}
                print(results[name]["error"], flush=True)
        caught += caught_here
        write_json_atomically(args.out, results)
    if "gpu_tests" not in results:
        run_tests(args, results, start)
    results["warnings"] = sorted({str(warning.message) for warning in caught})
    results["targets"] = targets(results)
    results["seconds"] = time.perf_counter() - start
    report = table(results)
    results["table"] = report
    write_json_atomically(args.out, results)
    print(report)
    for message in results["warnings"]:
        print(f"warning: {message}")
    if results["gpu_tests"].get("tail"):
        print(results["gpu_tests"]["tail"])
    return results


if __name__ == "__main__":
    main()
