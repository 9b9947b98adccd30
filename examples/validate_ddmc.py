"""Validate DDMC on real answer pairs with a Hugging Face causal LM (paper section 6.1, Figures 1 and 4).

For each query, the best answer and each incorrect answer (TruthfulQA), or the chosen and rejected dialogues
(HH-RLHF), are tokenized as ``query:answer``; every aligned prefix pair ``(x^(1:k), y^(1:k))`` is grouped by the
number of common tokens in its suffix and the distances ``d1 = |<1, x - y>|``, ``d2 = ||x - y||_2``, ``l1``,
``l3``, ``l4`` between the mean-pooled last-layer embeddings are summarized per group, for two groupings: every
prefix pair (the paper's) and the pairs that have already diverged. Prints the share of consecutive groups whose
mean distance decreases and the Spearman correlation with its 95% bootstrap interval, and writes a plot.

Run (seconds on a CPU with the shipped 260K-parameter model)::

    PYTHONPATH=. python examples/validate_ddmc.py
    PYTHONPATH=. python examples/validate_ddmc.py --dataset hh-rlhf --max-items 300
    PYTHONPATH=. python examples/validate_ddmc.py --model meta-llama/Meta-Llama-3-8B-Instruct --device cuda

The same diagnostics are the ``tbg ddmc`` command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tokenized_bandit_gym.evaluation.ddmc import plot_ddmc_report, run_ddmc_diagnostics
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments
from tokenized_bandit_gym.threads import use_small_work_threads


@dataclass
class Args:
    """Command-line options (each field's docstring is its --help)."""

    dataset: str = "truthfulqa"
    """truthfulqa, hh-rlhf (the bundled files), or a path to a file of either shape"""
    model: str = "stories260K"
    """Hugging Face causal LM: stories260K (shipped), a local directory, or a model id"""
    max_items: int = 30
    """questions/dialogues to use, from the top of the file (0: all; the paper's figures use all)"""
    max_common: int = 10
    """largest common-suffix group reported"""
    min_group_size: int = 5
    """groups with fewer prefix pairs are not reported"""
    num_bootstrap: int = 200
    """item-level bootstrap resamples for the Spearman intervals"""
    seed: int = 0
    """bootstrap seed"""
    device: str = "cpu"
    """torch device for the model"""
    batch_size: int = 16
    """sequences per forward pass"""
    plot: str = "runs/ddmc.png"
    """where the figure is written ('' for none)"""
    json: str = ""
    """where the report is written as JSON ('' for none)"""


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


def main(args: Args) -> None:
    report, table = run_ddmc_diagnostics(
        dataset=args.dataset,
        model=args.model,
        max_items=args.max_items or None,
        max_common=args.max_common,
        min_group_size=args.min_group_size,
        num_bootstrap=args.num_bootstrap,
        seed=args.seed,
        device=args.device,
        batch_size=args.batch_size,
    )
    print(report.format_text())
    d2_all, d2_diverged = report.summaries["all"]["d2"], report.summaries["diverged"]["d2"]
    print(
        f"\nd2 mean at 0 / 1 / 2 common tokens: all pairs {d2_all.mean_at(0):.3f} / {d2_all.mean_at(1):.3f} / "
        f"{d2_all.mean_at(2):.3f}; diverged pairs {d2_diverged.mean_at(0):.3f} / {d2_diverged.mean_at(1):.3f} / "
        f"{d2_diverged.mean_at(2):.3f}"
    )
    if args.plot:
        os.makedirs(os.path.dirname(args.plot) or ".", exist_ok=True)
        plot_ddmc_report(report, args.plot)
        print(f"wrote {args.plot}")
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        report.save_json(args.json)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    use_small_work_threads()  # one torch thread unless OMP_NUM_THREADS says otherwise
    main(parse_args())
