"""The options of ``tbg ddmc``, defined without importing torch or transformers (so ``tbg --help`` is fast)."""

from __future__ import annotations

import argparse
import textwrap

from tokenized_bandit_gym.evaluation.ddmc.answer_pair import DATASET_FORMATS
from tokenized_bandit_gym.evaluation.ddmc.resources import DEFAULT_MODEL_NAME
from tokenized_bandit_gym.script_arguments import int_at_least

DESCRIPTION = textwrap.fill(
    "DDMC diagnostics (paper section 6.1, Figures 1 and 4). For pairs of answers to the same query, every aligned "
    "prefix pair of the two query:answer texts is embedded (mean of the model's last-layer hidden states) and "
    "grouped by the length of its common suffix; the report gives the mean distance per group and its Spearman "
    "correlation with the group, over every prefix pair (the paper's grouping) and over pairs that have already "
    "diverged.",
    width=79,
)

EPILOG = """examples:
  tbg ddmc                                     shipped stories260K model, first 50 TruthfulQA questions
  tbg ddmc --dataset hh-rlhf --plot ddmc.png   HH-RLHF, with the figure
  tbg ddmc --model meta-llama/Meta-Llama-3-8B-Instruct --device cuda --max-items 0 --json ddmc.json"""


def add_ddmc_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``tbg ddmc`` options, each with its help, to ``parser`` and return it."""
    parser.add_argument(
        "--dataset",
        default="truthfulqa",
        help="truthfulqa or hh-rlhf (the copies shipped in the package), or the path of a file of either shape "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL_NAME,
        help="Hugging Face causal LM: stories260K (shipped, runs offline), a local directory or a hub id "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--max-items",
        type=int_at_least(0),
        default=50,
        help="questions or dialogues to use, from the top (0: all; default: 50)",
    )
    parser.add_argument(
        "--dataset-format",
        default="auto",
        choices=DATASET_FORMATS,
        help="how to read --dataset; auto picks by file extension, .csv (TruthfulQA) or .jsonl[.gz] (HH-RLHF) "
        "(default: auto)",
    )
    parser.add_argument(
        "--template",
        default=None,
        help="how a query and an answer are joined into one text, a format string with {query} and {answer} "
        "(default per dataset, e.g. 'Q: {query}\\nA: {answer}' for TruthfulQA)",
    )
    parser.add_argument(
        "--max-common",
        type=int_at_least(0),
        default=10,
        help="largest common-suffix length reported as a group (default: 10)",
    )
    parser.add_argument(
        "--min-group-size",
        type=int_at_least(1),
        default=5,
        help="groups with fewer prefix pairs are not reported (default: 5)",
    )
    parser.add_argument(
        "--num-bootstrap",
        type=int_at_least(0),
        default=200,
        help="bootstrap resamples of the questions for the Spearman intervals (default: 200)",
    )
    parser.add_argument("--seed", type=int_at_least(0), default=0, help="seed of the bootstrap (default: 0)")
    parser.add_argument("--device", default="cpu", help="torch device of the model, e.g. cpu, cuda (default: cpu)")
    parser.add_argument(
        "--batch-size", type=int_at_least(1), default=16, help="sequences embedded per forward pass (default: 16)"
    )
    parser.add_argument(
        "--max-tokens",
        type=int_at_least(1),
        default=None,
        help="truncate each query:answer text to this many tokens (default: the model's context length)",
    )
    parser.add_argument(
        "--resume-dir",
        default=None,
        help="keep the embeddings in this folder, batch by batch, and reuse those there: rerunning an interrupted "
        "command embeds only what is missing (default: none kept)",
    )
    parser.add_argument("--plot", default=None, help="also write the figure to this PNG file")
    parser.add_argument("--json", default=None, help="also write the full report to this JSON file")
    return parser


def _run_ddmc(args: argparse.Namespace) -> int:
    from tokenized_bandit_gym.evaluation.ddmc.ddmc_diagnostics import ddmc_command

    return ddmc_command(args)


def add_ddmc_subcommand(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``ddmc`` on a CLI's subparsers; the parsed namespace's ``func`` runs it.

    Example:
        >>> parser = argparse.ArgumentParser(prog="tbg")
        >>> _ = add_ddmc_subcommand(parser.add_subparsers(dest="command"))
        >>> parser.parse_args(["ddmc", "--max-items", "3"]).max_items
        3
    """
    parser = subparsers.add_parser(
        "ddmc",
        help="DDMC diagnostics: embedding distance against common suffix (paper section 6.1)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_ddmc_arguments(parser)
    parser.set_defaults(func=_run_ddmc)
    return parser
