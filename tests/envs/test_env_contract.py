"""The env contract on N rows (NumPy full or ended rows only, torch) agrees with one round at a time.

Rows whose round did not end hold the info schema's fill values, with the schema's dtypes.
"""

from __future__ import annotations

import numpy as np
import torch

from tokenized_bandit_gym.envs.env_contract import InfoSchema, forced_and_refused, round_summary


def test_batched_round_summary_equals_one_round_at_a_time() -> None:
    rng = np.random.default_rng(0)
    n, length, d = 9, 5, 3
    ended = rng.random(n) < 0.5
    ended[:2] = (True, False)
    rows = {
        "utility": rng.random(n),
        "optimal_utility": rng.random(n) + 1,
        "oracle_greedy_utility": rng.random(n),
        "noise": rng.normal(size=n),
        "response": rng.integers(0, 7, (n, length)),
        "response_length": rng.integers(1, length + 1, n),
        "optimal_response": rng.integers(0, 7, (n, length)),
        "response_embedding": rng.random((n, d)).astype(np.float32),
    }
    schema = InfoSchema(length, d)
    pending, pending_rows = schema.pending(), schema.pending(n)
    index = np.flatnonzero(ended)
    full = round_summary(**rows, ended=ended)
    compact = round_summary(**{key: value[index] for key, value in rows.items()}, ended=ended, ended_rows=index)
    on_device = round_summary(
        **{key: torch.from_numpy(value) for key, value in rows.items()}, ended=torch.from_numpy(ended)
    )
    for row in range(n):
        alone = round_summary(**{key: value[row] for key, value in rows.items()})
        assert alone.keys() == pending.keys() == pending_rows.keys()
        for key, value in alone.items():
            expected = value if ended[row] else pending[key]
            for batched in (full, compact, on_device):
                assert batched.keys() == pending.keys()
                np.testing.assert_array_equal(np.asarray(batched[key][row]), expected)
                assert np.asarray(batched[key]).dtype == pending_rows[key].dtype
    np.testing.assert_array_equal(full["regret"][index], rows["optimal_utility"][index] - rows["utility"][index])


def test_forced_and_refused_is_the_single_round_rule_on_every_row() -> None:
    allowed = np.array([True, False, False, False, True])
    lengths = np.array([0, 2, 3, 3, 3])
    stepping = np.array([True, True, True, False, True])
    for strict in (False, True):
        forced, refused = forced_and_refused(allowed, lengths, stepping, 4, strict)
        np.testing.assert_array_equal(forced, [False, True, True, False, False])
        np.testing.assert_array_equal(refused, [False, True, strict, False, False])
        torch_forced, torch_refused = forced_and_refused(
            torch.from_numpy(allowed), torch.from_numpy(lengths), torch.from_numpy(stepping), 4, strict
        )
        np.testing.assert_array_equal(torch_forced.numpy(), forced)
        np.testing.assert_array_equal(torch_refused.numpy(), refused)


def test_a_pending_step_is_the_step_entries_then_new_fill_values() -> None:
    schema = InfoSchema(4, 3, pairwise=True)
    first, second = schema.pending_step(5, True), schema.pending_step(2, False)
    expected = {"query_index": 5, "forced_eos": True, **schema.pending()}
    assert list(first) == list(expected)
    for key, value in expected.items():
        assert np.array_equal(first[key], value) and type(first[key]) is type(value), key
    assert (second["query_index"], second["forced_eos"]) == (2, False)
    arrays = [key for key, value in first.items() if isinstance(value, np.ndarray)]
    assert arrays  # response, optimal_response, response_embedding, utilities
    for key in arrays:
        assert not np.shares_memory(first[key], second[key]), key
    first["response"][:] = 7  # a user's write never reaches the next step's info
    assert (schema.pending_step(5, True)["response"] == -1).all()
