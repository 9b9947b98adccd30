"""The env contract, written once for every shell: the action check with the forced EOS, the round summary.

What users read of it is in docs/ENVIRONMENTS.md, and how the shells share it in docs/ARCHITECTURE.md,
"The env contract, written once". The single envs (synthetic and LLM, one round), the native vector
envs (N rounds: the NumPy host batch and the torch path) and, through the single envs, the
PettingZoo arena all call these functions, so a change to the contract is one edit here:

* :func:`observation_space` and :func:`observation`: the flat ``Dict`` observation, its keys and
  spaces (one round, or N rows of it);
* :func:`check_action` (one round) and :func:`forced_and_refused` (N rounds, NumPy or torch): an
  action must be an allowed candidate; at position L a masked one becomes the forced EOS, unless
  ``strict_actions``;
* :class:`InfoSchema` and :func:`round_summary`: the info schema, the same keys with the same
  dtypes and shapes in every step from reset to the round's last (``response`` padded to L with
  ``response_length`` beside it), holding documented fill values until the round ends, and no
  strings (replay buffers and dataset recorders store every step's info);
* :func:`observation_row` and :func:`summary_row`: one row of a batch's observation or round
  summary in the one-round form (what a single env and an arena player report), and
  :func:`step_reward_and_info` / :func:`round_start_info`: a one-round step's reward and info;
* :func:`token_image`: the ``"rgb_array"`` rendering.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, TypeVar, cast

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from tokenized_bandit_gym.core.noise_model import NoiseModel
from tokenized_bandit_gym.core.round_streams import RoundStreams
from tokenized_bandit_gym.core.validation import check_reset_seed

Rows = TypeVar("Rows", np.ndarray, torch.Tensor)

ROUND_VALUE_KEYS = ("utility", "optimal_utility", "regret", "oracle_greedy_utility", "noise")
"""The round summary's float entries, in :func:`round_summary`'s order (host batches keep them as rows of a buffer)."""
_RESPONSE_KEYS = ("response", "optimal_response")
_GROUPED_KEYS = frozenset(ROUND_VALUE_KEYS + _RESPONSE_KEYS)
TOKEN_FILL = -1
"""What ``response`` and ``optimal_response`` hold until the round ends (not a token id)."""


@dataclass(frozen=True)
class InfoSchema:
    """The info entries of one env: the same keys, dtypes and shapes in every step, reset included.

    Every step's ``info`` holds ``query_index`` (int), ``forced_eos`` (bool; False at reset),
    ``round_ended`` (bool: whether the round ended in this step) and the round summary of
    :func:`round_summary`. Until the round ends the summary holds fill values: 0.0 for the float
    entries (``utility``, ``optimal_utility``, ``regret``, ``oracle_greedy_utility``, ``noise``,
    ``response_logprob``), 0 for ``response_length``, zeros for ``response_embedding`` and
    :data:`TOKEN_FILL` (-1) for every token of ``response`` and ``optimal_response``. The fills
    are zeros rather than NaN because Tianshou's trainer refuses a replay buffer holding any NaN;
    a sum of ``regret`` over every step is the cumulative regret. Nothing is a string: the
    benchmark's kind is the env's ``optimal_kind`` attribute, an LLM response's text its
    ``response_text(info["response"])``.

    Args:
        max_length: L, the width of ``response`` and ``optimal_response``.
        embedding_dim: the width of ``response_embedding`` where the problem has features, else None.
        response_logprob: whether ``response_logprob`` (the LLM's ``log p(y | x)``) is reported.
        pairwise: whether the comparison's entries are reported (pairwise feedback, see
            :mod:`~tokenized_bandit_gym.envs.pairwise_feedback`): ``utilities`` ``(2,)`` float64
            (fill zeros), ``preferred`` int (fill 0) and ``regret_weak`` float (fill 0.0).
    """

    max_length: int
    embedding_dim: int | None = None
    response_logprob: bool = False
    pairwise: bool = False

    def pending(self, num_rows: int | None = None, device: torch.device | None = None) -> dict[str, Any]:
        """The round summary's fill values (new arrays), keyed and typed as :func:`round_summary` returns it.

        Args:
            num_rows: None for the one-round form (Python scalars, ``(L,)`` arrays), else B rows
                (``(B,)`` and ``(B, L)`` NumPy arrays).
            device: with ``num_rows``, tensors on this device instead of NumPy arrays.
        """
        if num_rows is None:
            pending = self.pending_step(0, False)
            del pending["query_index"], pending["forced_eos"]
            return pending
        return self._rows_pending(num_rows, device)

    def pending_step(self, query_index: int, forced_eos: bool) -> dict[str, Any]:
        """A one-round step's info before its round ends: ``query_index``, ``forced_eos``, then :meth:`pending`.

        A copy of a template with new arrays (every step of a single env makes one).
        """
        pending = self._one_round_step_pending.copy()
        pending["query_index"] = query_index
        pending["forced_eos"] = forced_eos
        for key in self._one_round_arrays:
            pending[key] = pending[key].copy()
        return pending

    @functools.cached_property
    def _one_round_step_pending(self) -> dict[str, Any]:
        """The one-round fill values led by placeholders of a step's own entries (read only: copied)."""
        return {"query_index": 0, "forced_eos": False, **self._rows_pending(None, None)}

    @functools.cached_property
    def _one_round_arrays(self) -> tuple[str, ...]:
        """The keys of the one-round form's array entries."""
        return tuple(key for key, value in self._one_round_step_pending.items() if isinstance(value, np.ndarray))

    def _rows_pending(self, num_rows: int | None, device: torch.device | None) -> dict[str, Any]:
        """The fill values of :meth:`pending`, built afresh."""
        rows = () if num_rows is None else (num_rows,)
        floats = np.zeros((len(ROUND_VALUE_KEYS), *rows))  # (5, B) one buffer, one row per entry
        tokens = np.full((len(_RESPONSE_KEYS), *rows, self.max_length), TOKEN_FILL, dtype=np.int64)  # (2, B, L)
        pending: dict[str, Any] = dict(zip(ROUND_VALUE_KEYS, floats if rows else [0.0] * len(floats), strict=True))
        pending["response"], pending["optimal_response"] = tokens
        pending["response_length"] = np.zeros(rows, dtype=np.int64) if rows else 0
        if self.response_logprob:
            pending["response_logprob"] = np.zeros(rows) if rows else 0.0
        if self.embedding_dim is not None:
            pending["response_embedding"] = np.zeros((*rows, self.embedding_dim), dtype=np.float32)
        if self.pairwise:
            pending["utilities"] = np.zeros((*rows, 2))
            pending["preferred"] = np.zeros(rows, dtype=np.int64) if rows else 0
            pending["regret_weak"] = np.zeros(rows) if rows else 0.0
        pending["round_ended"] = np.zeros(rows, dtype=bool) if rows else False
        if device is None or num_rows is None:
            return pending
        return {key: torch.from_numpy(value).to(device) for key, value in pending.items()}


def validate_action(action: object, num_actions: int) -> int:
    """Return ``action`` as an ``int`` in ``[0, num_actions)`` or raise naming it.

    Integers (Python, NumPy, 0-d integer arrays and tensors) are accepted; bools, floats
    (even integral ones), NaN and out-of-range values are not.

    Raises:
        TypeError: not an integer.
        ValueError: NaN, negative or ``>= num_actions``.
    """
    if type(action) is int or isinstance(action, np.integer):  # the usual cases, checked first
        if not 0 <= action < num_actions:
            raise ValueError(f"action {int(action)} is out of range: it must lie in [0, {num_actions})")
        return int(action)
    value = action
    if isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim == 0:
        value = value.item()
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"action must be an integer token index, got the bool {action!r}")
    if isinstance(value, Real) and not isinstance(value, Integral):
        if math.isnan(float(value)):
            raise ValueError(f"action must be an integer token index, got NaN ({action!r})")
        raise TypeError(f"action must be an integer token index, got the float {action!r}")
    if not isinstance(value, Integral):
        raise TypeError(f"action must be an integer token index, got {action!r} ({type(action).__name__})")
    index = int(value)
    if not 0 <= index < num_actions:
        raise ValueError(f"action {index} is out of range: it must lie in [0, {num_actions})")
    return index


def observation_space(
    *,
    vocab_size: int,
    query_width: int,
    max_length: int,
    num_candidates: int,
    candidate_embeddings: spaces.Box | None = None,
    candidate_logprobs: bool = False,
    pairwise: bool = False,
) -> spaces.Dict:
    """The observation space of one round: a flat ``Dict`` an SB3 policy takes.

    What each key holds: docs/ARCHITECTURE.md, "The env contract, written once".

    Args:
        vocab_size: n (token ids lie in ``[0, n)``).
        query_width: Lq, the padded query length.
        max_length: L.
        num_candidates: k.
        candidate_embeddings: the ``(k, d)`` float32 features' space, where the problem has features.
        candidate_logprobs: include the candidates' ``(k,)`` log-probabilities (LLM envs).
        pairwise: include the round's first response under pairwise feedback: ``first_response``
            (``(L,)``, EOS while it is decoded) and ``first_length`` (0 while it is decoded).
    """
    observation: dict[str, spaces.Space[Any]] = {
        "query": spaces.MultiDiscrete(np.full(query_width, vocab_size, dtype=np.int64)),
        "query_length": spaces.Discrete(query_width + 1),
        "response": spaces.MultiDiscrete(np.full(max_length, vocab_size, dtype=np.int64)),
        "length": spaces.Discrete(max_length + 1),
        "candidate_tokens": spaces.MultiDiscrete(np.full(num_candidates, vocab_size, dtype=np.int64)),
        "action_mask": spaces.MultiBinary(num_candidates),
    }
    if candidate_embeddings is not None:
        observation["candidate_embeddings"] = candidate_embeddings
    if candidate_logprobs:
        observation["candidate_logprobs"] = spaces.Box(-np.inf, 0.0, shape=(num_candidates,), dtype=np.float32)
    if pairwise:
        observation["first_response"] = spaces.MultiDiscrete(np.full(max_length, vocab_size, dtype=np.int64))
        observation["first_length"] = spaces.Discrete(max_length + 1)
    return spaces.Dict(observation)


def observation(
    *,
    query: Any,
    query_length: Any,
    response: Any,
    length: Any,
    candidate_tokens: Any,
    action_mask: Any,
    candidate_embeddings: Any = None,
    candidate_logprobs: Any = None,
) -> dict[str, Any]:
    """One observation (one round, or N rows of arrays or tensors), keyed as :func:`observation_space`.

    Args:
        query: ``(Lq,)`` the query's token ids, padded with EOS.
        query_length: its length.
        response: ``(L,)`` the response so far, padded with EOS.
        length: its length.
        candidate_tokens: ``(k,)`` the candidates' token ids.
        action_mask: ``(k,)`` int8, the allowed actions.
        candidate_embeddings: ``(k, d)`` float32 features (zeros once the response is complete), if any.
        candidate_logprobs: ``(k,)`` float32 log-probabilities (zeros once complete), if observed.
    """
    observed = {  # in the space's (sorted) key order, so no shell reorders; one dict display (every step)
        "action_mask": action_mask,
        "candidate_embeddings": candidate_embeddings,
        "candidate_logprobs": candidate_logprobs,
        "candidate_tokens": candidate_tokens,
        "length": length,
        "query": query,
        "query_length": query_length,
        "response": response,
    }
    if candidate_embeddings is None:
        del observed["candidate_embeddings"]
    if candidate_logprobs is None:
        del observed["candidate_logprobs"]
    return observed


def rows_observation(problem: Any, state: Any, candidate_tokens: Any, **candidate_entries: Any) -> dict[str, Any]:
    """N rows' observation from their problem and state: the query, response and length read off them.

    Args:
        problem: holds ``query_tokens`` ``(Q, Lq)`` and ``query_lengths`` ``(Q,)``.
        state: holds ``queries`` ``(N,)``, ``tokens`` ``(N, L)`` and ``lengths`` ``(N,)`` (copied).
        candidate_tokens: ``(N, k)`` (copied).
        **candidate_entries: :func:`observation`'s ``action_mask`` ``(N, k)`` int8 and, if any,
            ``candidate_embeddings`` ``(N, k, d)`` and ``candidate_logprobs`` ``(N, k)`` float32.
    """
    return observation(
        query=problem.query_tokens[state.queries],  # (N, Lq)
        query_length=problem.query_lengths[state.queries],  # (N,)
        response=state.tokens.clone(),  # (N, L)
        length=state.lengths.clone(),  # (N,)
        candidate_tokens=candidate_tokens.clone(),  # (N, k)
        **candidate_entries,
    )


def forced_and_refused(
    allowed: Rows, lengths: Rows, stepping: Rows, max_length: int, strict: bool
) -> tuple[Rows, Rows]:
    """The forced-EOS rule on N rows (NumPy arrays or tensors alike), ``(N,)`` bool each.

    Args:
        allowed: ``(N,)`` bool, whether each row's action is allowed by its mask.
        lengths: ``(N,)`` int, tokens chosen so far.
        stepping: ``(N,)`` bool, the rows that append a token in this step.
        max_length: L.
        strict: refuse a masked action at position L too.

    Returns:
        ``forced_eos`` (a masked action that becomes EOS, or is refused) and ``refused`` (a
        masked action before position L, or anywhere when ``strict``).
    """
    forced_eos = stepping & ~allowed  # (N,)
    return forced_eos, forced_eos & ((lengths < max_length - 1) | strict)


def check_action(action: object, mask: np.ndarray, length: int, max_length: int, strict: bool) -> tuple[int, bool]:
    """The action check with the forced EOS, for every single-row shell.

    What users are told of it: docs/ENVIRONMENTS.md, "Rounds, rewards and the forced EOS".

    Args:
        action: the agent's action (see :func:`validate_action`).
        mask: ``(k,)`` bool, the allowed actions now.
        length: tokens chosen so far.
        max_length: L.
        strict: raise on a masked action at position L too, instead of forcing EOS.

    Returns:
        The action to apply (at position L, a masked action becomes the only allowed one, EOS)
        and whether it was forced.

    Raises:
        TypeError: not an integer.
        ValueError: NaN, out of range, or masked (before position L, or anywhere when ``strict``).
    """
    if type(action) is int and 0 <= action < len(mask) and mask[action]:  # the usual case: an allowed int
        return action, False
    index = validate_action(action, len(mask))
    if mask[index]:
        return index, False
    _, refused = forced_and_refused(mask[index], np.int64(length), np.True_, max_length, strict)
    if refused:
        raise ValueError(
            f"action {index} is masked at position {length + 1}: allowed actions are {np.flatnonzero(mask).tolist()}"
        )
    return int(np.flatnonzero(mask)[0]), True  # the forced EOS: at position L only EOS is allowed


def round_summary(
    *,
    utility: Any,
    optimal_utility: Any,
    oracle_greedy_utility: Any,
    noise: Any,
    response: Any,
    response_length: Any,
    optimal_response: Any,
    response_embedding: Any = None,
    ended: np.ndarray | torch.Tensor | None = None,
    ended_rows: np.ndarray | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The info entries of rounds that ended, keyed as every env reports them.

    What users are told of them: docs/ENVIRONMENTS.md, "The info entries and regret".

    One round (``ended=None``): Python floats and ints, ``response``/``optimal_response`` ``(L,)``
    padded with EOS, ``round_ended`` True. N rounds: ``(N,)`` and ``(N, L)`` NumPy arrays or
    tensors, holding :class:`InfoSchema`'s fill values on the rows ``ended`` ``(N,)`` bool says
    did not end, and ``round_ended`` a copy of ``ended``. ``regret`` is
    ``optimal_utility - utility``. The benchmark's kind is not an entry (no strings in info): it
    is the env's ``optimal_kind``.

    Args:
        utility: the noise-free ``u(x_t, y_t)``.
        optimal_utility: the benchmark's utility (the exact optimum, or the LLM's oracle).
        oracle_greedy_utility: greedy decoding with the true utility.
        noise: ``eta_t``.
        response: the response's token ids, padded to L with EOS.
        response_length: ``|y_t|``.
        optimal_response: the benchmark's response, padded to L with EOS.
        response_embedding: ``e(x_t, y_t)`` where the family has features (else left out).
        ended: N rounds: the rows whose round ended in this step.
        ended_rows: ``(E,)`` the indices of the rows ``ended`` (ascending), when the NumPy arrays
            hold those rows only (``(E, ...)``, computed on them alone); they are scattered into
            zeros of N rows.
        **extra: further numeric entries of the env (the LLM's ``response_logprob``), each listed
            by its :class:`InfoSchema`.
    """
    summary: dict[str, Any] = {
        "utility": utility,
        "optimal_utility": optimal_utility,
        "regret": optimal_utility - utility,
        "oracle_greedy_utility": oracle_greedy_utility,
        "noise": noise,
        "response": response,
        "response_length": response_length,
        "optimal_response": optimal_response,
        **extra,
    }
    if response_embedding is not None:
        summary["response_embedding"] = response_embedding
    if ended is None:
        summary["round_ended"] = True
        return summary
    if isinstance(ended, torch.Tensor):  # no host round trip: one where per group of entries
        for keys, fill in ((ROUND_VALUE_KEYS, 0), (_RESPONSE_KEYS, TOKEN_FILL)):
            values = [summary[key] for key in keys]
            if all(isinstance(value, torch.Tensor) for value in values):
                stacked = torch.stack(values)  # (K, N, ...)
                masked = torch.where(ended.reshape(1, -1, *[1] * (stacked.dim() - 2)), stacked, fill)
                summary.update(zip(keys, masked, strict=True))
        for key, value in summary.items():
            if key not in _GROUPED_KEYS and isinstance(value, torch.Tensor):
                summary[key] = torch.where(ended.reshape(-1, *[1] * (value.dim() - 1)), value, 0)
        summary["round_ended"] = ended.clone()
        return summary
    # On the host every entry is a new array: fill values, with a row copy of the ended rows.
    compact = ended_rows is not None
    index = ended_rows if ended_rows is not None else ended.nonzero()[0]  # (E,) the ended rows
    num_rows = len(ended)
    for key, value in summary.items():
        if type(value) is not np.ndarray:
            continue
        fill, dtype = _HOST_FILLS.get(key, (0, value.dtype))
        if fill:
            filled = np.empty((num_rows, *value.shape[1:]), dtype=dtype)
            filled.fill(fill)
        else:
            filled = np.zeros((num_rows, *value.shape[1:]), dtype=dtype)
        filled[index] = value if compact else value.take(index, axis=0)  # rounded to dtype as a cast would
        summary[key] = filled
    summary["round_ended"] = ended.copy()
    return summary


_HOST_FILLS: dict[str, tuple[int, type[np.generic]]] = {
    **dict.fromkeys(ROUND_VALUE_KEYS, (0, np.float64)),
    **dict.fromkeys(_RESPONSE_KEYS, (TOKEN_FILL, np.int64)),
    "response_embedding": (0, np.float32),  # a float64 carry is rounded to it
}
"""The host entries' fill value and dtype (the schema's); any other entry keeps its dtype and fills with 0."""


def step_reward_and_info(
    query_index: int, forced_eos: bool, summary: dict[str, Any] | None, noise: float, schema: InfoSchema
) -> tuple[float, dict[str, Any]]:
    """The reward and info of one round's step (docs/ENVIRONMENTS.md), for every one-round shell.

    Until the round ends: reward 0, ``query_index``, ``forced_eos`` and the schema's fill values.
    The step that ends it: ``u(x_t, y_t) + eta_t`` and the round summary.

    Args:
        query_index: the round's query.
        forced_eos: whether the action was replaced by the forced EOS.
        summary: the round summary in the one-round form (:func:`round_summary` or
            :func:`summary_row`) when the round ended in this step, else None.
        noise: ``eta_t``.
        schema: the env's info schema.
    """
    if summary is None:
        return 0.0, schema.pending_step(int(query_index), bool(forced_eos))
    info: dict[str, Any] = {"query_index": int(query_index), "forced_eos": bool(forced_eos), **summary}
    return info["utility"] + noise, info


def start_round_streams(
    env: gym.Env[Any, Any], streams: RoundStreams | None, seed: object, num_queries: int, noise: NoiseModel
) -> tuple[RoundStreams, int, float]:
    """A single env's ``reset(seed=seed)`` up to its new round: the streams it uses, the query index and the noise.

    ``seed`` is checked (:func:`~tokenized_bandit_gym.core.validation.check_reset_seed`), Gymnasium's
    ``np_random`` seeded with it, and the streams reseeded by it (without one they go on, and an env that has none
    yet seeds them from ``np_random``: :meth:`RoundStreams.on_reset`); then the round's query and noise are drawn.

    Raises:
        TypeError: ``seed`` is a bool or not an integer.
        ValueError: ``seed`` is negative.
    """
    checked = check_reset_seed(seed)
    gym.Env.reset(env, seed=checked)
    if checked is not None or streams is None:  # else the streams go on (no call, no np_random lookup)
        streams = RoundStreams.on_reset(streams, checked, env.np_random)
    query, round_noise = streams.draw(num_queries, noise)
    return streams, query, round_noise


def round_start_info(query_index: int, schema: InfoSchema) -> dict[str, Any]:
    """The info of a one-round reset: ``query_index``, ``forced_eos`` False and the schema's fill values."""
    return schema.pending_step(int(query_index), False)  # step_reward_and_info's info before the round ends


def observation_row(observed: dict[str, Any], row: int) -> dict[str, Any]:
    """Row ``row`` of a batched observation (arrays or tensors) in the one-round form.

    Every entry becomes a host array, a view of row ``row`` of the batch's own (new) array; the
    ``(B,)`` entries (``query_length``, ``length``) become ``np.int64`` scalars, as the
    ``Discrete`` spaces hold them.
    """
    return {key: _host_row(value, row, copy=False) for key, value in observed.items()}


def summary_row(summary: dict[str, Any], row: int) -> dict[str, Any]:
    """Row ``row`` of a batched round summary (arrays or tensors) in the one-round form.

    ``(B,)`` entries become Python floats, ints and bools, ``(B, ...)`` entries new host arrays.
    """
    values: dict[str, Any] = {}
    for key, value in summary.items():
        if isinstance(value, (bool, int, float)):  # one value for every row (``round_ended`` at B = 1)
            values[key] = value
            continue
        entry = _host_row(value, row)
        values[key] = entry.item() if isinstance(entry, np.generic) else entry
    return values


def _host_row(value: np.ndarray | torch.Tensor, row: int, copy: bool = True) -> Any:
    """``value[row]`` on the host: an array (new if ``copy``), or a NumPy scalar for a ``(B,)`` entry."""
    if type(value) is not np.ndarray:  # a tensor: one host view of the batch, no torch op per row
        value = cast(torch.Tensor, value).cpu().numpy()
    entry = value[row]
    if type(entry) is np.ndarray:
        return entry.copy() if copy else entry
    return entry


def check_render_mode(render_mode: str | None, render_modes: list[str]) -> str | None:
    """``render_mode`` when it is None or one of the env's ``render_modes``, else a ValueError naming it."""
    if render_mode is not None and render_mode not in render_modes:
        raise ValueError(f"render_mode must be None or one of {render_modes}, got {render_mode!r}")
    return render_mode


def token_image(rows: list[list[int]], eos_token_id: int, width: int) -> np.ndarray:
    """One 8x8 cell per token, coloured by token id (EOS black, padding white): ``(8 * len(rows), 8 * width, 3)`` uint8.

    The ``"rgb_array"`` rendering of every env (what SB3's ``make_vec_env`` asks for).
    """
    cell = 8
    image = np.full((cell * len(rows), cell * width, 3), 255, dtype=np.uint8)
    for row_index, tokens in enumerate(rows):
        for column, token in enumerate(tokens):
            colour = 0 if token == eos_token_id else _token_colour(token)
            top, left = row_index * cell, column * cell
            image[top : top + cell - 1, left : left + cell - 1] = colour
    return image


@functools.lru_cache(maxsize=4096)
def _token_colour(token: int) -> np.ndarray:
    """The ``(3,)`` colour of a token's cell: seeded by its id, drawn once per token (read, never write)."""
    colour = np.random.default_rng(token).integers(64, 256, size=3)
    colour.flags.writeable = False
    return colour
