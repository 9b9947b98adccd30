"""theta fitted by Bradley-Terry on comparisons: the fit, the files it reads, the cache, the env keywords."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem
from tokenized_bandit_gym.llm.preference_theta import (
    MIN_PAIRS,
    fit_bradley_terry,
    held_out_accuracy,
    pooled_embeddings,
    read_comparisons,
)

ROOT = Path(__file__).resolve().parents[2]
PAIRS = [
    ("Once upon a time, a kind girl shared her toys.", "Once upon a time, a mean girl broke the toys."),
    ("The dog was happy and played in the sun.", "The dog was sad and bit the cat."),
    ("Tom helped his mom bake a cake.", "Tom threw the cake on the floor."),
    ("Lily said thank you to the old man.", "Lily shouted at the old man."),
    ("The bird sang a sweet song.", "The bird pecked the boy."),
    ("Ben gave his friend a hug.", "Ben pushed his friend down."),
    ("They cleaned the park together.", "They left trash in the park."),
    ("Mia found the lost kitten and took it home.", "Mia kicked the lost kitten."),
    ("The sun was warm and the sky was blue.", "The storm broke the little house."),
    ("Sam shared his apple with Sue.", "Sam took Sue's apple and ran."),
    ("The bear said sorry to the fox.", "The bear laughed at the fox."),
    ("Anna read a story to her brother.", "Anna tore her brother's book."),
]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def logistic_objective(theta: np.ndarray, x: np.ndarray, l2: float) -> tuple[float, np.ndarray]:
    """The Bradley-Terry loss and gradient, written independently in NumPy for scipy."""
    margin = x @ theta
    loss = np.logaddexp(0.0, -margin).sum() + 0.5 * l2 * theta @ theta
    gradient = -x.T @ (1.0 / (1.0 + np.exp(margin))) + l2 * theta
    return float(loss), gradient


def test_fit_matches_scipy_and_recovers_the_true_direction() -> None:
    from scipy.optimize import minimize

    generator = np.random.default_rng(0)
    true_theta = generator.normal(size=6)
    true_theta /= np.linalg.norm(true_theta)
    x = generator.normal(size=(2000, 6))
    chosen_first = generator.random(2000) < 1.0 / (1.0 + np.exp(-3.0 * x @ true_theta))
    differences = np.where(chosen_first[:, None], x, -x)  # e(chosen) - e(rejected)
    fitted = fit_bradley_terry(torch.tensor(differences), l2=0.5).numpy()
    reference = minimize(logistic_objective, np.zeros(6), args=(differences, 0.5), jac=True, method="L-BFGS-B")
    assert reference.success
    np.testing.assert_allclose(fitted, reference.x, rtol=1e-4, atol=1e-5)
    cosine = fitted @ true_theta / np.linalg.norm(fitted)
    assert cosine > 0.98


def test_held_out_accuracy_counts_correct_signs_and_brackets_them() -> None:
    differences = torch.tensor([[1.0, 0.0], [2.0, 1.0], [-1.0, 0.0], [3.0, -1.0]], dtype=torch.float64)
    accuracy, (low, high) = held_out_accuracy(torch.tensor([1.0, 0.0], dtype=torch.float64), differences)
    assert accuracy == 0.75
    assert 0.0 <= low <= accuracy <= high <= 1.0


def test_reads_jsonl_and_csv_with_named_columns(tmp_path: Path) -> None:
    rows = [{"good": chosen, "bad": rejected} for chosen, rejected in PAIRS]
    from_jsonl = read_comparisons(write_jsonl(tmp_path / "pairs.jsonl", rows), fields=("good", "bad"))
    csv_file = tmp_path / "pairs.csv"
    import csv

    with csv_file.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "good", "bad"])
        writer.writeheader()
        writer.writerows({"id": index, **row} for index, row in enumerate(rows))
    from_csv = read_comparisons(csv_file, fields=("good", "bad"))
    expected = [chosen for chosen, _ in PAIRS], [rejected for _, rejected in PAIRS]
    assert (from_jsonl.chosen, from_jsonl.rejected) == expected
    assert (from_csv.chosen, from_csv.rejected) == expected


@pytest.mark.parametrize(
    ("rows", "fields", "message"),
    [
        ([], ("chosen", "rejected"), "holds no pairs"),
        ([{"chosen": "same", "rejected": "same"}] + [{"chosen": a, "rejected": b} for a, b in PAIRS], None, "equals"),
        ([{"chosen": a, "rejected": b} for a, b in PAIRS], ("chosen", "worse"), "no field 'worse'"),
        ([{"chosen": a, "rejected": b} for a, b in PAIRS[: MIN_PAIRS - 1]], None, "too few for a held-out split"),
    ],
)
def test_bad_comparisons_are_refused_naming_the_problem(
    tmp_path: Path, rows: list[dict[str, Any]], fields: tuple[str, str] | None, message: str
) -> None:
    file = write_jsonl(tmp_path / "pairs.jsonl", rows)
    with pytest.raises(ValueError, match=message):
        read_comparisons(file, fields or ("chosen", "rejected"))


def test_csv_without_the_named_column_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "pairs.csv"
    file.write_text("chosen,other\na,b\n")
    with pytest.raises(ValueError, match="no column 'rejected'"):
        read_comparisons(file)


def test_pooled_embeddings_are_the_envs_e(stories: tuple[Any, Any]) -> None:
    model, tokenizer = stories
    texts = [chosen for chosen, _ in PAIRS[:3]]
    problem = LanguageModelProblem(
        model, tokenizer, texts, max_length=4, top_k=3, embedding_norm="none", fixed_length=False
    )
    state = problem.initial_state(torch.arange(3))
    expected = state.hidden_sum.double() / state.pooled_count[:, None].double()  # (3, H), the env's pooling of x
    torch.testing.assert_close(pooled_embeddings(problem, texts, batch_size=2), expected, rtol=1e-4, atol=1e-5)


def test_env_fits_theta_once_and_names_its_source(
    stories: tuple[Any, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gymnasium as gym

    monkeypatch.setenv("TBG_CACHE_DIR", str(tmp_path / "cache"))
    file = write_jsonl(tmp_path / "mine.jsonl", [{"chosen": a, "rejected": b} for a, b in PAIRS])
    model, tokenizer = stories
    kwargs = {"model": model, "tokenizer": tokenizer, "max_length": 4, "top_k": 3}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make("TokenizedAlignment-v0", theta="comparisons", comparisons=file, **kwargs)
    problem = env.unwrapped.problem
    fit = problem.preference_fit
    assert fit.num_pairs == len(PAIRS) and fit.num_held_out == 2
    assert "mine.jsonl" in problem.theta_source and "held-out pairwise accuracy" in problem.theta_source
    assert abs(float(problem.latent_theta.norm()) - 1.0) < 1e-9
    torch.testing.assert_close(problem.latent_theta.cpu(), fit.theta)
    warned = [w for w in caught if "not clearly above chance" in str(w.message)]
    assert len(warned) == (0 if fit.clearly_above_chance else 1)
    fits = list((tmp_path / "cache" / "preference-theta").iterdir())
    vector = gym.make_vec("TokenizedAlignment-v0", num_envs=2, theta="comparisons", comparisons=file, **kwargs)
    again = vector.unwrapped.problem.preference_fit
    assert again.checksum == fit.checksum and torch.equal(again.theta, fit.theta)
    assert list((tmp_path / "cache" / "preference-theta").iterdir()) == fits  # loaded, not refitted


def test_theta_names_are_checked(stories: tuple[Any, Any], tmp_path: Path) -> None:
    import gymnasium as gym

    model, tokenizer = stories
    kwargs = {"model": model, "tokenizer": tokenizer, "max_length": 4, "top_k": 3}
    with pytest.raises(ValueError, match="needs comparisons="):
        gym.make("TokenizedAlignment-v0", theta="comparisons", **kwargs)
    with pytest.raises(ValueError, match="goes with theta='comparisons'"):
        gym.make("TokenizedAlignment-v0", comparisons=tmp_path / "x.jsonl", **kwargs)
    with pytest.raises(ValueError, match="'hh-rlhf', 'comparisons'"):
        gym.make("TokenizedAlignment-v0", theta="human", **kwargs)
    default = gym.make("TokenizedAlignment-v0", **kwargs).unwrapped.problem
    assert "0.5 * 1" in default.theta_source and default.preference_fit is None
    vector = torch.ones(default.hidden_size)
    assert (
        "given by the user" in gym.make("TokenizedAlignment-v0", theta=vector, **kwargs).unwrapped.problem.theta_source
    )
    assert "random" in gym.make("TokenizedAlignment-v0", theta="random", **kwargs).unwrapped.problem.theta_source


def test_a_copied_or_pickled_env_keeps_where_theta_came_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker gets the env pickled (its recipe): the fitted theta, its source and its fit travel with it."""
    import copy
    import pickle

    import gymnasium as gym

    monkeypatch.setenv("TBG_CACHE_DIR", str(tmp_path / "cache"))
    file = write_jsonl(tmp_path / "mine.jsonl", [{"chosen": a, "rejected": b} for a, b in PAIRS])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a dozen pairs: the fit may not be clearly above chance
        env = gym.make("TokenizedAlignment-v0", theta="comparisons", comparisons=file, max_length=4, top_k=3)
        problem = env.unwrapped.problem
        for again in (pickle.loads(pickle.dumps(env.unwrapped)).problem, copy.deepcopy(problem)):
            assert again.theta_source == problem.theta_source and "mine.jsonl" in again.theta_source
            assert again.preference_fit.checksum == problem.preference_fit.checksum
            torch.testing.assert_close(again.latent_theta, problem.latent_theta)
    default = pickle.loads(pickle.dumps(gym.make("TokenizedAlignment-v0", max_length=4, top_k=3).unwrapped)).problem
    assert "0.5 * 1" in default.theta_source and default.preference_fit is None
    randomised = gym.make("TokenizedAlignment-v0", theta="random", instance_seed=3, max_length=4, top_k=3)
    assert "instance_seed=3" in pickle.loads(pickle.dumps(randomised.unwrapped)).problem.theta_source


def test_the_report_names_where_theta_came_from(tmp_path: Path) -> None:
    from tokenized_bandit_gym.evaluation.execute_run import execute_run
    from tokenized_bandit_gym.evaluation.leaderboard import build_leaderboard
    from tokenized_bandit_gym.evaluation.leaderboard_report import markdown_report, write_report
    from tokenized_bandit_gym.evaluation.run_spec import RunSpec

    kwargs = {"max_length": 3, "top_k": 2, "theta": "random", "instance_seed": 4}
    record = execute_run(RunSpec("TokenizedAlignment-v0", kwargs, "misaligned_greedy", {}, 0, 2, "LLM", "M"))
    assert record.metadata["theta_source"] == "a random unit direction (instance_seed=4)"
    synthetic = execute_run(RunSpec("TokenizedMultiArmedBandit-v0", {}, "random", {}, 0, 2, "TMAB", "R"))
    assert "theta_source" not in synthetic.metadata
    leaderboard = build_leaderboard([synthetic, record])  # the first run lacks the LLM run's theta_source
    assert leaderboard.theta_sources == {"LLM": record.metadata["theta_source"]}
    assert "Theta: a random unit direction (instance_seed=4)." in markdown_report(leaderboard)
    paths = write_report(leaderboard, tmp_path / "report")
    with paths["runs.csv"].open(newline="", encoding="utf-8") as handle:
        rows = {row["task"]: row for row in csv.DictReader(handle)}
    assert rows["LLM"]["theta_source"] == record.metadata["theta_source"] and rows["TMAB"]["theta_source"] == ""
    assert json.loads(paths["json"].read_text())["theta_sources"] == leaderboard.theta_sources


FIT_IN_A_PROCESS = """
import json, sys, warnings
import torch
from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem
from tokenized_bandit_gym.llm.load_language_model import load_language_model
from tokenized_bandit_gym.llm.preference_theta import preference_theta, read_comparisons
torch.set_num_threads(1)
warnings.simplefilter("ignore")
model, tokenizer = load_language_model()
problem = LanguageModelProblem(
    model, tokenizer, ["Once upon a time"], max_length=4, top_k=3, fixed_length=False, embedding_norm="l2"
)
fit = preference_theta(problem, read_comparisons(sys.argv[1]))
print(json.dumps({"theta": fit.theta.tolist(), "checksum": fit.checksum}))
"""


@pytest.mark.slow
def test_cache_is_safe_under_two_concurrent_processes(tmp_path: Path) -> None:
    file = write_jsonl(tmp_path / "pairs.jsonl", [{"chosen": a, "rejected": b} for a, b in PAIRS])
    cache = tmp_path / "cache"
    environment = {"TBG_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1", "PATH": ""}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", FIT_IN_A_PROCESS, str(file)],
            cwd=ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=300) for process in processes]
    for process, (_, error) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, error
    first, second = (json.loads(out) for out, _ in outputs)
    assert first == second
    entries = sorted(path.name for path in (cache / "preference-theta").iterdir())
    assert len(entries) == 2 and entries[0].startswith(".") and entries[0].endswith(".lock")  # one fit, no scratch
