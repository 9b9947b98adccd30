"""Run the DDMC diagnostics end to end (paper section 6.1, Figures 1 and 4), and the ``tbg ddmc`` command.

For pairs of answers to the same query, every aligned prefix pair ``(x^(1:k), y^(1:k))`` of the tokenized
``query:answer`` texts is grouped by the length of its common suffix (``common_suffix.py``), both prefixes are
embedded by mean pooling of the model's last-layer hidden states (the llm package's ``PrefixEmbedder``), and the
distances ``d1, d2, l1, l3, l4`` (``distances.py``) are summarized per group under two groupings: every prefix pair
(the paper's) and only the pairs that have already diverged (``ddmc_report.py``). The command's options are in
``ddmc_arguments.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from tokenized_bandit_gym.evaluation.ddmc.answer_pair_loaders import load_answer_pairs
from tokenized_bandit_gym.evaluation.ddmc.ddmc_arguments import DESCRIPTION, add_ddmc_arguments
from tokenized_bandit_gym.evaluation.ddmc.ddmc_plot import plot_ddmc_report
from tokenized_bandit_gym.evaluation.ddmc.ddmc_report import DDMCReport, summarize_ddmc
from tokenized_bandit_gym.evaluation.ddmc.prefix_pair_table import PrefixPairTable, build_prefix_pair_table
from tokenized_bandit_gym.evaluation.ddmc.resources import DEFAULT_MODEL_NAME, resolve_dataset
from tokenized_bandit_gym.llm.prefix_embedder import PrefixEmbedder


def run_ddmc_diagnostics(
    dataset: str | os.PathLike[str] = "truthfulqa",
    model: str | os.PathLike[str] = DEFAULT_MODEL_NAME,
    max_items: int | None = 50,
    dataset_format: str = "auto",
    template: str | None = None,
    max_common: int = 10,
    min_group_size: int = 5,
    num_bootstrap: int = 200,
    seed: int = 0,
    device: str | torch.device = "cpu",
    batch_size: int = 16,
    max_tokens: int | None = None,
    embedder: PrefixEmbedder | None = None,
    progress: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
) -> tuple[DDMCReport, PrefixPairTable]:
    """Measure how embedding distances of answer prefixes depend on their common suffix.

    Args:
        dataset: ``"truthfulqa"``, ``"hh-rlhf"`` (the bundled files) or a path to a file of either shape.
        model: ``"stories260K"`` (shipped), a local directory or a Hugging Face causal-LM id.
        max_items: Questions/dialogues to use, from the top of the file (all when None).
        dataset_format: ``"auto"``, ``"truthfulqa"`` or ``"hh-rlhf"``.
        template: ``query:answer`` format string (default per format).
        max_common: Largest common-suffix group reported.
        min_group_size: Smallest group reported.
        num_bootstrap: Item-level bootstrap resamples for the Spearman intervals.
        seed: Bootstrap seed.
        device: Torch device of the model.
        batch_size: Sequences per forward pass.
        max_tokens: Truncation length (default: the model's context length).
        embedder: A ready ``PrefixEmbedder`` to reuse (then ``model``, ``device``, ``batch_size`` and
            ``max_tokens`` are ignored).
        progress: Show a progress bar over the texts embedded.
        cache_dir: Keep the embeddings there, batch by batch, and reuse them: a rerun after an interruption
            embeds only what is missing (``build_prefix_pair_table``).

    Returns:
        The report and the prefix-pair table it summarizes.
    """
    path = resolve_dataset(dataset)
    pairs = load_answer_pairs(path, dataset_format=dataset_format, max_items=max_items, template=template)
    start = time.perf_counter()
    if embedder is None:
        embedder = PrefixEmbedder(model, device=device, batch_size=batch_size, max_tokens=max_tokens)
    table = build_prefix_pair_table(pairs, embedder, progress=progress, cache_dir=cache_dir)
    settings: dict[str, object] = {
        "model": _model_label(embedder.model_path),
        "dataset": f"{dataset} ({path.name})" if os.fspath(dataset) != path.name else path.name,
        "max_items": max_items,
        "max_tokens": embedder.max_tokens,
        "max_common": max_common,
        "min_group_size": min_group_size,
        "num_bootstrap": num_bootstrap,
        "seed": seed,
        "embedding": "mean of last-layer hidden states over every token of the query:answer prefix",
        "formatting": f"plain text, no chat template: {template!r}"
        if template is not None
        else "plain text, no chat template: the dataset's default join (TruthfulQA 'Q: {query}\\nA: {answer}', "
        "HH-RLHF the dialogue as written)",
        "embed_seconds": round(time.perf_counter() - start, 2),
    }
    report = summarize_ddmc(
        table,
        max_common=max_common,
        min_group_size=min_group_size,
        num_bootstrap=num_bootstrap,
        seed=seed,
        settings=settings,
    )
    return report, table


def _model_label(model_path: str) -> str:
    """A local model directory's name (no local paths in reports), or the hub id.

    A packaged model converted into the cache (``<name>-<digest>``) is named as the user names it (``<name>``).
    """
    from tokenized_bandit_gym.llm.packaged_models import packaged_model

    path = Path(model_path)
    if not path.exists():
        return model_path
    name, _, digest = path.name.rpartition("-")
    packaged = packaged_model(name) if name else None
    return name if packaged is not None and packaged.gguf_sha256.startswith(digest) else path.name


def ddmc_command(args: argparse.Namespace) -> int:
    """Run ``tbg ddmc`` with parsed arguments: print the report, write the plot/JSON if asked.

    Returns:
        0, or 2 when the model cannot be loaded, the embedder's options are refused or the input (the dataset,
        the template) is bad (the message is printed).
    """
    try:  # the one loader, through the embedder the run uses: refusals as one line, not a traceback
        embedder = PrefixEmbedder(
            args.model, device=args.device, batch_size=args.batch_size, max_tokens=args.max_tokens
        )
    except ValueError as error:
        print(f"tbg ddmc: error: {error}", file=sys.stderr)
        return 2
    try:  # a missing or malformed dataset, a bad template: an input error, named as one
        report, _ = run_ddmc_diagnostics(
            dataset=args.dataset,
            max_items=args.max_items or None,
            dataset_format=args.dataset_format,
            template=args.template,
            max_common=args.max_common,
            min_group_size=args.min_group_size,
            num_bootstrap=args.num_bootstrap,
            seed=args.seed,
            embedder=embedder,
            progress=True,
            cache_dir=args.resume_dir,
        )
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, ValueError) as error:
        print(f"tbg: error: bad input: {error}; nothing was written", file=sys.stderr)
        return 2
    print(report.format_text())
    for target, writer in ((args.plot, plot_ddmc_report), (args.json, DDMCReport.save_json)):
        if target:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            writer(report, target)
            print(f"wrote {target}")
    return 0


def ddmc_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tbg ddmc`` as a standalone program (``argv`` without the program name)."""
    parser = add_ddmc_arguments(argparse.ArgumentParser(prog="tbg ddmc", description=DESCRIPTION))
    return ddmc_command(parser.parse_args(sys.argv[1:] if argv is None else list(argv)))
