"""MkDocs hook: add the reference pages that ``docs/reference_pages.py`` generates to the site at every build."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference_pages import PAGES  # noqa: E402  (the folder above is put on the path first)


def on_files(files: Any, config: Any) -> Any:
    """Add each generated page (``mkdocs.structure.files.Files``) before the navigation is built."""
    from mkdocs.structure.files import File

    for path, write in PAGES.items():
        files.append(File.generated(config, path, content=write()))
    return files
