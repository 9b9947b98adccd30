"""Every Python snippet the README and the guides promise runs on its own, and the RL Zoo command runs as written.

The README's "Use" section, the agents guide's "Run an agent" and the RL libraries guide's "Stable-Baselines3".
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def section(document: str, title: str) -> str:
    """The text of ``document`` (a path under the repository) from the ``## title`` heading to the next one."""
    text = (ROOT / document).read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


SECTIONS = [
    section("README.md", "Use"),
    section("docs/AGENTS.md", "Run an agent"),
    section("docs/RL_LIBRARIES.md", "Stable-Baselines3"),
]
SNIPPETS = [snippet for text in SECTIONS for snippet in re.findall(r"```python\n(.*?)```", text, flags=re.S)]
ZOO_COMMANDS = [
    line for text in SECTIONS for line in re.findall(r"```bash\n(.*?)```", text, flags=re.S) if "rl_zoo3.train" in line
]


def run(command: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    # One torch thread: on a shared 2-core machine two spinning threads make a 5 s snippet take 50 s.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_sections_have_the_snippets_they_promise() -> None:
    assert len(SNIPPETS) >= 3
    sb3 = next(snippet for snippet in SNIPPETS if "stable_baselines3" in snippet)
    assert '"MultiInputPolicy", gym.make(' in sb3 and '"MlpPolicy", SB3Observation(' in sb3
    assert "MaskablePPO(" in sb3 and "action_masks=env.action_masks()" in sb3
    assert len(ZOO_COMMANDS) == 1


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_use_snippet_runs_on_its_own(index: int, tmp_path: Path) -> None:
    script = tmp_path / f"snippet_{index}.py"
    script.write_text(SNIPPETS[index], encoding="utf-8")
    completed = run([sys.executable, str(script)], cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip(), "every snippet prints its result"


@pytest.mark.skipif(importlib.util.find_spec("rl_zoo3") is None, reason="rl_zoo3 is not installed")
def test_rl_zoo3_command_runs_as_written_on_a_tiny_budget(tmp_path: Path) -> None:
    command = shlex.split(ZOO_COMMANDS[0].strip())
    assert command[:3] == ["python", "-m", "rl_zoo3.train"]
    # As written, plus a tiny budget (one PPO update) and a log folder of the test's own.
    command = [sys.executable, *command[1:], "-n", "128", "--log-folder", str(tmp_path / "logs"), "--seed", "0"]
    completed = run(command, cwd=ROOT)
    assert completed.returncode == 0, completed.stderr[-3000:]
    saved = list((tmp_path / "logs" / "ppo").glob("TokenizedLinearBandit-v0_*/TokenizedLinearBandit-v0.zip"))
    assert len(saved) == 1
