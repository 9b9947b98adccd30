"""Progress counters: tqdm on a terminal, plain lines elsewhere, never past the total."""

from __future__ import annotations

import io

from tokenized_bandit_gym.evaluation.progress import ProgressCounter


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_off_a_terminal_and_the_count_is_clipped() -> None:
    stream = io.StringIO()
    counter = ProgressCounter(10, "rounds", "round", stream=stream, interval=0.0)
    assert counter.update(4) == 4 and counter.update(9) == 6 and counter.update(3) == 0
    counter.write("a message")
    counter.close()
    text = stream.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert lines[0].startswith("rounds: 4/10 rounds (40%)") and lines[1].startswith("rounds: 10/10 rounds (100%)")
    assert lines[2] == "a message" and lines[-1].startswith("rounds: 10/10 rounds") and counter.count == 10


def test_plain_lines_wait_for_their_interval() -> None:
    stream = io.StringIO()
    counter = ProgressCounter(100, "runs", "run", stream=stream, interval=3600.0)
    for _ in range(100):
        counter.update(1)
    assert stream.getvalue() == ""  # within the interval: nothing until the end
    counter.close()
    assert stream.getvalue().splitlines() == [stream.getvalue().splitlines()[0]]
    assert stream.getvalue().startswith("runs: 100/100 runs (100%)")


def test_a_terminal_gets_a_tqdm_bar_and_disabled_counters_print_nothing() -> None:
    terminal = FakeTerminal()
    counter = ProgressCounter(5, "rounds", "round", stream=terminal)
    counter.update(7)
    counter.close()
    assert "\r" in terminal.getvalue() and "5/5" in terminal.getvalue()
    quiet = io.StringIO()
    disabled = ProgressCounter(5, "rounds", "round", enabled=False, stream=quiet, interval=0.0)
    disabled.update(2)
    disabled.close()
    assert quiet.getvalue() == "" and disabled.count == 2
