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


def test_evaluation_package_is_lazy_and_its_run_loops_stay_functions() -> None:
    code = (
        "import sys, tokenized_bandit_gym.evaluation as evaluation;"
        "assert 'torch' not in sys.modules, 'importing the evaluation package loaded torch';"
        "import tokenized_bandit_gym.evaluation.run_online;"  # binds the submodule on the package
        "from tokenized_bandit_gym.evaluation import run_online, run_online_vector;"
        "import types;"
        "assert callable(run_online) and not isinstance(run_online, types.ModuleType), run_online;"
        "assert callable(run_online_vector) and not isinstance(run_online_vector, types.ModuleType);"
        "print('ok')"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert completed.returncode == 0 and completed.stdout.strip() == "ok", completed.stderr
