"""The HTML leaderboard opened in a real headless browser (slow; needs chromium or chrome)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tokenized_bandit_gym.evaluation.cli import main

DATA = Path(__file__).resolve().parent / "data"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path is not None:
            return path
    pytest.skip(f"no headless browser found (tried {BROWSERS})")


@pytest.mark.slow
def test_html_page_renders_tables_and_plots_offline(tmp_path: Path) -> None:
    executable = browser()
    store = tmp_path / "old.sqlite"
    shutil.copyfile(DATA / "store_schema1.sqlite", store)
    out = tmp_path / "report"
    assert main(["report", "--store", str(store), "--out", str(out)]) == 0
    page = (out / "leaderboard.html").resolve()
    # The page must stand alone: copy it where no other report file is, then render it.
    alone = tmp_path / "alone" / "leaderboard.html"
    alone.parent.mkdir()
    shutil.copyfile(page, alone)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
    flags += ["--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(
        [executable, *flags, "--dump-dom", alone.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert dom.count("<table") == 4  # all tasks, two tasks, probability of improvement
    assert dom.count("<svg") == 2 and "TLB small" in dom and "oracle_greedy" in dom
    screenshot = tmp_path / "page.png"
    subprocess.run(
        [executable, *flags, "--window-size=1280,2400", f"--screenshot={screenshot}", alone.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    import matplotlib.image

    pixels = matplotlib.image.imread(screenshot)  # (H, W, 3 or 4) floats in [0, 1]
    assert pixels.shape[0] >= 2000 and pixels.shape[1] >= 1200
    # Plots draw coloured curves: some pixels are clearly not grey.
    rgb = pixels[..., :3]
    colourful = (rgb.max(axis=-1) - rgb.min(axis=-1)) > 0.3
    assert colourful.mean() > 0.001
    assert np.std(rgb) > 0.05
    shutil.copyfile(screenshot, out / "page_screenshot.png")
