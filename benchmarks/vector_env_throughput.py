"""Token-steps per second: the native vector env against Gymnasium's SyncVectorEnv over single envs.

Both are measured side by side in one run, on the same policy (a uniformly random allowed
token, drawn outside the timed region), for the default TLB and TMAB ids. A token-step is one
sub-env appending one token; the autoreset steps of NEXT_STEP mode do not count (both vector
envs spend them alike). SyncVectorEnv needs a small wrapper that pads ``info["response"]`` to
length L: otherwise it fails as soon as two sub-envs end rounds of different lengths in one
step (see RESULTS.md).

Run: ``PYTHONPATH=. python benchmarks/vector_env_throughput.py`` (defaults take about two
minutes on a 2-core CPU); ``--num-envs 1 64`` and ``--seconds 0.2`` make it quicker.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the ids)


@dataclasses.dataclass
class Args:
    """Command-line arguments (each field's docstring is its ``--help``)."""

    env_ids: tuple[str, ...] = ("TokenizedLinearBandit-v0", "TokenizedMultiArmedBandit-v0")
    """ids to measure (their default kwargs)"""
    num_envs: tuple[int, ...] = (1, 64, 1024, 4096)
    """N, the number of sub-envs"""
    seconds: float = 1.0
    """time to spend stepping each native configuration (after warm-up)"""
    sync_seconds: float = 1.0
    """time to spend stepping each SyncVectorEnv configuration"""
    min_steps: int = 3
    """steps measured at least, however long they take"""
    device: str = "cpu"
    """torch device of the native env ("cuda" when a GPU is lent)"""
    seed: int = 0
    """seeds the envs and the random policy"""
    threads: int = 1
    """torch intra-op threads (1: a shared 2-core machine thrashes with more)"""


class PadResponseInfo(gym.Wrapper):
    """Pads ``info["response"]`` with EOS to L tokens so SyncVectorEnv can stack it."""

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step the single env and pad the response of a finished round."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        if "response" in info:
            padded = np.full(self.env.unwrapped.problem.max_length, self.env.unwrapped.eos_token_id)
            padded[: len(info["response"])] = info["response"]
            info["response"] = padded
        return observation, reward, terminated, truncated, info


def random_allowed(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    """A uniformly random allowed token per row, ``(N,)`` (vectorized: argmax of masked noise)."""
    scores = rng.random(masks.shape)
    return np.where(masks.astype(bool), scores, -1.0).argmax(axis=1)


def warm_caches(envs: gym.vector.VectorEnv) -> None:
    """Compute each instance's cached optimum and oracle-greedy decode before timing."""
    base = envs.unwrapped
    problems = [env.unwrapped.problem for env in base.envs] if hasattr(base, "envs") else [base.problem]
    for problem in problems:
        queries = torch.zeros(1, dtype=torch.int64, device=problem.device)
        problem.optimal(queries)
        problem.oracle_greedy(queries)


def measure(envs: gym.vector.VectorEnv, seed: int, seconds: float, min_steps: int) -> tuple[float, int]:
    """Token-steps per second of ``envs`` under the random policy, and the steps measured."""
    rng = np.random.default_rng(seed)
    warm_caches(envs)
    observations, _ = envs.reset(seed=seed)
    to_numpy: Callable[[Any], np.ndarray] = lambda value: np.asarray(  # noqa: E731
        value.cpu() if isinstance(value, torch.Tensor) else value
    )
    autoreset = np.zeros(envs.num_envs, dtype=bool)
    elapsed, token_steps, steps = 0.0, 0, 0
    for _ in range(2):  # warm-up
        observations, _, terminated, _, _ = envs.step(random_allowed(rng, to_numpy(observations["action_mask"])))
        autoreset = to_numpy(terminated)
    while steps < min_steps or elapsed < seconds:
        actions = random_allowed(rng, to_numpy(observations["action_mask"]))
        start = time.perf_counter()
        observations, _, terminated, _, _ = envs.step(actions)
        elapsed += time.perf_counter() - start
        token_steps += int((~autoreset).sum())
        autoreset = to_numpy(terminated)
        steps += 1
    return token_steps / elapsed, steps


def main(args: Args) -> None:
    torch.set_grad_enabled(False)
    torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}, device: {args.device}")
    header = "| env | N | native numpy (tok/s) | native torch (tok/s) | SyncVectorEnv (tok/s) | native / sync |"
    print(header)
    print("|---|---|---|---|---|---|")
    for env_id in args.env_ids:
        for num_envs in args.num_envs:
            native = gym.make_vec(
                env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", device=args.device
            )
            native_rate, _ = measure(native, args.seed, args.seconds, args.min_steps)
            native_torch = gym.make_vec(
                env_id,
                num_envs=num_envs,
                vectorization_mode="vector_entry_point",
                array_backend="torch",
                device=args.device,
            )
            torch_rate, _ = measure(native_torch, args.seed, args.seconds, args.min_steps)
            sync = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync", wrappers=[PadResponseInfo])
            sync_rate, sync_steps = measure(sync, args.seed, args.sync_seconds, args.min_steps)
            print(
                f"| {env_id} | {num_envs} | {native_rate:,.0f} | {torch_rate:,.0f} | {sync_rate:,.0f} "
                f"({sync_steps} steps) | {native_rate / sync_rate:,.1f}x |",
                flush=True,
            )
            native.close()
            native_torch.close()
            sync.close()


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in dataclasses.fields(Args):
        default = field.default
        if isinstance(default, tuple):
            parser.add_argument(f"--{field.name.replace('_', '-')}", nargs="+", type=type(default[0]), default=default)
        else:
            parser.add_argument(f"--{field.name.replace('_', '-')}", type=type(default), default=default)
    return Args(
        **{key: tuple(value) if isinstance(value, list) else value for key, value in vars(parser.parse_args()).items()}
    )


if __name__ == "__main__":
    main(parse_args())
