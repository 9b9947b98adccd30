"""``step_mode="captured"`` of the synthetic vector envs: the eager step's trajectories, bit for bit."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the ids)
from tokenized_bandit_gym.registration import SYNTHETIC_ENVS

MODES = ("SameStep", "NextStep", "Disabled")


def torch_envs(env_id: str, step_mode: str, autoreset_mode: str, **kwargs: Any) -> Any:
    """A native vector env of 5 rows on the torch backend (CPU), 3 rounds drawn ahead (a refill every few steps)."""
    return gym.make_vec(
        env_id,
        num_envs=5,
        vectorization_mode="vector_entry_point",
        array_backend="torch",
        autoreset_mode=autoreset_mode,
        round_buffer=3,
        step_mode=step_mode,
        **kwargs,
    )


def assert_identical(got: Any, wanted: Any, where: str, exact: bool = True) -> None:
    """``got`` equals ``wanted``: the same keys in the same order, types, dtypes, shapes and values.

    With ``exact=False`` float tensors need only be close (torch's default tolerances: a CUDA library may pick
    another kernel for the same product), the others still equal.
    """
    assert type(got) is type(wanted), f"{where}: {type(got)} != {type(wanted)}"
    if isinstance(wanted, dict):
        assert list(got) == list(wanted), f"{where}: keys {list(got)} != {list(wanted)}"
        for key in wanted:
            assert_identical(got[key], wanted[key], f"{where}[{key!r}]", exact)
    elif isinstance(wanted, (tuple, list)):
        assert len(got) == len(wanted), where
        for position, (got_item, wanted_item) in enumerate(zip(got, wanted, strict=True)):
            assert_identical(got_item, wanted_item, f"{where}[{position}]", exact)
    elif isinstance(wanted, torch.Tensor):
        assert got.dtype == wanted.dtype and got.device == wanted.device, where
        if not exact and wanted.dtype.is_floating_point:
            torch.testing.assert_close(got, wanted, msg=where)
            return
        assert got.shape == wanted.shape and torch.equal(got, wanted), f"{where}: {got} != {wanted}"
    elif isinstance(wanted, np.ndarray) and wanted.dtype == object:
        assert got.shape == wanted.shape, where
        for row, (got_row, wanted_row) in enumerate(zip(got, wanted, strict=True)):
            assert_identical(got_row, wanted_row, f"{where}[{row}]", exact)
    elif isinstance(wanted, np.ndarray):
        assert got.dtype == wanted.dtype and np.array_equal(got, wanted), where
    else:
        assert got == wanted, where


def actions_for(envs: Any, generator: torch.Generator) -> torch.Tensor:
    """A random allowed action per row, and any action at position L (a masked one there becomes EOS)."""
    rounds = envs.unwrapped.rounds
    mask = rounds.mask.cpu()
    actions = torch.multinomial(mask.double() + 1e-12, 1, generator=generator)[:, 0]  # (N,)
    anything = torch.randint(0, mask.shape[1], actions.shape, generator=generator)
    last_position = rounds.lengths.cpu() == rounds.problem.max_length - 1
    return torch.where(last_position, anything, actions).to(rounds.mask.device)


@pytest.mark.parametrize("autoreset_mode", MODES)
@pytest.mark.parametrize("env_id", sorted(SYNTHETIC_ENVS))
def test_captured_step_mode_plays_the_eager_trajectory(env_id: str, autoreset_mode: str) -> None:
    """Three resets (an int seed, None, a seed list), 12 steps each, autoresets and forced EOS included."""
    eager = torch_envs(env_id, "eager", autoreset_mode)
    captured = torch_envs(env_id, "captured", autoreset_mode)
    assert captured.unwrapped.step_mode == "captured" and eager.unwrapped.step_mode == "eager"
    generator = torch.Generator().manual_seed(7)
    ended = forced = 0
    for seed in (3, None, [11, 12, 13, 14, 15]):
        assert_identical(captured.reset(seed=seed), eager.reset(seed=seed), f"reset(seed={seed})")
        for step in range(12):
            actions = actions_for(eager, generator)
            got, wanted = captured.step(actions), eager.step(actions)
            assert_identical(got, wanted, f"step {step} after reset(seed={seed})")
            assert_identical(captured.unwrapped.action_masks(), eager.unwrapped.action_masks(), "action_masks")
            ended += int(wanted[2].sum())
            infos = wanted[4].get("final_info", wanted[4])  # SAME_STEP: an ended round's forced EOS is there
            forced += int(infos["forced_eos"].sum())
            if autoreset_mode == "Disabled" and bool(wanted[2].any()):
                options = {"reset_mask": wanted[2].numpy().copy()}
                assert_identical(captured.reset(options=options), eager.reset(options=options), "reset_mask")
    assert ended > 0 and forced > 0


def test_captured_step_mode_refuses_an_invalid_action_and_changes_nothing() -> None:
    eager = torch_envs("TokenizedLinearBandit-v0", "eager", "SameStep", fixed_length=True)
    captured = torch_envs("TokenizedLinearBandit-v0", "captured", "SameStep", fixed_length=True)
    eager.reset(seed=0)
    captured.reset(seed=0)
    eos = captured.unwrapped.eos_token_id
    with pytest.raises(ValueError, match=f"action {eos + 1} of sub-env 0 is out of range"):
        captured.step(torch.full((5,), eos + 1))
    with pytest.raises(ValueError, match=f"action {eos} of sub-env 0 is masked"):  # EOS only at position L
        captured.step(torch.full((5,), eos))
    actions = torch.zeros(5, dtype=torch.int64)
    assert_identical(captured.step(actions), eager.step(actions), "the step after the refused ones")


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"step_mode": "graph"}, "'graph'"),
        ({"step_mode": "captured", "array_backend": "numpy"}, "array_backend='torch', got 'numpy'"),
        ({"step_mode": "captured", "feedback": "pairwise"}, "feedback='pairwise'"),
    ],
)
def test_captured_step_mode_refuses_what_it_cannot_serve(kwargs: dict[str, Any], named: str) -> None:
    arguments = {"num_envs": 2, "vectorization_mode": "vector_entry_point", "array_backend": "torch", **kwargs}
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")) as raised:
        gym.make_vec("TokenizedLinearBandit-v0", **arguments)
    assert "step_mode" in str(raised.value)


def test_static_vector_env_step_traces_whole_and_equals_the_eager_one() -> None:
    """``torch.compile(..., fullgraph=True)`` (no compiler: ``aot_eager``) traces the NEXT_STEP step without a break."""
    from tokenized_bandit_gym.envs.captured_vector_step import StaticVectorEnvStep

    eager, traced = (torch_envs("TokenizedLinearBandit-v0", "eager", "NextStep", max_length=3) for _ in range(2))
    eager.reset(seed=0)
    traced.reset(seed=0)
    eager_step = StaticVectorEnvStep(eager.unwrapped.rounds, eager.unwrapped.autoreset_mode)
    traced_step = StaticVectorEnvStep(traced.unwrapped.rounds, traced.unwrapped.autoreset_mode)
    compiled = torch.compile(traced_step.env_step, fullgraph=True, backend="aot_eager")  # a graph break is an error
    generator = torch.Generator().manual_seed(2)
    restarting = torch.zeros(5, dtype=torch.bool)
    for _ in range(5):
        actions = actions_for(eager, generator)
        queries = torch.randint(0, eager.unwrapped.problem.num_queries, (5,), generator=generator)
        noise = torch.randn(5, generator=generator, dtype=torch.float64)
        wanted = eager_step.env_step(actions, restarting, queries, noise)
        got = compiled(actions, restarting, queries, noise)
        for got_value, wanted_value in zip(got, wanted, strict=True):
            torch.testing.assert_close(got_value, wanted_value, atol=1e-12, rtol=1e-12)
        restarting = wanted[1]  # terminated: NEXT_STEP restarts them in the next step


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("autoreset_mode", MODES)
@pytest.mark.parametrize("env_id", sorted(SYNTHETIC_ENVS))
def test_captured_step_mode_replays_the_eager_trajectory_on_cuda(env_id: str, autoreset_mode: str) -> None:
    """On CUDA the step is one graph replay; the trajectory is the eager env's on the same device."""
    eager = torch_envs(env_id, "eager", autoreset_mode, device="cuda")
    captured = torch_envs(env_id, "captured", autoreset_mode, device="cuda")
    assert captured.unwrapped._captured.captured
    generator = torch.Generator().manual_seed(7)
    for seed in (3, None):
        assert_identical(captured.reset(seed=seed), eager.reset(seed=seed), f"reset(seed={seed})", exact=False)
        for step in range(12):
            actions = actions_for(eager, generator)
            got, wanted = captured.step(actions), eager.step(actions)
            assert_identical(got, wanted, f"step {step} after reset(seed={seed})", exact=False)
            if autoreset_mode == "Disabled" and bool(wanted[2].any()):
                options = {"reset_mask": wanted[2].cpu().numpy().copy()}
                got_reset, wanted_reset = captured.reset(options=options), eager.reset(options=options)
                assert_identical(got_reset, wanted_reset, "reset_mask", exact=False)
