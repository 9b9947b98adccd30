"""The native vector env of decoding-time LLM alignment (``TokenizedAlignment-v0``)."""

from __future__ import annotations

from tokenized_bandit_gym.envs.language_model_bandit_vector_env import LanguageModelBanditVectorEnv
from tokenized_bandit_gym.envs.tokenized_alignment_env import TokenizedAlignmentEnv


class TokenizedAlignmentVectorEnv(LanguageModelBanditVectorEnv):
    """N rounds of :class:`~tokenized_bandit_gym.envs.TokenizedAlignmentEnv` in one batched forward per step.

    ## Description

    Sub-env i is the single alignment env reset with seed ``s_i``: the same frozen LM, theta and
    query pool, the same query and noise streams, observations equal to float rounding and the
    same infos (see
    :class:`~tokenized_bandit_gym.envs.language_model_bandit_vector_env.LanguageModelBanditVectorEnv`).
    One step is one forward of the N rows' k candidates over the shared, left-padded KV cache,
    plus one forward of the queries of the rows that start a new round.

    ## Spaces

    ``action_space = MultiDiscrete([k] * N)``; ``observation_space`` is the single env's ``Dict``
    stacked along a leading axis of size N (``candidate_embeddings`` ``(N, k, d + 1)`` float32,
    ``candidate_tokens`` ``(N, k)``, ...).

    ## Autoreset

    ``metadata["autoreset_mode"] = AutoresetMode.NEXT_STEP``: the step after a sub-env's round
    ends resets it (its action is ignored) and returns reward 0 and ``terminated = False``.

    ## Arguments

    ``num_envs`` (N), ``array_backend`` (``"numpy"``, or ``"torch"``: tensors on the model's
    device), ``round_buffer``, ``autoreset_mode`` and every keyword of the single env.

    >>> import gymnasium as gym
    >>> import numpy as np
    >>> import tokenized_bandit_gym
    >>> envs = gym.make_vec("TokenizedAlignment-v0", num_envs=2, max_length=3, top_k=3, noise_scale=0.0)
    >>> observations, infos = envs.reset(seed=0)
    >>> observations["candidate_embeddings"].shape[:2]
    (2, 3)
    >>> for _ in range(3):
    ...     observations, rewards, terminated, truncated, infos = envs.step(np.zeros(2, dtype=np.int64))
    >>> bool(terminated.all()), isinstance(envs.unwrapped.response_text(infos["response"][0]), str)
    (True, True)

    ## Version History

    * v0: initial release.
    """

    single_env_class = TokenizedAlignmentEnv
