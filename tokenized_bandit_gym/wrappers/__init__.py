"""Gymnasium wrappers: policy-ready observations, action masks for SB3, regret statistics."""

from tokenized_bandit_gym.wrappers.expose_action_masks import ExposeActionMasks
from tokenized_bandit_gym.wrappers.regret_statistics import RegretStatistics
from tokenized_bandit_gym.wrappers.sb3_observation import SB3Observation
from tokenized_bandit_gym.wrappers.token_observation_encoder import TokenObservationEncoder

__all__ = ["ExposeActionMasks", "RegretStatistics", "SB3Observation", "TokenObservationEncoder"]
