"""``tbg``: run leaderboards, report them, list what can be run.

    tbg run leaderboard                          # the shipped default spec: every task x agent x seed not yet stored
    tbg run my_spec.toml --import my_agents      # a spec of your own; my_agents registers your agents
    tbg report --store tbg-results.sqlite --out tbg-report
    tbg verify --store tbg-results.sqlite        # check every stored run against its checksums
    tbg list                                     # env ids, and each agent with the kinds of task it plays

``tbg run`` stores each finished run at once (Ctrl-C, ``kill`` or ``kill -9`` lose only runs in
progress; rerunning resumes), then prints the leaderboard and writes the report (``--out``).
Several ``tbg run`` processes may share one store: they claim runs and split the work.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tokenized_bandit_gym.registration import AGENT_ENTRY_POINT_GROUP
from tokenized_bandit_gym.script_arguments import int_at_least

if TYPE_CHECKING:
    from tokenized_bandit_gym.evaluation.leaderboard_spec import LeaderboardSpec
    from tokenized_bandit_gym.evaluation.run_spec import RunSpec

DEFAULT_STORE = "tbg-results.sqlite"
DEFAULT_OUT = "tbg-report"
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 128 + signal.SIGTERM


class OutputError(ValueError):
    """The report folder (``--out``) cannot be written."""


class Terminated(KeyboardInterrupt):
    """SIGTERM reached ``tbg run``: handled like Ctrl-C (runs in progress stop, finished ones are kept)."""


# Set when SIGTERM reached `tbg run`: a backend may turn the Terminated it raised into a plain KeyboardInterrupt.
_sigterm_received = threading.Event()


def _raise_terminated(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the clean shutdown short
    _sigterm_received.set()
    raise Terminated


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``), so it stops runs as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():  # signal handlers live in the main thread
        yield
        return
    _sigterm_received.clear()
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def check_output_folder(out: Path) -> Path:
    """Resolve ``out`` and raise :class:`OutputError` unless it is, or can be created as, a writable folder.

    Called before any run. Symbolic links are followed (a loop, or one pointing nowhere, is refused); an
    existing folder must hold nothing but report files (see :func:`write_report_atomically`).

    Returns:
        ``out`` with every link resolved: where the report is written.
    """
    try:
        resolved = out.resolve()
    except (RuntimeError, OSError) as error:  # RuntimeError: a symlink loop (Python < 3.13)
        raise OutputError(f"--out {str(out)!r} cannot be resolved: {error}; pass a folder for the report") from error
    if os.path.lexists(resolved) and not resolved.exists():
        raise OutputError(f"--out {str(out)!r} is a symbolic link loop; pass a folder for the report")
    if os.path.islink(out) and not resolved.exists():
        raise OutputError(
            f"--out {str(out)!r} is a symbolic link to {str(resolved)!r}, which does not exist (a dangling link); "
            "create that folder or pass another --out"
        )
    if resolved.exists():
        if not resolved.is_dir():
            raise OutputError(f"--out {str(out)!r} is an existing file, not a folder; pass a folder for the report")
        if not os.access(resolved, os.W_OK | os.X_OK) or not os.access(resolved.parent, os.W_OK | os.X_OK):
            raise OutputError(f"--out {str(out)!r} is a folder that is not writable (it and its parent must be)")
        foreign = _foreign_files(resolved)
        if foreign:
            raise OutputError(
                f"--out {str(out)!r} holds files that are not a report ({', '.join(foreign[:5])}); a report replaces "
                "its folder whole. Pass a new or empty folder"
            )
        return resolved
    ancestor = resolved.parent
    while not ancestor.exists():
        if os.path.lexists(ancestor):  # a link that leads nowhere (Python 3.13 resolves past a loop)
            raise OutputError(f"--out {str(out)!r} cannot be created: {str(ancestor)!r} is a symbolic link loop")
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise OutputError(f"--out {str(out)!r} cannot be created: {str(ancestor)!r} is not a writable folder")
    return resolved


def _foreign_files(folder: Path) -> list[str]:
    """The names in ``folder`` that no report writes (sorted): a folder holding only report files may be replaced."""
    from tokenized_bandit_gym.evaluation.leaderboard_report import is_report_file

    return sorted(item.name for item in folder.iterdir() if not is_report_file(item))


def write_report_atomically(leaderboard: object, out: Path) -> dict[str, Path]:
    """Write the report into a temporary folder beside ``out``, then rename it into place.

    An interrupted or failed write (Ctrl-C, a full disk) leaves ``out`` as it was: never a mix of old
    and new files. A folder already at ``out`` is replaced when every file in it is a report file (an
    older report, whatever its labels); otherwise :class:`OutputError` is raised and nothing changes.

    Returns:
        Output name -> path, as :func:`~tokenized_bandit_gym.evaluation.leaderboard_report.write_report`.
    """
    from tokenized_bandit_gym.evaluation.leaderboard_report import write_report

    target = out.absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.partial"
    staging.mkdir()  # the mode a new folder gets here (umask applied)
    try:
        if target.is_dir():
            os.chmod(staging, target.stat().st_mode & 0o7777)
        paths = write_report(leaderboard, staging)  # type: ignore[arg-type]
        if target.exists():
            foreign = _foreign_files(target)
            if foreign:
                raise OutputError(
                    f"--out {str(out)!r} holds files that are not part of a report ({', '.join(foreign[:5])}); "
                    "a report replaces its folder whole. Pass a new or empty folder"
                )
            previous = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.old"
            os.rename(target, previous)
            try:
                os.rename(staging, target)
            except BaseException:
                os.rename(previous, target)
                raise
            shutil.rmtree(previous, ignore_errors=True)
        else:
            os.rename(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {name: out / path.relative_to(staging) for name, path in paths.items()}


def _add_import_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (repeatable), e.g. one that calls register_agent; looked up from the current "
        "directory too, and imported by every worker process",
    )


def import_user_modules(modules: Sequence[str]) -> None:
    """Import ``tbg run --import`` modules (the current directory searched too, as ``python -m`` does).

    Raises:
        AgentLoadError: a module does not import (named in the message).
    """
    from tokenized_bandit_gym.registration import import_agent_modules

    if modules and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    import_agent_modules(list(modules))


def build_parser() -> argparse.ArgumentParser:
    """The ``tbg`` argument parser (one subcommand per action, ``--help`` on each)."""
    parser = argparse.ArgumentParser(
        prog="tbg",
        description="tokenized-bandit-gym leaderboards: run specs, report results, list envs and agents.",
    )
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="{run,report,verify,list,ddmc,check-model,regime}"
    )

    run = commands.add_parser(
        "run",
        help="run every task x agent x seed of a spec not yet in the store, then print the leaderboard",
        description="Run every task x agent x seed of SPEC that the store does not hold yet. Each finished run "
        "is committed at once, so an interrupted run resumes where it stopped. Prints the leaderboard of the "
        "spec's runs and writes the report to --out.",
    )
    run.add_argument(
        "spec",
        type=Path,
        help="leaderboard spec (TOML file), or the name of a spec shipped in the package: leaderboard (the default)",
    )
    _add_import_argument(run)
    run.add_argument("--store", type=Path, default=Path(DEFAULT_STORE), help=f"results store (default {DEFAULT_STORE})")
    run.add_argument("--backend", choices=("local", "ray"), default="local", help="local processes (default) or Ray")
    run.add_argument(
        "--workers",
        type=int_at_least(1),
        default=None,
        help="local worker processes (default: workers on the idle cores once the work outweighs their start-up)",
    )
    run.add_argument("--ray-address", default=None, help="Ray cluster address (default: RAY_ADDRESS or a local Ray)")
    run.add_argument("--out", type=Path, default=Path(DEFAULT_OUT), help=f"report folder (default {DEFAULT_OUT})")
    run.add_argument("--no-report", action="store_true", help="only run and store; print and write nothing else")
    run.add_argument("--no-progress", action="store_true", help="hide the progress bars")

    report = commands.add_parser(
        "report",
        help="tables and plots from a results store",
        description="Print the leaderboard of every run in the store and write Markdown, HTML, PNG/SVG plots, "
        "CSV and JSON to --out (written beside it and renamed into place). Runs that fail their checksums are "
        "left out and named; the status is then 1.",
    )
    report.add_argument(
        "--store", type=Path, default=Path(DEFAULT_STORE), help=f"results store (default {DEFAULT_STORE})"
    )
    report.add_argument("--out", type=Path, default=Path(DEFAULT_OUT), help=f"report folder (default {DEFAULT_OUT})")
    report.add_argument(
        "--spec",
        type=Path,
        default=None,
        help="only the runs of this spec, reported with its reference rows, theory exponents, caveats and extra "
        "horizons (default: every run in the store)",
    )
    report.add_argument("--title", default=None, help="report title")

    verify = commands.add_parser(
        "verify",
        help="check every run in a results store against its checksums",
        description="Check every run in the store against the checksums written with it, and the file with "
        "SQLite's integrity check. Prints what it found; exits 1 when anything is damaged.",
    )
    verify.add_argument(
        "--store", type=Path, default=Path(DEFAULT_STORE), help=f"results store (default {DEFAULT_STORE})"
    )

    listing = commands.add_parser(
        "list",
        help="registered env ids, and agents with what each does and the kinds of task it plays",
        description="Print the registered env ids, then every agent (built in, registered by --import, or "
        f"installed under the entry-point group {AGENT_ENTRY_POINT_GROUP}) with the kinds of task it plays "
        "(linear, TMAB, LLM), a line on what it does (its class docstring's first line) and, for the other kinds, "
        "why not (what the agent's reset raises on that kind's task).",
    )
    _add_import_argument(listing)
    listing.add_argument(
        "--probe",
        action="store_true",
        help="ask every agent, built-in ones too, by resetting it on each kind's task (loads torch and the "
        "shipped LLM; without it the built-in agents' answers are read from a table and only other agents are "
        "asked)",
    )
    from tokenized_bandit_gym.evaluation.ddmc.ddmc_arguments import add_ddmc_subcommand

    add_ddmc_subcommand(commands)
    from tokenized_bandit_gym.evaluation.check_model import add_check_model_subcommand

    add_check_model_subcommand(commands)
    from tokenized_bandit_gym.evaluation.alignment_regime import add_regime_subcommand

    add_regime_subcommand(commands)
    return parser


def _command_list(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import tokenized_bandit_gym
    from tokenized_bandit_gym.evaluation.agent_support import TASK_KINDS, agent_support_table
    from tokenized_bandit_gym.registration import agent_description, entry_point_problems, list_agents

    import_user_modules(args.imports)
    ours = tokenized_bandit_gym.registered_ids()
    others = sorted(env_id for env_id in gym.registry if "Tokenized" in env_id and env_id not in ours)
    print("envs:")
    for env_id in [*ours, *others]:
        print(f"  {env_id}")
    kinds = ", ".join(f"{kind} = {env_id}" for kind, env_id in TASK_KINDS.items())
    print(f"agents (the kinds of task each plays: {kinds}):")
    names = list_agents()
    width = max(len(name) for name in names)
    for support in agent_support_table(names, probe=args.probe):
        if support.problem is not None:
            print(f"  {support.name:<{width}}  not usable: {support.problem}")
            continue
        print(f"  {support.name:<{width}}  {', '.join(support.supported) or 'none'}")
        description = agent_description(support.name)
        if description:
            print(f"  {'':<{width}}    {description}")
        for kind, reason in support.reasons.items():
            if reason is not None:
                print(f"  {'':<{width}}    not {kind}: {reason}")
    for name, problem in entry_point_problems().items():
        print(f"  {name:<{width}}  not usable: {problem}")
    return 0


def _report(store: object, runs: list[RunSpec] | None, title: str, out: Path, spec: object = None) -> int:
    """Print and write the leaderboard of ``runs`` (default: every stored run), with the labels of ``runs``.

    ``spec`` (the loaded leaderboard spec, when there is one) supplies the page's provenance and caveats.
    Damaged runs are left out and named on stderr.

    Returns:
        The exit status: 1 when a damaged run was left out, else 0.
    """
    import dataclasses
    import html

    from tokenized_bandit_gym.evaluation.leaderboard import build_leaderboard
    from tokenized_bandit_gym.evaluation.leaderboard_report import markdown_report

    wanted = None if runs is None else {run.key: run for run in runs}
    records = [
        record
        if wanted is None
        else dataclasses.replace(record, spec=dataclasses.replace(record.spec, **_labels(wanted[record.spec.key])))
        for record in store.records(wanted)  # type: ignore[attr-defined]
    ]
    damaged = _print_damaged(store.damaged)  # type: ignore[attr-defined]
    if not store.has_checksums:  # type: ignore[attr-defined]
        print(f"tbg: warning: {store.path}: {store.checksum_state()}", file=sys.stderr)  # type: ignore[attr-defined]
    if not records:
        print("no finished runs to report")
        return damaged
    given = store.labels() if runs is None else None  # type: ignore[attr-defined]
    leaderboard = build_leaderboard(records, title=title, spec=spec, given_labels=given)  # type: ignore[arg-type]
    # The terminal renders no HTML: the entity escapes that leaderboard.md needs (labels, '<' in notes) are undone.
    print(html.unescape(markdown_report(leaderboard)))
    paths = write_report_atomically(leaderboard, out)
    print(f"report written to {out}/ ({paths['html'].name}, {paths['markdown'].name}, plots, CSV, JSON)")
    return damaged


def _print_damaged(damaged: dict[str, str]) -> int:
    """Name each damaged run on stderr; returns 1 if there is one, else 0."""
    for key, problem in damaged.items():
        print(f"tbg: warning: run {key} is damaged and left out: {problem}", file=sys.stderr)
    if damaged:
        print(f"tbg: warning: {len(damaged)} damaged runs left out; see `tbg verify`", file=sys.stderr)
    return 1 if damaged else 0


def _command_verify(args: argparse.Namespace) -> int:
    from tokenized_bandit_gym.evaluation.results_store import ResultsStore

    with ResultsStore(args.store, create=False) as store:
        check = store.verify()
    for key, problem in check.damaged.items():
        print(f"damaged: run {key}: {problem}")
    for message in check.integrity:
        print(f"SQLite integrity check: {message}")
    print(f"checksums: {check.checksums}")
    print(f"{args.store}: {check.summary()}")
    return 0 if check.ok else 1


def _labels(run: RunSpec) -> dict[str, str]:
    return {"task_label": run.task_label, "agent_label": run.agent_label}


def _command_run(args: argparse.Namespace) -> int:
    from tokenized_bandit_gym.evaluation.leaderboard_spec import load_spec

    import_user_modules(args.imports)
    spec = load_spec(args.spec)
    if not args.no_report:
        args.out = check_output_folder(args.out)
    if args.backend == "ray":
        from tokenized_bandit_gym.evaluation.ray_backend import import_ray

        import_ray()
    runs = spec.runs()
    start = time.perf_counter()
    return _run_and_report(args, spec, runs, start)


def _run_and_report(args: argparse.Namespace, spec: LeaderboardSpec, runs: list[RunSpec], start: float) -> int:
    from tokenized_bandit_gym.evaluation.leaderboard_runner import run_leaderboard
    from tokenized_bandit_gym.evaluation.results_store import ResultsStore

    with ResultsStore(args.store) as store:
        print(
            f"{spec.source}: {len(runs)} runs ({len(spec.tasks)} tasks, {len(spec.agents)} agents, "
            f"{len(spec.seeds)} seeds); store {args.store}",
            file=sys.stderr,
        )
        try:
            with _sigterm_interrupts():
                summary = run_leaderboard(
                    runs,
                    store,
                    backend=args.backend,
                    workers=args.workers,
                    ray_address=args.ray_address,
                    progress=not args.no_progress,
                )
        except KeyboardInterrupt as interruption:
            print(
                f"\ninterrupted: {len(store)} finished runs are saved in {args.store}; "
                "rerun the same command to resume",
                file=sys.stderr,
            )
            terminated = isinstance(interruption, Terminated) or _sigterm_received.is_set()
            return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
        elsewhere = f", {summary.stored_elsewhere} stored by other processes" if summary.stored_elsewhere else ""
        if summary.discarded:
            elsewhere += f", {summary.discarded} played here too after their lease expired (discarded)"
        print(
            f"{summary.stored} runs stored, {summary.skipped} already in the store{elsewhere}, "
            f"{len(summary.failures)} failed ({time.perf_counter() - start:.1f} s)",
            file=sys.stderr,
        )
        damaged = 0 if args.no_report else _report(store, runs, spec.title, args.out, spec)
    if summary.failures:
        if any("Too many open files" in failure.error for failure in summary.failures):
            import resource

            limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            print(
                f"tbg: error: {len(summary.failures)} runs failed for want of file descriptors (this process may "
                f"open {limit} files: ulimit -n {limit}); raise the limit or pass fewer --workers, then rerun",
                file=sys.stderr,
            )
            return 2
        print(f"{len(summary.failures)} runs failed (see above); rerun to retry them", file=sys.stderr)
        return 1
    return damaged


def _command_report(args: argparse.Namespace) -> int:
    from tokenized_bandit_gym.evaluation.leaderboard_spec import load_spec
    from tokenized_bandit_gym.evaluation.results_store import ResultsStore

    runs = None
    spec = None
    title = args.title or "tokenized-bandit-gym leaderboard"
    if args.spec is not None:
        spec = load_spec(args.spec, check_registry=False)
        runs = spec.runs()
        title = args.title or spec.title
    args.out = check_output_folder(args.out)
    with ResultsStore(args.store, create=False) as store:
        return _report(store, runs, title, args.out, spec)


# Below this many open files `tbg` cannot run: a worker's pipes, SQLite's database, -wal and -shm files, and
# the libraries' own (measured: a one-worker `tbg run` works with 16).
MIN_OPEN_FILES = 16
# Commands that always load torch (checked at start-up, where a failure can name what is short); `tbg report
# --spec` and `tbg list --probe` load it too.
_TORCH_COMMANDS = ("run", "ddmc", "check-model")


@contextlib.contextmanager
def _starting_up() -> Iterator[None]:
    """While inside, Ctrl-C ends the process at once with one line and exit 130.

    A ``KeyboardInterrupt`` raised inside torch's import can abort the interpreter (a C++ ``terminate``), so
    none is raised before torch is loaded. The ``tbg`` console script's entry (``tbg_entry``) installs the same
    handling before the package is imported; on leaving, Python's own Ctrl-C handling is back.
    """
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous in (signal.SIG_IGN, None):
        yield
        return
    from_entry = getattr(previous, "__module__", None) == "tbg_entry"
    signal.signal(signal.SIGINT, _interrupted_while_starting)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler if from_entry else previous)


def _interrupted_while_starting(signum: int, frame: object) -> None:
    os.write(2, b"\ntbg: error: interrupted while starting; nothing was done\n")
    os._exit(EXIT_INTERRUPTED)


def _escape_unencodable_output() -> None:
    """Write characters stdout's and stderr's encoding cannot show (an emoji on an ASCII terminal) as escapes."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # a closed or detached stream: nothing to do
                reconfigure(errors="backslashreplace")


def _memory_limit() -> str:
    """The address-space limit (``ulimit -v``) as a phrase, or that there is none."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY:
        return "no address-space limit is set; the machine is short of memory"
    return f"the address-space limit is {limit / 2**20:,.0f} MiB (ulimit -v {limit // 1024})"


def _startup_shortage(args: argparse.Namespace) -> str | None:
    """What this process is too short of to run the parsed command (open files, memory for torch), or None.

    A soft open-file limit below :data:`MIN_OPEN_FILES` is raised toward the hard one first.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < MIN_OPEN_FILES:
        wanted = MIN_OPEN_FILES if hard == resource.RLIM_INFINITY else min(MIN_OPEN_FILES, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft < MIN_OPEN_FILES:
            return (
                f"too few file descriptors: this process may open {soft} files (ulimit -n {soft}) and tbg needs "
                f"at least {MIN_OPEN_FILES}; raise the limit (ulimit -n 1024)"
            )
    spec_given = args.command == "report" and args.spec is not None
    if args.command in _TORCH_COMMANDS or spec_given or getattr(args, "probe", False):
        try:
            import torch  # noqa: F401
        except MemoryError:
            return f"too little memory to load torch ({_memory_limit()}); raise the limit or free memory"
        except (ImportError, OSError) as error:
            return f"cannot load torch ({error}); too little memory? {_memory_limit()}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tbg`` console script; returns the exit status.

    Spec, store and ``--import`` errors are printed as one line (``tbg: error: ...``) with status 2. Run as
    a program (``argv`` None), Ctrl-C ends the process at once (exit 130, one line) until the arguments are
    parsed and torch is loaded. Output that the terminal's encoding cannot show is written with backslash
    escapes.
    """
    _escape_unencodable_output()
    with _starting_up() if argv is None else contextlib.nullcontext():
        args = build_parser().parse_args(argv)  # --help exits here, before anything heavy is imported
        problem = _startup_shortage(args)
        if problem is not None:
            print(f"tbg: error: {problem}", file=sys.stderr)
            return 2
        from tokenized_bandit_gym.evaluation.leaderboard_spec import SpecError
        from tokenized_bandit_gym.evaluation.ray_backend import RayUnavailableError
        from tokenized_bandit_gym.evaluation.results_store import StoreError
        from tokenized_bandit_gym.registration import AgentLoadError

    try:
        if args.command == "list":
            return _command_list(args)
        if args.command in (
            "run",
            "ddmc",
            "check-model",
            "regime",
        ):  # torch work: one thread unless OMP_NUM_THREADS is set
            from tokenized_bandit_gym.threads import use_small_work_threads

            use_small_work_threads()
        if args.command == "run":
            return _command_run(args)
        if args.command in ("ddmc", "check-model", "regime"):
            return args.func(args)
        if args.command == "verify":
            return _command_verify(args)
        return _command_report(args)
    except (SpecError, StoreError, RayUnavailableError, OutputError, AgentLoadError) as error:
        print(f"tbg: error: {error}", file=sys.stderr)
        return 2
    except sqlite3.Error as error:  # a full disk or a read-only store while runs are stored
        store = getattr(args, "store", "the results store")
        print(
            f"tbg: error: cannot write to {str(store)!r}: {error}; the runs it committed before are saved",
            file=sys.stderr,
        )
        return 2
    except OSError as error:  # a full disk or a vanished folder while the report is written
        where = f" {error.filename!r}" if error.filename else ""
        print(f"tbg: error: cannot write{where}: {error.strerror or error}; no report was written", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"tbg: error: out of memory ({_memory_limit()})", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C outside the runs (those print their own line)
        unchanged = "; no report was written (an earlier one is unchanged)" if args.command in ("run", "report") else ""
        print(f"\ntbg: error: interrupted{unchanged}", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
