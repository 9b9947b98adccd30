"""Files written whole or not at all: a temporary file beside the target, flushed to disk, renamed into place.

What an interrupted run resumes from (examples' results, checkpoints, caches): a run killed mid-write leaves
the previous file whole, never half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any


def write_json_atomically(path: str | os.PathLike[str], document: Any) -> None:
    """Write ``document`` as JSON to ``path`` through a temporary file beside it, renamed into place.

    A run killed mid-write leaves the previous file whole (the record it resumes from), never half a file;
    missing folders are created.
    """
    write_bytes_atomically(path, json.dumps(document).encode("utf-8"))


def write_bytes_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it, flushed to disk and renamed into place.

    A run killed mid-write leaves the previous file whole, never half a file; missing folders are created.
    """
    folder = os.path.dirname(os.fspath(path)) or "."
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.splitext(os.fspath(path))[1])
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
