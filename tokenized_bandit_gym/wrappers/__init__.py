"""Gymnasium wrappers: policy-ready observations, action masks for SB3, regret statistics, stackable infos."""

from tokenized_bandit_gym.wrappers.expose_action_masks import ExposeActionMasks
from tokenized_bandit_gym.wrappers.pad_response_info import PadResponseInfo
from tokenized_bandit_gym.wrappers.regret_statistics import RegretStatistics
from tokenized_bandit_gym.wrappers.sb3_observation import SB3Observation
from tokenized_bandit_gym.wrappers.token_observation_encoder import TokenObservationEncoder

__all__ = ["ExposeActionMasks", "PadResponseInfo", "RegretStatistics", "SB3Observation", "TokenObservationEncoder"]
