"""The native vector env of the tokenized linear bandit (TLB)."""

from __future__ import annotations

from tokenized_bandit_gym.envs.tokenized_bandit_vector_env import TokenizedBanditVectorEnv
from tokenized_bandit_gym.envs.tokenized_linear_bandit_env import TokenizedLinearBanditEnv


class TokenizedLinearBanditVectorEnv(TokenizedBanditVectorEnv):
    """N rounds of :class:`~tokenized_bandit_gym.envs.TokenizedLinearBanditEnv` in one batch.

    ## Description

    Sub-env i is the single TLB env reset with seed ``s_i``: same instance, same queries, noise,
    observations, rewards and infos (see
    :class:`~tokenized_bandit_gym.envs.tokenized_bandit_vector_env.TokenizedBanditVectorEnv`).
    One step costs O(N n d) tensor work and no Python loop over sub-envs or candidates.

    ## Spaces

    ``action_space = MultiDiscrete([n] * N)``; ``observation_space`` is the single env's ``Dict``
    with every entry stacked along a leading axis of size N (``candidate_embeddings``
    ``(N, n, d)`` float32, ``action_mask`` ``(N, n)`` int8, ...).

    ## Autoreset

    ``metadata["autoreset_mode"] = AutoresetMode.NEXT_STEP``: the step after a sub-env's round
    ends resets it (its action is ignored) and returns reward 0 and ``terminated = False``.

    ## Arguments

    ``num_envs`` (N), ``array_backend`` (``"numpy"`` or ``"torch"``: tensors stay on
    ``device``), ``round_buffer`` (rounds drawn ahead per sub-env) and every keyword of the
    single env, ``config=`` (a whole config) included.

    >>> import gymnasium as gym
    >>> import numpy as np
    >>> import tokenized_bandit_gym
    >>> envs = gym.make_vec("TokenizedLinearBandit-v0", num_envs=4)
    >>> observations, infos = envs.reset(seed=0)
    >>> observations["candidate_embeddings"].shape
    (4, 16, 16)
    >>> eos = np.full(4, envs.unwrapped.eos_token_id)
    >>> observations, rewards, terminated, truncated, infos = envs.step(eos)
    >>> bool(terminated.all()), infos["regret"].shape
    (True, (4,))

    ## Version History

    * v0: initial release.
    """

    single_env_class = TokenizedLinearBanditEnv
