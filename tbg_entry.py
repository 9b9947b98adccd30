"""The ``tbg`` console script's entry point: Ctrl-C is handled from its first line on.

Importing :mod:`tokenized_bandit_gym` (Gymnasium, NumPy) takes a fifth of a second before
:func:`tokenized_bandit_gym.evaluation.cli.main` could install anything, and a ``KeyboardInterrupt``
raised there prints a traceback. This module imports nothing of the package before it has made
SIGINT end the process at once (exit 130, one line); :func:`~tokenized_bandit_gym.evaluation.cli.main`
keeps that until its imports are done, then restores Python's own handling.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Run ``tbg`` (see :mod:`tokenized_bandit_gym.evaluation.cli`); returns the exit status."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, interrupted_while_starting)
    from tokenized_bandit_gym.evaluation.cli import main as tbg_main

    return tbg_main()


def interrupted_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C before ``tbg`` has done anything: one line and exit 130 (no traceback, no C++ abort mid-import)."""
    import os

    os.write(2, b"\ntbg: error: interrupted while starting; nothing was done\n")
    os._exit(130)


if __name__ == "__main__":
    sys.exit(main())
