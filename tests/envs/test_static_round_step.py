"""The static-shape step of the torch backend: the vector env's numbers, traced whole by torch.compile."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the ids)
from tokenized_bandit_gym.core.cuda_graph_step import CapturedStep
from tokenized_bandit_gym.envs.static_round_step import StaticRoundStep


def torch_envs(env_id: str, num_envs: int, device: str = "cpu", **kwargs: Any) -> Any:
    """A native vector env on the torch backend with SAME_STEP autoreset, reset with seed 0."""
    envs = gym.make_vec(
        env_id,
        num_envs=num_envs,
        array_backend="torch",
        autoreset_mode="SameStep",
        device=device,
        max_length=4,
        **kwargs,
    )
    envs.reset(seed=0)
    return envs


def allowed_actions(mask: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A uniformly random allowed action per row ``(N,)`` of ``mask`` ``(N, n)``."""
    weights = mask.double().cpu() + 1e-12
    return torch.multinomial(weights, 1, generator=generator)[:, 0].to(mask.device)


@pytest.mark.parametrize("env_id", ["TokenizedLinearBandit-v0", "TokenizedMultiArmedBandit-v0"])
def test_static_step_equals_the_vector_env_step(env_id: str) -> None:
    reference, stepped = torch_envs(env_id, 6), torch_envs(env_id, 6)
    static = StaticRoundStep(stepped.unwrapped.rounds)
    generator = torch.Generator().manual_seed(1)
    ended = 0
    for _ in range(10):
        actions = allowed_actions(reference.unwrapped.rounds.mask, generator)
        observation, rewards, terminated, _, _ = reference.step(actions)
        rounds = reference.unwrapped.rounds  # the queries and noises the env drew for the rounds it restarted
        got_rewards, got_terminated, mask, embeddings = static.step(actions, rounds.queries, rounds.noise)
        assert torch.equal(got_terminated, terminated) and torch.equal(got_rewards, rewards)
        assert torch.equal(mask, observation["action_mask"])
        if "candidate_embeddings" in observation:
            assert torch.equal(embeddings, observation["candidate_embeddings"])
        ended += int(terminated.sum())
    assert ended > 0


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("TokenizedLinearBandit-v0", {"family": "discounted"}),
        ("TokenizedLinearBandit-v0", {"family": "meanpool"}),
        ("TokenizedLinearBandit-v0", {"family": "markov"}),
        ("TokenizedLinearBandit-v0", {"family": "needle", "vocab_size": 3}),
        ("TokenizedLinearBandit-v0", {"family": "discounted", "fixed_length": True}),
        ("TokenizedMultiArmedBandit-v0", {}),
    ],
)
def test_static_step_keeps_the_vector_envs_state_with_forced_eos(env_id: str, kwargs: dict[str, Any]) -> None:
    """Masked actions at position L (forced to EOS) included; the state, noise and mask stay the env's bit for bit."""
    reference, stepped = torch_envs(env_id, 9, **kwargs), torch_envs(env_id, 9, **kwargs)
    static = StaticRoundStep(stepped.unwrapped.rounds)
    generator = torch.Generator().manual_seed(4)
    rounds = reference.unwrapped.rounds
    forced = 0
    for _ in range(14):
        actions = allowed_actions(rounds.mask, generator)
        last_position = rounds.lengths == rounds.problem.max_length - 1  # any action there: a masked one is EOS
        anything = torch.randint(0, rounds.mask.shape[1], actions.shape, generator=generator)
        actions = torch.where(last_position, anything, actions)
        forced += int((last_position & ~rounds.mask.gather(1, actions[:, None])[:, 0]).sum())
        observation, rewards, terminated, _, _ = reference.step(actions)
        got = static.step(actions, rounds.queries, rounds.noise)
        assert torch.equal(got[0], rewards) and torch.equal(got[1], terminated)
        assert torch.equal(got[2], observation["action_mask"])
        if "candidate_embeddings" in observation:
            assert torch.equal(got[3], observation["candidate_embeddings"])
        for field in ("queries", "tokens", "lengths", "finished", "carry", "last_tokens"):
            assert torch.equal(getattr(static.rounds.state, field), getattr(rounds.state, field)), field
        assert torch.equal(static.rounds.noise, rounds.noise) and torch.equal(static.rounds.mask, rounds.mask)
    assert forced > 0


def test_compiled_static_step_traces_whole_and_equals_the_eager_step() -> None:
    eager, traced = torch_envs("TokenizedLinearBandit-v0", 4), torch_envs("TokenizedLinearBandit-v0", 4)
    eager_step, traced_step = StaticRoundStep(eager.unwrapped.rounds), StaticRoundStep(traced.unwrapped.rounds)
    compiled = torch.compile(traced_step.step, fullgraph=True, backend="aot_eager")  # a graph break is an error
    generator = torch.Generator().manual_seed(2)
    for _ in range(6):
        actions = allowed_actions(eager.unwrapped.rounds.mask, generator)
        queries = torch.randint(0, eager.unwrapped.problem.num_queries, (4,), generator=generator)
        noise = torch.randn(4, generator=generator, dtype=torch.float64)
        for got, wanted in zip(
            compiled(actions, queries, noise), eager_step.step(actions, queries, noise), strict=True
        ):
            torch.testing.assert_close(got, wanted, atol=1e-12, rtol=1e-12)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_captured_static_step_replays_equal_to_the_eager_step() -> None:
    eager, captured = (
        torch_envs("TokenizedLinearBandit-v0", 64, "cuda"),
        torch_envs("TokenizedLinearBandit-v0", 64, "cuda"),
    )
    eager_step, static = StaticRoundStep(eager.unwrapped.rounds), StaticRoundStep(captured.unwrapped.rounds)
    rounds = captured.unwrapped.rounds
    examples = [torch.zeros(64, dtype=torch.int64, device="cuda"), rounds.queries.clone(), rounds.noise.clone()]
    step = CapturedStep(static.step, examples, static.buffers())
    assert step.captured
    generator = torch.Generator().manual_seed(3)
    for _ in range(8):
        actions = allowed_actions(eager.unwrapped.rounds.mask, generator)
        queries = torch.randint(0, rounds.problem.num_queries, (64,), generator=generator).cuda()
        noise = torch.randn(64, generator=generator, dtype=torch.float64).cuda()
        for got, wanted in zip(step(actions, queries, noise), eager_step.step(actions, queries, noise), strict=True):
            torch.testing.assert_close(got, wanted)
