"""Native vector envs: equivalence with N single envs, autoreset, bad input, backends, seeding.

Registry-driven: every registered id with a ``vector_entry_point`` is covered.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

import tokenized_bandit_gym
from tokenized_bandit_gym import testing
from tokenized_bandit_gym.core import NoiseModel, RoundStreams
from tokenized_bandit_gym.core.round_buffer import RoundBuffer
from tokenized_bandit_gym.registration import LLM_ENVS
from tokenized_bandit_gym.testing import LLM_FLOAT_ATOL, first_difference

VECTOR_IDS = [env_id for env_id in tokenized_bandit_gym.registered_ids() if gym.spec(env_id).vector_entry_point]
# the shipped stories260K at small L and k keeps the LLM cases fast
LLM_KWARGS: dict[str, Any] = {"max_length": 4, "top_k": 3, "optimal_kind": "oracle_greedy"}


def _kwargs(env_id: str) -> dict[str, Any]:
    return dict(LLM_KWARGS) if env_id in LLM_ENVS else {}


EQUIVALENCE_CASES = [pytest.param(env_id, _kwargs(env_id), id=env_id) for env_id in VECTOR_IDS] + [
    pytest.param(
        "TokenizedLinearBandit-v0",
        {"dtype": "float32", "fixed_length": True, "noise": "bounded"},
        id="TokenizedLinearBandit-v0-float32-fixed-bounded",
    ),
    pytest.param(
        "TokenizedDecoding-v0",
        {"max_length": 6, "top_k": 4, "optimal_kind": "oracle_beam", "beam_width": 3, "observe_logprobs": True},
        id="TokenizedDecoding-v0-beam-logprobs",
    ),
    pytest.param(
        "TokenizedAlignment-v0",
        {"max_length": 8, "top_k": 6, "embedding_norm": "l2", "candidate_batching": "expand"},
        id="TokenizedAlignment-v0-l2-expand",
    ),
]


@pytest.mark.parametrize(("env_id", "kwargs"), EQUIVALENCE_CASES)
def test_vector_env_replays_single_envs_exactly(env_id: str, kwargs: dict[str, Any]) -> None:
    """Bit for bit on the synthetic ids; LLM floats within ``LLM_FLOAT_ATOL`` (tokens, actions, flags exact)."""
    testing.check_vector_matches_single(env_id, **kwargs)


@pytest.mark.parametrize("env_id", VECTOR_IDS)
def test_make_vec_defaults_to_the_native_vector_env(env_id: str) -> None:
    envs = gym.make_vec(env_id, num_envs=2, **_kwargs(env_id))
    assert type(envs.unwrapped).__name__.endswith("VectorEnv")
    assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert envs.action_space == gym.spaces.MultiDiscrete([envs.unwrapped.single_action_space.n] * 2)
    observations, _ = envs.reset(seed=0)
    assert observations in envs.observation_space


def test_autoreset_next_step_ignores_action_and_starts_new_round() -> None:
    envs = gym.make_vec("TokenizedLinearBandit-v0", num_envs=3, noise_scale=0.0)
    observations, _ = envs.reset(seed=5)
    eos = envs.unwrapped.eos_token_id
    # sub-env 0 stops at once, the others write one token first
    observations, rewards, terminated, _, infos = envs.step(np.array([eos, 0, 1]))
    assert terminated.tolist() == [True, False, False]
    assert rewards[0] == pytest.approx(infos["utility"][0]) and rewards[1:].tolist() == [0.0, 0.0]
    assert infos["round_ended"].tolist() == [True, False, False] and infos["_regret"].all()
    assert observations["length"].tolist() == [1, 1, 1]
    assert observations["action_mask"][0].tolist() == [0] * eos + [1]  # a finished round allows only EOS
    assert not observations["candidate_embeddings"][0].any()
    # next step: sub-env 0 resets whatever its action (even a masked one), the others end
    observations, rewards, terminated, _, infos = envs.step(np.array([0, eos, eos]))
    assert terminated.tolist() == [False, True, True]
    assert rewards[0] == 0.0
    assert observations["length"].tolist() == [0, 2, 2]
    assert infos["forced_eos"].tolist() == [False, False, False] and infos["_forced_eos"].all()
    assert infos["round_ended"].tolist() == [False, True, True]
    assert infos["regret"][0] == 0.0 and infos["response"][0].tolist() == [-1] * envs.unwrapped.problem.max_length


def test_forced_eos_at_last_position_and_strict_actions() -> None:
    length = 3
    envs = gym.make_vec("TokenizedMultiArmedBandit-v0", num_envs=2, max_length=length)
    envs.reset(seed=0)
    for _ in range(length - 1):
        envs.step(np.array([0, 1]))
    _, rewards, terminated, _, infos = envs.step(np.array([0, envs.unwrapped.eos_token_id]))
    assert terminated.all()
    assert infos["forced_eos"].tolist() == [True, False]
    strict = gym.make_vec("TokenizedMultiArmedBandit-v0", num_envs=2, max_length=length, strict_actions=True)
    strict.reset(seed=0)
    for _ in range(length - 1):
        strict.step(np.array([0, 1]))
    with pytest.raises(ValueError, match=r"action 0 of sub-env 0 is masked at position 3"):
        strict.step(np.array([0, strict.unwrapped.eos_token_id]))


@pytest.mark.parametrize(
    ("actions", "error", "match"),
    [
        (np.array([0, 1, 2]), ValueError, r"shape \(2,\).*got shape \(3,\)"),
        (np.array([[0, 1]]), ValueError, r"shape \(2,\).*got shape \(1, 2\)"),
        (np.array([0.0, 1.0]), TypeError, "dtype float64"),
        (np.array([True, False]), TypeError, "dtype bool"),
        (torch.tensor([0.5, 1.0]), TypeError, "dtype torch.float32"),
        (np.array([0, 16]), ValueError, r"action 16 of sub-env 1 is out of range: it must lie in \[0, 16\)"),
        (np.array([-1, 0]), ValueError, r"action -1 of sub-env 0 is out of range"),
        ("ab", TypeError, "dtype <U2"),
    ],
)
def test_bad_action_batches_raise_naming_the_value(actions: Any, error: type[Exception], match: str) -> None:
    envs = gym.make_vec("TokenizedLinearBandit-v0", num_envs=2)
    envs.reset(seed=0)
    with pytest.raises(error, match=match):
        envs.step(actions)


def test_masked_action_before_last_position_raises() -> None:
    envs = gym.make_vec("TokenizedLinearBandit-v0", num_envs=2, fixed_length=True)
    envs.reset(seed=0)
    with pytest.raises(ValueError, match=r"action 15 of sub-env 1 is masked at position 1: allowed actions are"):
        envs.step(np.array([0, envs.unwrapped.eos_token_id]))


@pytest.mark.parametrize("env_id", ["TokenizedLinearBandit-v0", "TokenizedMultiArmedBandit-v0"])
def test_a_refused_step_changes_nothing(env_id: str) -> None:
    """A batch with one refused action raises before any row advances: the env goes on as if it had not been sent."""
    refused, untouched = (gym.make_vec(env_id, num_envs=3, fixed_length=True) for _ in range(2))
    observations, _ = refused.reset(seed=4)
    untouched.reset(seed=4)
    eos = refused.unwrapped.eos_token_id
    allowed = observations["action_mask"].argmax(axis=1)
    with pytest.raises(ValueError, match=r"sub-env 2 is masked at position 1"):
        refused.step(np.array([allowed[0], allowed[1], eos]))
    rng = np.random.default_rng(5)
    for _ in range(12):
        actions = testing.mixed_actions(rng, observations["action_mask"], testing.eos_actions(observations, eos))
        outputs, expected = refused.step(actions), untouched.step(actions)
        for name, output, value in zip(("observation", "infos"), outputs[::4], expected[::4], strict=True):
            assert output.keys() == value.keys(), name
            for key in value:
                np.testing.assert_array_equal(output[key], value[key], err_msg=f"{name} {key}")
        for output, value in zip(outputs[1:4], expected[1:4], strict=True):
            np.testing.assert_array_equal(output, value)
        observations = outputs[0]


def test_step_before_reset_and_bad_constructor_arguments_raise() -> None:
    envs = gym.make_vec("TokenizedLinearBandit-v0", num_envs=2)
    with pytest.raises(ValueError, match="before reset"):
        envs.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="array_backend"):
        gym.make_vec("TokenizedLinearBandit-v0", num_envs=2, array_backend="jax")
    with pytest.raises(ValueError, match="num_envs must be >= 1"):
        gym.make_vec("TokenizedLinearBandit-v0", num_envs=0, vectorization_mode="vector_entry_point")
    with pytest.raises(ValueError, match=r"seed must have one entry per sub-env \(2\)"):
        envs.reset(seed=[1, 2, 3])


def _run(envs: gym.vector.VectorEnv, seed: Any, steps: int) -> list[np.ndarray]:
    observations, _ = envs.reset(seed=seed)
    rng = np.random.default_rng(1)
    trace = []
    for _ in range(steps):
        eos_actions = testing.eos_actions(observations, envs.unwrapped.eos_token_id)
        actions = testing.mixed_actions(rng, np.asarray(observations["action_mask"]), eos_actions)
        observations, rewards, _, _, infos = envs.step(actions)
        trace += [np.asarray(observations["response"]), np.asarray(rewards), np.asarray(infos["query_index"])]
    return trace


def test_seeding_is_deterministic_and_seeds_matter() -> None:
    make = lambda: gym.make_vec("TokenizedLinearBandit-v0", num_envs=4, round_buffer=3)  # noqa: E731
    first, second, other = _run(make(), 7, 20), _run(make(), 7, 20), _run(make(), 8, 20)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(first, other, strict=True))
    # an int seed s means seeds s, s + 1, ... as in SyncVectorEnv
    for a, b in zip(first, _run(make(), [7, 8, 9, 10], 20), strict=True):
        np.testing.assert_array_equal(a, b)


def test_unseeded_reset_continues_the_streams_like_the_single_env() -> None:
    vector = gym.make_vec("TokenizedLinearBandit-v0", num_envs=2, round_buffer=2)
    single = [gym.make("TokenizedLinearBandit-v0") for _ in range(2)]
    _, infos = vector.reset(seed=[4, 9])
    expected = [env.reset(seed=seed)[1]["query_index"] for env, seed in zip(single, [4, 9], strict=True)]
    assert infos["query_index"].tolist() == expected
    for _ in range(5):
        _, infos = vector.reset()
        assert infos["query_index"].tolist() == [env.reset()[1]["query_index"] for env in single]


@pytest.mark.parametrize("env_id", [env_id for env_id in VECTOR_IDS if env_id not in LLM_ENVS])
def test_torch_backend_matches_numpy_backend_and_stays_on_device(env_id: str) -> None:
    """The torch path (all on the device) against the NumPy backend's host path, on every synthetic id."""
    _assert_torch_backend_matches_numpy_backend(env_id, 3)


@pytest.mark.parametrize("env_id", ["TokenizedLinearBandit-v0", "TokenizedMultiArmedBandit-v0"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_compiled_carry_table_step_equals_the_core_bit_for_bit(env_id: str, dtype: str) -> None:
    """The compiled carry-table step (two kernel calls a step) against the core's torch path, both instance dtypes."""
    assert gym.make_vec(env_id, num_envs=7, dtype=dtype).unwrapped._table_steps
    _assert_torch_backend_matches_numpy_backend(env_id, 7, dtype=dtype)


_WITHOUT_A_CACHE = """
import gymnasium as gym, numpy as np, torch
import tokenized_bandit_gym
from tokenized_bandit_gym.envs import carry_table_kernels
assert type(carry_table_kernels.begin_step._cache).__name__ == "NullCache"  # compiled, not cached
host = gym.make_vec("TokenizedLinearBandit-v0", num_envs=5)
device = gym.make_vec("TokenizedLinearBandit-v0", num_envs=5, array_backend="torch")
observations, _ = host.reset(seed=1)
device.reset(seed=1)
rng = np.random.default_rng(2)
for _ in range(20):
    actions = (rng.random(observations["action_mask"].shape) * observations["action_mask"]).argmax(axis=1)
    observations, rewards, _, _, infos = host.step(actions)
    expected, expected_rewards, _, _, expected_infos = device.step(torch.as_tensor(actions))
    for key, value in observations.items():
        np.testing.assert_array_equal(value, expected[key].numpy())
    np.testing.assert_array_equal(rewards, expected_rewards.numpy())
    np.testing.assert_array_equal(infos["regret"], expected_infos["regret"].numpy())
"""


def test_the_compiled_step_runs_where_no_cache_can_be_written() -> None:
    """A read-only install without a writable cache directory: Numba refuses to cache, the kernels still compile.

    Numba is told that no cache location exists (``NUMBA_CACHE_LOCATOR_CLASSES`` in the child process only,
    as a read-only site-packages and an unwritable home leave it); the NumPy backend still equals the torch one.
    """
    environment = {**os.environ, "NUMBA_CACHE_LOCATOR_CLASSES": "IPythonCacheLocator"}
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_A_CACHE], env=environment, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]


def _assert_torch_backend_matches_numpy_backend(env_id: str, num_envs: int, **kwargs: Any) -> None:
    """25 steps of the torch backend on the CPU and the NumPy backend, equal bit for bit; tensors stay on the device."""
    device = torch.device("cpu")
    numpy_envs = gym.make_vec(env_id, num_envs=num_envs, **kwargs)
    torch_envs = gym.make_vec(env_id, num_envs=num_envs, array_backend="torch", device=device, **kwargs)
    numpy_observations, _ = numpy_envs.reset(seed=2)
    torch_observations, torch_infos = torch_envs.reset(seed=2)
    rng = np.random.default_rng(3)
    for _ in range(25):
        for key, value in torch_observations.items():
            assert isinstance(value, torch.Tensor) and value.device == device
            np.testing.assert_array_equal(value.numpy(), numpy_observations[key])
        eos_actions = testing.eos_actions(numpy_observations, numpy_envs.unwrapped.eos_token_id)
        actions = testing.mixed_actions(rng, numpy_observations["action_mask"], eos_actions)
        numpy_observations, numpy_rewards, numpy_terminated, _, numpy_infos = numpy_envs.step(actions)
        torch_observations, rewards, terminated, truncated, torch_infos = torch_envs.step(
            torch.as_tensor(actions, device=device)
        )
        for value in (rewards, terminated, truncated):
            assert isinstance(value, torch.Tensor) and value.device == device
        np.testing.assert_array_equal(rewards.numpy(), numpy_rewards)
        np.testing.assert_array_equal(terminated.numpy(), numpy_terminated)
        for key, value in numpy_infos.items():
            np.testing.assert_array_equal(torch_infos[key].numpy(), value, err_msg=key)
        for value in torch_infos.values():
            assert value.device == device


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_torch_backend_matches_cpu_within_tolerance() -> None:
    cpu = gym.make_vec("TokenizedLinearBandit-v0", num_envs=8, array_backend="torch")
    cuda = gym.make_vec("TokenizedLinearBandit-v0", num_envs=8, array_backend="torch", device="cuda")
    cpu_observations, _ = cpu.reset(seed=0)
    cuda_observations, _ = cuda.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(30):
        assert cuda_observations["candidate_embeddings"].device.type == "cuda"
        torch.testing.assert_close(
            cuda_observations["candidate_embeddings"].cpu(), cpu_observations["candidate_embeddings"]
        )
        eos_actions = testing.eos_actions(cpu_observations, cpu.unwrapped.eos_token_id)
        actions = testing.mixed_actions(rng, cpu_observations["action_mask"].numpy(), eos_actions)
        cpu_observations, cpu_rewards, _, _, _ = cpu.step(torch.as_tensor(actions))
        cuda_observations, cuda_rewards, _, _, _ = cuda.step(torch.as_tensor(actions, device="cuda"))
        torch.testing.assert_close(cuda_rewards.cpu(), cpu_rewards)


@pytest.mark.parametrize("kind", ["gaussian", "bounded"])
def test_round_streams_draw_many_equals_draw(kind: str) -> None:
    noise = NoiseModel(kind, 0.3)
    one, many = RoundStreams.from_seed(5), RoundStreams.from_seed(5)
    singles = [one.draw(7, noise) for _ in range(9)]
    queries, etas = many.draw_many(7, noise, 4)
    more_queries, more_etas = many.draw_many(7, noise, 5)
    assert [q for q, _ in singles] == queries.tolist() + more_queries.tolist()
    assert [e for _, e in singles] == etas.tolist() + more_etas.tolist()


@pytest.mark.parametrize("kind", ["gaussian", "bounded"])
@pytest.mark.parametrize("host", [False, True], ids=["tensor-rows", "numpy-rows"])
@pytest.mark.parametrize("advance_rate", [0.6, 0.15])
def test_round_buffer_replays_each_row_stream_across_refills(host: bool, advance_rate: float, kind: str) -> None:
    # Rows that seldom start a round leave the buffer refilling late (when its furthest cursor reaches the
    # end), rows that often do refill it early: either way each row is its single stream, draw for draw,
    # also after a row is reseeded between refills (the compiled refill must draw from its new generators).
    noise = NoiseModel(kind, 1.0)
    buffer = RoundBuffer(3, 50, noise, capacity=3, device=torch.device("cpu"))
    buffer.seed([0, 1, 2], [10, 20, 30])
    streams = [RoundStreams.from_seed(seed) for seed in (10, 20, 30)]
    expected = [stream.draw(50, noise) for stream in streams]
    rng = np.random.default_rng(0)
    for step in range(40):
        if step == 20:
            buffer.seed([1], [40])
            streams[1] = RoundStreams.from_seed(40)
            expected[1] = streams[1].draw(50, noise)
        queries, etas = buffer.current_on_host() if host else buffer.current()
        assert [(int(q), float(e)) for q, e in zip(queries, etas, strict=True)] == expected
        rows = rng.random(3) < advance_rate
        if host:  # the rounds of some rows only (what a step that restarts them reads)
            queries, etas = buffer.current_on_host(rows)
            read = [(int(q), float(e)) for q, e, row in zip(queries, etas, rows, strict=True) if row]
            assert read == [draw for draw, row in zip(expected, rows, strict=True) if row]
        buffer.advance(rows if host else torch.as_tensor(rows))
        expected = [
            stream.draw(50, noise) if row else old for stream, row, old in zip(streams, rows, expected, strict=True)
        ]


LLM_VECTOR_IDS = [env_id for env_id in VECTOR_IDS if env_id in LLM_ENVS]


@pytest.mark.parametrize("env_id", LLM_VECTOR_IDS)
def test_llm_torch_backend_matches_numpy_backend_and_stays_on_device(env_id: str) -> None:
    device = torch.device("cpu")
    # Free lengths, so rounds end at different steps: with fixed length every row ends together, and in the
    # step where all rows autoreset the NumPy backend leaves forced_eos out of infos while torch keeps it.
    kwargs = {**LLM_KWARGS, "fixed_length": False}
    numpy_envs = gym.make_vec(env_id, num_envs=3, **kwargs)
    torch_envs = gym.make_vec(env_id, num_envs=3, array_backend="torch", device=device, **kwargs)
    numpy_observations, _ = numpy_envs.reset(seed=2)
    torch_observations, _ = torch_envs.reset(seed=2)
    eos = numpy_envs.unwrapped.eos_token_id
    rng = np.random.default_rng(3)
    ended = 0
    for _ in range(12):
        for key, value in torch_observations.items():
            assert isinstance(value, torch.Tensor) and value.device == device
            np.testing.assert_array_equal(value.numpy(), numpy_observations[key])
        actions = testing.mixed_actions(
            rng, numpy_observations["action_mask"], testing.eos_actions(numpy_observations, eos)
        )
        numpy_observations, numpy_rewards, numpy_terminated, _, numpy_infos = numpy_envs.step(actions)
        torch_observations, rewards, terminated, _, torch_infos = torch_envs.step(torch.as_tensor(actions))
        assert rewards.device == device and terminated.device == device
        np.testing.assert_array_equal(rewards.numpy(), numpy_rewards)
        np.testing.assert_array_equal(terminated.numpy(), numpy_terminated)
        assert set(torch_infos) == set(numpy_infos)
        if numpy_terminated.any():
            ended += int(numpy_terminated.sum())
            # no strings in info: the text is decoded from the response row, "" from the fill value
            for row in range(3):
                text = torch_envs.unwrapped.response_text(torch_infos["response"][row])
                assert text == numpy_envs.unwrapped.response_text(numpy_infos["response"][row])
                assert (text == "") if not numpy_terminated[row] else isinstance(text, str)
            assert torch_envs.unwrapped.optimal_kind == "oracle_greedy"
            np.testing.assert_array_equal(torch_infos["regret"].numpy(), numpy_infos["regret"])
        for value in torch_infos.values():
            assert value.device == device
    assert ended > 0


@pytest.mark.parametrize("env_id", LLM_VECTOR_IDS)
def test_llm_bad_action_batches_and_strict_actions_raise(env_id: str) -> None:
    envs = gym.make_vec(env_id, num_envs=2, strict_actions=True, **LLM_KWARGS)
    observations, _ = envs.reset(seed=0)
    k = LLM_KWARGS["top_k"]
    with pytest.raises(ValueError, match=r"shape \(2,\).*got shape \(3,\)"):
        envs.step(np.array([0, 1, 2]))
    with pytest.raises(TypeError, match="dtype float64"):
        envs.step(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match=rf"action {k} of sub-env 1 is out of range: it must lie in \[0, {k}\)"):
        envs.step(np.array([0, k]))
    eos_actions = testing.eos_actions(observations, envs.unwrapped.eos_token_id)
    non_eos = (eos_actions + 1) % k  # never the EOS candidate
    for _ in range(LLM_KWARGS["max_length"] - 1):
        observations, _, terminated, _, _ = envs.step(non_eos)
        assert not terminated.any()
        eos_actions = testing.eos_actions(observations, envs.unwrapped.eos_token_id)
        non_eos = (eos_actions + 1) % k
    # position L: only EOS is allowed, and strict_actions refuses the forced EOS
    with pytest.raises(ValueError, match=r"action \d of sub-env 0 is masked at position 4: allowed actions are"):
        envs.step(non_eos)
    _, _, terminated, _, infos = envs.step(eos_actions)
    assert terminated.all() and not infos["forced_eos"].any()


def test_llm_cache_stays_as_wide_as_the_longest_live_prefix() -> None:
    envs = gym.make_vec("TokenizedDecoding-v0", num_envs=4, **LLM_KWARGS)
    observations, _ = envs.reset(seed=0)
    query_width = observations["query"].shape[1]
    rng = np.random.default_rng(0)
    eos = envs.unwrapped.eos_token_id
    for _ in range(40):  # about ten rounds per sub-env: without trimming the cache would grow by 40 columns
        actions = testing.mixed_actions(rng, observations["action_mask"], testing.eos_actions(observations, eos))
        observations, *_ = envs.step(actions)
        width = envs.unwrapped.rounds.state.attention_mask.shape[1]
        assert width <= query_width + LLM_KWARGS["max_length"] + 1


def test_llm_cached_initial_states_match_encoding_each_restart() -> None:
    cached = gym.make_vec("TokenizedAlignment-v0", num_envs=4, cache_initial_states=True, **LLM_KWARGS)
    encoded = gym.make_vec("TokenizedAlignment-v0", num_envs=4, cache_initial_states=False, **LLM_KWARGS)
    cached_observations, _ = cached.reset(seed=1)
    encoded_observations, _ = encoded.reset(seed=1)
    eos = cached.unwrapped.eos_token_id
    rng = np.random.default_rng(2)
    restarts = 0
    for _ in range(20):
        for key, value in encoded_observations.items():
            assert first_difference(cached_observations[key], value, f"observation {key!r}", LLM_FLOAT_ATOL) is None
        actions = testing.mixed_actions(
            rng, encoded_observations["action_mask"], testing.eos_actions(encoded_observations, eos)
        )
        cached_observations, cached_rewards, _, _, _ = cached.step(actions)
        encoded_observations, encoded_rewards, terminated, _, _ = encoded.step(actions)
        assert first_difference(cached_rewards, encoded_rewards, "rewards", LLM_FLOAT_ATOL) is None
        restarts += int(terminated.sum())
    assert restarts >= 4
    with pytest.raises(TypeError, match="cache_initial_states must be a bool or None, got 'yes'"):
        gym.make_vec("TokenizedDecoding-v0", num_envs=2, cache_initial_states="yes", **LLM_KWARGS)


def _host_view(value: Any) -> np.ndarray | None:
    """The memory behind an output as a NumPy view (None for strings and object arrays)."""
    array = value.numpy() if isinstance(value, torch.Tensor) else value
    if not isinstance(array, np.ndarray) or array.dtype == object:
        return None
    return array


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("env_id", VECTOR_IDS)
def test_no_two_outputs_share_memory_and_none_shares_the_env_state(env_id: str, backend: str) -> None:
    """Writing into anything a step returns changes no other output and not the env (EOS first: rounds end at once)."""
    envs = gym.make_vec(env_id, num_envs=3, array_backend=backend, **_kwargs(env_id))
    observations, _ = envs.reset(seed=0)
    eos = envs.unwrapped.eos_token_id
    rounds = envs.unwrapped.rounds
    ended_steps = 0
    for _ in range(6):
        masks = np.asarray(observations["action_mask"]).astype(bool)
        eos_actions = testing.eos_actions(observations, eos)
        usable = (eos_actions >= 0) & masks[np.arange(len(masks)), np.maximum(eos_actions, 0)]
        actions = np.where(usable, eos_actions, masks.argmax(axis=1))
        observations, rewards, terminated, truncated, infos = envs.step(actions)
        ended_steps += bool(np.asarray(infos["round_ended"]).any())
        outputs = {f"observation {key}": value for key, value in observations.items()}
        outputs.update({f"info {key}": value for key, value in infos.items()})
        outputs.update(rewards=rewards, terminated=terminated, truncated=truncated)
        state = {name: getattr(rounds, name) for name in ("queries", "lengths", "finished", "noise", "mask")}
        views = {name: _host_view(value) for name, value in {**outputs, **state}.items()}
        names = [name for name in views if views[name] is not None]
        for first_index, first in enumerate(names):
            for second in names[first_index + 1 :]:
                if first in state and second in state:
                    continue
                assert not np.shares_memory(views[first], views[second]), (first, second)
    assert ended_steps > 0


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda mode: mode.value)
@pytest.mark.parametrize("env_id", VECTOR_IDS)
def test_every_autoreset_mode_replays_gymnasiums_sync_vector_env(env_id: str, mode: AutoresetMode) -> None:
    """Sub-env i is the single env in every autoreset mode: the native env equals SyncVectorEnv over single envs."""
    testing.check_autoreset_matches_sync(env_id, mode, **_kwargs(env_id))


def test_bad_autoreset_mode_and_reset_mask_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="autoreset_mode.*'bogus'"):
        gym.make_vec("TokenizedMultiArmedBandit-v0", 2, autoreset_mode="bogus")
    envs = gym.make_vec("TokenizedMultiArmedBandit-v0", 2, autoreset_mode="SameStep")
    assert envs.unwrapped.autoreset_mode == AutoresetMode.SAME_STEP
    envs.reset(seed=0)
    with pytest.raises(TypeError, match="reset_mask"):
        envs.reset(options={"reset_mask": [True, False]})
    with pytest.raises(ValueError, match=r"reset_mask.*shape \(2,\)"):
        envs.reset(options={"reset_mask": np.ones(3, dtype=bool)})
    with pytest.raises(ValueError, match="reset_mask.*at least one True"):
        envs.reset(options={"reset_mask": np.zeros(2, dtype=bool)})


def test_reset_mask_restarts_only_the_masked_sub_envs() -> None:
    envs = gym.make_vec("TokenizedLinearBandit-v0", 3, autoreset_mode=AutoresetMode.DISABLED)
    observations, _ = envs.reset(seed=0)
    observations, *_ = envs.step(np.asarray(observations["action_mask"]).argmax(1))  # one token each, none ends
    before = {key: np.copy(value) for key, value in observations.items()}
    observations, infos = envs.reset(options={"reset_mask": np.array([False, True, False])})
    assert observations["length"].tolist() == [1, 0, 1]
    for key in ("response", "query", "candidate_embeddings"):
        np.testing.assert_array_equal(observations[key][[0, 2]], before[key][[0, 2]])
    assert infos["_query_index"].tolist() == [False, True, False]
