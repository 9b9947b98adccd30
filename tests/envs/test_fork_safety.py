"""Forked workers never deadlock: each case runs as a user runs it, in a fresh interpreter with torch's default threads.

The parent builds an env (Gymnasium's async vector env does, to read the spaces), which runs
multi-threaded torch ops; a forked child that then used GNU OpenMP's inherited pool would hang.
Every script runs under a timeout in its own process group, so a deadlock fails the test instead
of hanging the run, and no hung worker outlives it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import tokenized_bandit_gym
from tokenized_bandit_gym import testing

ENV_IDS = tokenized_bandit_gym.registered_ids()
REPO_ROOT = Path(__file__).resolve().parents[2]


def run_fresh(script: str, timeout_s: float) -> str:
    """Run ``script`` in a fresh interpreter (nothing set first) and return its stdout; fail on a hang or an error."""
    try:
        completed = testing.run_in_fresh_interpreter(textwrap.dedent(script), timeout_s=timeout_s, cwd=REPO_ROOT)
    except TimeoutError as error:
        pytest.fail(str(error))
    assert completed.returncode == 0, completed.stderr[-4000:]
    return completed.stdout


def test_forked_child_runs_torch_on_one_thread_and_the_parent_keeps_its_own() -> None:
    output = run_fresh(
        """
        import os, torch, tokenized_bandit_gym
        torch.set_num_threads(2)
        torch.ones(1 << 20).sum()  # a parallel op: the parent's OpenMP pool is running
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            os.write(write, str(torch.get_num_threads()).encode())
            torch.ones(1 << 20).sum()
            os._exit(0)
        os.waitpid(child, 0)
        print(os.read(read, 16).decode(), torch.get_num_threads())
        """,
        timeout_s=60,
    )
    assert output.split() == ["1", "2"]


def test_fork_hook_imports_no_torch_into_a_child_whose_parent_had_none() -> None:
    output = run_fresh(
        """
        import os, sys, tokenized_bandit_gym
        child = os.fork()
        if child == 0:
            os._exit(0 if "torch" not in sys.modules else 1)
        print(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]), "torch" in sys.modules)
        """,
        timeout_s=60,
    )
    assert output.split() == ["0", "False"]


@pytest.mark.slow  # every id, the LLM ones at their default size: about 60 s on a busy 2-core machine
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_async_make_vec_steps_every_id_in_a_fresh_process(env_id: str) -> None:
    """``gym.make_vec(id, 2, vectorization_mode="async")`` with the fork start method, every id."""
    testing.check_fork_safety(env_id, timeout_s=240)


@pytest.mark.parametrize(
    ("env_id", "kwargs"), [("TokenizedLinearBandit-v0", {}), ("TokenizedAlignment-v0", {"max_length": 5, "top_k": 4})]
)
def test_fork_context_after_the_parent_stepped_an_env(env_id: str, kwargs: dict[str, int]) -> None:
    testing.check_fork_safety(env_id, **kwargs)


@pytest.mark.slow  # importing Tianshou takes about 10 s
def test_tianshou_subproc_vector_env_steps_after_the_parent_stepped_an_env() -> None:
    pytest.importorskip("tianshou")
    output = run_fresh(
        """
        import gymnasium as gym, tokenized_bandit_gym
        from tianshou.env import SubprocVectorEnv
        env = gym.make("TokenizedLinearBandit-v0")
        env.reset(seed=0)
        env.step(0)
        envs = SubprocVectorEnv([lambda: gym.make("TokenizedLinearBandit-v0")] * 2)
        envs.reset()
        envs.step([0, 0])
        envs.close()
        print("stepped")
        """,
        timeout_s=120,
    )
    assert output.split() == ["stepped"]


@pytest.mark.parametrize("torch_threads", ["", "2"], ids=["default", "explicit-2"])
def test_forked_workers_after_the_small_work_threads_limited_numpy_blas(torch_threads: str) -> None:
    """A script's ``use_small_work_threads()`` limits NumPy's BLAS pool to one thread (threadpoolctl), also when it
    gives torch two (a script's ``--threads 2``); forking after it is safe.

    The parent runs a BLAS product on its limited pool, then a raw forked child and an async vector
    env's forked workers run theirs; the parent's pool keeps its limit.
    """
    output = run_fresh(
        f"""
        import os, gymnasium as gym, numpy as np, tokenized_bandit_gym
        from gymnasium.vector import AsyncVectorEnv
        from threadpoolctl import threadpool_info
        from tokenized_bandit_gym.threads import use_small_work_threads
        use_small_work_threads({torch_threads})
        matrix = np.ones((512, 512))
        matrix @ matrix  # the parent's BLAS pool has run
        child = os.fork()
        if child == 0:
            os._exit(0 if float((matrix @ matrix)[0, 0]) == 512.0 else 1)
        print("child", os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
        envs = AsyncVectorEnv([lambda: gym.make("TokenizedLinearBandit-v0")] * 2, context="fork")
        envs.reset(seed=1)
        envs.step([0, 0])
        envs.close()
        blas = {{pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}}
        import torch
        print("stepped", blas <= {{1}}, "torch", torch.get_num_threads())
        """,
        timeout_s=120,
    )
    assert output.split() == ["child", "0", "stepped", "True", "torch", torch_threads or "1"]


@pytest.mark.parametrize("vendor", ["GenuineIntel", "AuthenticAMD"])
def test_forked_child_multiplies_on_each_vendors_product_path(vendor: str) -> None:
    """The LLM's prepared products (MKL's packed GEMM on Intel, oneDNN's linear on AMD) in a forked child, after
    the parent ran them on torch's default threads, and in the parent again after the fork.

    The vendor the path rule reads is set in the script, so both paths run on any x86 CPU; where the build has
    no such product the script says so and the test skips.
    """
    output = run_fresh(
        f"""
        import os, torch, tokenized_bandit_gym
        from tokenized_bandit_gym.llm import native_decoder_forward as forward
        forward.cpu_vendor = lambda: {vendor!r}
        weight = torch.randn(512, 256, generator=torch.Generator().manual_seed(0))  # (out, in)
        linear = forward.FrozenLinear(weight)
        if not (linear.packed or linear.onednn):
            print("unprepared")
            raise SystemExit(0)
        inputs = torch.randn(64, 256, generator=torch.Generator().manual_seed(1))  # (rows, in)
        expected = inputs @ weight.T
        close = lambda product: torch.allclose(product, expected, atol=1e-4, rtol=1e-5)
        with torch.no_grad():
            before = close(linear(inputs))  # the parent's thread pool has run the prepared product
            child = os.fork()
            if child == 0:
                os._exit(0 if close(linear(inputs)) else 1)
            status = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
            print("oneDNN", linear.onednn, "before", before, "child", status, "after", close(linear(inputs)))
        """,
        timeout_s=120,
    )
    if output.split() == ["unprepared"]:
        pytest.skip(f"torch has no {'MKL packed GEMM' if vendor == 'GenuineIntel' else 'oneDNN linear'} here")
    on_onednn = str(vendor != "GenuineIntel")
    assert output.split() == ["oneDNN", on_onednn, "before", "True", "child", "0", "after", "True"]
