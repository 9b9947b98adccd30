"""The tokenized multi-armed bandit (TMAB) environment."""

from __future__ import annotations

from tokenized_bandit_gym.envs.synthetic_config import TokenizedMultiArmedBanditConfig
from tokenized_bandit_gym.envs.tokenized_bandit_env import TokenizedBanditEnv


class TokenizedMultiArmedBanditEnv(TokenizedBanditEnv):
    """Tokenized multi-armed bandit: one fixed query, an unknown utility in [0, 1], no features.

    ## Description

    The tokenized multi-armed bandit of "Tokenized Bandit for LLM Decoding and Alignment"
    (ICML 2025, section 4). The query never changes and the utility ``u(y)`` of a complete
    response is an unknown function in ``[0, 1]``; the agent sees token ids only and learns
    from noisy rewards across episodes. ``family="discounted"`` (default) and ``"meanpool"``
    satisfy DDMC' (appendix "Appendix for TMAB") exactly: ``u(y) = 0.5 + 0.5 u_base(y:EOS)`` for
    a hidden exact-DDMC TLB utility. ``family="random_table"`` draws an independent utility for
    every complete response (Proposition 4.1's instance: no DDMC, regret exponential in L).

    ## Action Space

    ``Discrete(n)``: the next token id; EOS is ``n - 1``.

    ## Observation Space

    A flat ``Dict`` with ``query``, ``query_length``, ``response``, ``length``,
    ``candidate_tokens`` and ``action_mask`` as in
    :class:`~tokenized_bandit_gym.envs.TokenizedLinearBanditEnv`; no embeddings.

    ## Rewards

    0 on every step but the last; there ``u(y_t) + eta_t``.

    ## Starting State

    The empty response to the fixed query. ``reset(seed=s)`` seeds the noise stream (and the
    trivial query stream) only; ``instance_seed`` fixes the utility.

    ## Episode End

    Termination when the response ends with EOS (forced at position L, as in the TLB env);
    no truncation. The last ``info`` holds ``utility``, ``optimal_utility`` (exact),
    ``regret``, ``oracle_greedy_utility``, ``noise``, ``response`` and ``optimal_response``;
    every step's ``info`` has the same keys, with fill values before the last step (as in the TLB env).

    ## Arguments

    The keywords are the fields of
    :class:`~tokenized_bandit_gym.envs.synthetic_config.TokenizedMultiArmedBanditConfig` (where
    each default is written), ``family`` by its name, and the family's own options: every field of
    its dataclass in ``tokenized_bandit_gym.core.FAMILIES`` (None keeps the family's default).
    ``config=`` takes a whole config, which the other keywords change.

    | keyword | default | meaning |
    |---|---|---|
    | ``config`` | None | a ``TokenizedMultiArmedBanditConfig`` (None: the defaults below) |
    | ``vocab_size`` | 8 | n, EOS included |
    | ``max_length`` | 6 | L |
    | ``family`` | ``"discounted"`` | ``discounted``, ``meanpool``, ``random_table`` |
    | ``alpha`` | 0.8 | discount of the hidden utility (``discounted``) |
    | ``theta_norm`` | 1.0 | ``||theta||`` of the hidden utility (``discounted``, ``meanpool``) |
    | ``embedding_dim`` | 8 | dimension of the hidden utility's features (never observed) |
    | ``noise`` | ``"gaussian"`` | or ``"bounded"`` |
    | ``noise_scale`` | 0.1 | sigma |
    | ``instance_seed`` | 0 | fixes the utility |
    | ``fixed_length`` | False | EOS only at position L |
    | ``strict_actions`` | False | raise on masked actions |
    | ``device`` | ``"cpu"`` | torch device |
    | ``dtype`` | ``"float64"`` | dtype of utilities |

    >>> import gymnasium as gym
    >>> import tokenized_bandit_gym
    >>> env = gym.make("TokenizedMultiArmedBandit-v0")
    >>> observation, info = env.reset(seed=1)
    >>> observation, reward, terminated, truncated, info = env.step(env.unwrapped.eos_token_id)
    >>> terminated and 0.0 <= info["utility"] <= info["optimal_utility"] <= 1.0
    True

    ## Version History

    * v0: initial release.
    """

    config_class = TokenizedMultiArmedBanditConfig
