"""Second round of store and CLI hardening (issue 49): each case a fault, a bad input or a race tried on `tbg`.

Non-regular store files, a lost checksum table, deep TOML, negative sizes, unencodable output, too few
files or too little memory, input errors, Ctrl-C at any moment, report folders, raw HTML in Markdown,
and labels of a store shared by specs. The counts are recorded in ``docs/STORE_INTEGRITY.md``.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.evaluation.records import make_record
from tests.evaluation.test_resume import write_spec
from tests.evaluation.test_store_fault_injection import ends_with_one_error_line
from tokenized_bandit_gym.evaluation.cli import build_parser, main
from tokenized_bandit_gym.evaluation.results_store import SCHEMA_VERSION, ResultsStore

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


def run_tbg(
    arguments: list[str],
    timeout: float = 300,
    preexec: Callable[[], None] | None = None,
    **environment: str,
) -> subprocess.CompletedProcess[str]:
    """``tbg ARGUMENTS`` through the console script's entry, in a subprocess (Ctrl-C at its default)."""

    def prepare() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if preexec is not None:
            preexec()

    return subprocess.run(
        [sys.executable, "-m", "tbg_entry", *arguments],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO), **environment),
        preexec_fn=prepare,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def stored_store(path: Path, count: int = 3) -> list[str]:
    """A store of ``count`` hand-made runs; returns their keys, sorted."""
    with ResultsStore(path) as opened:
        for seed in range(count):
            opened.add(make_record("Task", "agent", seed, [0.25] * 30))
        return sorted(opened.keys())


# ---------------------------------------------------------------------------------------- 1. regular files only
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_device_or_folder_as_store_or_spec_is_refused_in_one_line_and_never_hangs(tmp_path: Path) -> None:
    fifo = tmp_path / "f.sqlite"
    os.mkfifo(fifo)
    spec = write_spec(tmp_path / "spec.toml", rounds=5, seeds=1)
    cases = {
        ("run", str(spec), "--store", str(fifo), "--no-report"): "is a FIFO (named pipe)",
        ("verify", "--store", str(fifo)): "is a FIFO (named pipe)",
        ("report", "--store", str(fifo), "--out", str(tmp_path / "r")): "is a FIFO (named pipe)",
        ("verify", "--store", os.devnull): "is a character device",
        ("verify", "--store", str(tmp_path)): "is a directory",
        ("run", str(fifo), "--store", str(tmp_path / "s.sqlite"), "--no-report"): "not a regular file",
    }
    for arguments, message in cases.items():
        finished = run_tbg(list(arguments), timeout=120)  # a hang fails here (it used to block in open())
        assert finished.returncode == 2, (arguments, finished.stderr[-2000:])
        assert ends_with_one_error_line(finished.stderr) and message in finished.stderr, finished.stderr[-2000:]
    assert not (tmp_path / "s.sqlite").exists()


# ------------------------------------------------------------------------------------- 3. damage never blessed
def test_a_new_store_records_its_format_and_when_checksums_began(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    stored_store(store, 1)
    connection = sqlite3.connect(store)
    version, since = connection.execute("SELECT version, checksums_since FROM tbg_schema").fetchone()
    assert connection.execute("PRAGMA user_version").fetchone()[0] == version == SCHEMA_VERSION == 2
    connection.close()
    with ResultsStore(store, create=False) as opened:
        assert opened.checksums_since == since and since.startswith("20")
        assert opened.checksum_state() == f"store format 2, runs checksummed since {since}"


def test_a_checksummed_store_of_format_1_is_recorded_as_format_2_when_opened_for_writing(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    stored_store(store, 2)
    connection = sqlite3.connect(store)
    with connection:  # as the previous version wrote it: checksums, but no record of them
        connection.execute("ALTER TABLE tbg_schema DROP COLUMN checksums_since")
        connection.execute("UPDATE tbg_schema SET version = 1")
        connection.execute("PRAGMA user_version = 1")
    connection.close()
    with ResultsStore(store, create=False) as opened:
        assert (
            opened.checksum_state()
            == "store format 1, runs checksummed since a time not recorded (written by an earlier version)"
        )
    with ResultsStore(store) as opened:
        assert opened.schema_version == 2 and opened.checksums_since and opened.verify().sound == 2
    with ResultsStore(store, create=False) as opened:
        assert opened.checksum_state().startswith("store format 2, runs checksummed since 20")


def test_three_processes_opening_a_store_written_before_checksums_at_once_all_upgrade_it(tmp_path: Path) -> None:
    store = tmp_path / "old.sqlite"
    shutil.copyfile(DATA / "store_schema1.sqlite", store)
    opener = (
        "import sys; from tokenized_bandit_gym.evaluation.results_store import ResultsStore; "
        "ResultsStore(sys.argv[1]).close()"
    )
    environment = dict(os.environ, PYTHONPATH=str(REPO))
    processes = [
        subprocess.Popen([sys.executable, "-c", opener, str(store)], cwd=REPO, env=environment, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    errors = [process.communicate(timeout=120)[1] for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], errors
    with ResultsStore(store, create=False) as opened:
        check = opened.verify()
        assert opened.schema_version == 2 and opened.checksums_since and (check.ok, check.sound) == (True, 8)


def test_a_lost_checksum_table_is_damage_that_report_and_run_refuse_and_verify_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.sqlite"
    keys = stored_store(store)
    connection = sqlite3.connect(store)
    with connection:  # the reproduction: drop the checksums, zero an array
        connection.execute("DROP TABLE run_checksums")
        connection.execute("UPDATE run_arrays SET data = zeroblob(length(data)) WHERE run_key = ?", (keys[0],))
    connection.close()
    capsys.readouterr()
    assert main(["report", "--store", str(store), "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err
    assert "has lost its checksum table run_checksums" in err and "damage" in err
    assert not (tmp_path / "report").exists()
    assert main(["verify", "--store", str(store)]) == 1
    out = capsys.readouterr().out
    assert "checksums: checksum table LOST" in out and "the checksum table is lost (damage)" in out
    spec = write_spec(tmp_path / "spec.toml", rounds=5, seeds=1)
    before = store.read_bytes()
    assert main(["run", str(spec), "--store", str(store), "--workers", "1", "--no-progress", "--no-report"]) == 2
    assert "has lost its checksum table" in capsys.readouterr().err
    assert store.read_bytes() == before  # no fresh checksums written over the damage
    with ResultsStore(store, create=False) as opened:
        assert not opened.verify().ok


def test_only_a_store_with_no_table_and_no_record_is_pre_checksum_and_its_upgrade_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "old.sqlite"
    shutil.copyfile(DATA / "store_schema1.sqlite", store)
    assert main(["verify", "--store", str(store)]) == 0
    assert "checksums: written before checksums (store format 1" in capsys.readouterr().out
    assert main(["report", "--store", str(store), "--out", str(tmp_path / "r")]) == 0
    assert "tbg: warning:" in capsys.readouterr().err  # reported, and said to be unverifiable
    with ResultsStore(store) as opened:  # opened for writing: checksummed, and that is recorded
        assert (opened.schema_version, opened.verify().sound) == (2, 8) and opened.checksums_since
    connection = sqlite3.connect(store)
    with connection:
        connection.execute("DROP TABLE run_checksums")
        connection.execute("UPDATE tbg_schema SET version = 1")  # a record kept elsewhere still tells
    connection.close()
    with pytest.raises(Exception, match="lost its checksum table"):
        ResultsStore(store)


# --------------------------------------------------------------------------------- 4. one line for every failure
def test_deep_toml_specs_end_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    arrays = tmp_path / "arrays.toml"
    arrays.write_text("x = " + "[" * 60_000 + "]" * 60_000 + "\n")
    tables = tmp_path / "tables.toml"
    tables.write_text("x = " + "{a = " * 60_000 + "1" + "}" * 60_000 + "\n")
    for spec in (arrays, tables):
        assert main(["run", str(spec), "--store", str(tmp_path / "s.sqlite"), "--no-report"]) == 2
        assert main(["report", "--spec", str(spec), "--store", str(tmp_path / "s.sqlite")]) == 2
        err = capsys.readouterr().err
        assert err.count("nests arrays or tables too deeply") == 2 and "Traceback" not in err


NEGATIVE_SIZES = [
    ["run", "spec.toml", "--workers", "0"],
    ["ddmc", "--max-items", "-1"],
    ["ddmc", "--max-common", "-1"],
    ["ddmc", "--min-group-size", "0"],
    ["ddmc", "--num-bootstrap", "-1"],
    ["ddmc", "--seed", "-1"],
    ["ddmc", "--batch-size", "0"],
    ["ddmc", "--max-tokens", "0"],
    ["check-model", "stories260K", "--steps", "0"],
    ["check-model", "stories260K", "--max-length", "-3"],
    ["check-model", "stories260K", "--top-k", "0"],
    ["check-model", "stories260K", "--seed", "-1"],
    ["check-model", "stories260K", "--max-length", "three"],
]


@pytest.mark.parametrize("arguments", NEGATIVE_SIZES, ids=[" ".join(case[::2]) for case in NEGATIVE_SIZES])
def test_negative_sizes_are_refused_at_argument_parsing(
    arguments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main(arguments)
    assert refused.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith(f"tbg {arguments[0]}: error: argument {arguments[-2]}: expected a ")
    assert repr(arguments[-1]) in lines[-1]


def test_every_integer_flag_of_every_subcommand_has_a_lower_bound() -> None:
    subcommands = next(
        action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)
    ).choices
    for name, parser in subcommands.items():
        for action in parser._actions:
            assert action.type is not int, f"tbg {name} {action.option_strings}: a plain int takes negative sizes"


def test_an_emoji_label_on_an_ascii_terminal_is_escaped_and_the_report_written(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "spec.toml", rounds=5, seeds=1)
    spec.write_text(spec.read_text() + 'label = "dice \U0001f3b2"\n')
    out = tmp_path / "report"
    arguments = ["run", str(spec), "--store", str(tmp_path / "s.sqlite"), "--workers", "1", "--no-progress"]
    finished = run_tbg([*arguments, "--out", str(out)], PYTHONIOENCODING="ascii")
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert "dice \\U0001f3b2" in finished.stdout and "Traceback" not in finished.stderr
    assert "dice \U0001f3b2" in (out / "leaderboard.md").read_text(encoding="utf-8")


def test_too_few_file_descriptors_at_start_is_named(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "spec.toml", rounds=5, seeds=1)

    def eight_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (8, 8))

    arguments = ["run", str(spec), "--store", str(tmp_path / "s.sqlite"), "--no-report"]
    finished = run_tbg(arguments, preexec=eight_files)
    assert finished.returncode == 2 and ends_with_one_error_line(finished.stderr), finished.stderr[-2000:]
    assert "too few file descriptors" in finished.stderr and "ulimit -n 8" in finished.stderr
    assert not (tmp_path / "s.sqlite").exists()


def test_too_little_memory_to_load_torch_at_start_is_named(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "spec.toml", rounds=5, seeds=1)

    def small_address_space() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (400_000 * 1024, resource.RLIM_INFINITY))

    arguments = ["run", str(spec), "--store", str(tmp_path / "s.sqlite"), "--no-report"]
    finished = run_tbg(arguments, preexec=small_address_space)
    assert finished.returncode == 2 and ends_with_one_error_line(finished.stderr), finished.stderr[-2000:]
    assert "torch" in finished.stderr and "ulimit -v 400000" in finished.stderr


def test_a_missing_ddmc_dataset_is_an_input_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["ddmc", "--dataset", str(tmp_path / "nonexistent")]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("tbg: error: bad input: dataset file not found")
    assert "write" not in err


# The `tbg` console script as pip writes it, after a line that says the interpreter has started: Ctrl-C before
# that line reaches Python's own start-up, not `tbg`.
CONSOLE_SCRIPT = (
    "import sys; print('started', flush=True); sys.argv[0] = 'tbg'; from tbg_entry import main; sys.exit(main())"
)


def interrupt_at(arguments: list[str], delay: float) -> subprocess.CompletedProcess[str]:
    """``tbg ARGUMENTS`` sent SIGINT ``delay`` seconds after its first line (while it imports, for short delays)."""
    process = subprocess.Popen(
        [sys.executable, "-c", CONSOLE_SCRIPT, *arguments],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "started\n"
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=300)
    return subprocess.CompletedProcess(arguments, process.returncode, out, err)


def check_interrupts(tmp_path: Path, delays: list[float]) -> dict[int, int]:
    """Interrupt `tbg report` and `tbg run` at each delay; every one ends with 130 and one line (or finished)."""
    store = tmp_path / "s.sqlite"
    spec = write_spec(tmp_path / "spec.toml", rounds=50, seeds=2)
    statuses: dict[int, int] = {}
    for index, delay in enumerate(delays):
        arguments = (
            ["report", "--store", str(store), "--out", str(tmp_path / "r")]
            if index % 2
            else ["run", str(spec), "--store", str(store), "--no-progress", "--out", str(tmp_path / "r")]
        )
        finished = interrupt_at(arguments, delay)
        statuses[finished.returncode] = statuses.get(finished.returncode, 0) + 1
        assert "Traceback" not in finished.stderr and "terminate" not in finished.stderr, finished.stderr[-2000:]
        if finished.returncode == -signal.SIGINT:  # as the interpreter exited, signals at their defaults: a
            assert "report written" in finished.stdout  # shell's 130, once the report is written
        elif finished.returncode != 0:
            assert finished.returncode == 130 and ends_with_one_error_line(finished.stderr), finished.stderr[-2000:]
    return statuses


def test_ctrl_c_while_tbg_starts_exits_130_with_one_line(tmp_path: Path) -> None:
    stored_store(tmp_path / "s.sqlite", 2)
    statuses = check_interrupts(tmp_path, [0.05, 0.15, 0.4, 1.0])
    assert statuses.get(130, 0) >= 3, statuses


@pytest.mark.slow
def test_ctrl_c_at_random_moments_of_tbg_exits_130_with_one_line(tmp_path: Path) -> None:
    stored_store(tmp_path / "s.sqlite", 2)
    rng = random.Random(49)
    statuses = check_interrupts(tmp_path, [rng.uniform(0.0, 4.0) for _ in range(40)])
    assert statuses.get(130, 0) >= 20, statuses


def test_a_report_replaces_its_own_earlier_report_after_a_label_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, out = tmp_path / "s.sqlite", tmp_path / "report"
    spec = write_spec(tmp_path / "spec.toml", rounds=5, seeds=1)
    arguments = ["run", str(spec), "--store", str(store), "--workers", "1", "--no-progress", "--out", str(out)]
    assert main(arguments) == 0
    old_plots = {item.name for item in out.iterdir() if item.name.startswith("regret_T")}
    spec.write_text(spec.read_text().replace("[[agent]]", 'label = "Renamed task"\n\n[[agent]]'))
    assert main(arguments) == 0  # the plots of the old label are that report's own: replaced, not refused
    names = {item.name for item in out.iterdir()}
    assert old_plots and not old_plots & names and "regret_Renamed_task.png" in names
    assert main(["report", "--store", str(store), "--out", str(out)]) == 0
    (out / "notes.txt").write_text("mine")
    with ResultsStore(store, create=False) as opened:
        before = len(opened)
    spec.write_text(spec.read_text().replace("seeds = 1", "seeds = 3"))
    capsys.readouterr()
    assert main(arguments) == 2  # refused before any run is played
    assert "holds files that are not a report (notes.txt)" in capsys.readouterr().err
    with ResultsStore(store, create=False) as opened:
        assert len(opened) == before
    assert (out / "notes.txt").read_text() == "mine"


def test_a_symlink_loop_or_dangling_out_is_refused_before_the_first_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loop, dangling, linked, real = tmp_path / "loop", tmp_path / "dangling", tmp_path / "linked", tmp_path / "real"
    loop.symlink_to(loop)
    dangling.symlink_to(tmp_path / "missing")
    real.mkdir()
    linked.symlink_to(real)
    spec = write_spec(tmp_path / "spec.toml", rounds=5, seeds=1)
    store = tmp_path / "s.sqlite"
    for out, message in ((loop, "loop"), (loop / "sub", "loop"), (dangling, "dangling")):
        assert main(["run", str(spec), "--store", str(store), "--no-progress", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"tbg: error: --out {str(out)!r}") and message in err, err
        assert not store.exists()
    assert main(["run", str(spec), "--store", str(store), "--no-progress", "--out", str(linked)]) == 0
    assert linked.is_symlink() and (real / "leaderboard.html").is_file()


# ------------------------------------------------------------------------------------ 5. Markdown escapes HTML
def test_markdown_escapes_labels_as_html_does() -> None:
    from tokenized_bandit_gym.evaluation.leaderboard import build_leaderboard
    from tokenized_bandit_gym.evaluation.leaderboard_report import markdown_report

    hostile = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<svg onload=alert(1)>"]
    records = [make_record(label, hostile[(index + 1) % 3], 0, [0.5] * 5) for index, label in enumerate(hostile)]
    records += [make_record(label, "random", 0, [0.75] * 5) for label in hostile]
    text = markdown_report(build_leaderboard(records, title="<script>title</script>"))
    for tag in ("<script", "<img", "<svg"):
        assert tag not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "&lt;img src=x onerror=alert(1)&gt;" in text


def test_the_terminal_table_shows_labels_and_notes_unescaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table printed to the terminal reads as typed ('<' in a label or note), the file keeps the escapes."""
    store = tmp_path / "s.sqlite"
    with ResultsStore(store) as opened:
        opened.add(make_record("Task <a>", "agent <b>", 0, [0.5] * 5))
        opened.add(make_record("Task <a>", "random", 0, [0.75] * 5))
    assert main(["report", "--store", str(store), "--out", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr().out
    assert "agent <b>" in printed and "&lt;" not in printed
    assert "agent &lt;b&gt;" in (tmp_path / "report" / "leaderboard.md").read_text(encoding="utf-8")


# -------------------------------------------------------------------------------- 6. labels follow the specs
def labelled(path: Path, name: str) -> Path:
    write_spec(path, rounds=5, seeds=2)
    path.write_text(
        path.read_text().replace("[[agent]]", f'label = "Task {name}"\n\n[[agent]]') + f'label = "Agent {name}"\n'
    )
    return path


def test_a_shared_store_names_tasks_and_agents_by_every_spec_whatever_stored_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = labelled(tmp_path / "a.toml", "A"), labelled(tmp_path / "b.toml", "B")
    reports = {}
    for order in ((first, second), (second, first)):
        store = tmp_path / f"{order[0].stem}{order[1].stem}.sqlite"
        for spec in order:
            assert main(["run", str(spec), "--store", str(store), "--no-progress", "--no-report"]) == 0
        out = tmp_path / f"report-{store.stem}"
        capsys.readouterr()
        assert main(["report", "--store", str(store), "--out", str(out)]) == 0
        capsys.readouterr()
        reports[store.stem] = (out / "leaderboard.md").read_text()
    names = {  # headings and the first two cells of every table row (the rest holds timings)
        order: [line.split(" | ")[:2] for line in text.splitlines() if line.startswith(("|", "#"))]
        for order, text in reports.items()
    }
    assert names["ab"] == names["ba"]
    text = reports["ab"]
    assert "Task A / Task B" in text and "Agent A / Agent B" in text
    assert "was given 2 labels by the specs run on its store" in text
