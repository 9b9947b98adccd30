"""Decoding-time LLM alignment as a tokenized linear bandit (paper section 5.1)."""

from __future__ import annotations

from tokenized_bandit_gym.envs.language_model_bandit_env import LanguageModelBanditEnv
from tokenized_bandit_gym.envs.language_model_config import TokenizedAlignmentConfig


class TokenizedAlignmentEnv(LanguageModelBanditEnv):
    """Align a frozen causal LM at decoding time: learn the user's hidden theta from noisy rewards.

    ## Description

    Paper section 5.1 and the experiments of section 6: a frozen causal LM (Hugging Face
    transformers) proposes its top-k next tokens; the agent picks one per step until EOS or
    ``max_length`` tokens; then it receives ``r_t = u(x_t, y_t) + eta_t`` with

    ``u(x, y) = gamma * v(p(x, y)) + (1 - gamma) * <theta, e(x, y)>``,

    ``p(x, y)`` the LM's probability of ``y`` given ``x``, ``v`` a known monotone map (log-prob by
    default) and ``e`` the mean-pooled last-layer hidden state of ``x:y`` (after the final norm,
    not rescaled by default, as in the paper; ``embedding_norm="l2"`` gives ``||e|| = 1``, but
    then ``(1 - gamma) <theta, e>`` is at most 0.2 against a sequence log-prob of tens of nats,
    so greedy decoding on the LM alone already matches the benchmark and nothing is left to
    learn). The paper's reduction to a TLB is built in:
    ``u = <theta', [e : v(p)]>`` with ``theta' = [(1 - gamma) * theta : gamma]``
    (``env.unwrapped.problem.theta``), and the observation's ``candidate_embeddings`` are the
    ``d + 1`` features ``[e(x, y:tau) : v(p(x, y:tau))]`` of every candidate, so any TLB agent
    (EOFUL, or the paper's WrongTheta: ``fixed_theta_greedy`` with ``theta="negated"``, that is
    ``theta' = problem.reduced_theta(-latent_theta)``) runs unchanged.
    The raw mean-pooled hidden states (``problem.candidate_pooled``), token log-probs and
    sequence log-probs (``problem.candidate_sequence_logprobs``) stay available on the problem.

    ## Action Space

    ``Discrete(k)``: an index into ``candidate_tokens`` (sorted by LM probability; EOS is always a
    candidate unless ``eos_candidate=False``: it takes the k-th slot when not in the top-k).

    ## Observation Space

    A flat ``Dict`` (n = vocabulary size, Lq = longest query, d = hidden size):

    | key | space | meaning |
    |---|---|---|
    | ``query`` | ``MultiDiscrete([n] * Lq)`` | ids the model is conditioned on (template, BOS), EOS-padded |
    | ``query_length`` | ``Discrete(Lq + 1)`` | number of query ids |
    | ``response`` | ``MultiDiscrete([n] * L)`` | response so far, EOS-padded |
    | ``length`` | ``Discrete(L + 1)`` | tokens chosen so far |
    | ``candidate_tokens`` | ``MultiDiscrete([n] * k)`` | token id of each action |
    | ``candidate_embeddings`` | ``Box((k, d + 1), float32)`` | ``[e(x, y:tau) : v(p(x, y:tau))]`` |
    | ``candidate_logprobs`` | ``Box(-inf, 0, (k,), float32)`` | ``log p(tau given x, y)`` |
    | ``action_mask`` | ``MultiBinary(k)`` | allowed actions |
    | ``first_response`` | ``MultiDiscrete([n] * L)`` | pairwise feedback only: the round's first response |
    | ``first_length`` | ``Discrete(L + 1)`` | pairwise feedback only: its length (0 while it is decoded) |

    ## Rewards

    0 on every step but the last; there ``u(x_t, y_t) + eta_t`` (gaussian or bounded noise).

    ## Starting State

    An empty response to a query drawn uniformly from the pool. The instance (model, theta,
    queries) is fixed by the constructor; ``reset(seed=s)`` seeds the query and noise streams
    only, separately (common random numbers across agents).

    ## Episode End

    Termination: the response ends with EOS. By default (``fixed_length=True``, the paper's
    setting) EOS is allowed only at position L, so every response has L tokens; at position L
    only EOS is allowed, and any action there ends the response with EOS (``info["forced_eos"]``)
    unless ``strict_actions=True``. Why fixed length is the default: ``v = log p`` of the whole
    response favours short responses, so with free lengths answering EOS at once (utility about
    -18 on the defaults) beats greedy decoding with the true utility (about -28), and a
    degenerate always-EOS policy would have negative regret. With every response of length L the
    comparison is between responses of one length, and always-EOS, uniform random and similar
    policies have positive regret on every value map. ``fixed_length=False`` (EOS anywhere) or
    ``min_length=m`` (EOS from position m on) restore free lengths, an explicit choice.
    Truncation: never. The last ``info`` holds ``utility``, ``optimal_utility`` and ``regret``
    against the benchmark ``optimal_kind`` (``"oracle_greedy"``: greedy decoding with the true
    utility over the same top-k candidates, the paper's plotted benchmark; ``"oracle_beam"``: the
    better of a beam search of ``beam_width`` and greedy; agents can beat either, so regret can be
    negative), ``oracle_greedy_utility``, ``noise``, ``response``, ``optimal_response``,
    ``response_logprob`` and ``response_embedding`` (``[e : v]``). Every step's ``info`` has
    these keys, with fill values before the last step (the env contract's ``InfoSchema``); the
    decoded text is ``env.unwrapped.response_text(info["response"])``.
    Benchmarks are computed once per query on first use and cached. Since the benchmark is not the
    optimum, every ``info`` from reset on holds ``benchmark_upper_bound = False`` (the report says it too).

    ## Arguments

    Query sources: the built-in story openings (suit ``stories260K``); ``"paper"``, the appendix-D
    generator (20 templates x 20 interests, 1,000 queries seeded by ``instance_seed``); a
    ``.csv`` (column ``query_column``, default TruthfulQA's ``Question``), a ``.jsonl``/``.jsonl.gz``
    (field ``query_field``, a dotted path; default HH-RLHF's first human turn) or a plain text file
    (one query a line); ``"hf:<dataset>"`` (needs ``datasets`` and network); or a list of strings.

    Models: a local directory with safetensors weights, ``"stories260K"`` or a cached hub name
    (:func:`~tokenized_bandit_gym.llm.load_language_model.load_language_model`). Each model's own
    attention (sliding windows, per-layer patterns, softcapping) and LM head (logit scaling, final
    softcapping) are reproduced, or the model is refused with a ValueError naming the feature;
    ``tbg check-model MODEL`` checks a model against its own no-cache forward.

    | keyword | default | meaning |
    |---|---|---|
    | ``model`` | shipped ``stories260K`` | hub name or local path (safetensors), or a loaded model |
    | ``tokenizer`` | None | tokenizer of a loaded ``model`` |
    | ``top_k`` | 15 | k (paper) |
    | ``gamma`` | 0.8 | weight of ``v(p)`` (paper) |
    | ``max_length`` | 30 | L (paper) |
    | ``queries`` | story openings | a source: ``"stories"``, ``"paper"`` (see below), ``"hf:<name>"``, a path, a list |
    | ``theta`` | ``0.5 * 1`` unit-normed | ``"random"``, ``"hh-rlhf"``, ``"comparisons"`` or a vector |
    | ``theta_scale`` | ``"unit"`` | default theta: ``"unit"`` (``0.5 * 1`` unit-normed), ``"literal"`` (``0.5 * 1``) |
    | ``value_map`` | ``"logprob"`` | ``v``: ``logprob``, ``scaled_logprob``, ``root_prob``, ``prob`` |
    | ``pooling`` | ``"query_response"`` | or ``"response"`` |
    | ``score_forced_eos`` | True | a forced EOS's ``log p`` (at position L) counts in ``v``; False: left out |
    | ``embedding_norm`` | ``"none"`` | the paper's raw mean-pooled state; ``"l2"`` for unit-norm ``e`` |
    | ``embedding_layer`` | ``"final_norm"`` | pool after the decoder's final norm, or ``"pre_norm"`` (before it) |
    | ``eos_candidate`` | True | EOS always a candidate |
    | ``chat_template`` | None | use the tokenizer's chat template when it has one |
    | ``candidate_batching`` | ``"auto"`` | ``"mask"`` (4-D mask, eager/SDPA) or ``"expand"`` (any kernel) |
    | ``forward_implementation`` | ``"auto"`` | ``"native"`` (Llama family, GPT-2), ``"transformers"`` (any LM) |
    | ``optimal_kind`` | ``"oracle_greedy"`` | or ``"oracle_beam"`` |
    | ``beam_width`` | 4 | for ``oracle_beam`` |
    | ``noise`` | ``"gaussian"`` | or ``"bounded"`` |
    | ``noise_scale`` | 0.1 | sigma |
    | ``instance_seed`` | 0 | seeds ``queries="paper"`` and ``theta="random"`` |
    | ``dtype`` | ``"float32"`` | weights: ``float32``, ``bfloat16``, ``float16``, ``float64`` |
    | ``device`` | ``"cpu"`` | torch device |
    | ``trust_remote_code`` | False | run model code from the hub |
    | ``attn_implementation`` | ``"auto"`` | kernel when loading: SDPA where the model supports it, else eager |
    | ``query_truncation`` | ``"none"`` | query + L beyond the model's positions raises; ``"left"`` truncates |
    | ``query_column`` | None | CSV column of the queries (default TruthfulQA's ``Question``) |
    | ``query_field`` | None | JSONL field of the queries, dotted path (default HH-RLHF's first turn) |
    | ``strict_actions`` | False | raise on masked actions |
    | ``fixed_length`` | True | EOS only at position L (the paper's setting; see Episode End) |
    | ``min_length`` | None | EOS only from position m on (with ``fixed_length=False``; ``1 <= m <= L``) |
    | ``comparisons`` | None | with ``theta="comparisons"``: a ``.jsonl``(``.gz``) or ``.csv`` of pairs |
    | ``comparison_fields`` | ``("chosen", "rejected")`` | the two field (JSONL) or column (CSV) names |
    | ``feedback`` | ``"scalar"`` | or ``"pairwise"``: two responses a round, reward a comparison |
    | ``preference_temperature`` | 1.0 | tau of the Bradley-Terry comparison (pairwise) |

    The keywords are the fields of the parts of
    :class:`~tokenized_bandit_gym.envs.language_model_config.TokenizedAlignmentConfig` (where each default is written;
    the table states the same, a test holds them equal); ``config=`` takes a whole config, which the other
    keywords change, and the env keeps it as ``env.unwrapped.config``.

    ``feedback="pairwise"``: a round (an episode) is two responses to the same query, decoded one
    after the other (the observation's ``first_response``/``first_length`` show the first while
    the second is decoded); the last reward is the preference bit, 1.0 when the first is
    preferred, drawn from Bradley-Terry ``sigma((u1 - u2) / tau)``; the last info adds
    ``utilities`` ``(2,)``, ``preferred`` and ``regret_weak``, and ``regret`` is the dueling
    regret ``u* - (u1 + u2) / 2``. Why sequential rather than T-POP's lockstep
    ``MultiDiscrete([k, k])``: :mod:`~tokenized_bandit_gym.envs.pairwise_feedback`.

    ``theta="hh-rlhf"`` (the shipped HH-RLHF pairs) or ``"comparisons"`` (the user's file) fits
    theta by Bradley-Terry on this model's own mean-pooled embeddings of the chosen and rejected
    texts (:mod:`~tokenized_bandit_gym.llm.preference_theta`), unit-normed, cached once per model and
    data; ``env.unwrapped.problem.theta_source`` names where theta came from (every theta) and
    ``problem.preference_fit`` holds the held-out pairwise accuracy, its bootstrap interval, the
    number of pairs and a checksum. A warning says when that accuracy is not clearly above chance.
    This is a linear reward model on the policy model's own features, not a claim about human values.

    >>> import gymnasium as gym
    >>> import tokenized_bandit_gym
    >>> env = gym.make("TokenizedAlignment-v0", max_length=8, top_k=4, noise_scale=0.0)
    >>> observation, info = env.reset(seed=0)
    >>> d = env.unwrapped.problem.hidden_size
    >>> observation["candidate_embeddings"].shape == (4, d + 1)
    True
    >>> terminated = False
    >>> while not terminated:
    ...     observation, reward, terminated, truncated, info = env.step(0)
    >>> env.unwrapped.optimal_kind, abs(info["regret"] - (info["optimal_utility"] - info["utility"])) < 1e-12
    ('oracle_greedy', True)
    >>> isinstance(env.unwrapped.response_text(info["response"]), str)
    True

    ## Vectorized environment

    The core (:class:`~tokenized_bandit_gym.llm.language_model_problem.LanguageModelProblem`)
    steps B rounds in one forward; the single env is the batch of one.
    ``gym.make_vec("TokenizedAlignment-v0", num_envs=N)`` returns the native
    :class:`~tokenized_bandit_gym.envs.tokenized_alignment_vector_env.TokenizedAlignmentVectorEnv`
    (N rounds per forward, NEXT_STEP autoreset, NumPy or torch arrays).

    ## Version History

    * v1: the reading calibrated on the paper's own numbers (appendix D's oracle - LM-greedy gaps of 8-21 and
      utilities up to +56, issue 48): ``value_map="scaled_logprob"`` (``log p / L``), ``pooling="response"``,
      ``theta_scale="literal"`` (the paper's ``0.5 * 1``) and ``score_forced_eos=False``. Under v0's reading
      the LM's own greedy decode already matches the benchmark, so no learner can beat it
      (``tbg regime MODEL`` measures the regime of any reading). v0 keeps its defaults.
    * v0: initial release. Before the first published leaderboard, the default became
      ``fixed_length=True`` (EOS only at position L, the paper's setting): with free lengths an
      empty answer beat the benchmark. ``fixed_length=False`` gives the earlier dynamics. Later,
      still v0: the opt-in ``feedback="pairwise"`` (the default ``"scalar"`` changes nothing).
    """

    config_class = TokenizedAlignmentConfig
