"""The native vector env of LLM decoding as a tokenized multi-armed bandit (``TokenizedDecoding-v0``)."""

from __future__ import annotations

from tokenized_bandit_gym.envs.language_model_bandit_vector_env import LanguageModelBanditVectorEnv
from tokenized_bandit_gym.envs.tokenized_decoding_env import TokenizedDecodingEnv


class TokenizedDecodingVectorEnv(LanguageModelBanditVectorEnv):
    """N rounds of :class:`~tokenized_bandit_gym.envs.TokenizedDecodingEnv` in one batched forward per step.

    ## Description

    Sub-env i is the single decoding env reset with seed ``s_i`` (see
    :class:`~tokenized_bandit_gym.envs.language_model_bandit_vector_env.LanguageModelBanditVectorEnv`):
    one fixed query, token ids observed only (``candidate_logprobs`` with
    ``observe_logprobs=True``). One step is one forward of the N chosen tokens over the shared
    KV cache.

    ## Spaces

    ``action_space = MultiDiscrete([k] * N)``; ``observation_space`` is the single env's ``Dict``
    stacked along a leading axis of size N.

    ## Autoreset

    ``metadata["autoreset_mode"] = AutoresetMode.NEXT_STEP``, as for the alignment vector env.

    ## Arguments

    ``num_envs``, ``array_backend``, ``round_buffer`` and every keyword of the single env.

    >>> import gymnasium as gym
    >>> import tokenized_bandit_gym
    >>> envs = gym.make_vec("TokenizedDecoding-v0", num_envs=3, max_length=3, array_backend="torch")
    >>> observations, infos = envs.reset(seed=0)
    >>> observations["candidate_tokens"].shape, observations["candidate_tokens"].device.type
    (torch.Size([3, 4]), 'cpu')

    ## Version History

    * v0: initial release.
    """

    single_env_class = TokenizedDecodingEnv
