"""Which code made a result: the package version and the git commit of its checkout.

The leaderboard stores it with every run (``RunRecord.metadata``), and whatever resumes from files (the
reproduction examples' results and checkpoints, :class:`~tokenized_bandit_gym.evaluation.runs_as_rows.RowsCheckpoint`,
the benchmark cache of :func:`~tokenized_bandit_gym.evaluation.runs_as_rows.warm_benchmarks`) records it and reuses
a file only when it was made by this code (:func:`made_by_this_code`), so a figure never mixes the numbers of two
versions. The git commit is asked once per process (cached).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

CodeVersion = dict[str, str | None]
"""``{"package_version": str, "git_commit": str | None}``: JSON-ready, compared for equality."""


@functools.lru_cache(maxsize=1)
def _git_commit(package_dir: str) -> str | None:
    """HEAD of the git checkout holding ``package_dir`` (``-dirty`` when tracked files changed), or None."""
    try:
        head = subprocess.run(
            ["git", "-C", package_dir, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", package_dir, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    dirty = status.returncode == 0 and bool(status.stdout.strip())
    return head.stdout.strip() + ("-dirty" if dirty else "")


def code_version() -> CodeVersion:
    """The code running in this process: the package version and the git commit of its checkout.

    The commit is that of the git checkout holding the imported ``tokenized_bandit_gym`` (with ``-dirty`` when
    tracked files differ from it), or None when the package is not in a git checkout (an installed wheel) or git
    is missing. The git calls run once per process; each call returns a new dict.

    Returns:
        ``{"package_version": tokenized_bandit_gym.__version__, "git_commit": str | None}``.
    """
    import tokenized_bandit_gym

    package_dir = str(Path(tokenized_bandit_gym.__file__).resolve().parent)
    return {"package_version": tokenized_bandit_gym.__version__, "git_commit": _git_commit(package_dir)}


def describe_code_version(version: Any) -> str:
    """One readable phrase for a recorded code version (``None`` or anything else: none recorded).

    Args:
        version: a :data:`CodeVersion` as written by :func:`code_version`, or what an older file holds instead.
    """
    if not isinstance(version, dict) or "package_version" not in version:
        return "no recorded code version"
    return f"tokenized-bandit-gym {version['package_version']} (git {version.get('git_commit') or 'unknown'})"


def made_by_this_code(recorded: Any, what: str) -> bool:
    """Whether a file recorded as made by code ``recorded`` was made by this code; if not, print one line.

    A file written before versions were recorded (``recorded`` None) counts as another version. The printed line
    names both versions and says that ``what`` is not reused (the caller makes it again).

    Args:
        recorded: the :data:`CodeVersion` the file holds (None when it holds none).
        what: the file (or results) it describes, for the printed line.

    Returns:
        True when ``recorded`` equals :func:`code_version`.
    """
    current = code_version()
    if recorded == current:
        return True
    print(
        f"not reusing {what}: made by {describe_code_version(recorded)}, this is {describe_code_version(current)}",
        flush=True,
    )
    return False


def read_results_json(path: str) -> dict[str, Any] | None:
    """The JSON object a script wrote to ``path`` earlier, or None: none there, or not such a file (one line says so).

    A file that is not a UTF-8 JSON object (damaged, truncated, or something else planted under its name, a pickle
    say) is never interpreted beyond JSON: one printed line names it, and the caller computes its results again.

    Args:
        path: the results file ("" for none).
    """
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            earlier = json.load(handle)
    except (OSError, ValueError) as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        print(f"not reusing {path}: not a readable JSON results file ({type(error).__name__})", flush=True)
        return None
    if not isinstance(earlier, dict):
        print(f"not reusing {path}: not a JSON results file (a {type(earlier).__name__}, not an object)", flush=True)
        return None
    return earlier
