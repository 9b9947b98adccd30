"""The HTML leaderboard rendered by a real headless Chromium (Debian's ``chromium``; skipped without one).

``.ci/run`` installs the browser, so this runs in CI. The page must stand alone (copied where no other
report file is), show the reference rows and the exponent columns, and draw its plots; the paper's claims fill
its first screen at 1400 and 800 px, and the legends are at least 10 px at 1400.
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
from tokenized_bandit_gym.evaluation.regret_plots import LEGEND_POINTS, TICK_POINTS

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
        record.metadata.update(git_commit="0123abc", torch_version="2.13.0", benchmark="exact")
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
    assert dom.count("<table") == 5  # the claims, A, B, all tasks, probability of improvement
    # The page opens with the claims block, then the three-line headline (leader, margin, confidence).
    claims = re.search(r'<h1>[^<]*</h1><section id="claims">(.*?)</section><p class="headline">(.*?)</p>', dom)
    assert claims is not None
    assert "the spec's theory exponent: learner's regret grows like sqrt(T) up to logs" in claims.group(1)
    assert re.search(r"<td>(consistent|not consistent|not settled)</td>", claims.group(1))
    headline = re.search(r'<p class="headline">(.*?)</p>', dom)
    assert headline is not None
    lines = headline.group(1).split("<br>")
    assert [line.split(":")[0] for line in lines] == ["Leader", "Margin", "Confidence"]
    assert "A: learner" in lines[0] and "P(learner &lt; random)" not in lines[2]  # random is a reference row
    assert "Benchmark: exact optimum." in dom
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


# Reports where the claims block sits and how much each inline figure is scaled, once the page is laid out.
LAYOUT_PROBE = """<script>
const claims = document.getElementById("claims").getBoundingClientRect();
const scales = Array.from(document.querySelectorAll("figure svg")).map(
  (svg) => svg.getBoundingClientRect().width / svg.width.baseVal.value);
document.body.dataset.claimsTop = claims.top;
document.body.dataset.claimsBottom = claims.bottom;
document.body.dataset.viewport = window.innerHeight;
document.body.dataset.overviewScale = scales[0];
document.body.dataset.smallestScale = Math.min(...scales);
</script>"""


@pytest.mark.parametrize("width", [1400, 800])
def test_the_claims_block_is_in_the_first_screen_and_legends_are_readable(tmp_path: Path, width: int) -> None:
    executable = browser()
    page = report_page(tmp_path)
    probed = page.with_name("probed.html")
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", LAYOUT_PROBE + "</body>"), encoding="utf-8")
    dom = subprocess.run(
        [executable, *flags(tmp_path / "profile"), f"--window-size={width},900", "--dump-dom", probed.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    layout = dict(re.findall(r'data-([a-z-]+)="([0-9.e+-]+)"', dom))
    # The whole claims table, not only its heading, is on the first screen (the window less the browser's frame).
    assert 0 < float(layout["claims-top"]) < float(layout["claims-bottom"]) <= float(layout["viewport"]) <= 900, layout
    if width == 1400:
        # At the page's default width the overview's legends and tick labels are at least 10 CSS px (1 pt = 4/3 px).
        assert min(LEGEND_POINTS, TICK_POINTS) * 4 / 3 * float(layout["overview-scale"]) >= 10, layout
        assert float(layout["smallest-scale"]) >= float(layout["overview-scale"]) - 1e-6  # the others are larger
