"""LLM decoding as a tokenized multi-armed bandit: find a likely response to one fixed query (section 2)."""

from __future__ import annotations

from tokenized_bandit_gym.envs.language_model_bandit_env import LanguageModelBanditEnv
from tokenized_bandit_gym.envs.language_model_config import TokenizedDecodingConfig


class TokenizedDecodingEnv(LanguageModelBanditEnv):
    """LLM decoding learned online: the utility is the LM's own sequence probability, unseen by the agent.

    ## Description

    Paper section 2 (LLM decoding as sequence-function maximisation) played as a tokenized
    multi-armed bandit: one fixed query ``x``; each round the agent picks a response among the
    LM's top-k candidates per step and receives ``r_t = v(p(x, y_t)) + eta_t``. The agent sees
    token ids only (no log-probs, no features, as in TMAB), so it must learn which sequences are
    likely from rewards. ``v`` defaults to ``root_prob``, ``p ** (1 / L)``, a monotone map into
    ``[0, 1]`` (TMAB utilities are bounded; ``p`` itself is too small to learn from).

    ## Action Space

    ``Discrete(k)``: an index into ``candidate_tokens`` (EOS is always a candidate).

    ## Observation Space

    A flat ``Dict``: ``query``, ``query_length``, ``response``, ``length``, ``candidate_tokens``,
    ``action_mask`` as in ``TokenizedAlignment-v0``; ``candidate_logprobs`` only with
    ``observe_logprobs=True`` (which makes the task a known-utility decoding problem).

    ## Rewards

    0 on every step but the last; there ``v(p(x, y_t)) + eta_t``.

    ## Starting State

    An empty response to the fixed query. ``reset(seed=s)`` seeds the noise stream.

    ## Episode End

    As in ``TokenizedAlignment-v0``: EOS ends the round, only at position L by default
    (``fixed_length=True``: with free lengths and ``v = p ** (1 / L)`` for the fixed L, the
    answer EOS-at-once is the most likely response and the beam benchmark itself); the last ``info``
    holds ``utility``, ``optimal_utility``, ``regret`` against ``optimal_kind`` (greedy decoding,
    the LM's own greedy output, or the better of beam search and greedy) and the rest; the text
    is ``env.unwrapped.response_text(info["response"])``.

    ## Arguments

    | keyword | default | meaning |
    |---|---|---|
    | ``model`` | shipped ``stories260K`` | hub name or local path, or a loaded model |
    | ``tokenizer`` | None | tokenizer of a loaded ``model`` |
    | ``query`` | first story opening | the fixed query |
    | ``top_k`` | 4 | k |
    | ``max_length`` | 8 | L: k^L = 65,536 responses, small enough for TMAB agents to explore |
    | ``value_map`` | ``"root_prob"`` | ``v``: ``root_prob``, ``prob``, ``logprob``, ``scaled_logprob`` |
    | ``optimal_kind`` | ``"oracle_beam"`` | or ``"oracle_greedy"`` |
    | ``beam_width`` | 8 | for ``oracle_beam`` |
    | ``observe_logprobs`` | False | add ``candidate_logprobs`` |
    | ``noise``, ``noise_scale`` | ``"gaussian"``, 0.1 | reward noise |
    | ``instance_seed`` | 0 | unused by the defaults (kept for the shared keyword set) |
    | ``dtype``, ``device``, ``chat_template``, ``candidate_batching`` | | as in ``TokenizedAlignment-v0`` |
    | ``forward_implementation`` | ``"auto"`` | as in ``TokenizedAlignment-v0`` |
    | ``trust_remote_code``, ``strict_actions`` | | as in ``TokenizedAlignment-v0`` |
    | ``attn_implementation``, ``query_truncation`` | ``"auto"``, ``"none"`` | as in ``TokenizedAlignment-v0`` |
    | ``fixed_length`` | True | EOS only at position L |
    | ``min_length`` | None | EOS only from position m on (with ``fixed_length=False``) |

    The keywords are the fields of the parts of
    :class:`~tokenized_bandit_gym.envs.language_model_config.TokenizedDecodingConfig` (where each default is written;
    the table states the same, a test holds them equal); ``config=`` takes a whole config, which the other
    keywords change, and the env keeps it as ``env.unwrapped.config``.

    >>> import gymnasium as gym
    >>> import tokenized_bandit_gym
    >>> env = gym.make("TokenizedDecoding-v0", noise_scale=0.0)
    >>> observation, info = env.reset(seed=0)
    >>> sorted(observation)
    ['action_mask', 'candidate_tokens', 'length', 'query', 'query_length', 'response']
    >>> terminated = False
    >>> while not terminated:
    ...     observation, reward, terminated, truncated, info = env.step(0)
    >>> 0.0 <= info["utility"] <= 1.0 and info["regret"] >= -1e-12
    True

    ## Vectorized environment

    ``gym.make_vec("TokenizedDecoding-v0", num_envs=N)`` returns the native
    :class:`~tokenized_bandit_gym.envs.tokenized_decoding_vector_env.TokenizedDecodingVectorEnv`
    (N rounds per forward, NEXT_STEP autoreset, NumPy or torch arrays).

    ## Version History

    * v0: initial release. Before the first published leaderboard, the default became
      ``fixed_length=True`` (EOS only at position L): with free lengths the empty answer was the
      benchmark. ``fixed_length=False`` gives the earlier dynamics.
    """

    config_class = TokenizedDecodingConfig
