"""The transformers backend of the LLM-backed envs (imports torch and transformers only when a name is used).

Batched core API (:class:`LanguageModelProblem`, B independent rounds per call, one forward per
step; the single envs are the batch of one, vector envs call the same methods):

* ``initial_state(queries (B,)) -> LanguageModelState``: encode the queries (left-padded) and score
  the first top-k candidates;
* ``action_mask(state) -> (B, k)``, ``state.candidate_tokens (B, k)``,
  ``state.candidate_logprobs (B, k)``, ``candidate_embeddings(state) -> (B, k, d + 1)`` (the TLB
  features ``[e : v(p)]``), ``candidate_pooled(state) -> (B, k, d)`` (raw mean-pooled hidden
  states), ``candidate_utilities(state) -> (B, k)`` (true utility, oracles only);
* ``advance(state, actions (B,), active=None) -> LanguageModelState``: append the chosen
  candidates, reusing their cache entries, and score the next candidates;
* ``utility_of(state) -> (B,)``, ``embedding_of(state) -> (B, d + 1)``, ``state_for``, ``embed``,
  ``oracle_greedy(queries)``, ``oracle_beam(queries, width)``.

Every forward goes through one :data:`~tokenized_bandit_gym.llm.decoder_forward.DecoderForward`
(:func:`select_decoder_forward`): a native one for the Llama family and GPT-2, the model's own
transformers forward for any other causal LM, with the model's own attention per layer (sliding
windows measured in positions: :mod:`~tokenized_bandit_gym.llm.attention_layout`) and its own head
(:mod:`~tokenized_bandit_gym.llm.language_model_head`); a model either is reproduced (probed at
construction against its own no-cache forward) or refused with an error naming the feature.

What an instance is made of is a frozen config of parts (:mod:`~tokenized_bandit_gym.llm.language_model_config`:
:class:`ModelSource`, :class:`QuerySource`, :class:`Prompting`, :class:`Reading`, :class:`Candidates`,
:class:`LengthRule`, composed as :class:`LanguageModelProblemConfig`), which
:func:`make_language_model_problem` builds the problem from.

One loader (:func:`load_language_model`: safetensors only, ``trust_remote_code`` off, a local
directory, ``"stories260K"`` or a cached hub name) serves the envs and the DDMC diagnostics, whose
:class:`PrefixEmbedder` computes the envs' ``e`` for every prefix of a text in one forward.
"""

from __future__ import annotations

from typing import Any

from tokenized_bandit_gym.lazy_names import keep_names_over_submodules, lazy_attribute

_LAZY = {
    "DEFAULT_MODEL": "load_language_model",
    "DEFAULT_MODEL_NAME": "load_language_model",
    "Candidates": "language_model_config",
    "LanguageModelProblemConfig": "language_model_config",
    "LengthRule": "language_model_config",
    "ModelSource": "language_model_config",
    "Prompting": "language_model_config",
    "QuerySource": "language_model_config",
    "Reading": "language_model_config",
    "LanguageModelProblem": "language_model_problem",
    "LanguageModelState": "language_model_state",
    "PrefixEmbedder": "prefix_embedder",
    "ValueMap": "value_map",
    "load_language_model": "load_language_model",
    "make_language_model_problem": "make_language_model_problem",
    "paper_queries": "query_sources",
    "resolve_model_source": "load_language_model",
    "resolve_queries": "query_sources",
    "select_decoder_forward": "decoder_forward",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


keep_names_over_submodules(__name__, _LAZY)
