"""User-facing documents point only inside the repository, their links and anchors resolve, and the README links the
architecture document."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
# The reference pages the site generates at build time (docs/reference_pages.py): named in the site's nav.
GENERATED = {
    REPO_ROOT / "docs" / page
    for page in re.findall(r"^\s*- [^:]+: (reference/\S+\.md)$", (REPO_ROOT / "mkdocs.yml").read_text(), re.M)
}


def test_documents_point_to_nothing_outside_the_repository() -> None:
    outside = {str(path.relative_to(REPO_ROOT)): re.findall(r"\.\./[\w./-]+", path.read_text()) for path in DOCUMENTS}
    assert {path: found for path, found in outside.items() if found} == {}


def heading_anchors(path: Path) -> set[str]:
    """The anchors of ``path``'s headings, as MkDocs (Python-Markdown's toc) and GitHub spell them."""
    text = re.sub(r"^(```|~~~).*?^\1", "", path.read_text(), flags=re.S | re.M)  # headings only, not code
    anchors = set()
    for title in re.findall(r"^#{1,6} +(.+?) *$", text, flags=re.M):
        plain = re.sub(r"[^\w\s-]", "", title.replace("`", "")).strip().lower()
        anchors.add(re.sub(r"[-\s]+", "-", plain))
    return anchors


def test_relative_links_resolve() -> None:
    broken = []
    for path in DOCUMENTS:
        for target, anchor in re.findall(r"\]\(([^)#:]*)(?:#([^)]*))?\)", path.read_text()):
            linked = path.parent / target if target else path
            if linked in GENERATED:
                continue
            if not linked.exists():
                broken.append((str(path.relative_to(REPO_ROOT)), target))
            elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked):
                broken.append((str(path.relative_to(REPO_ROOT)), f"{target}#{anchor}"))
    assert broken == []


def test_readme_links_the_architecture_document() -> None:
    assert "](docs/ARCHITECTURE.md)" in (REPO_ROOT / "README.md").read_text()
    assert (REPO_ROOT / "docs" / "ARCHITECTURE.md").is_file()


def test_the_site_generates_the_reference_pages_its_documents_link() -> None:
    assert {REPO_ROOT / "docs" / "reference" / name for name in ("envs.md", "agents.md")} <= GENERATED


def test_the_code_cites_only_documents_and_sections_that_exist() -> None:
    """Docstrings cite ``docs/X.md, "Section"``: the file and its heading exist (no document outside the repository)."""
    missing = []
    for path in sorted([*(REPO_ROOT / "tokenized_bandit_gym").rglob("*.py"), *(REPO_ROOT / "agents").rglob("*.py")]):
        text = path.read_text()
        if "DESIGN.md" in text:
            missing.append((str(path.relative_to(REPO_ROOT)), "DESIGN.md"))
        for document, heading in re.findall(r"(docs/\w+\.md)(?:,\s+\"([^\"]+)\")?", text):
            cited = REPO_ROOT / document
            if not cited.is_file() or (
                heading and heading not in re.findall(r"^#+ +(.+?) *$", cited.read_text(), re.M)
            ):
                missing.append((str(path.relative_to(REPO_ROOT)), f"{document} {heading}".strip()))
    assert missing == []


def quickstart_command_blocks() -> list[str]:
    """The README Quickstart's fenced command blocks, cut as a new user's checker cuts them (a section ends at the
    next ``## `` line; output is fenced with ``~~~``, so only commands are fenced with backticks)."""
    section = re.search(r"^## Quickstart\s*$(.*?)(?=^## |\Z)", (REPO_ROOT / "README.md").read_text(), re.S | re.M)
    assert section is not None, "README.md has no '## Quickstart' section"
    return re.findall(r"```(?:bash|sh|console|shell)?\n(.*?)```", section.group(1), re.S)


def test_the_quickstart_is_the_main_job_then_the_tests_and_ci_runs_the_same_test_command() -> None:
    main, tests = quickstart_command_blocks()[:2]
    assert main.split("\n")[:2] == ["pip install -e .", "tbg run leaderboard"]
    install, command = tests.strip().split("\n")
    assert install == 'pip install -e ".[dev,distributed]"' and command == "python -m pytest"
    assert command in (REPO_ROOT / ".ci" / "run").read_text().splitlines()
