"""The HTML leaderboard rendered by a real headless Chromium (Debian's ``chromium``; skipped without one).

``.ci/run`` installs the browser, so this runs in CI. The page must stand alone (copied where no other
report file is), show the reference rows and the exponent columns, and draw its plots.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.evaluation.records import make_record
from tokenized_bandit_gym.evaluation.leaderboard import build_leaderboard
from tokenized_bandit_gym.evaluation.leaderboard_report import write_report
from tokenized_bandit_gym.evaluation.leaderboard_spec import parse_spec

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path is not None:
            return path
    pytest.skip(f"no headless browser found (tried {BROWSERS}); .ci/run installs Debian's chromium")


def flags(profile: Path) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
    ]


def report_page(tmp_path: Path) -> Path:
    """A leaderboard of hand-made runs: two tasks, one with extra horizons, a reference agent, a caveat."""
    spec = parse_spec(
        {
            "title": "browser check",
            "rounds": 40,
            "seeds": [0, 1, 2],
            "task": [
                {"id": "A-v0", "label": "A", "horizons": [10, 20], "caveat": "a caveat for A", "theorem_applies": True},
                {"id": "B-v0", "label": "B"},
            ],
            "agent": [{"name": "learner", "theory_exponent": 0.5}, {"name": "random"}],
        },
        check_registry=False,
    )
    records = []
    for run in spec.runs():
        t = np.arange(1, run.rounds + 1)
        regret = 0.5 / np.sqrt(t) if run.agent == "learner" else np.full(run.rounds, 0.5)
        record = make_record(run.task_label, run.agent, run.seed, regret * (1.0 + 0.05 * run.seed))
        record.spec = run
        record.metadata.update(git_commit="0123abc", torch_version="2.13.0")
        records.append(record)
    board = build_leaderboard(records, title=spec.title, resamples=200, spec=spec)
    page = write_report(board, tmp_path / "report")["html"]
    alone = tmp_path / "alone" / "leaderboard.html"
    alone.parent.mkdir()
    shutil.copyfile(page, alone)
    return alone


def test_page_renders_reference_rows_exponents_and_plots(tmp_path: Path) -> None:
    executable = browser()
    page = report_page(tmp_path)
    dom = subprocess.run(
        [executable, *flags(tmp_path / "profile-dom"), "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert dom.count("<table") == 4  # all tasks, A, B, probability of improvement
    headers = re.findall(r"<th>([^<]*)</th>", dom)
    assert {"growth", "theory", "horizon"} <= set(headers)
    reference_rows = re.findall(r'<tr class="reference"><td>([^<]*)</td><td>([^<]*)</td>', dom)
    # the cross-task table and both task tables show random as an unranked reference row
    assert reference_rows.count(("ref", "random")) == 3
    assert "<td>1</td><td>learner</td>" in dom  # the learner is ranked, random is not
    assert "0123abc" in dom and "2.13.0" in dom and "a caveat for A" in dom
    assert 'class="overview"' in dom and dom.count("<svg") == 4  # overview, A, A's horizons, B
    assert "mean of 3 seeds" in dom and "95% pointwise bootstrap CI of the mean" in dom
    screenshot = tmp_path / "page.png"
    subprocess.run(
        [executable, *flags(tmp_path / "profile-shot"), "--window-size=1280,2400", f"--screenshot={screenshot}"]
        + [page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    import matplotlib.image

    pixels = matplotlib.image.imread(screenshot)[..., :3]  # (H, W, 3) floats in [0, 1]
    assert pixels.shape[:2] == (2400, 1280)
    # The plots were drawn: the coloured curves fill part of the page (text and tables are grey).
    colourful = (pixels.max(axis=-1) - pixels.min(axis=-1)) > 0.3  # (H, W)
    assert colourful.mean() > 0.002
    # The overview figure sits near the top: coloured pixels within the first 1,200 rows.
    assert colourful[:1200].mean() > 0.002
