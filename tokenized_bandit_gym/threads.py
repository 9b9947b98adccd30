"""Thread policy for small work: one torch thread unless the user chose otherwise.

A tokenized bandit's work is small (a ``(16, 16)`` product per step, a 260K-parameter LM, an SB3
policy of a few thousand weights): torch's default of one intra-op thread per core buys nothing
there, and on a busy machine the threads wait on each other (the LLM examples and SB3 training ran
10-30x slower with the default than with one thread on a loaded 2-core machine). So every script
(``examples/``, ``benchmarks/``, ``tbg``) calls :func:`use_small_work_threads` at start, and the
leaderboard's runs set :data:`THREAD_ENVIRONMENT` in their workers. A user who sets
``OMP_NUM_THREADS`` (or ``MKL_NUM_THREADS``) keeps what they set; a script's ``--threads`` option
passes its value here. Importing this module imports no torch.

NumPy's BLAS (OpenBLAS, used by the agents' host-side products such as EOFUL's confidence widths) stays
on one thread, whatever torch gets: its worker threads spin for a while after every call, so a second one
buys nothing on those small products and holds the other core. On one torch thread, the Figure-2 rows of
``examples/reproduce_regret.py`` used 5-18% more CPU with NumPy's default two BLAS threads than with one;
on two torch threads (its ``--real-llm`` preset on a 2-core machine) OpenBLAS's spinning worker and
torch's OpenMP worker took the second core from each other: two rounds of the nine rows took 18.7 s with
two BLAS threads and 13.9 s with one, against 22.3-23.7 s on one torch thread (2026-11-26, 2-core Intel
Xeon, ``benchmarks/RESULTS.md``). A user who sets ``OPENBLAS_NUM_THREADS`` (or ``OMP_NUM_THREADS``,
``MKL_NUM_THREADS``) keeps what they set.

Forked children: GNU OpenMP cannot use a thread pool it inherited through ``fork``, so a child whose
parent had run one multi-threaded torch op (building an env does) hangs at its first parallel op.
Importing the package registers :func:`use_one_thread_in_forked_child` with
:func:`os.register_at_fork`, so every forked child that inherits torch (Gymnasium's
``AsyncVectorEnv``, SB3's ``SubprocVecEnv``, Tianshou's ``SubprocVectorEnv``, a
``multiprocessing`` pool under the ``fork`` start method) runs torch on one intra-op thread, as
PyTorch's own ``DataLoader`` workers do. The parent keeps its threads, and a child started with
``spawn`` or ``forkserver`` is a fresh interpreter with torch's defaults.
"""

from __future__ import annotations

import os
import sys

# Torch intra-op threads for small work when the user set no thread variable.
SMALL_WORK_THREADS = 1
# The variables a user sets to choose the thread pools' sizes themselves.
USER_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
# The variables a user sets to choose NumPy's BLAS pool size themselves.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", *USER_THREAD_VARIABLES)
# The environment of every leaderboard worker process (read by the thread pools when they load).
THREAD_ENVIRONMENT = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def use_small_work_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads for small work, and NumPy's BLAS to one thread; return torch's count.

    Args:
        threads: an explicit count for torch (>= 1, e.g. a script's ``--threads``); None means
            :data:`SMALL_WORK_THREADS` unless one of :data:`USER_THREAD_VARIABLES` is set, in which
            case torch keeps the count it read from it. NumPy's BLAS gets :data:`SMALL_WORK_THREADS`
            whatever ``threads`` is (its spinning workers would hold the cores torch's pool runs on),
            unless one of :data:`BLAS_THREAD_VARIABLES` is set.

    Raises:
        ValueError: ``threads`` < 1.
        TypeError: ``threads`` not an integer.
    """
    import torch

    from tokenized_bandit_gym.core.validation import check_int

    if threads is not None:
        torch.set_num_threads(check_int("threads", threads, minimum=1))
    elif not any(os.environ.get(name) for name in USER_THREAD_VARIABLES):
        torch.set_num_threads(SMALL_WORK_THREADS)
    if not any(os.environ.get(name) for name in BLAS_THREAD_VARIABLES):
        _limit_numpy_blas(SMALL_WORK_THREADS)
    return torch.get_num_threads()


def _limit_numpy_blas(threads: int) -> None:
    """Limit NumPy's BLAS pools to ``threads`` threads (``threadpoolctl``, so it holds where NumPy loaded them)."""
    import numpy  # noqa: F401  (loads NumPy's BLAS, so that threadpoolctl finds it)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")


def use_one_thread_in_forked_child() -> None:
    """Set torch's intra-op threads to one in a forked child, where the parent's OpenMP pool cannot run.

    Registered by ``import tokenized_bandit_gym`` as an ``after_in_child`` fork hook. It imports
    nothing: a parent that had not imported torch passed on no thread pool.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def register_fork_hook() -> None:
    """Register :func:`use_one_thread_in_forked_child` to run in every forked child (where ``fork`` exists)."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=use_one_thread_in_forked_child)
