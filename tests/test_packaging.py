"""Packaging: the agents install as ``tokenized_bandit_gym.agents`` beside any other top-level ``agents``.

The wheel test installs the built wheel and a stub distribution that owns a top-level ``agents``
package (as ``openai-agents`` does) into one target folder, then checks from a fresh interpreter
that both import and that the leaderboard's agent registry still builds agents.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import venv
import warnings
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "tokenized_bandit_gym"


def source_packages() -> set[str]:
    """Every package of the source tree under its installed name."""
    found = {".".join(path.parent.relative_to(REPO_ROOT).parts) for path in (REPO_ROOT / PACKAGE).rglob("__init__.py")}
    for path in (REPO_ROOT / "agents").rglob("__init__.py"):
        found.add(".".join((PACKAGE, "agents", *path.parent.relative_to(REPO_ROOT / "agents").parts)))
    return found


def test_pyproject_lists_every_package_and_maps_agents() -> None:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(config["packages"]) == source_packages()
    assert config["package-dir"] == {f"{PACKAGE}.agents": "agents"}
    assert "agents" not in config["packages"]


def python_files() -> list[Path]:
    folders = (PACKAGE, "agents", "tests", "examples", "benchmarks")
    return [path for folder in folders for path in (REPO_ROOT / folder).rglob("*.py")]


def top_level_agents_imports(path: Path) -> list[int]:
    """Line numbers where ``path`` imports a top-level ``agents`` module."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            names = [node.module]
        else:
            continue
        if any(name == "agents" or name.startswith("agents.") for name in names):
            lines.append(node.lineno)
    return lines


def test_nothing_imports_a_top_level_agents_package() -> None:
    offenders = {str(path.relative_to(REPO_ROOT)): top_level_agents_imports(path) for path in python_files()}
    assert {path: lines for path, lines in offenders.items() if lines} == {}


def test_readme_imports_the_packaged_name() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert "from tokenized_bandit_gym import agents" in readme
    assert "\nimport agents\n" not in readme


def run_python(code: str, cwd: Path, pythonpath: Path | None = None) -> str:
    """Run ``code`` in a fresh interpreter (not from the repository root); return its stdout."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_env_and_evaluation_layers_import_no_agent_module(tmp_path: Path) -> None:
    code = f"""
        import importlib, pkgutil, sys
        import {PACKAGE}
        for layer in ("core", "envs", "wrappers", "adapters", "evaluation"):
            package = importlib.import_module("{PACKAGE}." + layer)
            for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
                importlib.import_module(module.name)
        print(sorted(name for name in sys.modules if name == "agents" or ".agents" in name))
    """
    assert run_python(code, tmp_path).strip() == "[]"


def pip(*args: str | Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr


def build_wheel(tmp_path: Path) -> tuple[Path, tuple[str, ...]]:
    """Build the wheel from a copy of the source (the build leaves nothing in the checkout); return it and the
    pip options that build with this interpreter's setuptools when it is new enough (no index needed)."""
    isolation: tuple[str, ...] = ()
    try:
        if Version(importlib.metadata.version("setuptools")) >= Version("77"):
            isolation = ("--no-build-isolation",)
    except importlib.metadata.PackageNotFoundError:
        pass
    source = tmp_path / "source"
    shutil.copytree(REPO_ROOT / PACKAGE, source / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO_ROOT / "agents", source / "agents", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO_ROOT / name, source / name)
    wheels = tmp_path / "wheels"
    pip("wheel", "--no-deps", *isolation, "-w", wheels, source)
    (wheel,) = wheels.glob("tokenized_bandit_gym-*.whl")
    return wheel, isolation


SHIPPED_FILES = (
    "data/README.md",
    "data/truthfulqa/TruthfulQA.csv",
    "data/truthfulqa/LICENSE",
    "data/hh-rlhf/harmless-base_test.jsonl.gz",
    "data/hh-rlhf/LICENSE",
    "data/models/gpt2-tokenizer/vocab.json",
    "data/models/gpt2-tokenizer/merges.txt",
    "data/models/gpt2-tokenizer/LICENSE",
    "data/models/stories260K/model.safetensors",
    "data/models/stories260K/LICENSE",
    "specs/leaderboard.toml",
)


def test_wheel_installs_beside_another_top_level_agents_package(tmp_path: Path) -> None:
    wheel, isolation = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {f"{PACKAGE}/{name}" for name in SHIPPED_FILES} <= names
    stub = tmp_path / "stub"
    (stub / "agents").mkdir(parents=True)
    (stub / "agents" / "__init__.py").write_text('OWNER = "stub"\n')
    (stub / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "stub-agents"\nversion = "1.0"\n[tool.setuptools]\npackages = ["agents"]\n'
    )
    target = tmp_path / "site"
    pip("install", "--no-deps", "--target", target, wheel)
    pip("install", "--no-deps", *isolation, "--target", target, "--upgrade", stub)  # installed after ours
    code = f"""
        import agents
        import gymnasium as gym
        import {PACKAGE}
        from {PACKAGE} import agents as packaged_agents
        from {PACKAGE}.evaluation import run_online

        assert agents.OWNER == "stub", agents.__file__
        assert {PACKAGE}.__file__.startswith({str(target)!r}), {PACKAGE}.__file__
        assert packaged_agents.__file__.startswith({str(target)!r}), packaged_agents.__file__
        assert packaged_agents.__name__ == "{PACKAGE}.agents"
        env = gym.make("TokenizedLinearBandit-v0", vocab_size=4, max_length=3, embedding_dim=3)
        result = run_online(env, packaged_agents.make("eoful"), rounds=3, seed=0)
        print(len(result.cumulative_regret), type(packaged_agents.make("greedy_etc")).__name__)
    """
    assert run_python(code, tmp_path, pythonpath=target).split() == ["3", "GreedyETC"]


def venv_seeing_this_environment(folder: Path) -> Path:
    """A fresh venv (no pip, no packages of its own) whose imports fall back to this environment's packages.

    A ``.pth`` file appends this environment's site-packages after the venv's own, so the dependencies
    (torch, transformers, ...) come from here, and anything installed into the venv comes first. An
    editable install of this checkout is not seen: its finder is a ``.pth`` file of this environment's
    site folder, which the venv does not process. Returns the venv's interpreter.
    """
    venv.create(folder, with_pip=False)
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    here = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (Path(purelib) / "dependencies_from_the_test_environment.pth").write_text("\n".join(sorted(here)) + "\n")
    return python


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_runs_ddmc_and_the_main_job_outside_the_repository(tmp_path: Path) -> None:
    wheel, _ = build_wheel(tmp_path)
    python = venv_seeing_this_environment(tmp_path / "venv")
    pip("--python", python, "install", "--no-deps", "--no-index", wheel)
    elsewhere = tmp_path / "elsewhere"  # not the repository, and nothing of it beside
    elsewhere.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run(
        [str(python), "-c", f"import {PACKAGE}; print({PACKAGE}.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(tmp_path / "venv")), where
    tbg = str(tmp_path / "venv" / "bin" / "tbg")
    ddmc = subprocess.run(
        [tbg, "ddmc", "--dataset", "truthfulqa", "--max-items", "20", "--json", "ddmc.json"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert ddmc.returncode == 0, ddmc.stderr[-3000:]
    assert (elsewhere / "ddmc.json").stat().st_size > 0
    main_job = subprocess.run(
        [tbg, "run", "leaderboard", "--no-progress"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert main_job.returncode == 0, main_job.stderr[-3000:]
    from tokenized_bandit_gym.evaluation.leaderboard_spec import load_spec

    runs = len({run.key for run in load_spec("leaderboard", check_registry=False).runs()})
    assert f"{runs} runs stored, 0 already in the store, 0 failed" in main_job.stderr, main_job.stderr[-3000:]
    assert (elsewhere / "tbg-report" / "leaderboard.html").is_file()


def test_data_readme_gives_the_checksum_and_license_of_every_shipped_file() -> None:
    data = REPO_ROOT / PACKAGE / "data"
    listed = dict(re.findall(r"^\| `([^`]+)` \| `([0-9a-f]{64})` \|$", (data / "README.md").read_text(), re.M))
    shipped = {
        path.relative_to(data).as_posix(): path
        for path in data.rglob("*")
        if path.is_file() and path.name != "README.md"
    }
    assert set(listed) == set(shipped)
    for name, path in shipped.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == listed[name], name
    for folder in {path.parent for path in shipped.values()}:
        assert (folder / "LICENSE").is_file(), folder


def test_rl_zoo_config_wraps_with_importable_non_deprecated_names() -> None:
    config = (REPO_ROOT / "examples" / "rl_zoo3_tlb.yml").read_text()
    wrappers = re.findall(r"^\s+- (tokenized_bandit_gym\.[\w.]+)$", config, re.M)
    assert wrappers
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for dotted in wrappers:
            module_name, _, name = dotted.rpartition(".")
            assert callable(getattr(importlib.import_module(module_name), name)), dotted


@pytest.mark.parametrize("name", ["eoful", "random", "greedy_etc"])
def test_agent_registry_builds_from_string_entry_points(name: str) -> None:
    from tokenized_bandit_gym import agents
    from tokenized_bandit_gym.registration import AGENT_ENTRY_POINTS, make_agent

    module_name, class_name = AGENT_ENTRY_POINTS[name].split(":")
    assert module_name.startswith(f"{PACKAGE}.agents.")
    assert type(make_agent(name)).__name__ == class_name
    assert type(agents.make(name)).__name__ == class_name


def test_register_agent_rejects_bad_entry_points() -> None:
    from tokenized_bandit_gym.registration import register_agent

    with pytest.raises(ValueError, match="already registered"):
        register_agent("eoful", "x:Y")
    with pytest.raises(ValueError, match="module:Class"):
        register_agent("new_agent_without_class", "some.module")
    with pytest.raises(TypeError, match="strings"):
        register_agent("new_agent", 3)  # type: ignore[arg-type]
