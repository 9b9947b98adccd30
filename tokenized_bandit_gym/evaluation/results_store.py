"""The results store: one SQLite file holding every finished run, written one transaction per run.

Why SQLite: a single file that needs no server, survives ``kill -9`` (a run is either fully
committed or absent; WAL mode), and can be read by any tool. The store never overwrites a file
it did not create: a file that is not SQLite, an SQLite database of another application, or a
store written by a newer schema raises :class:`StoreError` and is left untouched.

Schema (version 2)::

    tbg_schema(version, application, created_at)        -- one row; also PRAGMA user_version
    runs(run_key PRIMARY KEY, env_id, env_kwargs JSON, agent, agent_kwargs JSON, seed, rounds,
         task_label, agent_label, package_version, git_commit, torch_version,
         transformers_version, device, wall_time, started_at, finished_at, metadata JSON)
    run_arrays(run_key, name, dtype, data BLOB)          -- (T,) little-endian float64 per array

    run_checksums(run_key, part, checksum)              -- SHA-256 of the runs row and of each array
    run_leases(run_key PRIMARY KEY, holder, hostname, pid, heartbeat)  -- runs being played now
    run_labels(run_key, task_label, agent_label)        -- every label pair a spec gave a run (stored or not)

Schema 2 adds ``tbg_schema.checksums_since`` (when checksums began; PRAGMA user_version is 2 too): a store
that records checksums but has lost its ``run_checksums`` table is damaged, and is refused (only a store
with neither the table nor that record is one written before checksums).

Every run is written with its checksums in one transaction (``part`` is ``"runs"`` for the row,
else the array's name) and verified on every read: a run whose row or arrays no longer match, or
whose checksums are gone, is left out of :meth:`ResultsStore.records` and listed in
:attr:`ResultsStore.damaged` by key; a run the checksum table lists but the store lost is listed
there too. SQLite's own checks (``PRAGMA quick_check``) pass most single flipped bits in a data
page; the checksums catch them. :meth:`ResultsStore.verify` checks a whole store (``tbg verify``),
and :func:`run_leaderboard` refuses to write into a store that fails it. Stores written before
checksums get them (over their rows as they are then) the first time they are opened for writing.

``run_key`` is :attr:`RunSpec.key`, the hash of what determines the results, so a rerun of the
same spec skips finished runs and a run is never stored twice.

Several ``tbg run`` processes on one machine can share a store: each claims a run before playing
it by inserting its lease row (one ``BEGIN IMMEDIATE`` transaction), renews its leases' heartbeat
while it works, and deletes the lease in the transaction that stores the run. A lease whose holder
has died (same host, process gone) or whose heartbeat is older than the lease time is claimed
again, so no run is played twice and none is lost when a process is killed. The lease table is
added to older stores when they are opened for writing (readers of schema 1 ignore it).

SQLite's locking is unsafe on network filesystems (NFS, SMB/CIFS, sshfs...): keep the store on a
local disk. :class:`ResultsStore` warns (:class:`NetworkFilesystemWarning`) when it detects one.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import stat
import threading
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from tokenized_bandit_gym.evaluation.run_record import ARRAY_NAMES, DETERMINISTIC_ARRAYS, RunRecord
from tokenized_bandit_gym.evaluation.run_spec import RunSpec, canonical_json

SCHEMA_VERSION = 2
# The first store format that records its checksums (tbg_schema.checksums_since and PRAGMA user_version): a
# store of this format without its run_checksums table has lost it.
CHECKSUMS_SCHEMA_VERSION = 2
APPLICATION = "tokenized-bandit-gym results store"
# PRAGMA application_id, the 4 bytes "TBG1": marks the file as ours in the SQLite header.
APPLICATION_ID = 0x54424731
_SQLITE_HEADER = b"SQLite format 3\x00"
_ARRAY_DTYPE = "<f8"
# The files (device, inode) that stores of this process hold connections to, with how many: such a file is
# never opened any other way in this process (see ResultsStore._check_header).
_CONNECTED_FILES: Counter[tuple[int, int]] = Counter()
_CONNECTED_LOCK = threading.Lock()
# The metadata keys stored in their own columns (the rest goes to the metadata JSON column).
METADATA_COLUMNS = (
    "package_version",
    "git_commit",
    "torch_version",
    "transformers_version",
    "device",
    "wall_time",
    "started_at",
    "finished_at",
)

_CREATE = (
    "CREATE TABLE tbg_schema (version INTEGER NOT NULL, application TEXT NOT NULL, created_at TEXT NOT NULL, "
    "checksums_since TEXT)",
    """CREATE TABLE runs (
        run_key TEXT PRIMARY KEY,
        env_id TEXT NOT NULL,
        env_kwargs TEXT NOT NULL,
        agent TEXT NOT NULL,
        agent_kwargs TEXT NOT NULL,
        seed INTEGER NOT NULL,
        rounds INTEGER NOT NULL,
        task_label TEXT NOT NULL,
        agent_label TEXT NOT NULL,
        package_version TEXT,
        git_commit TEXT,
        torch_version TEXT,
        transformers_version TEXT,
        device TEXT,
        wall_time REAL,
        started_at TEXT,
        finished_at TEXT,
        metadata TEXT NOT NULL
    )""",
    """CREATE TABLE run_arrays (
        run_key TEXT NOT NULL REFERENCES runs(run_key),
        name TEXT NOT NULL,
        dtype TEXT NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (run_key, name)
    )""",
)


_CREATE_CHECKSUMS = """CREATE TABLE IF NOT EXISTS run_checksums (
    run_key TEXT NOT NULL,
    part TEXT NOT NULL,
    checksum TEXT NOT NULL,
    PRIMARY KEY (run_key, part)
)"""
# The run_checksums part that checksums the runs row (the other parts are array names).
ROW_PART = "runs"

_CREATE_LEASES = """CREATE TABLE IF NOT EXISTS run_leases (
    run_key TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    hostname TEXT NOT NULL,
    pid INTEGER NOT NULL,
    heartbeat REAL NOT NULL
)"""

# Every (task, agent) label pair a spec gave a run, stored or not yet: a store shared by specs names a task or
# agent by all of them (see ResultsStore.labels), whichever process stored the run.
_CREATE_LABELS = """CREATE TABLE IF NOT EXISTS run_labels (
    run_key TEXT NOT NULL,
    task_label TEXT NOT NULL,
    agent_label TEXT NOT NULL,
    PRIMARY KEY (run_key, task_label, agent_label)
)"""

# Filesystem types (``/proc/mounts``) on which SQLite's file locking is unreliable.
NETWORK_FILESYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smbfs",
        "smb3",
        "ncpfs",
        "afs",
        "9p",
        "ceph",
        "glusterfs",
        "lustre",
        "gpfs",
        "beegfs",
        "fuse.sshfs",
        "fuse.glusterfs",
        "fuse.cephfs",
        "fuse.s3fs",
        "fuse.rclone",
        "fuse.gcsfuse",
        "fuse.juicefs",
    }
)


class StoreError(RuntimeError):
    """The store file is missing, corrupted, foreign or from a newer version (left untouched)."""


@dataclass
class StoreCheck:
    """What :meth:`ResultsStore.verify` found.

    Attributes:
        runs: runs in the ``runs`` table.
        sound: runs whose row and arrays match their checksums.
        damaged: ``run_key -> what is wrong`` for every run whose data no longer matches, or that
            the checksum table lists but the store lost.
        unverified: runs written before checksums (a store never opened for writing since).
        integrity: the messages of SQLite's ``PRAGMA integrity_check`` (``[]`` when it passes).
        checksums: which case the store is (:meth:`ResultsStore.checksum_state`): checksummed since when,
            written before checksums, or its checksum table lost.
        checksums_lost: the store records having held checksums but its checksum table is gone (damage:
            no run is counted sound).
    """

    runs: int = 0
    sound: int = 0
    damaged: dict[str, str] = field(default_factory=dict)
    unverified: int = 0
    integrity: list[str] = field(default_factory=list)
    checksums: str = ""
    checksums_lost: bool = False

    @property
    def ok(self) -> bool:
        """True when nothing is damaged, the checksum table is there if it ever was, and SQLite's check passes."""
        return not self.damaged and not self.integrity and not self.checksums_lost

    def summary(self) -> str:
        """One line: how many runs were checked and what was wrong."""
        parts = [f"{self.runs} runs checked, {self.sound} sound, {len(self.damaged)} damaged"]
        if self.unverified:
            parts.append(f"{self.unverified} written before checksums (not verifiable)")
        if self.checksums_lost:
            parts.append("the checksum table is lost (damage)")
        if self.integrity:
            parts.append(f"SQLite integrity check failed ({'; '.join(self.integrity[:3])})")
        return ", ".join(parts)


def array_checksum(name: str, dtype: str, data: bytes) -> str:
    """SHA-256 of one stored array: its name, dtype, length and bytes."""
    digest = hashlib.sha256()
    for part in (name.encode(), dtype.encode(), str(len(data)).encode(), data):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


def row_checksum(row: dict[str, Any]) -> str:
    """SHA-256 of one ``runs`` row as SQLite returns it (column name -> value; a BLOB where text belongs hashes too)."""
    text = json.dumps(row, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


class NetworkFilesystemWarning(UserWarning):
    """The store sits on a network filesystem, where SQLite's locking is unsafe."""


def network_filesystem(path: str | Path, mounts: str | None = None) -> str | None:
    """The network filesystem type ``path`` lies on, or None (local, or not detectable).

    Args:
        path: a file or folder (need not exist yet).
        mounts: the mount table in ``/proc/mounts`` format (default: read ``/proc/mounts``;
            None is returned where there is none, e.g. on macOS and Windows).

    Returns:
        The ``fstype`` of the innermost mount holding ``path`` if it is one of
        :data:`NETWORK_FILESYSTEMS`, else None.
    """
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    target = os.path.abspath(os.path.realpath(path))
    best, best_type = "", None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        # /proc/mounts escapes spaces, tabs, newlines and backslashes as octal (\040).
        mount_point = fields[1].encode().decode("unicode_escape")
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, best_type = mount_point, fields[2]
    if best_type is None:
        return None
    return best_type if best_type in NETWORK_FILESYSTEMS or best_type.startswith("nfs") else None


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def _not_regular(path: Path, mode: int) -> str:
    kinds: tuple[tuple[Callable[[int], bool], str], ...] = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
    )
    kinds += ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    kind = next((name for test, name in kinds if test(mode)), "not a regular file")
    return f"{str(path)!r} is {kind}, not a results store file; it was not read. Pass a --store path of a regular file"


def _check_regular_file(path: Path) -> None:
    """Raise :class:`StoreError` unless ``path`` (followed through links) is a regular file: read nothing else.

    A FIFO would block the first ``open()`` forever, and a device or folder is no store.
    """
    try:
        mode = path.stat().st_mode
    except OSError as error:
        raise StoreError(f"cannot open the results store {str(path)!r}: {error.strerror or error}") from error
    if not stat.S_ISREG(mode):
        raise StoreError(_not_regular(path, mode))


def _file_identity(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_dev, status.st_ino


class LeaseHolder:
    """Who claims runs: one per ``tbg run`` process (hostname, pid and a random id)."""

    def __init__(self) -> None:
        self.hostname = socket.gethostname()
        self.pid = os.getpid()
        self.id = f"{self.hostname}:{self.pid}:{uuid.uuid4().hex[:12]}"


class ResultsStore:
    """An SQLite results store (see the module docstring for the schema).

    Args:
        path: the database file.
        create: create the file if it does not exist (``tbg run``); otherwise a missing file
            raises :class:`StoreError` (``tbg report``).

    Raises:
        StoreError: the file is not SQLite, belongs to another application, is corrupted, or
            was written by a newer schema.
    """

    schema_version: int
    """The store's format (``SCHEMA_VERSION`` for a store this version created), set when it is opened."""

    def __init__(self, path: str | Path, create: bool = True) -> None:
        self.path = Path(path)
        exists = self.path.exists()
        if not exists and not create:
            raise StoreError(f"no results store at {str(self.path)!r}; run `tbg run SPEC --store {self.path}` first")
        if exists:
            _check_regular_file(self.path)
            if create and not os.access(self.path, os.W_OK):
                raise StoreError(
                    f"the results store {str(self.path)!r} is read-only; `tbg run` stores runs in it "
                    "(`tbg report` and `tbg verify` only read it). Make it writable or pass another --store"
                )
        else:
            self._make_folder()
        if create:
            filesystem = network_filesystem(self.path)
            if filesystem is not None:
                warnings.warn(
                    f"the results store {str(self.path)!r} is on a network filesystem ({filesystem}), where "
                    "SQLite's locking is unsafe: concurrent `tbg run`s may corrupt it. Keep the store on a local "
                    "disk; to spread runs over machines use --backend ray",
                    NetworkFilesystemWarning,
                    stacklevel=2,
                )
        self._file: tuple[int, int] | None = None
        with _CONNECTED_LOCK:
            if exists:
                self._check_header()
            try:
                self._connection = sqlite3.connect(self.path, timeout=30.0)
            except sqlite3.Error as error:
                raise StoreError(self._unopenable(error)) from error
            self._register()
        self.damaged: dict[str, str] = {}
        self.checksums_since: str | None = None
        try:
            self._open()
            self._has_checksums = self._has_table("run_checksums")
            recorded = self._checksums_recorded()
            self.checksums_lost = recorded and not self._has_checksums
            if create:
                if self.checksums_lost:
                    raise StoreError(self._lost_checksums() + "; it was not modified")
                with self._connection:
                    self._connection.execute(_CREATE_LEASES)
                    self._connection.execute(_CREATE_LABELS)
                if not self._has_checksums:
                    self._add_checksums()
                self._record_checksums()
            self._has_leases = self._has_table("run_leases")
            self._has_labels = self._has_table("run_labels")
            self._has_checksums = self._has_table("run_checksums")
        except sqlite3.OperationalError as error:
            self.close()
            raise StoreError(self._unopenable(error)) from error
        except sqlite3.DatabaseError as error:
            self.close()
            raise StoreError(
                f"{str(self.path)!r} is not a readable results store ({error}); it was not modified"
            ) from error
        except StoreError:
            self.close()
            raise

    def _has_table(self, name: str) -> bool:
        query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        return self._connection.execute(query, (name,)).fetchone() is not None

    def _checksums_recorded(self) -> bool:
        """Whether the store records that it has held checksums (format 2, PRAGMA user_version 2, or a start time)."""
        user_version = int(self._connection.execute("PRAGMA user_version").fetchone()[0])
        columns = {row[1] for row in self._connection.execute("PRAGMA table_info(tbg_schema)")}
        if "checksums_since" in columns:
            since = self._connection.execute("SELECT checksums_since FROM tbg_schema").fetchone()[0]
            self.checksums_since = None if since is None else str(since)
        return (
            self.schema_version >= CHECKSUMS_SCHEMA_VERSION
            or user_version >= CHECKSUMS_SCHEMA_VERSION
            or (self.checksums_since is not None)
        )

    def _lost_checksums(self) -> str:
        since = f" since {self.checksums_since}" if self.checksums_since else ""
        return (
            f"the results store {str(self.path)!r} has lost its checksum table run_checksums: it records holding "
            f"checksums{since} (store format {self.schema_version}), so this is damage, not a store written before "
            "checksums, and its runs cannot be trusted"
        )

    @property
    def has_checksums(self) -> bool:
        """Whether the store has its checksum table (False before checksums, and when the table was lost)."""
        return self._has_checksums

    def checksum_state(self) -> str:
        """Which case the store is: checksummed (and since when), written before checksums, or checksums lost."""
        if self.checksums_lost:
            return "checksum table LOST (damage: " + self._lost_checksums().split(": ", 1)[1] + ")"
        if not self._has_checksums:
            return (
                f"written before checksums (store format {self.schema_version}: no checksum table and no record of "
                "one); its runs cannot be verified until `tbg run` opens it for writing"
            )
        since = self.checksums_since or "a time not recorded (written by an earlier version)"
        return f"store format {self.schema_version}, runs checksummed since {since}"

    def _record_checksums(self) -> None:
        """Record store format 2 and when checksums began, so that losing the checksum table reads as damage."""
        if self.schema_version >= CHECKSUMS_SCHEMA_VERSION and self.checksums_since is not None:
            return
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        connection = self._connection
        connection.execute("BEGIN IMMEDIATE")  # several `tbg run`s may open an older store at once
        try:
            columns = {row[1] for row in connection.execute("PRAGMA table_info(tbg_schema)")}
            if "checksums_since" not in columns:
                connection.execute("ALTER TABLE tbg_schema ADD COLUMN checksums_since TEXT")
            connection.execute(
                "UPDATE tbg_schema SET version = ?, checksums_since = COALESCE(checksums_since, ?)",
                (SCHEMA_VERSION, now),
            )
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            since = connection.execute("SELECT checksums_since FROM tbg_schema").fetchone()[0]
            connection.commit()
        except BaseException:
            connection.rollback()
            raise
        self.schema_version = SCHEMA_VERSION
        self.checksums_since = str(since)

    def _add_checksums(self) -> None:
        """Give a store written before checksums its checksum table, over its runs as they are now."""
        problems = [row[0] for row in self._connection.execute("PRAGMA integrity_check")]
        if problems != ["ok"]:
            raise StoreError(
                f"{str(self.path)!r} fails SQLite's integrity check ({'; '.join(problems[:3])}); it was not "
                "modified. See `tbg verify --store`"
            )
        with self._connection:
            self._connection.execute(_CREATE_CHECKSUMS)
            for (key,) in self._connection.execute("SELECT run_key FROM runs").fetchall():
                self._write_checksums(key)

    def _write_checksums(self, key: str) -> None:
        """Checksum the row and arrays of run ``key`` as stored (inside the caller's transaction)."""
        rows = [(key, ROW_PART, row_checksum(self._row(key)))]
        arrays = self._connection.execute("SELECT name, dtype, data FROM run_arrays WHERE run_key = ?", (key,))
        rows += [(key, name, array_checksum(name, dtype, data)) for name, dtype, data in arrays]
        self._connection.executemany("INSERT OR REPLACE INTO run_checksums VALUES (?, ?, ?)", rows)

    def _row(self, key: str) -> dict[str, Any]:
        cursor = self._connection.execute("SELECT * FROM runs WHERE run_key = ?", (key,))
        names = [column[0] for column in cursor.description]
        return dict(zip(names, cursor.fetchone(), strict=True))

    def _make_folder(self) -> None:
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(
                f"cannot create the results store {str(self.path)!r}: its folder {str(folder)!r} cannot be created "
                f"({error.strerror or error}). Pass a --store path in a writable folder"
            ) from error
        if not os.access(folder, os.W_OK | os.X_OK):
            raise StoreError(
                f"cannot create the results store {str(self.path)!r}: the folder {str(folder)!r} is not writable. "
                "Pass a --store path in a writable folder"
            )

    def _unopenable(self, error: Exception) -> str:
        return (
            f"cannot open the results store {str(self.path)!r} ({error}); the file and its folder "
            f"{str(self.path.parent)!r} must be readable and writable (SQLite keeps -wal and -shm files beside it)"
        )

    def _check_header(self) -> None:
        """Refuse a file that does not start as an SQLite database (SQLite would take a short one for an empty one).

        The header is read with a plain ``open()`` only while no store of this process holds a connection to
        the file: closing any descriptor of a file drops every POSIX lock the process holds on it, and the
        next process to close the store then deletes the live WAL ("How To Corrupt An SQLite Database File",
        section 2.2). The lease heartbeat opens a second store in the writer's process; that one relies on
        the first one's check and on SQLite's own (``file is not a database``, see :meth:`_open`).
        """
        if _file_identity(self.path) in _CONNECTED_FILES:
            return
        # O_NONBLOCK: a FIFO put in the file's place since the check in __init__ must not block the open.
        descriptor = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(descriptor, "rb") as handle:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise StoreError(_not_regular(self.path, os.fstat(descriptor).st_mode))
            header = handle.read(len(_SQLITE_HEADER))
        if header and header != _SQLITE_HEADER:
            raise StoreError(
                f"{str(self.path)!r} is not an SQLite database (foreign or corrupted file); "
                "it was not modified. Pass another --store path."
            )

    def _register(self) -> None:
        """Count this connection in :data:`_CONNECTED_FILES` (called with :data:`_CONNECTED_LOCK` held)."""
        try:
            self._file = _file_identity(self.path)
        except OSError:
            return
        _CONNECTED_FILES[self._file] += 1

    def _open(self) -> None:
        cursor = self._connection.cursor()
        try:
            application_id = cursor.execute("PRAGMA application_id").fetchone()[0]
        except sqlite3.DatabaseError as error:
            if isinstance(error, sqlite3.OperationalError) or "not a database" not in str(error):
                raise
            raise StoreError(
                f"{str(self.path)!r} is not an SQLite database (foreign or corrupted file); "
                "it was not modified. Pass another --store path."
            ) from error
        tables = {row[0] for row in cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables and application_id == 0:
            self._create()
            return
        if application_id != APPLICATION_ID or "tbg_schema" not in tables:
            raise StoreError(
                f"{str(self.path)!r} is an SQLite database of another application (tables {sorted(tables)}); "
                "it was not modified. Pass another --store path."
            )
        row = cursor.execute("SELECT version FROM tbg_schema").fetchone()
        if row is None or not isinstance(row[0], int):
            found = "an empty tbg_schema table" if row is None else f"schema version {row[0]!r}"
            raise StoreError(f"{str(self.path)!r} has {found} (corrupted store); it was not modified")
        self.schema_version = int(row[0])
        if self.schema_version > SCHEMA_VERSION:
            raise StoreError(
                f"{str(self.path)!r} was written by a newer tokenized-bandit-gym (schema {self.schema_version}, "
                f"this version reads up to {SCHEMA_VERSION}); upgrade the package. It was not modified."
            )
        missing = {"runs", "run_arrays"} - tables
        if missing:
            raise StoreError(f"{str(self.path)!r} lacks the tables {sorted(missing)} (corrupted store); not modified")
        self._connection.execute("PRAGMA journal_mode=WAL")

    def _create(self) -> None:
        connection = self._connection
        connection.execute("PRAGMA journal_mode=WAL")
        with connection:
            connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            for statement in (*_CREATE, _CREATE_CHECKSUMS):
                connection.execute(statement)
            now = datetime.now(timezone.utc).isoformat(timespec="seconds")
            connection.execute("INSERT INTO tbg_schema VALUES (?, ?, ?, ?)", (SCHEMA_VERSION, APPLICATION, now, now))
        self.schema_version = SCHEMA_VERSION
        self.checksums_since = now

    def close(self) -> None:
        """Close the connection (finished runs are already committed)."""
        self._connection.close()
        with _CONNECTED_LOCK:
            if self._file is not None:
                _CONNECTED_FILES[self._file] -= 1
                if _CONNECTED_FILES[self._file] <= 0:
                    del _CONNECTED_FILES[self._file]
                self._file = None

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def keys(self) -> set[str]:
        """Run keys of every stored run."""
        return {row[0] for row in self._connection.execute("SELECT run_key FROM runs")}

    def __len__(self) -> int:
        return int(self._connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0])

    def __contains__(self, key: object) -> bool:
        row = self._connection.execute("SELECT 1 FROM runs WHERE run_key = ?", (key,)).fetchone()
        return row is not None

    def add(self, record: RunRecord) -> bool:
        """Store one finished run in one transaction.

        Returns:
            True if stored, False if a run with the same key was already there (nothing changes).
        """
        spec = record.spec
        metadata = dict(record.metadata)
        columns = [metadata.pop(name, None) for name in METADATA_COLUMNS]
        connection = self._connection
        with connection:
            cursor = connection.execute(
                "INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    spec.key,
                    spec.env_id,
                    canonical_json(spec.env_kwargs),
                    spec.agent,
                    canonical_json(spec.agent_kwargs),
                    spec.seed,
                    spec.rounds,
                    spec.task_label or spec.env_id,
                    spec.agent_label or spec.agent,
                    *columns,
                    canonical_json(metadata),
                ),
            )
            if self._has_leases:
                connection.execute("DELETE FROM run_leases WHERE run_key = ?", (spec.key,))
            self._record_labels([spec])
            if cursor.rowcount == 0:
                return False
            connection.executemany(
                "INSERT INTO run_arrays VALUES (?, ?, ?, ?)",
                [
                    (spec.key, name, _ARRAY_DTYPE, record.arrays[name].astype(_ARRAY_DTYPE).tobytes())
                    for name in ARRAY_NAMES
                ],
            )
            if self._has_checksums:
                self._write_checksums(spec.key)
        return True

    # ------------------------------------------------------------------ leases (concurrent `tbg run`s)
    def claim(self, keys: Sequence[str], holder: LeaseHolder, lease_seconds: float) -> tuple[str | None, int]:
        """Claim the first of ``keys`` that is neither stored nor leased by a live holder.

        One ``BEGIN IMMEDIATE`` transaction, so two processes never claim the same run. A lease is
        taken over when its holder is a process of this machine that no longer exists, or when its
        heartbeat is older than ``lease_seconds``. Keys are looked at in order up to the claimed one
        (indexed lookups), so a claim costs little however long the sweep.

        Returns:
            The claimed key (None if none is free) and how many of the keys looked at other live
            holders lease (all of ``keys`` when none is free).
        """
        connection = self._connection
        now = time.time()
        connection.execute("BEGIN IMMEDIATE")
        try:
            claimed, held_elsewhere = None, 0
            for key in keys:
                if key in self:
                    continue
                lease = connection.execute(
                    "SELECT holder, hostname, pid, heartbeat FROM run_leases WHERE run_key = ?", (key,)
                ).fetchone()
                if lease is not None:
                    lease_holder, hostname, pid, heartbeat = lease
                    if lease_holder == holder.id:
                        continue  # already ours
                    expired = now - heartbeat > lease_seconds
                    dead = hostname == holder.hostname and not process_alive(pid)
                    if not (expired or dead):
                        held_elsewhere += 1
                        continue
                claimed = key
                connection.execute(
                    "INSERT OR REPLACE INTO run_leases VALUES (?, ?, ?, ?, ?)",
                    (key, holder.id, holder.hostname, holder.pid, now),
                )
                break
            connection.commit()
        except BaseException:
            connection.rollback()
            raise
        return claimed, held_elsewhere

    def renew_leases(self, holder: LeaseHolder) -> None:
        """Refresh the heartbeat of every lease ``holder`` holds."""
        with self._connection:
            self._connection.execute("UPDATE run_leases SET heartbeat = ? WHERE holder = ?", (time.time(), holder.id))

    def release(self, holder: LeaseHolder, key: str | None = None) -> None:
        """Drop ``holder``'s lease on ``key`` (a failed run), or all of its leases (None)."""
        with self._connection:
            if key is None:
                self._connection.execute("DELETE FROM run_leases WHERE holder = ?", (holder.id,))
            else:
                self._connection.execute("DELETE FROM run_leases WHERE holder = ? AND run_key = ?", (holder.id, key))

    def relabel(self, runs: Iterable[RunSpec]) -> int:
        """Give stored runs the task and agent labels of ``runs`` (labels follow the spec); returns rows changed.

        A run whose row no longer matches its checksum keeps its labels (it stays reported as damaged).
        """
        changed = 0
        runs = list(runs)
        with self._connection:
            self._record_labels(runs)
            for run in runs:
                task, agent = run.task_label or run.env_id, run.agent_label or run.agent
                found = self._connection.execute(
                    "SELECT 1 FROM runs WHERE run_key = ? AND (task_label IS NOT ? OR agent_label IS NOT ?)",
                    (run.key, task, agent),
                ).fetchone()
                if found is None:
                    continue
                if self._has_checksums and self._checksums(run.key).get(ROW_PART) != row_checksum(self._row(run.key)):
                    continue
                self._connection.execute(
                    "UPDATE runs SET task_label = ?, agent_label = ? WHERE run_key = ?", (task, agent, run.key)
                )
                if self._has_checksums:
                    self._connection.execute(
                        "UPDATE run_checksums SET checksum = ? WHERE run_key = ? AND part = ?",
                        (row_checksum(self._row(run.key)), run.key, ROW_PART),
                    )
                changed += 1
        return changed

    def _record_labels(self, runs: Sequence[RunSpec]) -> None:
        """Add the labels ``runs`` give to :meth:`labels` (inside the caller's transaction)."""
        if self._has_labels:
            self._connection.executemany(
                "INSERT OR IGNORE INTO run_labels VALUES (?, ?, ?)",
                [(run.key, run.task_label or run.env_id, run.agent_label or run.agent) for run in runs],
            )

    def labels(self) -> dict[str, tuple[list[str], list[str]]]:
        """Run key -> (every task label, every agent label) that the specs run on this store gave it, sorted.

        Labels follow the spec, so one run shared by specs has several; which process stored it does not
        matter. Empty for a store no ``tbg run`` of this version has opened.
        """
        if not self._has_labels:
            return {}
        given: dict[str, tuple[set[str], set[str]]] = {}
        for key, task, agent in self._connection.execute("SELECT run_key, task_label, agent_label FROM run_labels"):
            tasks, agents = given.setdefault(str(key), (set(), set()))
            tasks.add(str(task))
            agents.add(str(agent))
        return {key: (sorted(tasks), sorted(agents)) for key, (tasks, agents) in given.items()}

    def _checksums(self, key: str) -> dict[str, str]:
        query = "SELECT part, checksum FROM run_checksums WHERE run_key = ?"
        return dict(self._connection.execute(query, (key,)).fetchall())

    def records(self, keys: Iterable[str | RunSpec] | None = None) -> Iterator[RunRecord]:
        """Every sound stored run (or those with ``keys``: run keys, or the RunSpecs themselves), in insertion order.

        Each run is checked against its checksums as it is read. A damaged run is left out and
        listed in :attr:`damaged` (``run_key -> what is wrong``), as is a run that the checksum
        table lists but the store has lost; :attr:`damaged` is reset by each call.

        Raises:
            StoreError: SQLite cannot read the file (a damaged page in the store's structure).
            TypeError: ``keys`` holds something that is neither a run key nor a RunSpec.
        """
        wanted = None if keys is None else {_run_key(key) for key in keys}
        self.damaged = {}
        if self.checksums_lost:
            raise StoreError(self._lost_checksums() + f". Run `tbg verify --store {self.path}`")
        try:
            rows, names, checksums = self._snapshot()
            listed = set()
            for row in rows:
                values = dict(zip(names, row, strict=True))
                key = values["run_key"]
                listed.add(key)
                if wanted is not None and key not in wanted:
                    continue
                arrays = {
                    name: (dtype, data)
                    for name, dtype, data in self._connection.execute(
                        "SELECT name, dtype, data FROM run_arrays WHERE run_key = ?", (key,)
                    )
                }
                problem = None if checksums is None else _damage(values, arrays, checksums.get(key))
                if problem is None:
                    try:
                        record = _record(values, arrays)
                    except (ValueError, KeyError, TypeError) as error:
                        problem = str(error)
                if problem is not None:
                    self.damaged[str(key)] = problem
                    continue
                yield record
            for key in sorted(set(checksums or ()) - listed):
                if wanted is None or key in wanted:
                    self.damaged[key] = "listed in the checksum table but missing from the store (a damaged page)"
        except sqlite3.DatabaseError as error:
            raise StoreError(
                f"cannot read {str(self.path)!r} ({error}); the store is damaged. Run `tbg verify --store {self.path}`"
            ) from error

    def _snapshot(self) -> tuple[list[tuple[Any, ...]], list[str], dict[str, dict[str, str]] | None]:
        """The runs rows, their column names and the checksums (None before checksums), in one read transaction."""
        connection = self._connection
        own = not connection.in_transaction
        if own:
            connection.execute("BEGIN")
        try:
            cursor = connection.execute("SELECT * FROM runs ORDER BY rowid")
            names = [column[0] for column in cursor.description]
            rows = cursor.fetchall()
            checksums: dict[str, dict[str, str]] | None = None
            if self._has_checksums:
                checksums = {}
                for key, part, checksum in connection.execute("SELECT run_key, part, checksum FROM run_checksums"):
                    checksums.setdefault(str(key), {})[str(part)] = checksum
        finally:
            if own:
                connection.rollback()
        return rows, names, checksums

    def verify(self) -> StoreCheck:
        """Check every run against its checksums and the file with SQLite's ``PRAGMA integrity_check``.

        Returns:
            What was found (see :class:`StoreCheck`); nothing is changed.
        """
        check = StoreCheck(checksums=self.checksum_state(), checksums_lost=self.checksums_lost)
        try:
            problems = [str(row[0]) for row in self._connection.execute("PRAGMA integrity_check")]
            check.integrity = [] if problems == ["ok"] else problems
            check.runs = len(self)
            if self.checksums_lost:
                return check
            sound = sum(1 for _ in self.records())
        except (sqlite3.DatabaseError, StoreError) as error:
            check.integrity.append(str(error))
            return check
        check.damaged = dict(self.damaged)
        if self._has_checksums:
            check.sound = sound
        else:
            check.unverified = sound
        return check

    def result_bytes(self) -> dict[str, list[bytes]]:
        """Run key -> the bytes of each array that does not depend on timing, of every sound run.

        Two stores of the same runs, however they were played (workers, processes, interruptions), hold
        equal ones: :data:`~tokenized_bandit_gym.evaluation.run_record.DETERMINISTIC_ARRAYS`, in that order.
        """
        return {
            record.spec.key: [record.arrays[name].tobytes() for name in DETERMINISTIC_ARRAYS]
            for record in self.records()
        }

    def raw_rows(self) -> list[tuple[Any, ...]]:
        """Every row of ``runs`` and ``run_arrays`` exactly as stored (for byte-level comparisons)."""
        runs = self._connection.execute("SELECT * FROM runs ORDER BY run_key").fetchall()
        arrays = self._connection.execute("SELECT * FROM run_arrays ORDER BY run_key, name").fetchall()
        return runs + arrays


def _run_key(key: object) -> str:
    """The run key of ``key``: a run key itself, or a RunSpec's."""
    if isinstance(key, RunSpec):
        return key.key
    if not isinstance(key, str):
        raise TypeError(f"records() takes run keys or RunSpecs (e.g. spec.runs()), got {key!r}")
    return key


def _damage(
    values: dict[str, Any], arrays: dict[str, tuple[str, bytes]], checksums: dict[str, str] | None
) -> str | None:
    """What is wrong with one run read from the store (None when its row and arrays match ``checksums``)."""
    if not checksums or ROW_PART not in checksums:
        return "it has no checksums (a damaged page)"
    if checksums[ROW_PART] != row_checksum(values):
        return "its runs row does not match its checksum"
    for name in sorted((checksums.keys() - {ROW_PART}) | arrays.keys()):
        if name not in arrays:
            return f"its array {name!r} is missing"
        if name not in checksums:
            return f"its array {name!r} has no checksum"
        dtype, data = arrays[name]
        if (
            not isinstance(dtype, str)
            or not isinstance(data, bytes)
            or checksums[name] != array_checksum(name, dtype, data)
        ):
            return f"its array {name!r} does not match its checksum"
    return None


def _record(values: dict[str, Any], arrays: dict[str, tuple[str, bytes]]) -> RunRecord:
    """The run of one ``runs`` row and its arrays (``name -> (dtype, bytes)``)."""
    spec = RunSpec(
        env_id=values["env_id"],
        env_kwargs=json.loads(values["env_kwargs"]),
        agent=values["agent"],
        agent_kwargs=json.loads(values["agent_kwargs"]),
        seed=int(values["seed"]),
        rounds=int(values["rounds"]),
        task_label=values["task_label"],
        agent_label=values["agent_label"],
    )
    if spec.key != values["run_key"]:
        raise ValueError(f"run {values['run_key']} does not match the hash of its own fields")
    metadata = json.loads(values["metadata"])
    metadata.update({name: values.get(name) for name in METADATA_COLUMNS})
    decoded = {name: np.frombuffer(data, dtype=dtype).astype(np.float64) for name, (dtype, data) in arrays.items()}
    return RunRecord(spec=spec, arrays=decoded, metadata=metadata)
