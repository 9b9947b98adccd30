"""DDMC diagnostics (paper section 6.1, Figures 1 and 4): embedding distance of answer prefixes vs common suffix.

Importing this package does not import transformers; the model is loaded when a ``PrefixEmbedder`` is built.
"""

from tokenized_bandit_gym.evaluation.ddmc.answer_pair import AnswerPair
from tokenized_bandit_gym.evaluation.ddmc.answer_pair_loaders import (
    load_answer_pairs,
    load_hh_rlhf_pairs,
    load_truthfulqa_pairs,
)
from tokenized_bandit_gym.evaluation.ddmc.common_suffix import common_suffix_lengths, diverged_mask
from tokenized_bandit_gym.evaluation.ddmc.ddmc_diagnostics import (
    add_ddmc_subcommand,
    ddmc_command,
    ddmc_main,
    run_ddmc_diagnostics,
)
from tokenized_bandit_gym.evaluation.ddmc.ddmc_plot import plot_ddmc_report
from tokenized_bandit_gym.evaluation.ddmc.ddmc_report import GROUPINGS, DDMCReport, summarize_ddmc
from tokenized_bandit_gym.evaluation.ddmc.distance_summary import DistanceSummary, summarize_distances
from tokenized_bandit_gym.evaluation.ddmc.distances import DISTANCE_NAMES, embedding_distances
from tokenized_bandit_gym.evaluation.ddmc.prefix_pair_table import (
    PrefixPairTable,
    build_prefix_pair_table,
    table_from_embeddings,
)
from tokenized_bandit_gym.evaluation.ddmc.resources import DEFAULT_MODEL_NAME, resolve_dataset, resolve_model
from tokenized_bandit_gym.llm.prefix_embedder import PrefixEmbedder

__all__ = [
    "DEFAULT_MODEL_NAME",
    "DISTANCE_NAMES",
    "GROUPINGS",
    "AnswerPair",
    "DDMCReport",
    "DistanceSummary",
    "PrefixEmbedder",
    "PrefixPairTable",
    "add_ddmc_subcommand",
    "build_prefix_pair_table",
    "common_suffix_lengths",
    "ddmc_command",
    "ddmc_main",
    "diverged_mask",
    "embedding_distances",
    "load_answer_pairs",
    "load_hh_rlhf_pairs",
    "load_truthfulqa_pairs",
    "plot_ddmc_report",
    "resolve_dataset",
    "resolve_model",
    "run_ddmc_diagnostics",
    "summarize_ddmc",
    "summarize_distances",
    "table_from_embeddings",
]
