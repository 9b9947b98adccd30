"""Importing the package registers envs without loading torch or transformers."""

from __future__ import annotations

import subprocess
import sys


def test_import_registers_envs_without_heavy_modules() -> None:
    code = (
        "import sys, gymnasium, tokenized_bandit_gym;"
        "assert 'TokenizedLinearBandit-v0' in gymnasium.registry;"
        "heavy = [m for m in ('torch', 'transformers', 'stable_baselines3', 'matplotlib') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == ""
