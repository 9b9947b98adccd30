"""``step_mode="captured"`` of the LLM vector env: the eager env's trajectory on stories260K, to float rounding."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the ids)
from tokenized_bandit_gym.envs.captured_language_model_advance import CapturedLanguageModelAdvance

TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}
"""The static step's tolerance against the eager core (tests/llm/test_captured_step.py)."""


def llm_envs(step_mode: str, autoreset_mode: str, env_id: str = "TokenizedAlignment-v0", **kwargs: Any) -> Any:
    """Three rounds of ``env_id`` (the shipped stories260K, native forward), L = 4, k = 3."""
    return gym.make_vec(
        env_id,
        num_envs=3,
        array_backend="torch",
        autoreset_mode=autoreset_mode,
        step_mode=step_mode,
        max_length=4,
        top_k=3,
        **kwargs,
    )


def assert_close(got: Any, wanted: Any, where: str) -> None:
    """Equal structure; integer and bool entries equal, float ones within :data:`TOLERANCE`."""
    assert type(got) is type(wanted), f"{where}: {type(got)} != {type(wanted)}"
    if isinstance(wanted, dict):
        assert list(got) == list(wanted), f"{where}: keys {list(got)} != {list(wanted)}"
        for key in wanted:
            if key == "regret":  # a difference of two utilities of about 25 each: their rounding, not its own
                assert torch.equal(got[key], got["optimal_utility"] - got["utility"]), f"{where}[{key!r}]"
                continue
            assert_close(got[key], wanted[key], f"{where}[{key!r}]")
    elif isinstance(wanted, (tuple, list)) or (isinstance(wanted, np.ndarray) and wanted.dtype == object):
        assert len(got) == len(wanted), where
        for position, (got_item, wanted_item) in enumerate(zip(got, wanted, strict=True)):
            assert_close(got_item, wanted_item, f"{where}[{position}]")
    elif isinstance(wanted, torch.Tensor):
        assert got.dtype == wanted.dtype and got.shape == wanted.shape, where
        if wanted.dtype.is_floating_point:
            torch.testing.assert_close(got, wanted, **TOLERANCE, msg=where)
        else:
            assert torch.equal(got, wanted), f"{where}: {got} != {wanted}"
    else:
        assert got == wanted, where


def staggered_actions(observation: dict[str, torch.Tensor], eos: int) -> torch.Tensor:
    """Row r takes the EOS candidate once its response holds r + 1 tokens, else the top candidate ``(N,)``.

    Deterministic, and the rows' rounds end at different steps, so some rows restart while others play on.
    """
    rows = torch.arange(observation["length"].shape[0])
    is_eos = (observation["candidate_tokens"] == eos) & observation["action_mask"].bool()  # (N, k)
    wants_eos = (observation["length"] >= rows + 1) & is_eos.any(dim=1)
    return torch.where(wants_eos, is_eos.int().argmax(dim=1), 0)


@pytest.mark.parametrize("autoreset_mode", ["SameStep", "NextStep"])
@pytest.mark.parametrize("policy", ["top", "staggered"])
@pytest.mark.parametrize("env_id", ["TokenizedAlignment-v0", "TokenizedAlignment-v1"])
def test_captured_step_mode_plays_the_eager_trajectory(autoreset_mode: str, policy: str, env_id: str) -> None:
    """The top candidate (every row ends at L) or staggered ends: two resets, every end and restart included.

    Both ids' readings: v1's leaves a forced EOS's log p out of v and pools the response only.
    """
    options: dict[str, Any] = {"env_id": env_id}
    if policy == "staggered":
        options["fixed_length"] = False  # EOS allowed before L: ends to stagger
    eager, captured = llm_envs("eager", autoreset_mode, **options), llm_envs("captured", autoreset_mode, **options)
    advance = captured.unwrapped.rounds.static_advance
    assert isinstance(advance, CapturedLanguageModelAdvance)
    eos = eager.unwrapped.eos_token_id
    ended, partial, stepped_rows = 0, 0, set()
    for seed in (0, [4, 5, 6]):
        wanted_reset = eager.reset(seed=seed)
        assert_close(captured.reset(seed=seed), wanted_reset, f"reset(seed={seed})")
        observation = wanted_reset[0]
        for step in range(11):  # two rounds of L = 4 and more
            actions = torch.zeros(3, dtype=torch.int64)
            if policy == "staggered":
                actions = staggered_actions(observation, eos)
            wanted = eager.step(actions)
            got = captured.step(actions)
            assert advance.static is not None  # the rounds stepped through the static step
            stepped_rows.add(advance.static.tokens.shape[0])
            assert_close(got, wanted, f"step {step} after reset(seed={seed})")
            observation = wanted[0]
            ended += int(wanted[2].sum())
            partial += int(0 < int(wanted[2].sum()) < 3)
    assert ended >= 6 and max(stepped_rows) > 3  # the benchmark rows stepped in it too
    assert partial > 0 if policy == "staggered" else partial == 0


def test_captured_step_mode_serves_the_numpy_backend() -> None:
    """The LLM batch lives on the model's device either way: the NumPy backend converts what the step returns."""
    options = {"num_envs": 2, "max_length": 3, "top_k": 2, "fixed_length": False}
    eager = gym.make_vec("TokenizedAlignment-v0", **options)
    captured = gym.make_vec("TokenizedAlignment-v0", step_mode="captured", **options)
    eager.reset(seed=1)
    captured.reset(seed=1)
    for _ in range(7):
        actions = np.array([0, 1])
        got, wanted = captured.step(actions), eager.step(actions)
        for key, value in wanted[0].items():
            assert isinstance(got[0][key], np.ndarray)
            np.testing.assert_allclose(got[0][key], value, atol=1e-5, rtol=1e-5, err_msg=key)
        assert np.array_equal(got[2], wanted[2]) and np.allclose(got[1], wanted[1], atol=1e-5)
    assert captured.unwrapped.rounds.static_advance.static is not None


@pytest.mark.parametrize(
    ("env_id", "kwargs", "named"),
    [
        ("TokenizedAlignment-v0", {"forward_implementation": "transformers"}, "needs a native forward"),
        ("TokenizedDecoding-v0", {}, "needs embeddings=True"),
        ("TokenizedAlignment-v0", {"feedback": "pairwise"}, "feedback='pairwise'"),
    ],
)
def test_captured_step_mode_refuses_what_the_static_step_cannot_serve(
    env_id: str, kwargs: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=named) as raised:
        gym.make_vec(env_id, num_envs=2, step_mode="captured", max_length=3, top_k=2, **kwargs)
    assert "step_mode='captured'" in str(raised.value)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_captured_step_mode_replays_the_eager_trajectory_on_cuda() -> None:
    eager = llm_envs("eager", "SameStep", device="cuda")
    captured = llm_envs("captured", "SameStep", device="cuda")
    actions = torch.zeros(3, dtype=torch.int64, device="cuda")
    assert_close(captured.reset(seed=0), eager.reset(seed=0), "reset")
    for step in range(9):
        assert_close(captured.step(actions), eager.step(actions), f"step {step}")
        assert captured.unwrapped.rounds.static_advance.captured
