"""TokenizedAlignment-v0 and TokenizedDecoding-v0: API conformance, determinism, CRN, bad input."""

from __future__ import annotations

import doctest
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

import tokenized_bandit_gym
from tokenized_bandit_gym.envs import tokenized_alignment_env, tokenized_decoding_env

SMALL = {
    "TokenizedAlignment-v0": {"max_length": 5, "top_k": 4},
    "TokenizedDecoding-v0": {"max_length": 4, "top_k": 3, "beam_width": 2},
}


def test_ids_registered_without_importing_transformers() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tokenized_bandit_gym as t; ids = t.registered_ids(); "
        "assert 'TokenizedAlignment-v0' in ids and 'TokenizedDecoding-v0' in ids; "
        "assert 'transformers' not in sys.modules, 'transformers imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert tokenized_bandit_gym.registered_ids()


@pytest.mark.parametrize("env_id", sorted(SMALL))
def test_gymnasium_and_sb3_check_env(env_id: str) -> None:
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(env_id, **SMALL[env_id])
    check_env(env.unwrapped, skip_render_check=True)
    sb3_check_env(env.unwrapped, warn=False)


@pytest.mark.parametrize("env_id", sorted(SMALL))
def test_default_ids_make_and_reset(env_id: str) -> None:
    env = gym.make(env_id)
    observation, info = env.reset(seed=0)
    assert env.observation_space.contains(observation)
    problem = env.unwrapped.problem
    assert problem.max_length == (30 if env_id == "TokenizedAlignment-v0" else 8)
    if env_id == "TokenizedAlignment-v0":
        assert (problem.top_k, problem.gamma) == (15, 0.8)
        torch.testing.assert_close(
            problem.latent_theta, torch.full((problem.hidden_size,), problem.hidden_size**-0.5, dtype=torch.float64)
        )


def play(env: gym.Env[Any, Any], seed: int, policy_seed: int, episodes: int) -> list[tuple[Any, ...]]:
    """Trajectory summaries of ``episodes`` rounds with seeded random allowed actions."""
    rng = np.random.default_rng(policy_seed)
    record = []
    observation, info = env.reset(seed=seed)
    for _ in range(episodes):
        terminated = False
        steps = []
        while not terminated:
            action = int(rng.choice(np.flatnonzero(observation["action_mask"])))
            observation, reward, terminated, _, info = env.step(action)
            steps.append((action, reward))
        record.append(
            (
                info["query_index"],
                info["noise"],
                tuple(info["response"]),
                info["utility"],
                env.unwrapped.response_text(info["response"]),
                steps,
            )
        )
        observation, info = env.reset()
    return record


def test_same_seeds_same_trajectories_and_common_random_numbers() -> None:
    kwargs = {**SMALL["TokenizedAlignment-v0"], "noise_scale": 1.0}
    first = play(gym.make("TokenizedAlignment-v0", **kwargs), seed=3, policy_seed=0, episodes=3)
    second = play(gym.make("TokenizedAlignment-v0", **kwargs), seed=3, policy_seed=0, episodes=3)
    assert first == second
    other_policy = play(gym.make("TokenizedAlignment-v0", **kwargs), seed=3, policy_seed=1, episodes=3)
    assert [r[:2] for r in other_policy] == [r[:2] for r in first]  # same queries and noise
    assert [r[2] for r in other_policy] != [r[2] for r in first]


def test_alignment_observation_is_the_tlb_reduction() -> None:
    env = gym.make(
        "TokenizedAlignment-v0", max_length=4, top_k=5, noise_scale=0.0, queries="paper", embedding_norm="l2"
    )
    problem = env.unwrapped.problem
    observation, _ = env.reset(seed=1)
    terminated = False
    while not terminated:
        features = observation["candidate_embeddings"].astype(np.float64)  # (k, d + 1)
        state = env.unwrapped.rounds.state
        np.testing.assert_allclose(
            features @ problem.theta.numpy(), problem.candidate_utilities(state)[0].numpy(), atol=1e-4
        )
        np.testing.assert_allclose(np.linalg.norm(features[:, :-1], axis=1), 1.0, atol=1e-5)
        at_last_position = observation["length"] == problem.max_length - 1
        assert (observation["candidate_tokens"] == problem.eos_token_id).any() == at_last_position  # fixed length
        observation, reward, terminated, _, info = env.step(int(np.argmax(observation["action_mask"])))
    assert reward == info["utility"]
    np.testing.assert_allclose(
        info["response_embedding"].astype(np.float64) @ problem.theta.numpy(), info["utility"], atol=1e-4
    )
    assert isinstance(env.unwrapped.response_text(info["response"]), str)
    assert env.unwrapped.optimal_kind == "oracle_greedy"


def test_forced_eos_and_strict_actions() -> None:
    env = gym.make("TokenizedAlignment-v0", max_length=2, top_k=3)
    observation, _ = env.reset(seed=0)
    observation, *_ = env.step(0 if observation["candidate_tokens"][0] != env.unwrapped.eos_token_id else 1)
    masked = int(np.flatnonzero(observation["action_mask"] == 0)[0])
    _, _, terminated, _, info = env.step(masked)
    assert terminated and info["forced_eos"] and info["response"][-1] == env.unwrapped.eos_token_id
    strict = gym.make("TokenizedAlignment-v0", max_length=2, top_k=3, strict_actions=True)
    observation, _ = strict.reset(seed=0)
    strict.step(0 if observation["candidate_tokens"][0] != strict.unwrapped.eos_token_id else 1)
    with pytest.raises(ValueError, match="masked"):
        strict.step(masked)
    with pytest.raises(ValueError, match="out of range"):
        strict.step(3)
    with pytest.raises(TypeError):
        strict.step(0.5)


def test_oracle_beam_benchmark_and_oracle_greedy_agent() -> None:
    from tokenized_bandit_gym.agents import make
    from tokenized_bandit_gym.evaluation.run_online import run_online

    env = gym.make("TokenizedAlignment-v0", max_length=4, top_k=3, optimal_kind="oracle_beam", beam_width=3)
    result = run_online(env, make("oracle_greedy"), rounds=3, seed=0)
    assert np.all(result.optimal_utility >= result.oracle_greedy_utility - 1e-12)
    np.testing.assert_allclose(result.utility, result.oracle_greedy_utility, atol=1e-5)


def test_misaligned_greedy_follows_the_lm() -> None:
    from tokenized_bandit_gym.agents import make
    from tokenized_bandit_gym.evaluation.run_online import run_online

    env = gym.make("TokenizedAlignment-v0", max_length=4, top_k=3, gamma=1.0, noise_scale=0.0)
    result = run_online(env, make("misaligned_greedy"), rounds=2, seed=0)
    np.testing.assert_allclose(result.regret, 0.0, atol=1e-5)  # gamma = 1: LM greedy is the oracle greedy
    with pytest.raises(ValueError, match="candidate_logprobs"):
        run_online(gym.make("TokenizedDecoding-v0", **SMALL["TokenizedDecoding-v0"]), make("misaligned_greedy"), 1, 0)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"model": "/nonexistent/model/dir"}, ValueError, "does not exist"),
        ({"top_k": 600}, ValueError, "larger than the vocabulary"),
        ({"top_k": 0}, ValueError, "top_k"),
        ({"gamma": 2.0}, ValueError, "gamma"),
        ({"queries": []}, ValueError, "no queries"),
        ({"queries": "not-a-source"}, ValueError, "neither a known source"),
        ({"optimal_kind": "exact"}, ValueError, "optimal_kind"),
        ({"theta": "wrong"}, ValueError, "theta"),
        ({"dtype": "int8"}, ValueError, "dtype"),
        ({"trust_remote_code": "yes"}, TypeError, "trust_remote_code"),
    ],
)
def test_bad_input(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        gym.make("TokenizedAlignment-v0", **kwargs)


def test_tokenizer_without_eos(stories: tuple[Any, Any]) -> None:
    import copy

    tokenizer = copy.deepcopy(stories[1])
    tokenizer.eos_token = None
    with pytest.raises(ValueError, match="no EOS"):
        gym.make("TokenizedAlignment-v0", model=stories[0], tokenizer=tokenizer)


def test_empty_text_file(tmp_path: Any) -> None:
    path = tmp_path / "queries.txt"
    path.write_text("\n  \n")
    with pytest.raises(ValueError, match="no queries"):
        gym.make("TokenizedAlignment-v0", queries=str(path))


@pytest.mark.parametrize("module", [tokenized_alignment_env, tokenized_decoding_env])
def test_docstring_examples_run(module: Any) -> None:
    failures, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0


def test_example_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import runpy
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "llm_alignment_baselines.py"
    monkeypatch.setattr("sys.argv", [str(script), "--rounds", "2", "--max-length", "3", "--top-k", "2"])
    runpy.run_path(str(script), run_name="__main__")
    assert "misaligned_greedy: cumulative regret" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("env_id", sorted(SMALL))
def test_check_env_with_defaults(env_id: str) -> None:
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(env_id)
    check_env(env.unwrapped, skip_render_check=True)
    sb3_check_env(env.unwrapped, warn=False)


def _counting(problem: Any, name: str, calls: list[str]) -> None:
    """Record each call of ``problem.<name>`` in ``calls`` (the method still runs)."""
    method = getattr(problem, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return method(*args, **kwargs)

    setattr(problem, name, counted)


def _alone(kwargs: dict[str, Any], query: int) -> tuple[float, list[int]]:
    """The oracle greedy decode of ``query`` by a separate env's problem, one query alone (the reference)."""
    problem = gym.make("TokenizedAlignment-v0", **kwargs).unwrapped.problem
    decoded = problem.greedy_decode(torch.tensor([query]))
    return float(decoded.utility[0]), decoded.responses[0].tolist()


def test_benchmark_rows_decode_the_benchmark_in_the_rounds_forward() -> None:
    """Fixed length: each round's oracle-greedy benchmark is decoded by rows of the rounds' own forward (no
    decode of its own), a row that chooses as greedy does shares its forward with that benchmark row, and the
    benchmark equals the decode of the query alone."""
    kwargs = {"max_length": 4, "top_k": 3}
    k = kwargs["top_k"]
    envs = gym.make_vec("TokenizedAlignment-v0", num_envs=3, **kwargs)
    rounds = envs.unwrapped.rounds
    problem = rounds.problem
    calls: list[str] = []
    _counting(problem, "greedy_decode", calls)
    seen: list[int] = []  # tokens embedded per forward
    handle = problem.model.get_input_embeddings().register_forward_pre_hook(
        lambda module, args: seen.append(int(args[0].numel()))
    )
    rng = np.random.default_rng(0)
    observations, _ = envs.reset(seed=[5, 5, 9])  # rows 0 and 1 play the same queries
    ended, restarting = 0, False
    try:
        for _ in range(3 * (kwargs["max_length"] + 1)):  # three rounds, each with the step that starts the next
            queries = rounds.queries.tolist()
            benchmark_rows = len({query for query in queries if not problem.has_oracle_greedy(query)})
            shared = 0 if problem.has_oracle_greedy(queries[0]) else 1  # row 0 with its query's benchmark row
            greedy = int(problem.greedy_choice(rounds.state)[0])  # row 0 chooses as greedy does
            allowed = [np.flatnonzero(mask) for mask in observations["action_mask"]]
            actions = np.array([greedy] + [int(rng.choice(row)) for row in allowed[1:]])
            seen.clear()
            observations, _, terminated, _, infos = envs.step(actions)
            if not restarting:  # row 0 and its query's benchmark row are one row of the forward (none at the end)
                assert len(seen) <= 1 and all(tokens <= (3 + benchmark_rows - shared) * k for tokens in seen)
            restarting = bool(terminated.any())
            if restarting:
                assert terminated.all()
                ended += 1
                assert infos["response"][0].tolist() == infos["optimal_response"][0].tolist()
                for row in range(3):
                    utility, response = _alone(kwargs, queries[row])
                    assert infos["optimal_response"][row].tolist() == response
                    assert abs(float(infos["optimal_utility"][row]) - utility) < 1e-5
    finally:
        handle.remove()
    assert ended == 3 and calls == []  # every benchmark came from the rounds' forward


def test_benchmark_row_of_a_round_that_ends_early_is_finished_greedily() -> None:
    """Free lengths: the round ends at its first allowed EOS; its query's benchmark row is finished greedily on
    its own (no decode from the start) and equals the decode of the query alone."""
    kwargs = {"max_length": 5, "top_k": 4, "fixed_length": False}
    env = gym.make("TokenizedAlignment-v0", **kwargs)
    problem = env.unwrapped.problem
    calls: list[str] = []
    _counting(problem, "greedy_decode", calls)
    _counting(problem, "greedy_continue", calls)
    for seed in (0, 1, 2):
        observation, info = env.reset(seed=seed)
        query = int(info["query_index"])
        terminated, steps = False, 0
        while not terminated:
            eos = np.flatnonzero(observation["candidate_tokens"] == env.unwrapped.eos_token_id)
            allowed = np.flatnonzero(observation["action_mask"])
            action = int(eos[0]) if eos.size and observation["action_mask"][eos[0]] else int(allowed[0])
            observation, _, terminated, _, info = env.step(action)
            steps += 1
        utility, response = _alone(kwargs, query)
        assert info["optimal_response"].tolist() == response
        assert abs(float(info["optimal_utility"]) - utility) < 1e-5
        if steps < sum(token != env.unwrapped.eos_token_id for token in response) + 1:
            assert calls[-1] == "greedy_continue"
    assert "greedy_decode" not in calls and "greedy_continue" in calls
