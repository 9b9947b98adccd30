"""The figures under docs/figures/: embedded, small, at least 1,000 px wide, and redrawn by examples/docs_figures.py.

The docs (docs/*.md) embed every figure they ship, and every figure they embed exists; each figure is an entry of
the script's registry, is redrawn from its stored numbers with its titles inside the canvas, and the commands
that compute those numbers still run at small settings (slow).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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


# The registry and command that redraw every figure (examples/docs_figures.py).
SCRIPT = "examples/docs_figures.py"


def png_width(path: Path) -> int:
    """Width in pixels from the PNG header (IHDR), without decoding the image."""
    header = path.read_bytes()[:24]
    if header[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    return int.from_bytes(header[16:20], "big")


def test_every_figure_is_registered_and_at_least_1000_px_wide(load_script) -> None:
    figures = load_script(SCRIPT)
    committed = {path.stem for path in (DOCS / "figures").glob("*.png")}
    assert committed == set(figures.FIGURES), {
        "not in the registry": committed - set(figures.FIGURES),
        "registered, not committed": set(figures.FIGURES) - committed,
    }
    narrow = {name: png_width(DOCS / "figures" / f"{name}.png") for name in committed}
    assert all(width >= figures.MIN_WIDTH_PX for width in narrow.values()), narrow
    for figure in figures.FIGURES.values():
        assert figure.results.exists(), f"{figure.name}: its numbers are not stored"
        assert figures.command_of(figure), f"{figure.name} does not say which command computes its numbers"


def stored(load_script) -> list[str]:
    return list(load_script(SCRIPT).FIGURES)


def test_each_stored_figure_is_redrawn_from_its_numbers_with_its_title_inside(
    load_script, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = load_script(SCRIPT)
    import matplotlib.figure
    import matplotlib.pyplot as plt

    outside: list[str] = []
    save = matplotlib.figure.Figure.savefig

    def save_and_check_titles(self: matplotlib.figure.Figure, *args: object, **kwargs: object) -> None:
        save(self, *args, **kwargs)
        renderer = self.canvas.get_renderer()
        canvas = self.bbox
        for title in [axis.title for axis in self.axes] + [self._suptitle]:
            if title is not None and title.get_text():
                box = title.get_window_extent(renderer)
                if box.x0 < canvas.x0 - 1 or box.x1 > canvas.x1 + 1 or box.y1 > canvas.y1 + 1:
                    outside.append(title.get_text())

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", save_and_check_titles)
    open_before = set(plt.get_fignums())  # figures an earlier test in this process left open are not ours
    for name in stored(load_script):
        drawn = figures.draw(figures.FIGURES[name], png=tmp_path / f"{name}.png")
        assert png_width(drawn) >= figures.MIN_WIDTH_PX, name
        assert set(plt.get_fignums()) <= open_before, f"{name} left a figure open"
    assert not outside, f"titles cut by the canvas: {outside}"


def test_no_internal_file_or_cache_name_in_a_stored_figure_s_numbers(load_script) -> None:
    figures = load_script(SCRIPT)
    for name in stored(load_script):
        text = figures.FIGURES[name].results.read_text(encoding="utf-8")
        assert not re.search(r'": "(/|[A-Za-z]:\\\\)', text), f"{name} stores a local path"
        model_names = re.findall(r'"model": "([^"]*)"', text)
        assert all("/" not in model and "cache" not in model for model in model_names), (name, model_names)


@pytest.mark.slow
def test_the_commands_run_at_small_settings_and_their_numbers_draw(load_script, tmp_path: Path) -> None:
    figures = load_script(SCRIPT)
    commands = {}
    for figure in figures.FIGURES.values():
        if figure.compute is not None:
            commands.setdefault(figures.command_of(figure).split(" --")[0], figure)  # one run per script
    assert len(commands) >= 3  # the main job, the regret script, the ratio script
    for index, figure in enumerate(commands.values()):
        numbers = figures.recompute(figure, small=True, store=tmp_path / f"{figure.name}.json")
        drawn = figures.draw(figure, results=numbers, png=tmp_path / f"small_{index}.png")
        assert png_width(drawn) >= figures.MIN_WIDTH_PX, figure.name
