"""Chaos on one results store: 3 `tbg run`s with overlapping specs under random SIGINT, SIGTERM and SIGKILL.

Three specs share one task and agent and overlap in their seeds (each with its own labels), so
the three processes race for the same runs. While they run, a signal picked at random (SIGINT,
SIGTERM or SIGKILL) goes to a random one of them every 0.2 to 1.5 s; a killed process is started
again, and some signals land during start-up (within 1.5 s of a start, while `tbg` imports and
opens the store). Once the signals are spent the processes run to the end. The store must then
pass `tbg verify`, hold every run of the three specs exactly once, and hold byte for byte the
results of a store written by the same specs without interruption. Every interrupted process
must end as it should: 130 after SIGINT with one line, 143 after SIGTERM (or killed by it before
`tbg run` handles it), 0 when it had just finished, and never a traceback.

The counts are recorded in docs/STORE_INTEGRITY.md.

Run: ``PYTHONPATH=. nice -n 10 python benchmarks/store_chaos.py [--signals 28] [--startup-signals 24]``
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tokenized_bandit_gym.evaluation.results_store import ResultsStore
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments

REPO = Path(__file__).resolve().parents[1]
SPEC = """
rounds = {rounds}
seeds = [{seeds}]

[[task]]
id = "TokenizedMultiArmedBandit-v0"
label = "Task {name}"

[[agent]]
name = "random"
label = "Random {name}"
"""
# Overlapping seed ranges: every run is in at least two of the three specs.
SEEDS = {"a": range(0, 8), "b": range(4, 12), "c": [*range(0, 4), *range(8, 12)]}
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
# 0: the signal came as the process finished. SIGTERM before `tbg run` handles it (start-up, the report) ends the
# process by the signal's default action (-15, which a shell shows as 143): nothing is written then.
EXPECTED_STATUS = {
    signal.SIGINT: {130, -signal.SIGINT, 0},  # -2: as the interpreter exited (its handlers back at the defaults)
    signal.SIGTERM: {143, -signal.SIGTERM, 0},
    signal.SIGKILL: {-signal.SIGKILL, 0},
}


@dataclass
class Args:
    """Command-line arguments."""

    signals: int = 28
    """signals sent while the processes run"""
    startup_signals: int = 24
    """signals sent within 1.5 s of a process's start (while it imports and opens the store)"""
    rounds: int = 300
    """T of every run"""
    seed: int = 0
    """seeds the choice of signals, targets and delays"""


@dataclass
class ChaosResult:
    """What one chaos run did and found."""

    signals: dict[str, int] = field(default_factory=dict)
    startup_signals: int = 0
    unclear_exits: list[str] = field(default_factory=list)
    runs_expected: int = 0
    runs_stored: int = 0
    array_rows: int = 0
    verify: str = ""
    verify_ok: bool = False
    identical: bool = False

    @property
    def held(self) -> bool:
        """Every run stored once, byte-identical to the uninterrupted store, and every exit clear."""
        return (
            self.verify_ok
            and self.identical
            and self.runs_stored == self.runs_expected
            and self.array_rows == self.runs_expected * 6
            and not self.unclear_exits
        )


def write_specs(folder: Path, rounds: int) -> dict[str, Path]:
    """The three overlapping specs."""
    paths = {}
    for name, seeds in SEEDS.items():
        paths[name] = folder / f"spec_{name}.toml"
        paths[name].write_text(SPEC.format(rounds=rounds, seeds=", ".join(map(str, seeds)), name=name))
    return paths


# The `tbg` console script as pip writes it, after a line that says the interpreter has started (signals before
# it reach Python's own start-up, not `tbg`).
CONSOLE_SCRIPT = (
    "import sys; print('started', flush=True); sys.argv[0] = 'tbg'; from tbg_entry import main; sys.exit(main())"
)


def start(spec: Path, store: Path) -> subprocess.Popen[str]:
    """`tbg run SPEC --store STORE` as the console script runs it, with Ctrl-C at its default; returns once started."""
    command = [sys.executable, "-c", CONSOLE_SCRIPT, "run", str(spec), "--store", str(store)]
    command += ["--workers", "1", "--no-progress", "--no-report"]
    process = subprocess.Popen(
        command,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stdout is not None
    process.stdout.readline()  # "started"
    return process


def chaos(folder: Path, args: Args) -> ChaosResult:
    """Run the three specs on one store under ``args.signals + args.startup_signals`` signals; check the store."""
    rng = random.Random(args.seed)
    specs = write_specs(folder, args.rounds)
    store = folder / "chaos.sqlite"
    result = ChaosResult(signals={signal.Signals(sig).name: 0 for sig in SIGNALS})
    processes = {name: (start(spec, store), time.monotonic()) for name, spec in specs.items()}
    finished: set[str] = set()
    sent = {"running": 0, "startup": 0}
    deadline = time.monotonic() + 1800
    while len(finished) < len(specs):
        if time.monotonic() > deadline:
            raise RuntimeError("the chaos run did not finish within 30 minutes")
        for name, (process, _) in list(processes.items()):
            if name not in finished and process.poll() is not None:
                process.communicate()
                if process.returncode == 0:
                    finished.add(name)
                else:
                    processes[name] = (start(specs[name], store), time.monotonic())
        live = [name for name in processes if name not in finished]
        want_startup = sent["startup"] < args.startup_signals
        want_running = sent["running"] < args.signals
        if not live or not (want_startup or want_running):
            time.sleep(0.1)
            continue
        name = rng.choice(live)
        process, started = processes[name]
        left = 1.5 - (time.monotonic() - started)
        starting = left > 0
        if starting and want_startup:
            time.sleep(rng.uniform(0.0, left))
            kind = "startup"
        elif not starting and want_running:
            time.sleep(rng.uniform(0.2, 1.5))
            kind = "running"
        else:
            time.sleep(0.05)
            continue
        if process.poll() is not None:
            continue
        sig = rng.choice(SIGNALS)
        process.send_signal(sig)
        _, err = process.communicate(timeout=300)
        sent[kind] += 1
        result.signals[signal.Signals(sig).name] += 1
        lines = [line for line in err.splitlines() if line.strip()]
        clear = process.returncode in EXPECTED_STATUS[sig] and "Traceback" not in err and "terminate" not in err
        if sig == signal.SIGINT and process.returncode == 130:
            clear = clear and bool(lines) and ("interrupted" in lines[-1] or lines[-1].startswith("tbg: error:"))
        if not clear:
            result.unclear_exits.append(f"{signal.Signals(sig).name} ({kind}): exit {process.returncode}: {err[-400:]}")
        if process.returncode == 0:
            finished.add(name)
        else:
            processes[name] = (start(specs[name], store), time.monotonic())
    result.startup_signals = sent["startup"]

    reference = folder / "uninterrupted.sqlite"
    for spec in specs.values():
        command = [sys.executable, "-m", "tbg_entry", "run", str(spec), "--store", str(reference)]
        subprocess.run(
            [*command, "--workers", "1", "--no-progress", "--no-report"],
            cwd=REPO,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            check=True,
            capture_output=True,
        )
    with ResultsStore(store, create=False) as opened:
        check = opened.verify()
        contents = opened.result_bytes()
    result.verify, result.verify_ok = check.summary(), check.ok
    connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        result.runs_stored = int(connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
        result.array_rows = int(connection.execute("SELECT COUNT(*) FROM run_arrays").fetchone()[0])
    finally:
        connection.close()
    with ResultsStore(reference, create=False) as opened:
        expected = opened.result_bytes()
    result.runs_expected = len(expected)
    result.identical = contents == expected
    return result


def main(args: Args) -> ChaosResult:
    """One chaos run in a temporary folder; prints and returns what it found."""
    with tempfile.TemporaryDirectory() as name:
        result = chaos(Path(name), args)
    print(
        f"signals while running: {args.signals}, during start-up: {result.startup_signals} ({result.signals}); "
        f"runs stored {result.runs_stored} of {result.runs_expected}, array rows {result.array_rows}; "
        f"verify: {result.verify}; byte-identical to an uninterrupted store: {result.identical}; "
        f"unclear exits: {len(result.unclear_exits)}"
    )
    for line in result.unclear_exits:
        print(f"  {line}")
    print("HELD" if result.held else "FAILED")
    return result


if __name__ == "__main__":
    main(parse_dataclass_arguments(Args, __doc__))
