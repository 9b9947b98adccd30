"""Redraw the figures under docs/figures/ from the numbers stored under docs/results/, with one command.

    python examples/docs_figures.py                              # every figure whose numbers are stored
    python examples/docs_figures.py --only leaderboard_overview  # one figure
    python examples/docs_figures.py --list                       # each figure, its numbers and their command

Each figure is one entry of ``FIGURES``: its PNG, the JSON it is drawn from (``docs/results/<name>.json``), the
function that draws it, and the command that computes that JSON (``compute``), with small settings that the tests
run. ``--recompute NAME`` runs the full command first (minutes for the main job and the stories260K runs, hours for
the SmolLM2 runs) and stores its JSON. Adding a figure is adding one entry. Every figure is drawn at least
1,000 px wide with its title inside the canvas.

Where a run's per-round numbers were not kept (the SmolLM2 regret and ratio runs, whose JSON was git-ignored at
the time), the stored JSON holds the numbers that docs/REPRODUCTION.md's tables give, and the figure says so.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from tokenized_bandit_gym.evaluation.atomic_files import write_json_atomically
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments

ROOT = Path(__file__).resolve().parents[1]
FIGURES_DIR = ROOT / "docs" / "figures"
RESULTS_DIR = ROOT / "docs" / "results"
MIN_WIDTH_PX = 1000
"""Every figure is at least this wide (pixels)."""
DPI = 110
OVERVIEW_DPI = 90
"""The overview is 18 in wide: 1,620 px at this resolution."""


def example(name: str) -> ModuleType:
    """The script ``examples/<name>.py`` as a module (the examples folder is not a package).

    The repository's root goes on ``sys.path`` first, as ``PYTHONPATH=.`` puts it for the scripts built on
    ``examples/reproduce_regret.py`` (``from examples import reproduce_regret``).
    """
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    path = Path(__file__).resolve().parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"docs_figures_{name}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot load the example {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_overview(results: dict[str, Any], path: Path) -> None:
    """The main job's overview (``plot_all``), from the report's ``leaderboard.json``."""
    from tokenized_bandit_gym.evaluation.leaderboard_report import plotted_leaderboard
    from tokenized_bandit_gym.evaluation.regret_plots import close_figure, plot_all

    figure = plot_all(plotted_leaderboard(results))
    figure.savefig(path, dpi=OVERVIEW_DPI)
    close_figure(figure)


def draw_regret(results: dict[str, Any], path: Path) -> None:
    """Cumulative regret of each agent (``reproduce_regret.py``'s ``regret.json``), see ``reproduce_regret.plot``."""
    example("reproduce_regret").plot(results, str(path))


def draw_ratio(results: dict[str, Any], path: Path) -> None:
    """Assumption 4's ratio per round in both norms (``reproduce_ratio.py``'s ``ratio.json``)."""
    example("reproduce_ratio").plot(results, str(path))


def draw_pairwise(results: dict[str, Any], path: Path) -> None:
    """Pairwise feedback (``pairwise_alignment.py``'s ``pairwise.json``): regret and preference rates."""
    example("pairwise_alignment").plot(results, str(path))


def draw_alignment(results: dict[str, Any], path: Path) -> None:
    """Alignment to the fitted preference (``reproduce_alignment.py``'s ``alignment.json``): regret and win rates."""
    example("reproduce_alignment").plot(results, str(path))


def draw_phase_diagram(results: dict[str, Any], path: Path) -> None:
    """EOFUL and Misaligned greedy against the spread ratio (``alignment_phase_diagram.py``'s JSON)."""
    example("alignment_phase_diagram").plot(results, str(path))


def draw_eoful_radius(results: dict[str, Any], path: Path) -> None:
    """The theory EOFUL, the practitioner's and Misaligned greedy (``eoful_radius.py``'s ``eoful_radius.json``)."""
    example("eoful_radius").plot(results, str(path))


def draw_ratio_summary(results: dict[str, Any], path: Path) -> None:
    """Assumption 4's ratio per seed, both norms: the largest and the mean ratio over the rounds, and the threshold.

    ``results["seeds"]`` lists the seeds; ``results["norms"]`` maps a norm's label to ``max`` and ``mean``
    (one value per seed) and ``rounds_below`` (rounds whose largest ratio is at most the threshold).
    """
    plt = _pyplot()
    seeds = results["seeds"]
    figure, axes = plt.subplots(1, len(results["norms"]), figsize=(11.0, 5.0), squeeze=False)
    width = 0.38
    for axis, (norm, values) in zip(axes[0], results["norms"].items(), strict=True):
        x = np.arange(len(seeds))
        axis.bar(x - width / 2, values["max"], width, color="#0072B2", label="largest ratio over the rounds")
        axis.bar(x + width / 2, values["mean"], width, color="#E69F00", label="mean ratio over the rounds")
        axis.axhline(results["threshold"], color="k", linestyle="--", linewidth=1.2, label="1.25 (paper)")
        for index, below in enumerate(values["rounds_below"]):
            axis.annotate(
                f"{below}/{results['rounds']} rounds\n<= {results['threshold']}",
                (index, max(values["max"][index], results["threshold"])),
                textcoords="offset points",
                xytext=(0, 6),
                ha="center",
                fontsize=10,
            )
        axis.set_xticks(x, [f"seed {seed}" for seed in seeds], fontsize=11)
        axis.tick_params(labelsize=11)
        axis.set_ylabel("ratio over positions l", fontsize=11)
        axis.set_ylim(0, 1.3 * max(max(values["max"]), results["threshold"]))
        axis.set_title(norm, fontsize=11)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, fontsize=11, loc="lower center", ncol=len(labels))
    figure.suptitle(results["title"], fontsize=12)
    figure.tight_layout(rect=(0.0, 0.08, 1.0, 1.0))
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def draw_ddmc(results: dict[str, Any], path: Path) -> None:
    """The DDMC diagnostics (``tbg ddmc --json``): each distance against the common-suffix length."""
    from tokenized_bandit_gym.evaluation.ddmc import plot_ddmc_report
    from tokenized_bandit_gym.evaluation.ddmc.ddmc_report import DDMCReport

    plot_ddmc_report(DDMCReport.from_dict(results), path, dpi=DPI)


def ddmc_compute(arguments: list[str]) -> Callable[[Path, bool], Path]:
    """A ``compute`` that runs ``tbg ddmc`` with ``arguments`` (small: 3 items, 10 resamples, stories260K)."""

    def compute(out: Path, small: bool) -> Path:
        chosen = ["--max-items", "3", "--num-bootstrap", "10"] if small else arguments
        command = [sys.executable, "-m", "tokenized_bandit_gym.evaluation.cli", "ddmc", *chosen]
        _run([*command, "--json", str(out / "ddmc.json")], ROOT)
        return out / "ddmc.json"

    compute.__doc__ = f"tbg ddmc {' '.join(arguments)} --json FILE"
    return compute


def _run(command: list[str], cwd: Path) -> None:
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    completed = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": path}
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{completed.stderr[-3000:]}")


SMALL_SPEC = """title = "small overview"
rounds = 30
seeds = [0, 1]
[[task]]
id = "TokenizedLinearBandit-v0"
label = "TLB"
kwargs = { vocab_size = 4, max_length = 3, embedding_dim = 4 }
horizons = [10, 20]
theorem_applies = true
[[agent]]
name = "eoful"
[[agent]]
name = "random"
"""


def compute_overview(out: Path, small: bool) -> Path:
    """Run the main job (or a small spec) in ``out`` with a fresh store; returns its ``leaderboard.json``."""
    spec = "leaderboard"
    if small:
        (out / "small.toml").write_text(SMALL_SPEC, encoding="utf-8")
        spec = str(out / "small.toml")
    command = [sys.executable, "-m", "tokenized_bandit_gym.evaluation.cli", "run", spec, "--no-progress"]
    _run([*command, "--store", str(out / "store.sqlite"), "--out", str(out / "report")], out)
    with (out / "report" / "leaderboard.json").open(encoding="utf-8") as handle:
        report = json.load(handle)
    plotted = {key: _rounded(report[key]) for key in OVERVIEW_KEYS}
    write_json_atomically(str(out / "overview.json"), plotted)
    return out / "overview.json"


# What the overview is drawn from (``plotted_leaderboard``), and the claims and provenance that go with it.
OVERVIEW_KEYS = (
    "title",
    "claims",
    "provenance",
    "tasks",
    "agents",
    "reference_agents",
    "theory_exponents",
    "theory_tasks",
    "task_seeds",
    "horizons",
    "curves",
)


def _rounded(value: Any) -> Any:
    """``value`` with every float rounded to 4 significant digits (the stored JSON stays small)."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    return value


def script_compute(script: str, arguments: list[str], small_arguments: list[str], output: str) -> Callable:
    """A ``compute`` that runs ``examples/<script>.py`` with ``arguments`` (or the small ones) into ``out``."""

    def compute(out: Path, small: bool) -> Path:
        chosen = small_arguments if small else arguments
        _run([sys.executable, str(ROOT / "examples" / f"{script}.py"), *chosen, "--out-dir", str(out)], ROOT)
        return out / output

    compute.__doc__ = " ".join(
        ["PYTHONPATH=. python", f"examples/{script}.py", *arguments, f"--out-dir DIR (writes DIR/{output})"]
    )
    return compute


SMALL_LLM = ["--rounds", "4", "--max-length", "3", "--top-k", "3"]
SMALL_PAIRWISE = [*SMALL_LLM, "--tlb-rounds", "10"]
SMALL_PHASE_DIAGRAM = [*SMALL_LLM, "--ratios", "0.1", "10", "--seeds", "0,1", "--regime-rounds", "2"]
SMALL_ALIGNMENT = ["--model", "stories260K", "--rounds", "2", "--max-length", "3", "--top-k", "3", "--seeds", "0"]
SMALL_RADIUS = [*SMALL_LLM, "--multipliers", "0.1", "1", "--seeds", "0,1"]


@dataclass(frozen=True)
class DocsFigure:
    """One figure under docs/figures/: drawn by ``draw(results, path)`` from ``docs/results/<name>.json``.

    ``compute(out_dir, small)`` recomputes that JSON (returns its path); ``small`` settings run in seconds.
    ``note`` says where the stored numbers came from when no command here recomputes them.
    """

    name: str
    draw: Callable[[dict[str, Any], Path], None]
    compute: Callable[[Path, bool], Path] | None
    note: str = ""
    command: str = field(default="")

    @property
    def png(self) -> Path:
        """The figure's file under docs/figures/."""
        return FIGURES_DIR / f"{self.name}.png"

    @property
    def results(self) -> Path:
        """The stored numbers it is drawn from, under docs/results/."""
        return RESULTS_DIR / f"{self.name}.json"


def _regret(name: str, arguments: list[str]) -> DocsFigure:
    return DocsFigure(name, draw_regret, script_compute("reproduce_regret", arguments, SMALL_LLM, "regret.json"))


def _ratio(name: str, arguments: list[str]) -> DocsFigure:
    return DocsFigure(name, draw_ratio, script_compute("reproduce_ratio", arguments, SMALL_LLM, "ratio.json"))


def _ddmc(name: str, model: str, dataset: str, items: str, resamples: str) -> DocsFigure:
    arguments = ["--model", model, "--dataset", dataset, "--max-items", items, "--num-bootstrap", resamples]
    return DocsFigure(name, draw_ddmc, ddmc_compute(arguments))


V0_FLAG = "--env-id TokenizedAlignment-v0"
"""The regret and ratio figures' numbers were made under -v0's reading, the scripts' default before -v1 (issue 48)."""
TABLES = "the numbers of docs/REPRODUCTION.md's table (the run's per-round JSON was not kept)"

FIGURES: dict[str, DocsFigure] = {
    figure.name: figure
    for figure in (
        DocsFigure("leaderboard_overview", draw_overview, compute_overview, command="tbg run leaderboard"),
        _regret("regret_stories260K", V0_FLAG.split()),
        _regret("regret_stories260K_theta_half", [*V0_FLAG.split(), "--theta", "0.5"]),
        _ratio("ratio_stories260K_logprob", V0_FLAG.split()),
        _ratio("ratio_stories260K_root_prob", [*V0_FLAG.split(), "--value-map", "root_prob"]),
        DocsFigure(
            "regret_smollm2",
            draw_regret,
            None,
            note=TABLES,
            command=f"python examples/reproduce_regret.py {V0_FLAG} --real-llm --out-dir runs/regret_smollm2",
        ),
        DocsFigure(
            "regret_smollm2_T1000",
            draw_regret,
            None,
            note=TABLES,
            command=(
                f"python examples/reproduce_regret.py {V0_FLAG} --real-llm --rounds 1000 "
                "--out-dir runs/regret_smollm2_T1000"
            ),
        ),
        _regret("regret_smollm2_v1_T1000", ["--real-llm", "--rounds", "1000"]),
        _ratio("ratio_smollm2_v1_T1000", ["--from-regret", "docs/results/regret_smollm2_v1_T1000.json"]),
        DocsFigure(
            "ratio_smollm2",
            draw_ratio_summary,
            None,
            note=TABLES,
            command="python examples/reproduce_ratio.py --from-regret runs/regret_smollm2/regret.json",
        ),
        DocsFigure(
            "ratio_smollm2_T1000",
            draw_ratio_summary,
            None,
            note=TABLES,
            command="python examples/reproduce_ratio.py --from-regret runs/regret_smollm2_T1000/regret.json",
        ),
        _ddmc("ddmc_truthfulqa_stories260K", "stories260K", "truthfulqa", "300", "1000"),
        _ddmc("ddmc_hh-rlhf_stories260K", "stories260K", "hh-rlhf", "300", "200"),
        _ddmc("ddmc_truthfulqa_smollm2", "smollm2-135m-instruct", "truthfulqa", "50", "200"),
        _ddmc("ddmc_hh-rlhf_smollm2", "smollm2-135m-instruct", "hh-rlhf", "50", "200"),
        DocsFigure(
            "alignment_smollm2",
            draw_alignment,
            script_compute(
                "reproduce_alignment", ["--rounds", "30", "--seeds", "0", "1"], SMALL_ALIGNMENT, "alignment.json"
            ),
        ),
        DocsFigure(
            "pairwise_stories260K",
            draw_pairwise,
            script_compute("pairwise_alignment", ["--rounds", "30"], SMALL_PAIRWISE, "pairwise.json"),
        ),
        DocsFigure(
            "alignment_phase_diagram_stories260K_T100",
            draw_phase_diagram,
            script_compute("alignment_phase_diagram", ["--rounds", "100"], SMALL_PHASE_DIAGRAM, "phase_diagram.json"),
        ),
        DocsFigure(
            "alignment_phase_diagram_smollm2_T100",
            draw_phase_diagram,
            script_compute(
                "alignment_phase_diagram",
                ["--model", "smollm2-135m-instruct", "--rounds", "100", "--threads", "2"],
                SMALL_PHASE_DIAGRAM,
                "phase_diagram.json",
            ),
        ),
        DocsFigure(
            "eoful_radius_stories260K_T100",
            draw_eoful_radius,
            script_compute("eoful_radius", ["--rounds", "100", "--theta", "5.4"], SMALL_RADIUS, "eoful_radius.json"),
        ),
        DocsFigure(
            "eoful_radius_smollm2_T100",
            draw_eoful_radius,
            script_compute("eoful_radius", ["--real-llm"], SMALL_RADIUS, "eoful_radius.json"),
        ),
        DocsFigure(
            "pairwise_smollm2",
            draw_pairwise,
            script_compute(
                "pairwise_alignment",
                ["--model", "smollm2-135m-instruct", "--queries", "paper", "--rounds", "60"],
                SMALL_PAIRWISE,
                "pairwise.json",
            ),
        ),
    )
}


def command_of(figure: DocsFigure) -> str:
    """The command that computes a figure's numbers, in words."""
    return figure.command or (figure.compute.__doc__ or "" if figure.compute is not None else "")


def draw(figure: DocsFigure, results: Path | None = None, png: Path | None = None) -> Path:
    """Draw ``figure`` from ``results`` (default: its stored JSON) into ``png`` (default: docs/figures/); returns it."""
    source = results or figure.results
    if not source.exists():
        raise ValueError(f"{figure.name}: no stored numbers at {source}; compute them with: {command_of(figure)}")
    with source.open(encoding="utf-8") as handle:
        data = json.load(handle)
    target = png or figure.png
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.draw(data, target)
    compact_png(target)
    return target


def compact_png(path: Path) -> None:
    """Rewrite the PNG at ``path`` with a 256-colour palette (a third of the bytes; plots have few colours)."""
    from PIL import Image

    with Image.open(path) as image:
        palette = image.convert("RGB").quantize(colors=256)
    palette.save(path, optimize=True)


def recompute(figure: DocsFigure, small: bool = False, store: Path | None = None) -> Path:
    """Run ``figure``'s command in a scratch folder and copy its JSON to ``store`` (default: its stored JSON)."""
    if figure.compute is None:
        raise ValueError(f"{figure.name} cannot be recomputed here ({figure.note}); run: {command_of(figure)}")
    target = store or figure.results
    with tempfile.TemporaryDirectory() as scratch:
        made = figure.compute(Path(scratch), small)
        with made.open(encoding="utf-8") as handle:
            numbers = json.load(handle)
        numbers.get("settings", {}).pop("out_dir", None)  # the scratch folder: no local path is stored
        write_json_atomically(str(target), numbers)
    return target


@dataclass
class Args:
    """Command-line options (each field's docstring is its --help)."""

    only: str = ""
    """draw only this figure (a name from --list)"""
    list: bool = False
    """list the figures, their stored numbers and the commands that compute them, and draw nothing"""
    recompute: str = ""
    """recompute this figure's numbers with its full command first (see --list), then draw it"""


def main(args: Args) -> list[Path]:
    if args.list:
        for figure in FIGURES.values():
            stored = "stored" if figure.results.exists() else "NOT STORED"
            print(f"{figure.name}: {stored} {figure.results.relative_to(ROOT)}; {command_of(figure)}")
            if figure.note:
                print(f"    {figure.note}")
        return []
    names = [args.recompute or args.only] if (args.recompute or args.only) else list(FIGURES)
    unknown = [name for name in names if name not in FIGURES]
    if unknown:
        raise SystemExit(f"unknown figure {unknown[0]!r}; one of: {', '.join(FIGURES)}")
    if args.recompute:
        print(f"stored {recompute(FIGURES[args.recompute])}")
    drawn = []
    for name in names:
        drawn.append(draw(FIGURES[name]))
        print(f"drew {drawn[-1].relative_to(ROOT)}")
    return drawn


if __name__ == "__main__":
    main(parse_dataclass_arguments(Args, __doc__))
