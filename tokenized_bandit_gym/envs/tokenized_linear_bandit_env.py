"""The tokenized linear bandit (TLB) environment."""

from __future__ import annotations

from tokenized_bandit_gym.envs.synthetic_config import TokenizedLinearBanditConfig
from tokenized_bandit_gym.envs.tokenized_bandit_env import TokenizedBanditEnv


class TokenizedLinearBanditEnv(TokenizedBanditEnv):
    """Tokenized linear bandit: answer a query token by token; the utility is linear in e(x, y).

    ## Description

    The tokenized linear bandit of "Tokenized Bandit for LLM Decoding and Alignment" (ICML 2025,
    section 3). In every round a query ``x_t`` is drawn from a fixed pool; the agent picks the
    response ``y_t`` one token at a time, irrevocably, until it picks EOS or reaches ``max_length``
    tokens, and only then receives ``r_t = <theta, e(x_t, y_t)> + eta_t``. ``theta`` is hidden;
    the embedding function ``e`` is public (the observation carries ``e(x, y:tau)`` for every
    candidate tau, and ``env.unwrapped.problem.embed`` answers arbitrary batched queries). One
    round of the paper is one episode; learning happens across episodes.

    Families (``family=``): ``"discounted"`` and ``"meanpool"`` satisfy DDMC exactly (paper
    Assumption 3, on same-length pairs without an interior EOS), ``"markov"`` violates it by a
    tunable ``ddmc_violation`` (0 gives exact DDMC), ``"needle"`` is the lower-bound instance of
    Proposition 3.1. DDMC says nothing about pairs where one response has already ended with
    EOS, so greedy decoding can stop at the wrong time even on exact-DDMC families; with
    ``fixed_length=True`` (EOS only at position L) greedy decoding with the true utility is
    exactly optimal on them (Theorem 5.1).

    ## Action Space

    ``Discrete(n)``: the id of the next token (the candidates are the whole vocabulary,
    ``candidate_tokens = arange(n)``); EOS is ``n - 1``.

    ## Observation Space

    A flat ``Dict``:

    | key | space | meaning |
    |---|---|---|
    | ``query`` | ``MultiDiscrete([n] * Lq)`` | query token ids, padded with EOS |
    | ``query_length`` | ``Discrete(Lq + 1)`` | number of query tokens |
    | ``response`` | ``MultiDiscrete([n] * L)`` | response so far, padded with EOS |
    | ``length`` | ``Discrete(L + 1)`` | tokens chosen so far |
    | ``candidate_tokens`` | ``MultiDiscrete([n] * n)`` | token id of each action |
    | ``candidate_embeddings`` | ``Box(-1, 1, (n, d), float32)`` | ``e(x, y:tau)`` per candidate |
    | ``action_mask`` | ``MultiBinary(n)`` | allowed actions |
    | ``first_response`` | ``MultiDiscrete([n] * L)`` | pairwise feedback only: the round's first response |
    | ``first_length`` | ``Discrete(L + 1)`` | pairwise feedback only: its length (0 while it is decoded) |

    ## Rewards

    0 on every step but the last; there ``u(x_t, y_t) + eta_t`` with gaussian
    (``N(0, sigma^2)``) or bounded (``U[-sigma, sigma]``) noise.

    ## Starting State

    An empty response to a query drawn uniformly from the pool. The instance (theta, features,
    query pool) is fixed by ``instance_seed``; ``reset(seed=s)`` seeds the query and noise
    streams only, separately, so agents with the same seed see the same queries and noise.

    ## Episode End

    Termination: the response is complete (ends with EOS). At position L only EOS is allowed;
    by default any action there ends the response with EOS (``info["forced_eos"] = True``), and
    ``strict_actions=True`` raises instead. Truncation: never (left to outside wrappers).
    The last ``info`` holds ``utility``, ``optimal_utility`` (exact: ``env.unwrapped.optimal_kind``
    is ``"exact"``), ``regret``, ``oracle_greedy_utility``, ``noise``, ``response``,
    ``optimal_response`` and ``response_embedding``. Every step's ``info`` has the same keys
    (``query_index``, ``forced_eos``, ``round_ended`` too), with fill values before the last
    step: 0 for the numbers, -1 for the tokens (the env contract's ``InfoSchema``).

    ## Pairwise feedback

    ``feedback="pairwise"`` makes a round (an episode) two responses to the same query, decoded
    one after the other: when the first is complete the episode goes on with an empty second
    response, and the observation's ``first_response`` ``(L,)`` and ``first_length`` show the
    first (``first_length`` is 0 while the first is decoded). The last step's reward is the
    preference bit (1.0 when the first is preferred), drawn from Bradley-Terry
    ``P = sigma((u1 - u2) / tau)`` with ``tau = preference_temperature``; the last info adds
    ``utilities`` ``(2,)``, ``preferred`` (0 first, 1 second) and ``regret_weak = u* - max(u1, u2)``,
    and ``regret = u* - (u1 + u2) / 2`` (the dueling regret). Sequential, not lockstep
    ``MultiDiscrete([k, k])``: the action stays ``Discrete(k)`` with one action mask and the
    forced EOS, so every checker, vectorizer and masking library applies unchanged and the
    second response can depend on the first (the dueling agents choose it relative to the
    first); see :mod:`tokenized_bandit_gym.envs.pairwise_feedback`.

    >>> import gymnasium as gym
    >>> import tokenized_bandit_gym
    >>> env = gym.make("TokenizedLinearBandit-v0", feedback="pairwise", preference_temperature=0.1)
    >>> observation, info = env.reset(seed=0)
    >>> terminated, steps = False, 0
    >>> while not terminated:
    ...     observation, reward, terminated, truncated, info = env.step(env.unwrapped.eos_token_id)
    ...     steps += 1
    >>> steps, info["utilities"].shape, reward == 1.0 - info["preferred"]
    (2, (2,), True)

    ## Arguments

    The keywords are the fields of :class:`~tokenized_bandit_gym.envs.synthetic_config.TokenizedLinearBanditConfig`
    (where each default is written), ``family`` by its name, and the family's own options: every
    field of its dataclass in ``tokenized_bandit_gym.core.FAMILIES`` (None keeps the family's
    default; a family added there brings its own). ``config=`` takes a whole config, which the
    other keywords change.

    | keyword | default | meaning |
    |---|---|---|
    | ``config`` | None | a ``TokenizedLinearBanditConfig`` (None: the defaults below) |
    | ``vocab_size`` | 16 | n, EOS included |
    | ``max_length`` | 8 | L |
    | ``embedding_dim`` | 16 | d |
    | ``family`` | ``"discounted"`` | ``discounted``, ``meanpool``, ``markov``, ``needle`` |
    | ``alpha`` | 0.8 | discount (``discounted``, ``markov``) |
    | ``ddmc_violation`` | 0.5 | bigram weight (``markov``) |
    | ``needle_gap`` | 0.1 | sibling gap eps (``needle``) |
    | ``num_queries`` | 32 | query pool size |
    | ``query_length`` | 4 | longest query |
    | ``theta_norm`` | 1.0 | ``||theta||`` (not ``needle``) |
    | ``noise`` | ``"gaussian"`` | or ``"bounded"`` |
    | ``noise_scale`` | 0.1 | sigma; 0 for noise-free rewards |
    | ``instance_seed`` | 0 | fixes the instance |
    | ``fixed_length`` | False | EOS only at position L |
    | ``strict_actions`` | False | raise on masked actions |
    | ``device`` | ``"cpu"`` | torch device of the instance |
    | ``feedback`` | ``"scalar"`` | or ``"pairwise"``: two responses a round, reward a comparison |
    | ``preference_temperature`` | 1.0 | tau of the Bradley-Terry comparison (pairwise) |
    | ``dtype`` | ``"float64"`` | dtype of utilities |

    >>> import gymnasium as gym
    >>> import tokenized_bandit_gym
    >>> env = gym.make("TokenizedLinearBandit-v0", noise_scale=0.0)
    >>> observation, info = env.reset(seed=0)
    >>> observation["candidate_embeddings"].shape
    (16, 16)
    >>> terminated = False
    >>> while not terminated:
    ...     observation, reward, terminated, truncated, info = env.step(env.unwrapped.eos_token_id)
    >>> round(info["regret"], 12) == round(info["optimal_utility"] - info["utility"], 12)
    True

    ## Vectorized environment

    ``gym.make_vec(id, num_envs=N)`` steps N rounds in one batch of the same core (see the
    vector env module when registered); otherwise Gymnasium's ``SyncVectorEnv`` applies.

    ## Version History

    * v0: initial release. Later, still v0: the opt-in ``feedback="pairwise"`` (the default
      ``"scalar"`` keeps every earlier reward, observation and info unchanged).
    """

    config_class = TokenizedLinearBanditConfig
