"""Per-step wall time of the LLM env vs model.generate with a KV cache and vs naive recomputation.

Measured interleaved in one run (each repeat times every method once, in turn; times are medians
over the repeats, ratios are medians of the per-repeat ratios, with their range), so a change of
machine load hits all of them alike; the ratios are what to quote:

* env: ``TokenizedAlignmentEnv.step`` over a whole L-token episode, observation included (the k
  candidates' ``[e : v]`` features, log-probs, mask); one batched forward of the k candidates over
  the prefix KV cache per step, under a 4-D mask, through the native forward (the default for
  Llama-family and GPT-2 models) and, side by side, through the model's own transformers forward,
  and through the native forward with its projections on plain ``F.linear`` (no weight prepared by
  :class:`~tokenized_bandit_gym.llm.native_decoder_forward.FrozenLinear`: the native forward before
  issue 28 item 4), so the gain of the prepared weights is measured in the same process.
* (a) ``model.generate`` per token with the KV cache, greedy, same model and device:
  ``(t(L new tokens) - t(1 new token)) / (L - 1)``, so the prefill is excluded as it is for the env.
* (b) naive: every step recomputes each candidate's full ``x:y:tau`` without a cache (the k
  sequences batched in one forward), mean-pools the last-layer hidden states and reads the next
  candidates from the chosen sequence's last position (LM head on that one row). No separate
  forward of the prefix: the chosen sequence's own forward already gives the next distribution.
  Averaged over ``naive_positions`` positions spread over the episode.
* (b) on the native forward: the same naive recomputation through the env's native forward, so
  both sides run the same forward and the ratio is the KV cache's own gain.
* (b') naive, one forward per candidate: the same recomputation with the k sequences run one at a
  time (the most literal "recompute every candidate's full sequence"; printed next to (b) so both
  readings of the issue's baseline are on record).

Floors, timed in the same loop on a prefix of the episode's mean length (fastest of 5 calls per
repeat, then the median over the repeats): transformers' forward of one token over the cache
(what generate runs per token), the k candidates under the 4-D mask through either forward (what
the env runs per step), and the LM head + top-k on one row (both run it once per step). Two
lower bounds of a step: the **compute floor** (``k x 2 x decoder weights + 2 x LM head`` FLOPs at
the fp32 1024^3 matmul rate measured now, on the same threads) and the **bandwidth floor** (one
token through the native forward over the cache, plus the LM head: every weight read once, the
least a step can stream from memory; the compute floor assumes the weights are already in cache).
``floor env / (a) = (native k-token forward + head) / (1-token forward + head)`` is what the env
would reach with zero overhead of its own; ``floor (b) / env = naive / (native k-token forward +
head)``.

Run: ``PYTHONPATH=. python benchmarks/llm_step.py`` (``--help`` for the options).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from benchmarks.generate_timing import generate_seconds_per_token
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments

os.environ.setdefault("HF_HUB_OFFLINE", "1")

QUERY = "Once upon a time, there was a little girl named Lily."
IMPLEMENTATIONS = ("native", "transformers")
UNPREPARED = "native, F.linear"
"""The native forward with every projection on plain ``F.linear`` (no weight packed or transposed)."""


@dataclass
class Args:
    """Benchmark options."""

    models: str = "stories260K,gpt2-small-random"
    """comma-separated: stories260K (shipped, pretrained), smollm2-135m-instruct (the packaged real instruct model)
    and/or gpt2-small-random (124M, random weights)"""
    max_length: int = 30
    """L, tokens per episode"""
    top_k: int = 15
    """k, candidates per step"""
    repeats: int = 5
    """interleaved repeats (each: one episode per env variant, one generate pair, one naive pass, floors)"""
    naive_positions: int = 6
    """positions of the episode at which the naive recomputation is timed"""
    threads: int = 1
    """torch CPU threads (1 avoids oversubscription on a shared 2-core machine)"""
    device: str = "cpu"
    """torch device"""
    dtype: str = "float32"
    """weight dtype of both models (float32, bfloat16, float16); env, generate and naive all run in it"""


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


def load(name: str, device: str, dtype: str = "float32") -> tuple[Any, Any]:
    """The model and tokenizer named ``name``, weights in ``dtype``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from tokenized_bandit_gym.llm.load_language_model import load_language_model, resolve_dtype

    if name == "smollm2-135m-instruct":  # the packaged real instruct model (see docs/LLM.md)
        return load_language_model(name, device=device, dtype=dtype)
    model, tokenizer = load_language_model(device=device, dtype=dtype)
    if name == "stories260K":
        return model, tokenizer
    if name == "gpt2-small-random":
        config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
        config.eos_token_id = tokenizer.eos_token_id
        torch.manual_seed(0)
        language_model = GPT2LMHeadModel(config).to(device=device, dtype=resolve_dtype(dtype))
        return language_model.eval(), tokenizer  # stories260K ids (< 512) drive it
    raise ValueError(f"unknown model {name!r}: expected stories260K, smollm2-135m-instruct or gpt2-small-random")


def make_env(model: Any, tokenizer: Any, args: Args, implementation: str) -> Any:
    """A noise-free ``TokenizedAlignmentEnv`` on the one benchmark query, with the forward ``implementation``.

    ``implementation`` is one of :data:`IMPLEMENTATIONS` or :data:`UNPREPARED` (the native forward built
    while no weight qualifies for packing or transposing, so every projection runs ``F.linear``).
    """
    from unittest import mock

    from tokenized_bandit_gym.envs.tokenized_alignment_env import TokenizedAlignmentEnv
    from tokenized_bandit_gym.llm import native_decoder_forward

    def build(forward: str) -> Any:
        return TokenizedAlignmentEnv(
            model=model,
            tokenizer=tokenizer,
            queries=[QUERY],
            max_length=args.max_length,
            top_k=args.top_k,
            noise_scale=0.0,
            candidate_batching="mask",
            forward_implementation=forward,
        )

    if implementation != UNPREPARED:
        return build(implementation)
    with (
        mock.patch.object(native_decoder_forward, "mkl_packs", return_value=False),
        mock.patch.object(native_decoder_forward, "PACKED_MIN_WEIGHTS", 0),
    ):
        return build("native")


def time_episode(env: Any) -> tuple[float, list[int]]:
    """Mean seconds per step over one episode that never picks EOS early; the response ids."""
    eos = env.unwrapped.eos_token_id
    observation, _ = env.reset(seed=0)
    terminated, elapsed, steps = False, 0.0, 0
    while not terminated:
        allowed = np.flatnonzero(observation["action_mask"] & (observation["candidate_tokens"] != eos))
        action = int(allowed[0]) if allowed.size else int(np.flatnonzero(observation["action_mask"])[0])
        start = time.perf_counter()
        observation, _, terminated, _, info = env.step(action)
        elapsed += time.perf_counter() - start
        steps += 1
    return elapsed / steps, [int(t) for t in info["response"]]


def time_generate(model: Any, query: list[int], args: Args) -> float:
    """Seconds per generated token of ``model.generate`` (greedy, KV cache), prefill excluded."""
    return generate_seconds_per_token(model, torch.tensor([query], device=args.device), args.max_length)


@torch.no_grad()
def time_naive(
    model: Any, query: list[int], response: list[int], args: Args, batched: bool = True, native: bool = False
) -> float:
    """Mean seconds per step of recomputing the k candidates' full sequences without a cache.

    ``batched``: the k sequences ``(k, T + 1)`` in one forward; otherwise k forwards of ``(1, T + 1)``.
    ``native``: through the env's native forward instead of the model's own transformers forward.
    """
    from tokenized_bandit_gym.llm.decoder_forward import select_decoder_forward

    positions = np.unique(np.linspace(0, len(response) - 1, args.naive_positions).astype(int))
    base, head = model.base_model, model.get_output_embeddings()
    forward = select_decoder_forward(model, "native") if native else None

    def encode(sequences: torch.Tensor) -> torch.Tensor:
        """Last-layer hidden states ``(n, T + 1, H)`` of ``sequences`` ``(n, T + 1)``, no cache."""
        if forward is None:
            return base(input_ids=sequences).last_hidden_state
        positions = torch.arange(sequences.shape[1], device=args.device).expand_as(sequences)
        return forward(sequences, torch.ones_like(sequences), positions, ())[0]

    elapsed = []
    for position in positions:
        prefix = torch.tensor(query + response[:position], device=args.device)
        candidates = torch.arange(3, 3 + args.top_k, device=args.device)  # (k,) ids; their values do not matter
        start = time.perf_counter()
        sequences = torch.cat([prefix.expand(args.top_k, -1), candidates[:, None]], dim=1)  # (k, T + 1)
        if batched:
            hidden = encode(sequences)  # (k, T + 1, H)
        else:
            hidden = torch.cat([encode(row[None]) for row in sequences])  # (k, T + 1, H)
        pooled = hidden.mean(dim=1)  # (k, H)
        pooled = pooled / pooled.norm(dim=-1, keepdim=True)
        head(hidden[:1, -1]).float().log_softmax(-1).topk(args.top_k)  # next candidates after the chosen one
        elapsed.append(time.perf_counter() - start)
    return float(np.mean(elapsed))


@torch.no_grad()
def time_floors(model: Any, prefix_length: int, args: Args) -> dict[str, float]:
    """Seconds of the forwards and the LM head the env and generate are built on, over a cache.

    ``one``: 1 token, transformers (what generate runs per token); ``one_native``: 1 token, native
    (every weight read once: with ``head``, the bandwidth floor); ``k_transformers`` and
    ``k_native``: the k candidates under the 4-D mask, through either forward (what the env runs
    per step); ``head``: LM head + top-k on one row (both run it once per step).
    """
    from tokenized_bandit_gym.llm.decoder_forward import select_decoder_forward

    head = model.get_output_embeddings()
    dtype = head.weight.dtype
    transformers_forward = select_decoder_forward(model, "transformers")
    native_forward = select_decoder_forward(model, "native")
    ids = torch.arange(3, 3 + prefix_length, device=args.device)[None] % 500  # (1, P)
    ones = torch.ones_like(ids)
    _, past = transformers_forward(ids, ones, torch.arange(prefix_length, device=args.device)[None], ())
    k = args.top_k
    blocked = torch.finfo(dtype).min
    self_only = torch.zeros(k, k, device=args.device, dtype=dtype).masked_fill_(
        ~torch.eye(k, dtype=torch.bool), blocked
    )
    mask = torch.cat([torch.zeros(1, 1, k, prefix_length, device=args.device, dtype=dtype), self_only[None, None]], 3)
    position = torch.full((1, k), prefix_length, device=args.device)
    one_mask = torch.ones(1, prefix_length + 1, dtype=torch.int64, device=args.device)
    hidden = torch.randn(1, head.weight.shape[1], device=args.device, dtype=dtype)
    return {
        "compute_floor": compute_floor_seconds(model, k, args.device),
        "one": timed(lambda: transformers_forward(ids[:, :1], one_mask, position[:, :1], past)),
        "one_native": timed(lambda: native_forward(ids[:, :1], one_mask, position[:, :1], past)),
        "k_transformers": timed(lambda: transformers_forward(ids[:, :k], mask, position, past)),
        "k_native": timed(lambda: native_forward(ids[:, :k], mask, position, past)),
        "head": timed(lambda: head(hidden).float().log_softmax(-1).topk(k)),
    }


def compute_floor_seconds(model: Any, k: int, device: str) -> float:
    """Seconds of the step's compute floor, at the machine's matmul throughput measured now (1024^3 matmul).

    FLOPs: :func:`step_flops`; throughput: :func:`matmul_flops_per_second`.
    """
    return step_flops(model, k) / matmul_flops_per_second(device, model.get_output_embeddings().weight.dtype)


def step_flops(model: Any, k: int) -> int:
    """FLOPs of one env step's floor: ``k * 2 * (decoder weights) + 2 * (LM head weights)``.

    Each candidate needs its own ``e(x, y:tau)``, so the k tokens go through every decoder weight (2 FLOPs per
    weight and token); the LM head runs on the chosen row only; the input embedding is a gather.
    """
    head = model.get_output_embeddings().weight
    embedding = model.get_input_embeddings().weight
    decoder = sum(parameter.numel() for parameter in model.parameters()) - embedding.numel()
    if head.data_ptr() != embedding.data_ptr():
        decoder -= head.numel()  # an untied head is not in the decoder either
    return k * 2 * decoder + 2 * head.numel()


def matmul_flops_per_second(
    device: str, dtype: torch.dtype = torch.float32, clock: Callable[[], float] = time.perf_counter
) -> float:
    """The machine's matmul throughput now: fastest of 5 ``1024^3`` matmuls, timed by ``clock``.

    ``time.process_time`` (CPU seconds of this process) instead of the wall clock leaves out the time other
    processes of a shared machine take from it (one torch thread: CPU seconds are the work done).
    """
    size = 1024
    left = torch.randn(size, size, device=device, dtype=dtype)
    right = torch.randn(size, size, device=device, dtype=dtype)
    return 2 * size**3 / timed(lambda: torch.mm(left, right), clock=clock)


def timed(call: Callable[[], None], calls: int = 5, clock: Callable[[], float] = time.perf_counter) -> float:
    """Fastest of ``calls`` calls, in seconds of ``clock`` (a floor: the least the machine's load added)."""
    samples = []
    for _ in range(calls):
        start = clock()
        call()
        samples.append(clock() - start)
    return min(samples)


def benchmark(name: str, args: Args) -> str:
    """One markdown table for the model: medians over the interleaved repeats, ratios to the env."""
    model, tokenizer = load(name, args.device, args.dtype)
    envs = {name: make_env(model, tokenizer, args, name) for name in (*IMPLEMENTATIONS, UNPREPARED)}
    _, response = time_episode(envs["native"])  # untimed: fills the oracle benchmark cache, warms up
    time_episode(envs["transformers"])
    time_episode(envs[UNPREPARED])
    problem = envs["native"].unwrapped.problem
    query = problem.query_tokens[0, : int(problem.query_lengths[0])].tolist()
    time_generate(model, query, args)
    columns: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        samples = {
            "env_native": time_episode(envs["native"])[0],
            "env_transformers": time_episode(envs["transformers"])[0],
            "env_unprepared": time_episode(envs[UNPREPARED])[0],
            "generate": time_generate(model, query, args),
            "naive": time_naive(model, query, response, args),
            "naive_native": time_naive(model, query, response, args, native=True),
            "naive_each": time_naive(model, query, response, args, batched=False),
        }
        samples |= time_floors(model, len(query) + args.max_length // 2, args)
        samples["k_native_and_head"] = samples["k_native"] + samples["head"]
        samples["bandwidth_floor"] = samples["one_native"] + samples["head"]
        for key, value in samples.items():
            columns.setdefault(key, []).append(value)
    ms = {key: 1e3 * float(np.median(values)) for key, values in columns.items()}

    def ratio(numerator: str, denominator: str) -> str:
        """Median of the per-repeat ratios, with their range."""
        ratios = np.array(columns[numerator]) / np.array(columns[denominator])
        return f"**{np.median(ratios):.2f}x** ({ratios.min():.2f}-{ratios.max():.2f})"

    floor_a = (ms["k_native"] + ms["head"]) / (ms["one"] + ms["head"])
    floor_b = ms["naive"] / (ms["k_native"] + ms["head"])
    rows = [
        f"| env step, native forward | {ms['env_native']:.2f} | 1 | |",
        f"| env step, transformers forward | {ms['env_transformers']:.2f} | "
        f"{ratio('env_transformers', 'env_native')} | same env on the model's own forward |",
        f"| env step, native forward on F.linear | {ms['env_unprepared']:.2f} | "
        f"{ratio('env_unprepared', 'env_native')} | no weight packed or transposed (the forward before) |",
        f"| (a) generate per token | {ms['generate']:.2f} | {ratio('env_native', 'generate')} | "
        f"env / (a); target <= 1.5x; floor {floor_a:.2f}x |",
        f"| (b) naive, k sequences in one forward | {ms['naive']:.2f} | {ratio('naive', 'env_native')} | "
        f"(b) / env; target >= 10x; floor {floor_b:.1f}x |",
        f"| (b) naive on the native forward | {ms['naive_native']:.2f} | {ratio('naive_native', 'env_native')} | "
        "the cache's own gain, same forward on both sides |",
        f"| (b') naive, a forward per candidate | {ms['naive_each']:.2f} | {ratio('naive_each', 'env_native')} | "
        "(b') / env |",
        f"| compute floor: k x 2 x decoder weights + LM head at the measured matmul rate | "
        f"{ms['compute_floor']:.3g} | {ratio('env_native', 'compute_floor')} | env / floor; "
        f"k-token native fwd + head / floor: {ratio('k_native_and_head', 'compute_floor')} |",
        f"| bandwidth floor: 1-token native fwd + LM head (every weight read once) | {ms['bandwidth_floor']:.2f} | "
        f"{ratio('env_native', 'bandwidth_floor')} | env / bandwidth floor; k-token native fwd + head / "
        f"bandwidth floor: {ratio('k_native_and_head', 'bandwidth_floor')} |",
        f"| floors: 1-token fwd (transformers) / k-token fwd (transformers, native) / LM head | "
        f"{ms['one']:.2f} / {ms['k_transformers']:.2f}, {ms['k_native']:.2f} / {ms['head']:.2f} | | |",
    ]
    header = f"\n{name} ({args.dtype})\n\n| method | ms per step | ratio | |\n|---|---|---|---|"
    return "\n".join([header, *rows])


def main() -> None:
    """Print one markdown table per model, with the load average before and after."""
    args = parse_args()
    torch.set_num_threads(args.threads)
    print(f"L={args.max_length}, k={args.top_k}, device={args.device}, threads={args.threads}, dtype={args.dtype}")
    print(f"repeats={args.repeats}, load average before: {os.getloadavg()}")
    for name in args.models.split(","):
        print(benchmark(name, args), flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
