"""Gymnasium environments: one class per file, all thin shells over :mod:`tokenized_bandit_gym.core`."""

from tokenized_bandit_gym.envs.env_contract import validate_action
from tokenized_bandit_gym.envs.synthetic_config import (
    SyntheticBanditConfig,
    TokenizedLinearBanditConfig,
    TokenizedMultiArmedBanditConfig,
)
from tokenized_bandit_gym.envs.tokenized_bandit_env import TokenizedBanditEnv
from tokenized_bandit_gym.envs.tokenized_bandit_vector_env import TokenizedBanditVectorEnv
from tokenized_bandit_gym.envs.tokenized_linear_bandit_env import TokenizedLinearBanditEnv
from tokenized_bandit_gym.envs.tokenized_linear_bandit_vector_env import TokenizedLinearBanditVectorEnv
from tokenized_bandit_gym.envs.tokenized_multi_armed_bandit_env import TokenizedMultiArmedBanditEnv
from tokenized_bandit_gym.envs.tokenized_multi_armed_bandit_vector_env import TokenizedMultiArmedBanditVectorEnv

__all__ = [
    "SyntheticBanditConfig",
    "TokenizedBanditEnv",
    "TokenizedBanditVectorEnv",
    "TokenizedLinearBanditConfig",
    "TokenizedLinearBanditEnv",
    "TokenizedLinearBanditVectorEnv",
    "TokenizedMultiArmedBanditConfig",
    "TokenizedMultiArmedBanditEnv",
    "TokenizedMultiArmedBanditVectorEnv",
    "validate_action",
]
