"""The Python snippet of the leaderboard guide (docs/LEADERBOARD_PYTHON.md) runs as written, in an empty folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
GUIDE = REPO_ROOT / "docs" / "LEADERBOARD_PYTHON.md"


def test_the_leaderboard_snippet_stores_its_runs_writes_a_report_and_resumes(tmp_path: Path) -> None:
    snippets = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    assert len(snippets) == 1
    script = tmp_path / "snippet.py"
    script.write_text(snippets[0], encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    first, again = (
        subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True)
        for _ in range(2)
    )
    assert first.returncode == 0 and again.returncode == 0, (first.stderr + again.stderr)[-3000:]
    assert "4 runs stored, 0 already stored, 0 failed" in first.stdout
    assert "EOFUL" in first.stdout and "Random" in first.stdout  # the table of both agents
    assert "0 runs stored, 4 already stored, 0 failed" in again.stdout
    assert (tmp_path / "small_report" / "leaderboard.html").stat().st_size > 0
