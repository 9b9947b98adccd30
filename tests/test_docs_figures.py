"""The docs embed every figure they ship, every figure they embed exists, and each is small."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
MAX_BYTES = 100_000


def test_every_committed_figure_is_embedded_exists_and_is_small() -> None:
    text = "\n".join(path.read_text(encoding="utf-8") for path in sorted(DOCS.glob("*.md")))
    embedded = set(re.findall(r"!\[[^\]]*\]\((figures/[^)]+)\)", text))
    committed = {f"figures/{path.name}" for path in (DOCS / "figures").glob("*.png")}
    assert embedded == committed, {"not embedded": committed - embedded, "missing": embedded - committed}
    for name in committed:
        size = (DOCS / name).stat().st_size
        assert size < MAX_BYTES, f"{name} is {size} bytes; keep committed figures under {MAX_BYTES}"
    # no figure is only mentioned by path without being shown
    mentioned = set(re.findall(r"(?<!\()figures/[\w.-]+\.png", text))
    assert mentioned <= embedded
