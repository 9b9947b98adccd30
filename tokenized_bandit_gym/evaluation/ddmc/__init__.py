"""DDMC diagnostics (paper section 6.1, Figures 1 and 4): embedding distance of answer prefixes vs common suffix.

Every name loads lazily: importing this package (as ``tbg --help`` does) imports no torch or transformers; the
model is loaded when a ``PrefixEmbedder`` is built.
"""

from __future__ import annotations

from typing import Any

from tokenized_bandit_gym.lazy_names import lazy_attribute

_LAZY = {
    "AnswerPair": "answer_pair",
    "DDMCReport": "ddmc_report",
    "DEFAULT_MODEL_NAME": "resources",
    "DISTANCE_NAMES": "distances",
    "DistanceSummary": "distance_summary",
    "GROUPINGS": "ddmc_report",
    "PrefixEmbedder": "tokenized_bandit_gym.llm.prefix_embedder",
    "PrefixPairTable": "prefix_pair_table",
    "add_ddmc_arguments": "ddmc_arguments",
    "add_ddmc_subcommand": "ddmc_arguments",
    "build_prefix_pair_table": "prefix_pair_table",
    "common_suffix_lengths": "common_suffix",
    "ddmc_command": "ddmc_diagnostics",
    "ddmc_main": "ddmc_diagnostics",
    "diverged_mask": "common_suffix",
    "embedding_distances": "distances",
    "load_answer_pairs": "answer_pair_loaders",
    "load_hh_rlhf_pairs": "answer_pair_loaders",
    "load_truthfulqa_pairs": "answer_pair_loaders",
    "plot_ddmc_report": "ddmc_plot",
    "resolve_dataset": "resources",
    "resolve_model": "resources",
    "run_ddmc_diagnostics": "ddmc_diagnostics",
    "summarize_ddmc": "ddmc_report",
    "summarize_distances": "distance_summary",
    "table_from_embeddings": "prefix_pair_table",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)
