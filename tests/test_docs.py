"""User-facing documents point only inside the repository, and the README links the architecture document."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def test_documents_point_to_nothing_outside_the_repository() -> None:
    outside = {str(path.relative_to(REPO_ROOT)): re.findall(r"\.\./[\w./-]+", path.read_text()) for path in DOCUMENTS}
    assert {path: found for path, found in outside.items() if found} == {}


def test_relative_links_resolve() -> None:
    broken = []
    for path in DOCUMENTS:
        for target in re.findall(r"\]\(([^)#:]+)\)", path.read_text()):
            if not (path.parent / target).exists():
                broken.append((str(path.relative_to(REPO_ROOT)), target))
    assert broken == []


def test_readme_links_the_architecture_document() -> None:
    assert "](docs/ARCHITECTURE.md)" in (REPO_ROOT / "README.md").read_text()
    assert (REPO_ROOT / "docs" / "ARCHITECTURE.md").is_file()
