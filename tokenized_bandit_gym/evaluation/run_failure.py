"""A run that raised: what was run and the error, so the others can go on."""

from __future__ import annotations

from dataclasses import dataclass

from tokenized_bandit_gym.evaluation.run_spec import RunSpec


@dataclass(frozen=True)
class RunFailure:
    """One run that raised an exception (nothing is stored for it; a rerun tries it again).

    Attributes:
        spec: what was run.
        error: the exception's type and message.
        traceback: the formatted traceback, for the log.
    """

    spec: RunSpec
    error: str
    traceback: str = ""
