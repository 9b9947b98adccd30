"""No benchmark imports an example: what a benchmark shares with a script lives in the package (issue 50)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

EXAMPLE_IMPORTS = (
    re.compile(r"^\s*from\s+examples(\.\w+)*\s+import\b", re.MULTILINE),
    re.compile(r"^\s*import\s+examples\b", re.MULTILINE),
    re.compile(r"\b(spec_from_file_location|run_path|import_module)\([^)]*\bexamples\b", re.DOTALL),
)
"""An import statement of ``examples``, or a module of ``examples/`` loaded by its path or name."""


def example_imports(source: str) -> list[str]:
    """The text of each import of an example in ``source``."""
    return [match.group(0) for pattern in EXAMPLE_IMPORTS for match in pattern.finditer(source)]


@pytest.mark.parametrize(
    "source",
    [
        "from examples import reproduce_regret\n",
        "    from examples.reproduce_regret import Args, make_env\n",
        "import examples.reproduce_regret as script\n",
        'spec = importlib.util.spec_from_file_location(\n    "x", ROOT / "examples/reproduce_regret.py"\n)\n',
        'script = runpy.run_path(str(ROOT / "examples" / "reproduce_regret.py"))\n',
        'importlib.import_module("examples.reproduce_regret")\n',
    ],
)
def test_each_way_of_importing_an_example_is_seen(source: str) -> None:
    assert example_imports(source)


def test_running_an_example_as_a_command_is_not_an_import() -> None:
    source = 'subprocess.run([sys.executable, str(REPOSITORY / "examples/reproduce_regret.py"), *command])\n'
    assert example_imports(source) == []


def test_no_benchmark_imports_an_example() -> None:
    scripts = sorted(BENCHMARKS.glob("*.py"))
    assert scripts, f"no benchmark scripts under {BENCHMARKS}"
    found = {path.name: example_imports(path.read_text()) for path in scripts}
    assert {name: imports for name, imports in found.items() if imports} == {}
