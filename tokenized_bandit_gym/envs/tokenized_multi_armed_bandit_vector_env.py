"""The native vector env of the tokenized multi-armed bandit (TMAB)."""

from __future__ import annotations

from tokenized_bandit_gym.envs.tokenized_bandit_vector_env import TokenizedBanditVectorEnv
from tokenized_bandit_gym.envs.tokenized_multi_armed_bandit_env import TokenizedMultiArmedBanditEnv


class TokenizedMultiArmedBanditVectorEnv(TokenizedBanditVectorEnv):
    """N rounds of :class:`~tokenized_bandit_gym.envs.TokenizedMultiArmedBanditEnv` in one batch.

    ## Description

    Sub-env i is the single TMAB env reset with seed ``s_i`` (see
    :class:`~tokenized_bandit_gym.envs.tokenized_bandit_vector_env.TokenizedBanditVectorEnv`);
    no features are observed.

    ## Spaces

    ``action_space = MultiDiscrete([n] * N)``; ``observation_space`` is the single env's ``Dict``
    stacked along a leading axis of size N.

    ## Autoreset

    ``metadata["autoreset_mode"] = AutoresetMode.NEXT_STEP``, as for the TLB vector env.

    ## Arguments

    ``num_envs``, ``array_backend``, ``round_buffer`` and every keyword of the single env,
    ``config=`` (a whole config) included.

    >>> import gymnasium as gym
    >>> import tokenized_bandit_gym
    >>> envs = gym.make_vec("TokenizedMultiArmedBandit-v0", num_envs=3, array_backend="torch")
    >>> observations, infos = envs.reset(seed=0)
    >>> observations["action_mask"].shape, observations["action_mask"].device.type
    (torch.Size([3, 8]), 'cpu')

    ## Version History

    * v0: initial release.
    """

    single_env_class = TokenizedMultiArmedBanditEnv
