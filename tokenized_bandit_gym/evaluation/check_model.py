"""``tbg check-model``: does a causal LM step right in the LLM envs? Check it against its own forward.

The LLM envs score the k candidates of a step with a KV cache, batched (docs/PERFORMANCE.md,
"The LLM envs: native forward"). A
researcher bringing a new model runs this before trusting its numbers: over a few episodes with
non-greedy (uniformly random allowed) actions, every observation of ``TokenizedAlignment-v0``,
single and vector, is compared with an independent no-cache forward of ``x:y:tau`` for every
candidate tau (``model(ids, output_hidden_states=True)``: the candidate embedding ``e`` is the
mean of its last hidden state, the log-probs come from its own logits, ``v(p)`` from those). Every
forward and candidate batching is tried; each either matches, is refused by the env with a reason,
or fails the check. The verdict table names the forward and batching used and the largest errors.
Each path's first episode avoids EOS while it can, so it reaches the episode's last position (query
length plus L, where position-dependent switches such as longrope's show). The thresholds are
float32's, or for 16-bit weights twice the dtype's noise measured on the model itself (its own
forward with another attention kernel); the verdict line prints them.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tokenized_bandit_gym.script_arguments import int_at_least

if TYPE_CHECKING:  # torch and numpy load when a check runs, not when ``tbg --help`` builds the parser
    import numpy as np
    import torch

REQUESTED_PATHS: tuple[tuple[str, str], ...] = (
    ("auto", "auto"),
    ("native", "mask"),
    ("native", "expand"),
    ("transformers", "mask"),
    ("transformers", "expand"),
)
"""``(forward_implementation, candidate_batching)`` pairs checked on the single env; the vector env runs auto."""

ENV_ID = "TokenizedAlignment-v0"


@dataclass(frozen=True)
class PathVerdict:
    """The check of one env and one requested path.

    Attributes:
        env: ``"single"`` or ``"vector"``.
        requested: ``"forward/batching"`` as asked.
        forward: the forward the env ran (None when refused).
        batching: the candidate batching it ran (None when refused).
        compared: candidate rows compared (one row is the k candidates of one observation).
        min_cosine: smallest cosine between a candidate's embedding and the reference's.
        max_logprob_error: largest ``|log p(tau | x, y)|`` difference.
        max_value_error: largest ``|v(p(x, y:tau))|`` difference divided by ``|y| + 1``, the number of
            token log-probs ``v`` sums (on a 49,152-token vocabulary float32 rounding alone moves each by ~4e-5).
        refusal: the env's error when it refused the path, else None.
        min_cosine_allowed: the cosine threshold of the verdict.
        max_error_allowed: the log-prob and ``v`` threshold of the verdict.
        tolerance_basis: how the thresholds were set (:class:`Tolerances`).
    """

    env: str
    requested: str
    forward: str | None
    batching: str | None
    compared: int
    min_cosine: float
    max_logprob_error: float
    max_value_error: float
    refusal: str | None
    min_cosine_allowed: float
    max_error_allowed: float
    tolerance_basis: str = "float32 weights"

    @property
    def passed(self) -> bool:
        """Compared and within the thresholds (a refusal neither passes nor fails)."""
        return (
            self.refusal is None
            and self.compared > 0
            and self.min_cosine >= self.min_cosine_allowed
            and self.max_logprob_error <= self.max_error_allowed
            and self.max_value_error <= self.max_error_allowed
        )

    @property
    def verdict(self) -> str:
        """``"ok"``, ``"refused"`` or ``"MISMATCH"``."""
        if self.refusal is not None:
            return "refused"
        return "ok" if self.passed else "MISMATCH"


FLOAT32_TOLERANCES = (0.9999, 1e-4)
"""``(min cosine, max log-prob error)`` of float32 and float64 weights."""
NOISE_HEADROOM = 2.0
"""16-bit thresholds are this many times the dtype's noise measured on the model (:func:`measured_noise`)."""


@dataclass(frozen=True)
class Tolerances:
    """The verdict's thresholds, and what they were calibrated on.

    Attributes:
        min_cosine: smallest cosine allowed between a candidate's embedding and the reference's.
        max_error: largest ``|log p|`` and ``|v|`` difference allowed.
        basis: how the thresholds were set, for the verdict line.
    """

    min_cosine: float
    max_error: float
    basis: str


def measured_noise(model: Any, sequences: list[torch.Tensor], max_length: int) -> tuple[float, float, str]:
    """The noise of the model's 16-bit dtype on the model itself: ``(1 - min cosine, max log-prob error, against)``.

    The model's no-cache forward of ``sequences`` (each ``(T,)`` ids) with its attention kernel
    against the same forward with another kernel (eager, or SDPA for an eager model): the same
    function in the same dtype, so what differs is the dtype's rounding (and what it flips, such as
    an expert's routing). Where the model takes no other kernel, a float32 copy of the model is the
    other side. Compared: the cosine of every position's last hidden state, and the largest
    difference of a top-10 token's log-prob at a position or of the sum of the last
    ``max_length + 1`` positions' (what ``v(p(x, y:tau))`` sums). Float32 and float64 models
    return ``(0, 0, "")``.
    """
    import copy

    import torch

    if next(model.parameters()).dtype in (torch.float32, torch.float64):
        return 0.0, 0.0, ""
    kernel = model.config._attn_implementation
    other_kernel = "sdpa" if kernel == "eager" else "eager"
    with torch.no_grad():
        own = [model(input_ids=ids[None], output_hidden_states=True, use_cache=False) for ids in sequences]
        try:
            model.set_attn_implementation(other_kernel)
        except (ValueError, ImportError, NotImplementedError):  # the model runs one kernel only
            other_model, against = copy.deepcopy(model).float(), "a float32 copy"
        else:
            other_model, against = model, f"its {other_kernel} attention kernel"
        try:
            other = [other_model(input_ids=ids[None], output_hidden_states=True, use_cache=False) for ids in sequences]
        finally:
            if other_model is model:
                model.set_attn_implementation(kernel)
    cosine_gap, logprob_error = 0.0, 0.0
    for first, second in zip(own, other, strict=True):
        cosine = torch.nn.functional.cosine_similarity(
            first.hidden_states[-1][0].double(), second.hidden_states[-1][0].double(), dim=1
        )  # (T,)
        cosine_gap = max(cosine_gap, float(1.0 - cosine.min()))
        logprobs = [output.logits[0].double().log_softmax(dim=-1) for output in (first, second)]  # (T, n) each
        top = logprobs[0].topk(min(10, logprobs[0].shape[1]), dim=1).indices  # (T, 10)
        token_errors = (logprobs[0].gather(1, top) - logprobs[1].gather(1, top)).abs()  # (T, 10)
        tail = token_errors[-(max_length + 1) :, 0].sum()  # the top token's, summed over the last positions
        logprob_error = max(logprob_error, float(token_errors.max()), float(tail))
    return cosine_gap, logprob_error, against


def tolerances(model: Any, sequences: list[torch.Tensor], max_length: int) -> Tolerances:
    """The verdict's thresholds for ``model``: float32's, or twice the 16-bit noise measured on it.

    16-bit weights move log-probs by the rounding of their dtype alone, by how much depends on the
    model (stories260K in bfloat16: 0.30 nats between its SDPA and eager kernels; a tiny random
    Mixtral: 0.11), so the thresholds are :data:`NOISE_HEADROOM` times the noise
    :func:`measured_noise` finds on this model's own forward of the probe sequences, never looser
    than float32's floor.
    """
    import torch

    dtype = next(model.parameters()).dtype
    min_cosine, max_error = FLOAT32_TOLERANCES
    if dtype in (torch.float32, torch.float64):
        return Tolerances(min_cosine, max_error, f"{str(dtype).removeprefix('torch.')} weights")
    cosine_gap, logprob_error, against = measured_noise(model, sequences, max_length)
    name = str(dtype).removeprefix("torch.")
    return Tolerances(
        min(min_cosine, 1.0 - NOISE_HEADROOM * cosine_gap),
        max(max_error, NOISE_HEADROOM * logprob_error),
        f"{NOISE_HEADROOM:g} x the {name} noise measured on this model against {against} "
        f"(|dlogp| {logprob_error:.3g}, 1 - cosine {cosine_gap:.2g})",
    )


def reference_scores(
    model: Any, prefix: torch.Tensor, candidates: torch.Tensor, query_length: int, pooling: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The no-cache reference of ``x:y:tau`` for every candidate: one plain forward of the k sequences.

    Args:
        model: the causal LM.
        prefix: ``x:y`` ids ``(T,)``.
        candidates: ``(k,)`` candidate ids tau.
        query_length: ``|x|``.
        pooling: ``"query_response"`` (mean over ``x:y:tau``) or ``"response"`` (over ``y:tau``).

    Returns:
        Mean-pooled last hidden states ``(k, H)``, ``log p(tau | x, y)`` ``(k,)`` and
        ``log p(y:tau | x)`` ``(k,)``, float64.
    """
    import torch

    device = next(model.parameters()).device
    k = candidates.shape[0]
    ids = torch.cat([prefix.expand(k, -1), candidates[:, None]], dim=1).to(device)  # (k, T + 1)
    with torch.no_grad():
        output = model(input_ids=ids, output_hidden_states=True, use_cache=False)
    hidden = output.hidden_states[-1].double()  # (k, T + 1, H)
    start = 0 if pooling == "query_response" else query_length
    pooled = hidden[:, start:].mean(dim=1)  # (k, H)
    logprobs = output.logits.double().log_softmax(dim=-1)[:, query_length - 1 : -1]  # (k, |y| + 1, n)
    token_logprobs = logprobs.gather(2, ids[:, query_length:, None])[..., 0]  # (k, |y| + 1)
    return pooled, token_logprobs[:, -1], token_logprobs.sum(dim=1)


class _Errors:
    """Running extremes of the comparison."""

    def __init__(self) -> None:
        self.compared, self.min_cosine, self.max_logprob, self.max_value = 0, 1.0, 0.0, 0.0

    def add(self, problem: Any, row: dict[str, np.ndarray]) -> None:
        """Compare one observation row (the single env's observation, or one row of the vector env's)."""
        import numpy as np
        import torch

        query_length, length = int(row["query_length"]), int(row["length"])
        prefix = torch.as_tensor(np.concatenate([row["query"][:query_length], row["response"][:length]]))
        candidates = torch.as_tensor(row["candidate_tokens"])
        pooled, token, sequence = reference_scores(
            problem.model, prefix.long(), candidates.long(), query_length, problem.pooling
        )
        features = torch.as_tensor(row["candidate_embeddings"], dtype=torch.float64)  # (k, d + 1)
        cosine = torch.nn.functional.cosine_similarity(features[:, :-1], pooled.cpu(), dim=1)  # (k,)
        value = problem.value_map(sequence.cpu())  # (k,)
        logprobs = torch.as_tensor(row["candidate_logprobs"], dtype=torch.float64)  # (k,)
        self.compared += 1
        self.min_cosine = min(self.min_cosine, float(cosine.min()))
        self.max_logprob = max(self.max_logprob, _max_error(logprobs, token.cpu()))
        # v sums the |y| + 1 token log-probs of y:tau, so float rounding in each adds up: compare per summed token.
        self.max_value = max(self.max_value, _max_error(features[:, -1], value) / (length + 1))


def _max_error(got: torch.Tensor, expected: torch.Tensor) -> float:
    """Largest ``|got - expected|`` (both ``-inf`` counts as equal; one ``-inf`` alone as ``inf``)."""
    import torch

    same_infinity = torch.isinf(got) & torch.isinf(expected) & (got == expected)
    difference = torch.where(same_infinity, 0.0, (got - expected).abs())
    return float(difference.max()) if difference.numel() else 0.0


def check_language_model(
    model: Any,
    tokenizer: Any,
    steps: int = 20,
    seed: int = 0,
    num_envs: int = 3,
    **env_kwargs: Any,
) -> list[PathVerdict]:
    """Check ``model`` in ``TokenizedAlignment-v0`` on every requested path and in the vector env.

    Args:
        model: a loaded causal LM.
        tokenizer: its tokenizer.
        steps: observation rows compared per path (``>= 1``).
        seed: seeds the episodes and the random actions.
        num_envs: N of the vector env.
        **env_kwargs: further env keywords (``max_length``, ``top_k``, ``queries``, ``query_column``, ...).

    Returns:
        One verdict per single-env path of :data:`REQUESTED_PATHS`, then the vector env's (auto).
        Every path's first episode avoids EOS while it can, so it reaches the episode's last
        position (query length plus L); the thresholds are :func:`tolerances` of the model.
    """
    import gymnasium as gym
    import numpy as np

    import tokenized_bandit_gym  # noqa: F401  (registers the envs)

    limits = tolerances(model, _noise_sequences(model, tokenizer, seed, env_kwargs), env_kwargs.get("max_length", 30))
    min_cosine, max_error = limits.min_cosine, limits.max_error
    kwargs: dict[str, Any] = {"noise_scale": 0.0, **env_kwargs, "model": model, "tokenizer": tokenizer}
    verdicts: list[PathVerdict] = []
    rng = np.random.default_rng(seed)
    for forward, batching in (*REQUESTED_PATHS, ("auto", "auto")):
        vector = len(verdicts) == len(REQUESTED_PATHS)
        path: dict[str, Any] = {"forward_implementation": forward, "candidate_batching": batching}
        errors = _Errors()
        ran: tuple[str | None, str | None] = (None, None)  # the forward and batching the env ran
        refusal = None
        try:
            if vector:
                mode: dict[str, Any] = {"num_envs": num_envs, "vectorization_mode": "vector_entry_point"}
                env: Any = gym.make_vec(ENV_ID, **mode, **kwargs, **path)
            else:
                env = gym.make(ENV_ID, **kwargs, **path)
        except ValueError as error:
            refusal = str(error)
            errors.min_cosine = errors.max_logprob = errors.max_value = math.nan  # nothing compared
        else:
            problem = env.unwrapped.problem
            _play(env, problem, errors, steps, rng, vector)
            env.close()
            ran = (problem.forward_implementation, problem.candidate_batching)
        verdicts.append(
            PathVerdict(
                env="vector" if vector else "single",
                requested=f"{forward}/{batching}",
                forward=ran[0],
                batching=ran[1],
                compared=errors.compared,
                min_cosine=errors.min_cosine,
                max_logprob_error=errors.max_logprob,
                max_value_error=errors.max_value,
                refusal=refusal,
                min_cosine_allowed=min_cosine,
                max_error_allowed=max_error,
                tolerance_basis=limits.basis,
            )
        )
    return verdicts


def _noise_sequences(model: Any, tokenizer: Any, seed: int, env_kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """Up to four of the check's queries as ids ``(T,)``, each followed by ``max_length`` seeded random tokens."""
    import torch

    from tokenized_bandit_gym.llm.query_sources import resolve_queries

    sources = {key: env_kwargs[key] for key in ("query_column", "query_field") if env_kwargs.get(key) is not None}
    texts = resolve_queries(env_kwargs.get("queries"), seed=seed, **sources)[:4]
    max_length = int(env_kwargs.get("max_length", 30))
    positions = getattr(model.config.get_text_config(), "max_position_embeddings", None) or 4096
    vocabulary = int(model.get_output_embeddings().weight.shape[0])
    generator = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    sequences = []
    for text in texts:
        ids = torch.as_tensor(tokenizer(text)["input_ids"][: max(1, positions - max_length)], dtype=torch.int64)
        tail = torch.randint(3, vocabulary, (max_length,), generator=generator)
        sequences.append(torch.cat([ids, tail]).to(device))
    return sequences


def _random_action(row: dict[str, np.ndarray], rng: np.random.Generator, avoid_eos: bool, eos: int) -> int:
    """A uniformly random allowed candidate of one observation row (not EOS while ``avoid_eos`` and another is)."""
    import numpy as np

    allowed = np.asarray(row["action_mask"], dtype=bool)
    if avoid_eos and (allowed & (row["candidate_tokens"] != eos)).any():
        allowed = allowed & (row["candidate_tokens"] != eos)
    return int(rng.choice(np.flatnonzero(allowed)))


def _play(env: Any, problem: Any, errors: _Errors, steps: int, rng: np.random.Generator, vector: bool) -> None:
    """Step ``env`` with random allowed actions until ``steps`` observation rows are compared.

    The first episode (row 0's, in the vector env) avoids EOS while it can, so it reaches the
    episode's last position, and is played to its end whatever ``steps`` is.
    """
    import numpy as np

    eos = problem.eos_token_id
    observation, _ = env.reset(seed=int(rng.integers(2**31)))
    if not vector:
        first_episode = True
        while errors.compared < steps or first_episode:
            errors.add(problem, observation)
            observation, _, terminated, _, _ = env.step(_random_action(observation, rng, first_episode, eos))
            if terminated:
                first_episode = False
                observation, _ = env.reset()
        return
    live = np.ones(env.num_envs, dtype=bool)  # rows whose observation is not a round's final one
    first_episode = True
    while errors.compared < steps or first_episode:
        actions = np.zeros(env.num_envs, dtype=np.int64)
        for row in range(env.num_envs):
            if live[row]:
                observed = {key: value[row] for key, value in observation.items()}
                errors.add(problem, observed)
                actions[row] = _random_action(observed, rng, first_episode and row == 0, eos)
        observation, _, terminated, _, _ = env.step(actions)
        live = ~np.asarray(terminated)
        first_episode = first_episode and bool(live[0])


def format_verdicts(verdicts: list[PathVerdict]) -> str:
    """The verdict table: env, requested and used path, rows compared, the largest errors and the verdict."""
    header = f"{'env':7} {'requested':20} {'forward':13} {'batching':9} {'rows':>5} {'min cos':>10} "
    header += f"{'max|dlogp|':>11} {'|dv|/tok':>10}  verdict"
    lines = [header]
    for verdict in verdicts:
        if verdict.refusal is not None:
            lines.append(f"{verdict.env:7} {verdict.requested:20} refused: {verdict.refusal}")
            continue
        lines.append(
            f"{verdict.env:7} {verdict.requested:20} {verdict.forward:13} {verdict.batching:9} {verdict.compared:5d} "
            f"{verdict.min_cosine:10.6f} {verdict.max_logprob_error:11.2e} {verdict.max_value_error:10.2e}  "
            f"{verdict.verdict}"
        )
    lines.append(f"{thresholds(verdicts[0])} (reference: a plain no-cache forward of x:y:tau per candidate)")
    auto = [verdict for verdict in verdicts if verdict.requested == "auto/auto" and verdict.refusal is None]
    if auto:
        lines.append(f"auto runs the {auto[0].forward} forward with {auto[0].batching!r} candidate batching")
    return "\n".join(lines)


def thresholds(verdict: PathVerdict) -> str:
    """The verdict's thresholds and how they were set, as one phrase."""
    return (
        f"thresholds: cosine >= {verdict.min_cosine_allowed:.6g}, "
        f"|dlogp| and |dv|/tok <= {verdict.max_error_allowed:.3g} ({verdict.tolerance_basis})"
    )


def add_check_model_subcommand(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``check-model`` on a CLI's subparsers; the parsed namespace's ``func`` runs it."""
    parser = subparsers.add_parser(
        "check-model",
        help="check a causal LM's cached env steps against its own no-cache forward",
        description=__doc__.splitlines()[0] + " Exits 1 on a mismatch (or when the env refuses the model).",
    )
    parser.add_argument("model", help="local directory (safetensors), stories260K or a cached hub name")
    parser.add_argument(
        "--steps", type=int_at_least(1), default=20, help="observation rows compared per path (default 20)"
    )
    parser.add_argument("--dtype", default="float32", help="float32 (default), bfloat16, float16 or float64")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--attn-implementation", default="auto", help="attention kernel (default auto)")
    parser.add_argument("--max-length", type=int_at_least(1), default=8, help="L of the episodes (default 8)")
    parser.add_argument("--top-k", type=int_at_least(1), default=4, help="k candidates per step (default 4)")
    parser.add_argument("--queries", default=None, help="query source (default: the built-in story openings)")
    parser.add_argument("--query-column", default=None, help="CSV column of the queries (a CSV --queries)")
    parser.add_argument("--query-field", default=None, help="JSONL field of the queries, a dotted path")
    parser.add_argument(
        "--query-truncation", default="none", choices=("none", "left"), help="over-long queries: refuse or keep the end"
    )
    parser.add_argument("--seed", type=int_at_least(0), default=0, help="seeds the episodes and the random actions")
    parser.add_argument(
        "--fixed-length",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="EOS only at position L, or anywhere with --no-fixed-length (default: the env's default)",
    )
    parser.add_argument("--trust-remote-code", action="store_true", help="run code shipped with the model")
    parser.set_defaults(func=check_model_command)
    return parser


def check_model_command(args: argparse.Namespace) -> int:
    """Run ``tbg check-model``: print the verdict table.

    Returns:
        0 when every path matches or is refused (and auto is not refused), 1 on a mismatch or when
        the envs refuse the model, 2 when the model cannot be loaded or an argument is bad.
    """
    import sys

    from tokenized_bandit_gym.llm.load_language_model import load_language_model

    try:
        if args.steps < 1:
            raise ValueError(f"--steps must be at least 1, got {args.steps}")
        model, tokenizer = load_language_model(
            args.model, args.dtype, args.device, args.trust_remote_code, args.attn_implementation
        )
    except (ValueError, TypeError) as error:
        print(f"tbg check-model: error: {error}", file=sys.stderr)
        return 2
    config = model.config.get_text_config()
    print(
        f"check-model {args.model}: model_type={config.model_type}, dtype={args.dtype}, device={args.device}, "
        f"attention kernel {model.config._attn_implementation}"
    )
    extra = {"query_column": args.query_column, "query_field": args.query_field}
    if args.fixed_length is not None:
        extra["fixed_length"] = args.fixed_length
    try:
        verdicts = check_language_model(
            model, tokenizer, steps=args.steps, seed=args.seed, max_length=args.max_length, top_k=args.top_k,
            queries=args.queries, query_truncation=args.query_truncation,
            **{key: value for key, value in extra.items() if value is not None},
        )  # fmt: skip
    except (ValueError, TypeError) as error:  # a bad query source or column, or an env keyword it does not take
        print(f"tbg check-model: error: {error}", file=sys.stderr)
        return 2
    print(format_verdicts(verdicts))
    usable = all(verdict.refusal is None for verdict in verdicts if verdict.requested == "auto/auto")
    mismatch = any(verdict.verdict == "MISMATCH" for verdict in verdicts)
    outcome = "MISMATCH" if mismatch else "REFUSED by the envs" if not usable else "OK"
    print(f"verdict: {outcome}; {thresholds(verdicts[0])}")
    return 1 if mismatch or not usable else 0
