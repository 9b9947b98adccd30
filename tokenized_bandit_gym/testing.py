"""Conformance checks a user runs on their own env id, utility family or agent (PettingZoo's ``api_test`` for us).

One call runs them all and raises :class:`ConformanceError` naming the check, the env id (or agent)
and the first difference found::

    from tokenized_bandit_gym.testing import check_agent, check_env_id, check_family

    check_env_id("TokenizedLinearBandit-v0")                      # an id (yours, once registered)
    check_family("meanpool")                                      # every env kind that plays the family
    check_agent("my_agents:EpsilonGreedy", "TokenizedMultiArmedBandit-v0")  # an agent on a task

The checks, each also callable alone:

- :func:`check_gymnasium_api`, :func:`check_sb3_api`: Gymnasium's and Stable-Baselines3's ``check_env``.
- :func:`check_determinism`: same seeds, same trajectory, bit for bit; two policies with the same seed
  see the same queries and noise (common random numbers).
- :func:`check_pickling`, :func:`check_vector_pickling`: an env copied mid-round (pickle, cloudpickle,
  deepcopy: how multiprocessing, Ray, SuperSuit and Tianshou move it) goes on exactly as the original.
- :func:`check_info_schema`, :func:`check_vector_info_schema`: the same info keys, types, dtypes and
  shapes from reset to the last step, the documented fill values before a round ends, no strings.
- :func:`check_vector_matches_single`, :func:`check_autoreset_matches_sync`: the native vector env is N
  single envs, bit for bit (within ``atol`` on floats where the envs run a batched LLM forward).
- :func:`check_problem_protocol`: the instance implements the problem Protocol and its calls agree.
- :func:`check_fork_safety` (not in :func:`check_env_id` by default: it starts a fresh interpreter):
  forked vector-env workers step after the parent stepped an env, without a deadlock.
- :func:`check_agent`: the agent protocol (``reset``/``act``/``update``, or the batched one), same seed
  same actions, and every action an index the action mask allows (the forced EOS at position L aside).

The project's own tests run every check on every registered id and agent, so what passes here is what
the project holds itself to.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np

from tokenized_bandit_gym.registration import LLM_ENVS, load_agent_class

if TYPE_CHECKING:
    from tokenized_bandit_gym.envs.tokenized_bandit_vector_env import TokenizedBanditVectorEnv

LLM_FLOAT_ATOL = 1e-4
"""Float tolerance of vector = single on the LLM ids: a batched forward over a padded cache rounds
differently from a batch of one; tokens, actions and flags stay exact."""

TOKEN_ENTRIES = ("response", "optimal_response")
"""Info entries of token ids: filled with -1 before a round ends (every other round entry with 0 or False)."""

COPIERS: dict[str, Callable[[Any], Any]] = {
    "pickle": lambda env: pickle.loads(pickle.dumps(env)),
    "cloudpickle": lambda env: _cloudpickle().loads(_cloudpickle().dumps(env)),
    "deepcopy": copy.deepcopy,
}
"""How an env travels: pickle (multiprocessing), cloudpickle (SuperSuit, Ray, Tianshou workers), deepcopy."""


class ConformanceError(Exception):
    """A conformance check failed.

    Attributes:
        check: the check's name (``"determinism"``, ``"info schema"``, ...).
        subject: the env id, family or agent checked.
        detail: the first difference found, or what was refused.
    """

    def __init__(self, check: str, subject: str, detail: str) -> None:
        self.check, self.subject, self.detail = check, subject, detail
        super().__init__(f"{check} check failed on {subject}: {detail}")


def _cloudpickle() -> Any:
    import cloudpickle

    return cloudpickle


def first_difference(first: Any, second: Any, where: str = "", atol: float = 0.0) -> str | None:
    """Where two nested values (dicts, lists, tuples, arrays, tensors, scalars) first differ, or None.

    Arrays compare element by element with NaN equal to NaN and their shapes equal; with ``atol > 0``
    floating arrays may differ by ``atol`` (``rtol = 0``), everything else stays exact.

    Args:
        first: the value found.
        second: the value expected.
        where: a name for the top level, prefixed to the path in the answer.
        atol: absolute tolerance on floating values.

    Returns:
        ``"PATH: FOUND != EXPECTED"`` for the first difference, None when the values agree.
    """
    if isinstance(second, dict):
        if not isinstance(first, dict) or first.keys() != second.keys():
            found_keys = sorted(first) if isinstance(first, dict) else type(first).__name__
            return f"{where or 'value'}: keys {found_keys} != {sorted(second)}"
        for key in second:
            difference = first_difference(first[key], second[key], f"{where}[{key!r}]", atol)
            if difference is not None:
                return difference
        return None
    if isinstance(second, (list, tuple)):
        if not isinstance(first, (list, tuple)) or len(first) != len(second):
            return f"{where or 'value'}: {first!r} != {second!r}"
        for index, (one, other) in enumerate(zip(first, second, strict=True)):
            difference = first_difference(one, other, f"{where}[{index}]", atol)
            if difference is not None:
                return difference
        return None
    found, expected = _host(first), _host(second)
    if found.shape != expected.shape:
        return f"{where or 'value'}: shape {found.shape} != {expected.shape}"
    if atol and expected.dtype.kind == "f":
        if not np.allclose(found, expected, rtol=0.0, atol=atol, equal_nan=True):
            return f"{where or 'value'}: {found!r} != {expected!r} (atol {atol})"
        return None
    numeric = expected.dtype.kind in "fc" and found.dtype.kind in "fc"
    if not np.array_equal(found, expected, equal_nan=numeric):
        return f"{where or 'value'}: {found!r} != {expected!r}"
    return None


def _host(value: Any) -> np.ndarray:
    """A value as a host NumPy array (torch tensors copied off their device)."""
    torch = sys.modules.get("torch")  # a tensor exists only where torch is imported
    if torch is not None and isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def _require_same(check: str, subject: str, found: Any, expected: Any, where: str = "", atol: float = 0.0) -> None:
    difference = first_difference(found, expected, where, atol)
    if difference is not None:
        raise ConformanceError(check, subject, difference)


def _require(check: str, subject: str, holds: bool, detail: str) -> None:
    if not holds:
        raise ConformanceError(check, subject, detail)


def random_trajectory(env: gym.Env[Any, Any], seed: int, policy_seed: int, rounds: int = 3) -> list[tuple[Any, ...]]:
    """``rounds`` episodes of a seeded random policy over the allowed actions, from ``env.reset(seed=seed)``.

    Args:
        env: a tokenized bandit env (wrapped or not).
        seed: the first reset's seed (later resets are unseeded: the env's streams go on).
        policy_seed: seeds the policy.
        rounds: episodes to play.

    Returns:
        ``("reset", query_index, observation)`` at each reset and ``(action, reward, observation, info)``
        at each step.

    Raises:
        ConformanceError: a step returned ``truncated`` other than False.
    """
    rng = np.random.default_rng(policy_seed)
    trajectory: list[tuple[Any, ...]] = []
    observation, info = env.reset(seed=seed)
    for round_index in range(rounds):
        if round_index:
            observation, info = env.reset()
        trajectory.append(("reset", info["query_index"], observation))
        terminated = False
        while not terminated:
            action = int(rng.choice(np.flatnonzero(observation["action_mask"])))
            observation, reward, terminated, truncated, info = env.step(action)
            _require("episode end", _name(env), truncated is False, f"truncated is {truncated!r}, not False")
            trajectory.append((action, reward, observation, info))
    return trajectory


def _name(env: Any) -> str:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None else type(env.unwrapped).__name__


def _subject(env_id: str, kwargs: dict[str, Any]) -> str:
    return f"{env_id} {kwargs}" if kwargs else env_id


def check_gymnasium_api(env_id: str, **kwargs: Any) -> None:
    """Gymnasium's ``check_env`` (render checks included) on ``gym.make(env_id, **kwargs)``; a warning fails it."""
    from gymnasium.utils.env_checker import check_env

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", category=UserWarning)
            check_env(gym.make(env_id, **kwargs).unwrapped, skip_render_check=False)
    except (AssertionError, UserWarning) as error:
        raise ConformanceError("gymnasium check_env", _subject(env_id, kwargs), str(error)) from error


def check_sb3_api(env_id: str, **kwargs: Any) -> None:
    """Stable-Baselines3's ``check_env`` on ``gym.make(env_id, **kwargs)``."""
    from stable_baselines3.common.env_checker import check_env

    try:
        check_env(gym.make(env_id, **kwargs).unwrapped, warn=True)
    except AssertionError as error:
        raise ConformanceError("SB3 check_env", _subject(env_id, kwargs), str(error)) from error


def check_determinism(env_id: str, rounds: int = 3, **kwargs: Any) -> None:
    """Same seeds, same trajectory; and the same queries and noise whatever the actions (common random numbers).

    Args:
        env_id: a registered id.
        rounds: episodes played (the common-random-numbers part plays twice as many).
        **kwargs: passed to ``gym.make``.
    """
    subject = _subject(env_id, kwargs)
    first = random_trajectory(gym.make(env_id, **kwargs), seed=7, policy_seed=1, rounds=rounds)
    second = random_trajectory(gym.make(env_id, **kwargs), seed=7, policy_seed=1, rounds=rounds)
    _require_same("determinism", subject, second, first, "trajectory")

    def queries_and_noise(policy_seed: int) -> list[list[Any]]:
        steps = random_trajectory(gym.make(env_id, **kwargs), seed=11, policy_seed=policy_seed, rounds=2 * rounds)
        queries = [step[1] for step in steps if step[0] == "reset"]
        noise = [step[3]["noise"] for step in steps if step[0] != "reset" and step[3]["round_ended"]]
        return [queries, noise]

    _require_same("common random numbers", subject, queries_and_noise(2), queries_and_noise(1), "[queries, noise]")


def _carry_on(env: gym.Env[Any, Any], policy_seed: int, rounds: int = 3) -> list[tuple[Any, ...]]:
    """Finish the round in progress, then play ``rounds`` more without reseeding (the env's own streams go on)."""
    rng = np.random.default_rng(policy_seed)
    trajectory: list[tuple[Any, ...]] = []
    for round_index in range(rounds + 1):
        if round_index:
            observation, info = env.reset()
            trajectory.append(("reset", info, observation))
        terminated = False
        while not terminated:
            action = int(rng.choice(np.flatnonzero(env.get_wrapper_attr("action_masks")())))
            observation, reward, terminated, _, info = env.step(action)
            trajectory.append((action, reward, observation, info))
    return trajectory


def check_pickling(env_id: str, copiers: Iterable[str] = tuple(COPIERS), **kwargs: Any) -> None:
    """An env copied in the middle of a round goes on exactly as the original (its round state and streams).

    Args:
        env_id: a registered id.
        copiers: names in :data:`COPIERS` (all of them by default).
        **kwargs: passed to ``gym.make``.
    """
    subject = _subject(env_id, kwargs)
    for copier in copiers:
        env = gym.make(env_id, **kwargs)
        observation, _ = env.reset(seed=3)
        not_eos = observation["candidate_tokens"] != env.unwrapped.eos_token_id  # type: ignore[attr-defined]
        env.step(int(np.flatnonzero(observation["action_mask"].astype(bool) & not_eos)[0]))  # the round goes on
        try:
            copied = COPIERS[copier](env)
        except (TypeError, pickle.PicklingError, AttributeError) as error:
            raise ConformanceError(f"pickling ({copier})", subject, f"the env does not copy: {error}") from error
        _require(f"pickling ({copier})", subject, copied.unwrapped is not env.unwrapped, "the copy is the original")
        expected = _carry_on(env, policy_seed=0)
        _require_same(f"pickling ({copier})", subject, _carry_on(copied, policy_seed=0), expected, "after the copy")


def check_vector_pickling(env_id: str, num_envs: int = 3, steps: int = 8, **kwargs: Any) -> None:
    """A native vector env copied with cloudpickle after one step goes on exactly as the original."""
    subject = _subject(env_id, kwargs)
    envs = gym.make_vec(env_id, num_envs, **kwargs)
    observation, _ = envs.reset(seed=4)
    envs.step(np.asarray(observation["action_mask"]).argmax(axis=1))
    copied = _cloudpickle().loads(_cloudpickle().dumps(envs))
    for step in range(steps):
        actions = np.asarray(observation["action_mask"]).argmax(axis=1)
        observation, *rest = envs.step(actions)
        _require_same("vector pickling", subject, list(copied.step(actions)), [observation, *rest], f"step {step}")


def info_signature(info: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """Each info entry's type, dtype and shape: what must not change over an episode."""
    return {key: (type(value), getattr(value, "dtype", None), np.shape(value)) for key, value in info.items()}


def _fill_value_problem(info: dict[str, Any], rows: Any = ...) -> str | None:
    """The first round entry of ``info`` (on ``rows``) that does not hold the schema's fill value, or None."""
    for key, value in info.items():
        if key.startswith("_") or key in ("query_index", "final_obs", "final_info"):
            continue
        entry = _host(value)[rows]
        expected = -1 if key in TOKEN_ENTRIES else 0
        if not (entry == expected).all():
            return f"info[{key!r}] is {entry!r} before the round ended, not the fill value {expected}"
    return None


def _without(info: dict[str, Any], key: str) -> dict[str, Any]:
    return {name: value for name, value in info.items() if name != key}


def check_info_schema(env_id: str, rounds: int = 3, **kwargs: Any) -> None:
    """Every step's info, reset included, has the same keys, types, dtypes and shapes; fill values before the end.

    What replay buffers and dataset recorders (Tianshou, Minari) need: they store every step's info.
    """
    subject = _subject(env_id, kwargs)
    env = gym.make(env_id, **kwargs)
    rng = np.random.default_rng(0)
    observation, info = env.reset(seed=0)
    expected = info_signature(info)
    strings = [key for key, value in info.items() if isinstance(value, str)]
    _require("info schema", subject, not strings, f"reset's info holds strings: {strings}")
    _require("info schema", subject, (problem := _fill_value_problem(info)) is None, f"at reset: {problem}")
    for round_index in range(rounds):
        terminated, step = False, 0
        while not terminated:
            observation, _, terminated, _, info = env.step(int(rng.choice(np.flatnonzero(observation["action_mask"]))))
            where = f"round {round_index} step {step}"
            _require_same("info schema", subject, info_signature(info), expected, f"{where} info signature")
            _require("info schema", subject, info["round_ended"] is terminated, f"{where}: round_ended != terminated")
            if not terminated:
                problem = _fill_value_problem(_without(info, "forced_eos"))
                _require("info schema", subject, problem is None, f"{where}: {problem}")
            step += 1
        regret = info["optimal_utility"] - info["utility"]
        close = abs(info["regret"] - regret) <= max(1e-6 * abs(regret), 1e-12)  # pytest.approx's tolerance
        _require("info schema", subject, close, f"regret {info['regret']!r} != u* - u = {regret!r}")
        ended = bool((info["response"] >= 0).all()) and info["response_length"] >= 1
        _require("info schema", subject, ended, f"round {round_index}'s response is not filled in at its end")
        observation, info = env.reset()
        _require_same("info schema", subject, info_signature(info), expected, f"reset {round_index + 1} info signature")


def check_vector_info_schema(env_id: str, array_backend: str = "numpy", num_envs: int = 3, **kwargs: Any) -> None:
    """The native vector env's infos: one signature over time, every ``_key`` mask True, fill values on live rows."""
    import torch

    subject = _subject(env_id, {"array_backend": array_backend, **kwargs})
    envs = gym.make_vec(env_id, num_envs, array_backend=array_backend, **kwargs)
    rng = np.random.default_rng(1)
    observation, infos = envs.reset(seed=0)
    expected = info_signature(infos)
    _require("vector info schema", subject, (problem := _fill_value_problem(infos)) is None, f"at reset: {problem}")
    ended = 0
    for step in range(12):
        masks = _host(observation["action_mask"]).astype(bool)
        actions = np.array([rng.choice(np.flatnonzero(mask)) for mask in masks])
        observation, _, terminated, _, infos = envs.step(
            torch.as_tensor(actions) if array_backend == "torch" else actions
        )
        where = f"step {step}"
        _require_same("vector info schema", subject, info_signature(infos), expected, f"{where} info signature")
        unmasked = [key for key in infos if not key.startswith("_") and not bool(_host(infos[f"_{key}"]).all())]
        _require("vector info schema", subject, not unmasked, f"{where}: _key masks not all True for {unmasked}")
        terminated = _host(terminated)
        _require_same("vector info schema", subject, _host(infos["round_ended"]), terminated, f"{where} round_ended")
        problem = _fill_value_problem(_without(infos, "forced_eos"), ~terminated)
        _require("vector info schema", subject, problem is None, f"{where}: {problem}")
        ended += int(terminated.sum())
    _require("vector info schema", subject, ended > 0, "no round ended in 12 steps")


def eos_actions(observations: dict[str, Any], eos: int) -> np.ndarray:
    """``(N,)`` the action that appends EOS in each row (``-1`` where EOS is not a candidate)."""
    is_eos = _host(observations["candidate_tokens"]) == eos  # (N, k)
    return np.where(is_eos.any(axis=1), is_eos.argmax(axis=1), -1)


def mixed_actions(rng: np.random.Generator, masks: Any, eos: np.ndarray) -> np.ndarray:
    """``(N,)`` mostly allowed actions, sometimes EOS, and any action wherever only EOS is allowed (the forced EOS).

    Args:
        rng: the policy's generator.
        masks: ``(N, k)`` the action masks.
        eos: ``(N,)`` from :func:`eos_actions`.
    """
    masks = _host(masks)
    actions = np.empty(masks.shape[0], dtype=np.int64)
    for row, mask in enumerate(masks.astype(bool)):
        allowed = np.flatnonzero(mask)
        eos_action = int(eos[row])
        if allowed.size == 1 and rng.random() < 0.5:
            actions[row] = rng.integers(masks.shape[1])  # any action at position L: the forced EOS
        elif eos_action >= 0 and mask[eos_action] and rng.random() < 0.15:
            actions[row] = eos_action
        else:
            actions[row] = rng.choice(allowed)
    return actions


class _SingleEnvRows:
    """N single envs driven with NEXT_STEP autoreset, the way SyncVectorEnv drives them."""

    def __init__(self, env_id: str, seeds: list[int], **kwargs: Any) -> None:
        self.envs = [gym.make(env_id, **kwargs) for _ in seeds]
        self.seeds = seeds
        self.autoreset = np.zeros(len(seeds), dtype=bool)

    def reset(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        results = [env.reset(seed=seed) for env, seed in zip(self.envs, self.seeds, strict=True)]
        self.autoreset[:] = False
        return [result[0] for result in results], [result[1] for result in results]

    def step(self, actions: np.ndarray) -> tuple[list[Any], np.ndarray, np.ndarray, list[dict[str, Any]]]:
        observations, rewards, terminated, infos = [], np.zeros(len(self.envs)), np.zeros(len(self.envs), bool), []
        for row, env in enumerate(self.envs):
            if self.autoreset[row]:
                observation, info = env.reset()
            else:
                observation, rewards[row], terminated[row], _, info = env.step(int(actions[row]))
            observations.append(observation)
            infos.append(info)
        self.autoreset = terminated.copy()
        return observations, rewards, terminated, infos


def _rows_difference(batched: dict[str, Any], singles: list[dict[str, Any]], atol: float, where: str) -> str | None:
    """Where row i of the vector observation first differs from single env i's observation."""
    for row, single in enumerate(singles):
        if set(batched) != set(single):
            return f"{where} observation keys {sorted(batched)} != {sorted(single)}"
        for key, value in single.items():
            difference = first_difference(batched[key][row], value, f"{where} observation[{key!r}] row {row}", atol)
            if difference is not None:
                return difference
    return None


def _infos_difference(batched: dict[str, Any], singles: list[dict[str, Any]], atol: float, where: str) -> str | None:
    """Where the vector infos first differ from the single envs' infos (keys, ``_key`` masks, values)."""
    keys = {key for info in singles for key in info}
    if {key for key in batched if not key.startswith("_")} != keys:
        return f"{where} info keys {sorted(key for key in batched if not key.startswith('_'))} != {sorted(keys)}"
    for key in sorted(keys):
        for row, info in enumerate(singles):
            if bool(batched[f"_{key}"][row]) != (key in info):
                return f"{where} info mask _{key} row {row} is {bool(batched[f'_{key}'][row])}"
            if key not in info:
                continue
            value = batched[key][row]
            if key == "response":
                padding = _host(value)[len(info[key]) :]
                if not np.all(padding == info[key][-1]):
                    return f"{where} info['response'] row {row} is not padded with EOS: {_host(value)!r}"
                value = value[: len(info[key])]
            difference = first_difference(value, info[key], f"{where} info[{key!r}] row {row}", atol)
            if difference is not None:
                return difference
    return None


def _atol(env_id: str, atol: float | None) -> float:
    return (LLM_FLOAT_ATOL if env_id in LLM_ENVS else 0.0) if atol is None else atol


def check_vector_matches_single(
    env_id: str, atol: float | None = None, steps: int | None = None, round_buffer: int | None = 4, **kwargs: Any
) -> None:
    """``gym.make_vec(env_id, 5)`` replays five single envs seeded alike, step by step, bit for bit.

    A mixed policy (allowed actions, early EOS, any action where the EOS is forced) runs several episodes
    per sub-env, ending apart (and across round-buffer refills).

    Args:
        env_id: an id with a ``vector_entry_point``.
        atol: float tolerance; None is 0 (bit for bit), or :data:`LLM_FLOAT_ATOL` on the LLM ids.
        steps: vector steps; None is 60 bit for bit, 30 within a tolerance.
        round_buffer: the vector env's ``round_buffer`` (rounds drawn ahead), None for its default.
        **kwargs: passed to both ``gym.make_vec`` and ``gym.make``.
    """
    atol = _atol(env_id, atol)
    subject = _subject(env_id, kwargs)
    seeds = [3, 11, 12, 40, 7]
    vector_kwargs: dict[str, Any] = {} if round_buffer is None else {"round_buffer": round_buffer}
    vector = gym.make_vec(env_id, len(seeds), vectorization_mode="vector_entry_point", **vector_kwargs, **kwargs)
    reference = _SingleEnvRows(env_id, seeds, **kwargs)
    observations, infos = vector.reset(seed=seeds)  # type: ignore[arg-type]  # gymnasium types it an int only
    expected_observations, expected_infos = reference.reset()

    def require_same_rows(where: str) -> None:
        difference = _rows_difference(observations, expected_observations, atol, where)
        difference = difference or _infos_difference(infos, expected_infos, atol, where)
        _require("vector = single", subject, difference is None, str(difference))

    require_same_rows("reset")
    rng = np.random.default_rng(0)
    eos = cast("TokenizedBanditVectorEnv", vector.unwrapped).eos_token_id
    episodes = np.zeros(len(seeds), dtype=int)
    for step in range(steps if steps is not None else (60 if atol == 0.0 else 30)):
        actions = mixed_actions(rng, observations["action_mask"], eos_actions(observations, eos))
        observations, rewards, terminated, truncated, infos = vector.step(actions)
        expected_observations, expected_rewards, expected_terminated, expected_infos = reference.step(actions)
        require_same_rows(f"step {step}")
        _require_same("vector = single", subject, rewards, expected_rewards, f"step {step} rewards", atol)
        _require_same("vector = single", subject, terminated, expected_terminated, f"step {step} terminated")
        _require("vector = single", subject, not _host(truncated).any(), f"step {step}: truncated {truncated!r}")
        episodes += _host(terminated)
    _require("vector = single", subject, episodes.min() >= 3, f"a sub-env ended fewer than 3 rounds: {episodes}")


def _vector_infos_difference(actual: dict[str, Any], expected: dict[str, Any], atol: float, where: str) -> str | None:
    """Gymnasium's vector infos, key by key: the same keys and masks, equal values (and dtypes) on the masked rows."""
    if actual.keys() != expected.keys():
        return f"{where} info keys {sorted(actual)} != {sorted(expected)}"
    for key in (key for key in expected if not key.startswith("_")):
        mask = _host(expected[f"_{key}"])
        difference = first_difference(actual[f"_{key}"], mask, f"{where} info mask _{key}")
        if difference is None and isinstance(expected[key], dict):  # final_info
            difference = _vector_infos_difference(actual[key], expected[key], atol, f"{where} {key}")
        elif difference is None and key == "final_obs":
            for row in np.flatnonzero(mask):
                batched = {name: value[None] for name, value in actual[key][row].items()}
                difference = difference or _rows_difference(batched, [expected[key][row]], atol, f"{where} {key}")
        elif difference is None:
            if _host(actual[key]).dtype != _host(expected[key]).dtype:
                return f"{where} info[{key!r}] dtype {_host(actual[key]).dtype} != {_host(expected[key]).dtype}"
            found, wanted = _host(actual[key])[mask], _host(expected[key])[mask]
            difference = first_difference(found, wanted, f"{where} info[{key!r}]", atol)
        if difference is not None:
            return difference
    return None


def check_autoreset_matches_sync(
    env_id: str, autoreset_mode: Any = "NextStep", atol: float | None = None, **kwargs: Any
) -> None:
    """The native vector env equals Gymnasium's SyncVectorEnv over single envs in ``autoreset_mode``.

    With ``DISABLED``, stepping past an ended round is refused (``ValueError`` naming ``reset_mask``)
    and ``reset(options={"reset_mask": ...})`` restarts the ended rows alike in both.

    Args:
        env_id: an id with a ``vector_entry_point``.
        autoreset_mode: a ``gymnasium.vector.AutoresetMode`` or its value (``"NextStep"``, ``"SameStep"``,
            ``"Disabled"``).
        atol: float tolerance; None is 0, or :data:`LLM_FLOAT_ATOL` on the LLM ids.
        **kwargs: passed to both ``gym.make_vec`` and ``gym.make``.
    """
    from gymnasium.vector import AutoresetMode

    mode = AutoresetMode(autoreset_mode)
    atol = _atol(env_id, atol)
    subject = _subject(env_id, {"autoreset_mode": mode.value, **kwargs})
    seeds: list[int | None] = [3, 11, 12, 40]
    native = gym.make_vec(env_id, num_envs=len(seeds), autoreset_mode=mode, round_buffer=4, **kwargs)
    sync = gym.vector.SyncVectorEnv([lambda: gym.make(env_id, **kwargs)] * len(seeds), autoreset_mode=mode)
    declared = (native.metadata["autoreset_mode"], cast("TokenizedBanditVectorEnv", native.unwrapped).autoreset_mode)
    _require("autoreset = sync", subject, declared == (mode, mode), f"declared autoreset modes {declared}")

    def require_same(
        observations: dict[str, Any], infos: dict[str, Any], expected: tuple[Any, ...], where: str
    ) -> None:
        difference = first_difference(observations, expected[0], f"{where} observation", atol)
        difference = difference or _vector_infos_difference(infos, expected[1], atol, where)
        _require("autoreset = sync", subject, difference is None, str(difference))

    observations, infos = native.reset(seed=seeds)  # type: ignore[arg-type]  # gymnasium types it an int only
    require_same(observations, infos, sync.reset(seed=seeds), "reset")
    rng = np.random.default_rng(0)
    eos = cast("TokenizedBanditVectorEnv", native.unwrapped).eos_token_id
    ended = 0
    for step in range(40 if atol == 0.0 else 16):
        actions = mixed_actions(rng, observations["action_mask"], eos_actions(observations, eos))
        observations, rewards, terminated, _, infos = native.step(actions)
        expected_observations, expected_rewards, expected_terminated, _, expected_infos = sync.step(actions)
        require_same(observations, infos, (expected_observations, expected_infos), f"step {step}")
        _require_same("autoreset = sync", subject, rewards, expected_rewards, f"step {step} rewards", atol)
        _require_same("autoreset = sync", subject, terminated, expected_terminated, f"step {step} terminated")
        ended += int(terminated.sum())
        if mode == AutoresetMode.DISABLED and terminated.any():
            try:
                native.step(actions)
            except ValueError as error:
                _require(
                    "autoreset = sync", subject, "reset_mask" in str(error), f"refusal names no reset_mask: {error}"
                )
            else:
                raise ConformanceError("autoreset = sync", subject, f"step {step}: stepped past an ended round")
            observations, infos = native.reset(options={"reset_mask": terminated})
            expected = sync.reset(options={"reset_mask": terminated.copy()})
            require_same(observations, infos, expected, f"step {step} reset")
    _require("autoreset = sync", subject, ended >= 4, f"only {ended} rounds ended")


def check_problem_protocol(env_id: str, **kwargs: Any) -> None:
    """``env.unwrapped.problem`` implements the problem Protocol, and its calls agree with each other."""
    import torch

    from tokenized_bandit_gym.core import TokenizedBanditProblem

    subject = _subject(env_id, kwargs)
    env = gym.make(env_id, **kwargs)
    problem = env.unwrapped.problem  # type: ignore[attr-defined]
    _require("problem protocol", subject, isinstance(problem, TokenizedBanditProblem), f"{problem!r} is not one")
    queries = torch.arange(min(problem.num_queries, 3))
    state = problem.initial_state(queries)
    mask = problem.action_mask(state)
    shape = (len(queries), env.action_space.n)  # type: ignore[attr-defined]
    _require("problem protocol", subject, mask.shape == shape and mask.dtype == torch.bool, f"action_mask {mask!r}")
    utilities = problem.candidate_utilities(state)
    _require("problem protocol", subject, utilities.shape == mask.shape, f"candidate_utilities {utilities.shape}")
    greedy = problem.greedy_decode(queries)
    responses = (len(queries), problem.max_length)
    _require("problem protocol", subject, greedy.responses.shape == responses, f"greedy {greedy.responses.shape}")

    def require_close(found: torch.Tensor, expected: torch.Tensor, where: str) -> None:
        _require(
            "problem protocol", subject, found.dtype == expected.dtype, f"{where}: {found.dtype} != {expected.dtype}"
        )
        _require_same("problem protocol", subject, found, expected, where, atol=1e-5)

    require_close(problem.utility(queries, greedy.responses), greedy.utility, "utility of the greedy responses")
    require_close(problem.oracle_greedy(queries).utility, greedy.utility, "oracle_greedy's utility")
    for _ in range(problem.max_length):  # the first allowed candidate at every step: complete after L steps
        state = problem.advance(state, problem.action_mask(state).int().argmax(dim=1))
    played = problem.utility_of(state)
    _require("problem protocol", subject, played.shape == (len(queries),), f"utility_of's shape {played.shape}")
    require_close(problem.utility(queries, state.tokens), played, "utility of the played responses")


def run_in_fresh_interpreter(
    script: str, *arguments: str, timeout_s: float, cwd: str | os.PathLike[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -c script arguments...`` in a fresh interpreter, in its own process group, under a timeout.

    Nothing is set first (torch's default threads), so it runs as a user's script does; ``cwd`` is its
    working folder (first on its import path), None for this process's.

    Returns:
        The finished process, with its text ``stdout`` and ``stderr``.

    Raises:
        TimeoutError: no end within ``timeout_s`` (a deadlock): the whole process group, forked workers
            included, is killed first, and the message holds what it printed.
    """
    process = subprocess.Popen(
        [sys.executable, "-c", script, *arguments],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the forked workers die with it on a timeout
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise TimeoutError(f"deadlock: no end within {timeout_s} s; it printed:\n{stdout}\n{stderr[-2000:]}") from None
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


_FORK_SCRIPT = """
import importlib, json, sys
import gymnasium as gym, numpy as np, tokenized_bandit_gym
env_id, kwargs, imports, registration = json.loads(sys.argv[1])
for module in imports:
    importlib.import_module(module)
if env_id not in gym.registry and registration is not None:
    gym.register(**registration)
env = gym.make(env_id, **kwargs)
observation, _ = env.reset(seed=0)
env.step(int(np.flatnonzero(observation["action_mask"])[0]))  # the parent has run torch before it forks
envs = gym.make_vec(env_id, 2, vectorization_mode="async", vector_kwargs={"context": "fork"}, **kwargs)
observation, _ = envs.reset(seed=1)
for _ in range(3):
    observation, *_ = envs.step(np.asarray(observation["action_mask"]).argmax(axis=1))
envs.close()
print("stepped")
"""


def check_fork_safety(env_id: str, imports: Sequence[str] = (), timeout_s: float = 120.0, **kwargs: Any) -> None:
    """In a fresh interpreter with torch's default threads: step an env, then fork an async vector env and step it.

    A forked child that used GNU OpenMP's inherited pool would hang; the script runs in its own process
    group under ``timeout_s``, so a deadlock fails the check and no hung worker outlives it.

    Args:
        env_id: an id; one registered with a ``"module:Class"`` entry point is registered again in the
            fresh interpreter, else name the module that registers it in ``imports``.
        imports: modules the fresh interpreter imports first.
        timeout_s: how long the script may take.
        **kwargs: passed to ``gym.make`` and ``gym.make_vec`` (JSON values).
    """
    subject = _subject(env_id, kwargs)
    spec = gym.spec(env_id)
    registration = None
    if isinstance(spec.entry_point, str) and (
        spec.vector_entry_point is None or isinstance(spec.vector_entry_point, str)
    ):
        registration = {
            "id": env_id,
            "entry_point": spec.entry_point,
            "vector_entry_point": spec.vector_entry_point,
            "kwargs": spec.kwargs,
        }
    try:
        completed = run_in_fresh_interpreter(
            _FORK_SCRIPT, json.dumps([env_id, kwargs, list(imports), registration]), timeout_s=timeout_s
        )
    except TimeoutError as error:
        raise ConformanceError("fork safety", subject, str(error)) from None
    if completed.returncode != 0 or completed.stdout.split() != ["stepped"]:
        raise ConformanceError("fork safety", subject, f"exit {completed.returncode}: {completed.stderr[-3000:]}")


def check_env_id(env_id: str, fork: bool = False, atol: float | None = None, **kwargs: Any) -> None:
    """Every env check on ``gym.make(env_id, **kwargs)``: the one call to run on your own id.

    Runs :func:`check_gymnasium_api`, :func:`check_sb3_api`, :func:`check_determinism`,
    :func:`check_pickling`, :func:`check_info_schema` and :func:`check_problem_protocol`; where the id
    has a native vector env also :func:`check_vector_pickling`, :func:`check_vector_info_schema` (both
    array backends), :func:`check_vector_matches_single` and :func:`check_autoreset_matches_sync` (every
    autoreset mode); with ``fork=True`` :func:`check_fork_safety`.

    Example:
        >>> from tokenized_bandit_gym.testing import check_env_id
        >>> check_env_id("TokenizedMultiArmedBanditRandomTable-v0")

    Args:
        env_id: a registered id (``import`` the module that registers yours first).
        fork: also run the fork-safety check (a fresh interpreter, a few seconds).
        atol: the vector checks' float tolerance (None: bit for bit, :data:`LLM_FLOAT_ATOL` on the LLM ids).
        **kwargs: passed to every ``gym.make`` and ``gym.make_vec`` (small sizes keep it fast).

    Raises:
        ConformanceError: the first check that fails, naming it, the id and the first difference.
    """
    from gymnasium.vector import AutoresetMode

    check_gymnasium_api(env_id, **kwargs)
    check_sb3_api(env_id, **kwargs)
    check_determinism(env_id, **kwargs)
    check_pickling(env_id, **kwargs)
    check_info_schema(env_id, **kwargs)
    check_problem_protocol(env_id, **kwargs)
    if gym.spec(env_id).vector_entry_point is not None:
        check_vector_pickling(env_id, **kwargs)
        for backend in ("numpy", "torch"):
            check_vector_info_schema(env_id, array_backend=backend, **kwargs)
        check_vector_matches_single(env_id, atol=atol, **kwargs)
        for mode in AutoresetMode:
            check_autoreset_matches_sync(env_id, mode, atol=atol, **kwargs)
    if fork:
        check_fork_safety(env_id, **kwargs)


def family_env_ids(family: str) -> list[str]:
    """The env kinds that play ``family`` (a name in ``tokenized_bandit_gym.core.FAMILIES``)."""
    from tokenized_bandit_gym.core import problem_factory

    if family not in problem_factory.FAMILIES:
        raise ValueError(f"family {family!r} is not in FAMILIES; known: {sorted(problem_factory.FAMILIES)}")
    family_class = problem_factory.FAMILIES[family]
    kinds = {"TokenizedLinearBandit-v0": family_class.linear, "TokenizedMultiArmedBandit-v0": family_class.multi_armed}
    return [env_id for env_id, plays in kinds.items() if plays]


def check_family(family: str, **kwargs: Any) -> None:
    """:func:`check_env_id` with ``family=family`` on every env kind that plays it (TLB and/or TMAB).

    Example:
        >>> from tokenized_bandit_gym.testing import check_family
        >>> check_family("random_table", vocab_size=3, max_length=3)

    Args:
        family: a name in ``tokenized_bandit_gym.core.FAMILIES`` (yours once added there).
        **kwargs: passed to :func:`check_env_id` (sizes, family options, ``fork``).

    Raises:
        ValueError: ``family`` is not a known family.
        ConformanceError: the first check that fails.
    """
    for env_id in family_env_ids(family):
        check_env_id(env_id, family=family, **kwargs)


# ---------------------------------------------------------------- agents


def _agent_factory(
    agent: str | type | Callable[[], Any], agent_kwargs: dict[str, Any]
) -> tuple[str, Callable[[], Any]]:
    """The agent's name for messages and a factory of fresh instances."""
    if isinstance(agent, str):
        agent_class = load_agent_class(agent)
        return agent, lambda: agent_class(**agent_kwargs)
    if not callable(agent):
        raise TypeError(f"agent must be a registered name, 'module:Class', a class or a factory, got {agent!r}")
    name = getattr(agent, "__name__", repr(agent))
    return name, lambda: agent(**agent_kwargs)


def _action_problem(action: Any, mask: np.ndarray, forced: bool) -> str | None:
    """Why ``action`` is not a valid action under ``mask`` (None when it is)."""
    if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
        return f"act returned {action!r} ({type(action).__name__}), not an int"
    if not 0 <= action < mask.shape[0]:
        return f"action {action} is out of range [0, {mask.shape[0]})"
    if not mask[action] and not forced:
        return f"action {action} is masked (allowed: {np.flatnonzero(mask).tolist()})"
    return None


class _ActionRecorder(gym.Wrapper):
    """Records every action and refuses one the observed action mask does not allow (position L aside)."""

    def __init__(self, env: gym.Env[Any, Any], subject: str) -> None:
        super().__init__(env)
        self.subject = subject
        self.actions: list[int] = []
        self.max_length = env.unwrapped.problem.max_length  # type: ignore[attr-defined]
        self.observation: dict[str, Any] = {}

    def reset(self, **kwargs: Any) -> Any:
        self.observation, info = self.env.reset(**kwargs)
        return self.observation, info

    def step(self, action: Any) -> Any:
        forced = int(self.observation["length"]) == self.max_length - 1  # any action is the forced EOS there
        problem = _action_problem(action, _host(self.observation["action_mask"]).astype(bool), forced)
        where = f"action {len(self.actions)}"
        _require("valid actions", self.subject, problem is None, f"{where}: {problem}")
        self.actions.append(int(action))
        result = self.env.step(action)
        self.observation = result[0]
        return result


class _VectorActionRecorder(gym.vector.VectorWrapper):
    """Records every action batch and refuses one the masks do not allow on the rows that need an action."""

    def __init__(self, envs: gym.vector.VectorEnv, subject: str) -> None:
        super().__init__(envs)
        self.subject = subject
        self.actions: list[np.ndarray] = []
        self.max_length = envs.unwrapped.problem.max_length  # type: ignore[attr-defined]
        self.observations: dict[str, Any] = {}
        self.autoreset = np.zeros(envs.num_envs, dtype=bool)

    def reset(self, **kwargs: Any) -> Any:
        self.observations, infos = self.env.reset(**kwargs)
        self.autoreset[:] = False
        return self.observations, infos

    def step(self, actions: Any) -> Any:
        batch = _host(actions)
        shape_ok = batch.shape == (self.num_envs,) and batch.dtype.kind in "iu"
        where = f"action batch {len(self.actions)}"
        _require("valid actions", self.subject, shape_ok, f"{where}: {batch!r} is not ({self.num_envs},) integers")
        masks = _host(self.observations["action_mask"]).astype(bool)
        lengths = _host(self.observations["length"])
        for row in np.flatnonzero(~self.autoreset):  # rows that autoreset ignore their action
            problem = _action_problem(batch[row].item(), masks[row], int(lengths[row]) == self.max_length - 1)
            _require("valid actions", self.subject, problem is None, f"{where} row {row}: {problem}")
        self.actions.append(batch.copy())
        result = self.env.step(actions)
        self.observations, self.autoreset = result[0], _host(result[2]).astype(bool)
        return result


def check_agent(
    agent: str | type | Callable[[], Any],
    env_id: str = "TokenizedLinearBandit-v0",
    rounds: int = 4,
    seed: int = 0,
    num_envs: int = 2,
    env_kwargs: dict[str, Any] | None = None,
    agent_kwargs: dict[str, Any] | None = None,
) -> None:
    """The agent checks on one task: protocol, same seed same actions, valid actions under the mask.

    An :class:`~tokenized_bandit_gym.agent.Agent` plays ``rounds`` rounds of ``gym.make(env_id)``
    through ``run_online``; a :class:`~tokenized_bandit_gym.batched_agent.BatchedAgent` (one with
    ``act_batch``) plays them on ``gym.make_vec(env_id, num_envs)``. It plays twice, fresh each time,
    with the same seed: the actions must be the same. Every action must be an integer the action mask
    allows (at position L, where only EOS is allowed, any action is the documented forced EOS).

    Example:
        >>> from tokenized_bandit_gym.testing import check_agent
        >>> check_agent("greedy_etc", "TokenizedLinearBandit-v0")

    Args:
        agent: a registered name, a ``"package.module:Class"`` reference, an agent class, or a factory
            of fresh agents.
        env_id: the task's id.
        rounds: rounds each run plays.
        seed: the runs' seed.
        num_envs: sub-envs for a batched agent.
        env_kwargs: passed to ``gym.make`` / ``gym.make_vec``.
        agent_kwargs: passed to the agent's constructor.

    Raises:
        ConformanceError: the first check that fails, naming it, the agent and the env id.
        TypeError: ``agent`` is none of the above.
    """
    from tokenized_bandit_gym.agent import Agent
    from tokenized_bandit_gym.batched_agent import BatchedAgent
    from tokenized_bandit_gym.evaluation.run_online import run_online

    env_kwargs = dict(env_kwargs or {})
    name, make = _agent_factory(agent, dict(agent_kwargs or {}))
    subject = f"agent {name} on {_subject(env_id, env_kwargs)}"
    batched = callable(getattr(make(), "act_batch", None))
    protocol = BatchedAgent if batched else Agent
    instance = make()
    _require("agent protocol", subject, isinstance(instance, protocol), f"{instance!r} does not implement {protocol}")
    _require("agent protocol", subject, isinstance(instance.name, str), f"name is {instance.name!r}, not a str")

    def play() -> tuple[list[Any], Any]:
        if batched:
            envs: Any = _VectorActionRecorder(gym.make_vec(env_id, num_envs, **env_kwargs), subject)
        else:
            envs = _ActionRecorder(gym.make(env_id, **env_kwargs), subject)
        try:
            result = run_online(envs, make(), rounds, seed=seed)
        except ValueError as error:
            raise ConformanceError(
                "agent protocol", subject, f"the agent refused or failed the task: {error}"
            ) from error
        return envs.actions, result.utility

    first_actions, first_utility = play()
    second_actions, second_utility = play()
    _require_same("agent determinism", subject, second_actions, first_actions, "actions")
    _require_same("agent determinism", subject, second_utility, first_utility, "utility")


__all__ = [
    "COPIERS",
    "LLM_FLOAT_ATOL",
    "ConformanceError",
    "check_agent",
    "check_autoreset_matches_sync",
    "check_determinism",
    "check_env_id",
    "check_family",
    "check_fork_safety",
    "check_gymnasium_api",
    "check_info_schema",
    "check_pickling",
    "check_problem_protocol",
    "check_sb3_api",
    "check_vector_info_schema",
    "check_vector_matches_single",
    "check_vector_pickling",
    "eos_actions",
    "family_env_ids",
    "first_difference",
    "info_signature",
    "mixed_actions",
    "random_trajectory",
    "run_in_fresh_interpreter",
]
