"""Batched, device-agnostic math of tokenized bandits: instances, utilities, exact optima, noise.

Nothing here imports gymnasium; the environments in :mod:`tokenized_bandit_gym.envs` are thin
shells over these classes.
"""

from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.discounted_problem import DiscountedProblem
from tokenized_bandit_gym.core.enumeration import complete_responses, count_complete_responses
from tokenized_bandit_gym.core.instance_sizes import InstanceSizes
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.markov_problem import MarkovProblem
from tokenized_bandit_gym.core.meanpool_problem import MeanPoolProblem
from tokenized_bandit_gym.core.needle_problem import NeedleProblem
from tokenized_bandit_gym.core.noise_model import NOISE_KINDS, NoiseModel
from tokenized_bandit_gym.core.problem_factory import (
    FAMILIES,
    LINEAR_FAMILIES,
    MULTI_ARMED_FAMILIES,
    Family,
    build_linear_problem,
    build_multi_armed_problem,
    families_playing,
    make_linear_problem,
    make_multi_armed_problem,
)
from tokenized_bandit_gym.core.random_table_problem import RandomTableProblem
from tokenized_bandit_gym.core.round_streams import RoundStreams
from tokenized_bandit_gym.core.stop_value_problem import StopValueProblem
from tokenized_bandit_gym.core.tokenized_problem import DecodedResponses, TokenizedBanditProblem, TokenizedProblem

__all__ = [
    "FAMILIES",
    "LINEAR_FAMILIES",
    "MULTI_ARMED_FAMILIES",
    "NOISE_KINDS",
    "DecodedResponses",
    "DecodingState",
    "DiscountedProblem",
    "Family",
    "InstanceSizes",
    "LinearTokenizedProblem",
    "MarkovProblem",
    "MeanPoolProblem",
    "NeedleProblem",
    "NoiseModel",
    "RandomTableProblem",
    "RoundStreams",
    "StopValueProblem",
    "TokenizedBanditProblem",
    "TokenizedProblem",
    "build_linear_problem",
    "build_multi_armed_problem",
    "complete_responses",
    "count_complete_responses",
    "families_playing",
    "make_linear_problem",
    "make_multi_armed_problem",
]
