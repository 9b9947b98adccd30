"""Progress of long runs: counters that suit where they write (a tqdm bar on a terminal, plain periodic lines in a log).

A tqdm bar redraws itself with carriage returns and cursor escapes, which a log file or a CI console
that is not a terminal keeps as garbage. :func:`progress_counter` asks the stream: on a terminal it draws
a tqdm bar; otherwise it prints one plain line at most every ``interval`` seconds, and one at the end.
Either way the count never passes its total (late or repeated credit is clipped).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from tqdm.auto import tqdm

PLAIN_INTERVAL_SECONDS = 30.0
"""Seconds between two plain progress lines (and a last line at the end)."""


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is an interactive terminal (a closed or odd stream counts as not)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class ProgressCounter:
    """A count of work done out of ``total``, shown as a tqdm bar on a terminal or as plain lines otherwise.

    Args:
        total: the count at which the work is done (never exceeded).
        desc: what is counted, printed first.
        unit: the unit's name (``"round"``).
        enabled: False shows nothing (the count is still kept).
        stream: where to write (default: stderr).
        position: the tqdm bar's line (several bars at once).
        leave: keep the tqdm bar on screen when closed.
        interval: seconds between two plain lines.
    """

    def __init__(
        self,
        total: int,
        desc: str,
        unit: str = "it",
        enabled: bool = True,
        stream: TextIO | None = None,
        position: int = 0,
        leave: bool = True,
        interval: float = PLAIN_INTERVAL_SECONDS,
    ) -> None:
        self.total = total
        self.count = 0
        self._desc = desc
        self._unit = unit
        self._stream = stream if stream is not None else sys.stderr
        self._interval = interval
        self._start = self._last_line = time.monotonic()
        self._enabled = enabled
        self._bar: Any = None
        if enabled and is_terminal(self._stream):
            self._bar = tqdm(total=total, desc=desc, unit=unit, file=self._stream, position=position, leave=leave)

    def update(self, amount: int = 1) -> int:
        """Add ``amount`` (clipped so the count stays at most :attr:`total`); return what was added."""
        added = max(0, min(int(amount), self.total - self.count))
        self.count += added
        if self._bar is not None:
            self._bar.update(added)
        elif self._enabled and added and time.monotonic() - self._last_line >= self._interval:
            self._print_line()
        return added

    def _print_line(self) -> None:
        self._last_line = time.monotonic()
        percent = 100.0 * self.count / self.total if self.total else 100.0
        print(
            f"{self._desc}: {self.count}/{self.total} {self._unit}s ({percent:.0f}%), "
            f"{self._last_line - self._start:.0f} s",
            file=self._stream,
            flush=True,
        )

    def write(self, text: str) -> None:
        """Print ``text`` on the counter's stream (above the bars on a terminal, without breaking them)."""
        if self._bar is not None:
            tqdm.write(text, file=self._stream)
        else:
            print(text, file=self._stream, flush=True)

    def close(self) -> None:
        """Close the bar, or print the last plain line."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._enabled:
            self._print_line()
            self._enabled = False
