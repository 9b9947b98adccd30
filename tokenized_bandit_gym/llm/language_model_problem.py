"""A frozen causal LM as a tokenized bandit instance, stepped B rounds at a time with the KV cache.

Paper section 5.1: ``u(x, y) = gamma * v(p(x, y)) + (1 - gamma) * <theta, e(x, y)>`` where ``p`` is the
LM's sequence probability, ``v`` a known monotone map and ``e`` the mean-pooled last-layer hidden
state; candidates are the LM's top-k next tokens. With ``gamma = 1`` and no embeddings this is the
LLM decoding problem of section 2 (``u = v(p(x, y))``).

How a step works (one batched forward per step, no token encoded twice): the state holds the KV
cache of ``x:y`` and the last-layer hidden state of its last token, whose LM-head output gives the
top-k candidates and their log-probs. The k candidates of every row are then run together in one
forward over the prefix cache (as k tokens per row at the same position under a 4-D attention
mask that lets each see only the prefix and itself, or as ``B * k`` one-token rows over the cache
expanded along the batch), which gives each candidate's hidden state (so
``e(x, y:tau) = (sum_{x:y} h + h_tau) / (|x:y| + 1)`` from a running sum) and its own key/value
entries. Choosing a candidate appends its entries to the prefix cache, and its hidden state gives
the next distribution: the next step only runs the next candidates.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from tokenized_bandit_gym.core.tokenized_problem import DecodedResponses, replayed
from tokenized_bandit_gym.core.validation import check_choice, check_int, check_real, check_replay
from tokenized_bandit_gym.llm.attention_layout import MASKED_KERNELS
from tokenized_bandit_gym.llm.decoder_forward import FORWARD_IMPLEMENTATIONS, has_native_forward, select_decoder_forward
from tokenized_bandit_gym.llm.language_model_config import (
    CANDIDATE_BATCHING,
    EMBEDDING_NORMS,
    POOLING_SPANS,
    QUERY_TRUNCATIONS,
    THETA_SCALES,
    Candidates,
    LengthRule,
    ModelSource,
    Prompting,
    Reading,
    check_length_rule,
)
from tokenized_bandit_gym.llm.language_model_head import LanguageModelHead
from tokenized_bandit_gym.llm.language_model_state import KeyValues, LanguageModelState
from tokenized_bandit_gym.llm.length_switch import length_switch, recomputed_prefix
from tokenized_bandit_gym.llm.pre_norm import EMBEDDING_LAYERS, PreNormForward, final_norm_of, norm_inputs_recorded
from tokenized_bandit_gym.llm.refusals import REFUSAL_ERRORS, described_failure, known_refusal, mismatch_reason
from tokenized_bandit_gym.llm.static_kv_cache import appended, commit, detached, preallocated
from tokenized_bandit_gym.llm.value_map import ValueMap

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from tokenized_bandit_gym.llm.make_language_model_problem import LanguageModelRecipe
    from tokenized_bandit_gym.llm.preference_theta import PreferenceFit

ProbeCheck = tuple[str, torch.Tensor, torch.Tensor]
"""``(what was probed, the core's value, the no-cache forward's)``: hidden states, embeddings or log-probs."""


class LanguageModelProblem:
    """Batched LLM-backed tokenized bandit instance (the core the LLM envs and vector envs share).

    The utility is the paper's TLB reduction ``u = <theta', [e(x, y) : v(p(x, y))]>`` with
    ``theta' = [(1 - gamma) * theta : gamma]`` (:attr:`theta`, dimension ``d + 1`` with ``d`` the
    hidden size); :meth:`candidate_embeddings` returns those ``d + 1`` features for every candidate,
    so any TLB agent runs on it unchanged. An action is an index into the ``k`` candidates.
    It implements :class:`~tokenized_bandit_gym.core.tokenized_problem.TokenizedBanditProblem`
    with :class:`LanguageModelState` as its state, as the synthetic families do with theirs.

    Every default is the alignment env's (:mod:`~tokenized_bandit_gym.llm.language_model_config`'s parts,
    written there once: ``embedding_norm="none"``, ``fixed_length=True``); an env gives every argument from
    its config.

    Args:
        model: a loaded causal LM (``transformers`` ``PreTrainedModel``), in eval mode.
        tokenizer: its tokenizer (must have an EOS token).
        queries: the query pool, as strings.
        max_length: L.
        top_k: k, the number of candidates per step (``1 <= k <= vocabulary size``).
        gamma: weight of ``v(p)`` in ``[0, 1]``.
        theta: latent ``theta`` ``(d,)``; None gives the paper's ``0.5 * 1``, scaled as ``theta_scale`` says.
        theta_scale: the default theta's scale: ``"unit"`` (``0.5 * 1`` rescaled to unit norm, every
            coordinate ``1 / sqrt(d)``) or ``"literal"`` (the paper's ``0.5 * 1`` as written, norm
            ``sqrt(d) / 2``: 12 at d = 576, 32 at d = 4096); a given ``theta`` is used as it is.
        score_forced_eos: whether a forced EOS (the EOS at position L, where it is the only allowed
            token) adds its ``log p`` to the ``log p(y | x)`` that ``v`` maps. True: the whole sequence's
            log-prob; False: the response's tokens only (the paper's sample responses end in "...", no EOS),
            since a forced EOS is no choice and its log-prob (tens of nats on an instruct model stopped
            mid-sentence) otherwise outweighs the rest of ``v``. An EOS chosen before L is always scored.
        value_map: ``v``, see :class:`~tokenized_bandit_gym.llm.value_map.ValueMap`.
        embeddings: compute ``e`` (False only when ``gamma == 1``, the decoding problem).
        pooling: ``"query_response"`` (the paper: mean over ``x:y``) or ``"response"`` (over ``y``).
        embedding_norm: ``"l2"`` (``e`` = mean / ||mean||, so ``||e|| = 1``) or ``"none"``.
        embedding_layer: the hidden states ``e`` pools: ``"final_norm"`` (after the decoder's final norm, the
            LM head's input) or ``"pre_norm"`` (the last decoder layer's output, before that norm; runs
            transformers' forward, :mod:`~tokenized_bandit_gym.llm.pre_norm`). The log-probs are the same.
        eos_candidate: EOS is always one of the k candidates (it replaces the k-th when not in the
            top-k); at position L and in finished rows it is inserted regardless.
        chat_template: apply the tokenizer's chat template (None: when it has one).
        candidate_batching: how the k candidates share the prefix cache in the one forward per
            step: ``"mask"`` (k tokens per row under a 4-D attention mask; the cache is read once),
            ``"expand"`` (``B * k`` rows over the cache repeated along the batch; works with any
            attention kernel) or ``"auto"``: the first that the construction probe finds right,
            ``"mask"`` (with the native forward and the eager and SDPA kernels) then ``"expand"``.
        forward_implementation: the model forward every step runs
            (:func:`~tokenized_bandit_gym.llm.decoder_forward.select_decoder_forward`):
            ``"native"`` (the Llama family and GPT-2 without transformers' per-call machinery; the
            same numbers, fewer ops), ``"transformers"`` (the model's own forward, any causal LM)
            or ``"auto"`` (native where the architecture has one, then transformers, keeping the
            first path, with the batching, that the probe finds right). Either way the model's own
            attention is reproduced (sliding windows per layer, attention softcapping) or the
            model is refused with a ValueError naming the feature
            (:func:`~tokenized_bandit_gym.llm.attention_layout.attention_layout`).
        query_truncation: ``"none"``: a query whose ids plus ``max_length`` exceed the model's
            ``max_position_embeddings`` is a ValueError naming both lengths; ``"left"``: such
            queries keep their last ids (and a leading BOS) so that they fit.
        fixed_length: EOS only at position L, as on the synthetic ids (every response has L
            tokens, the paper's experiments: "we set the length of each sentence to be L = 30").
        min_length: EOS only at positions ``>= min_length`` (``1 <= min_length <= L``; None or 1:
            anywhere). Where EOS is not allowed it is not a candidate: the k candidates are the
            top-k other tokens. Greedy decoding and beam search (the benchmarks) obey the same rule.

    Positions past a length switch (longrope's long factors) are right too: see
    :mod:`~tokenized_bandit_gym.llm.length_switch`.

    Raises:
        ValueError: a bad argument, an over-long query, or a model whose attention or LM head
            cannot be reproduced: at construction, probe sequences (the first query, and episodes
            stepped to their last position, query length plus L) are run through the model's own
            ``model(ids, output_hidden_states=True)`` and through this core's forward and head, and
            a model that differs on every path tried is refused; the message names the model type
            and, per path, the feature or the difference.
    """

    ddmc = False
    recipe: LanguageModelRecipe | None = None
    """How to rebuild this problem (set by ``make_language_model_problem`` for a model named by hub name or path)."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        queries: Sequence[str],
        max_length: int = LengthRule.max_length,
        top_k: int = Candidates.top_k,
        gamma: float = Reading.gamma,
        theta: torch.Tensor | Sequence[float] | None = None,
        value_map: str = Reading.value_map,
        embeddings: bool = True,
        theta_scale: str = Reading.theta_scale,
        score_forced_eos: bool = Reading.score_forced_eos,
        pooling: str = Reading.pooling,
        embedding_norm: str = Reading.embedding_norm,
        embedding_layer: str = Reading.embedding_layer,
        eos_candidate: bool = Candidates.eos_candidate,
        chat_template: bool | None = Prompting.chat_template,
        candidate_batching: str = ModelSource.candidate_batching,
        forward_implementation: str = ModelSource.forward_implementation,
        query_truncation: str = Prompting.query_truncation,
        fixed_length: bool = LengthRule.fixed_length,
        min_length: int | None = LengthRule.min_length,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = check_int("max_length", max_length, minimum=1)
        self.fixed_length, self.min_length = check_length_rule(fixed_length, min_length, self.max_length)
        self.gamma = check_real("gamma", gamma, low=0.0, high=1.0)
        self.pooling = check_choice("pooling", pooling, POOLING_SPANS)
        self.embedding_norm = check_choice("embedding_norm", embedding_norm, EMBEDDING_NORMS)
        self.embedding_layer = check_choice("embedding_layer", embedding_layer, EMBEDDING_LAYERS)
        self._final_norm = final_norm_of(model) if self.embedding_layer == "pre_norm" else None
        if self._final_norm is not None and forward_implementation == "native":
            raise ValueError(
                "embedding_layer='pre_norm' runs transformers' forward: forward_implementation='native' "
                "cannot go with it (use 'auto' or 'transformers')"
            )
        self.value_map = ValueMap(value_map, self.max_length)
        self.theta_scale = check_choice("theta_scale", theta_scale, THETA_SCALES)
        for name, flag in (
            ("embeddings", embeddings),
            ("eos_candidate", eos_candidate),
            ("score_forced_eos", score_forced_eos),
        ):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, got {flag!r}")
        if not embeddings and self.gamma != 1.0:
            raise ValueError(f"embeddings=False needs gamma == 1 (u = v(p) alone), got gamma={gamma}")
        self.embeddings = embeddings
        self.eos_candidate = eos_candidate
        self.score_forced_eos = score_forced_eos
        check_choice("candidate_batching", candidate_batching, CANDIDATE_BATCHING)
        check_choice("forward_implementation", forward_implementation, FORWARD_IMPLEMENTATIONS)
        self.forward_implementation, self.candidate_batching = forward_implementation, candidate_batching
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer has no EOS token: a tokenized bandit needs one to end responses")
        self.eos_token_id = int(tokenizer.eos_token_id)
        self.query_truncation = check_choice("query_truncation", query_truncation, QUERY_TRUNCATIONS)
        self._head = LanguageModelHead(model)
        self._lm_head = self._head.linear
        self.vocab_size = int(self._lm_head.weight.shape[0])
        self.top_k = check_int("top_k", top_k, minimum=1)
        if self.top_k > self.vocab_size:
            raise ValueError(f"top_k={top_k} is larger than the vocabulary ({self.vocab_size} tokens)")
        if self.eos_token_id >= self.vocab_size:
            raise ValueError(f"eos_token_id={self.eos_token_id} is outside the model's vocabulary of {self.vocab_size}")
        self.device = next(model.parameters()).device
        self.hidden_size = int(self._lm_head.weight.shape[1])
        self.latent_theta = self._make_theta(theta)  # (d,)
        default_source = "the paper's 0.5 * 1, unit-normed" if theta_scale == "unit" else "the paper's literal 0.5 * 1"
        self.theta_source = default_source if theta is None else "a vector given by the user"
        """Where :attr:`latent_theta` came from, in words (reports print it)."""
        self.preference_fit: PreferenceFit | None = None
        """The :class:`~tokenized_bandit_gym.llm.preference_theta.PreferenceFit` of a theta fitted on comparisons."""
        self.query_texts = list(queries)
        if not self.query_texts:
            raise ValueError("the query pool is empty")
        self.chat_template = self._check_chat_template(chat_template)
        self.query_tokens, self.query_lengths = self._tokenize_queries(self.query_texts)  # (Q, Lq), (Q,)
        self._greedy: dict[int, tuple[float, torch.Tensor]] = {}
        self._beam: dict[tuple[int, int], tuple[float, torch.Tensor]] = {}
        self._memo: dict[tuple[int, tuple[int, ...]], LanguageModelState] = {}
        self._self_masks: dict[tuple[int, torch.dtype], torch.Tensor] = {}
        longest = int(self.query_lengths.max()) + self.max_length  # tokens of the longest x:y:tau an episode reaches
        self._switch = length_switch(model, longest)
        self._check_against_model(forward_implementation, candidate_batching)

    # ------------------------------------------------------------------ public attributes
    @property
    def num_candidates(self) -> int:
        """k, the number of actions per step."""
        return self.top_k

    @property
    def num_queries(self) -> int:
        """Q, the size of the query pool."""
        return int(self.query_tokens.shape[0])

    @property
    def embedding_dim(self) -> int | None:
        """``d + 1``: the hidden size plus the ``v(p)`` coordinate (None without embeddings)."""
        return self.hidden_size + 1 if self.embeddings else None

    @property
    def theta(self) -> torch.Tensor:
        """``theta' = [(1 - gamma) * theta : gamma]`` ``(d + 1,)``: ``u = <theta', features>``."""
        return self.reduced_theta(self.latent_theta)

    def reduced_theta(self, latent: torch.Tensor | Sequence[float]) -> torch.Tensor:
        """``[(1 - gamma) * latent : gamma]`` ``(d + 1,)`` for any latent ``(d,)`` (e.g. WrongTheta's ``-0.5 * 1``)."""
        latent = torch.as_tensor(latent, dtype=torch.float64, device=self.device)
        if latent.shape != (self.hidden_size,):
            raise ValueError(f"theta must have shape ({self.hidden_size},), got {tuple(latent.shape)}")
        gamma = torch.tensor([self.gamma], dtype=torch.float64, device=self.device)
        return torch.cat([(1.0 - self.gamma) * latent, gamma])  # (d + 1,)

    @property
    def prompt_formatting(self) -> str:
        """How a query becomes the prompt, in words (scripts and reports print it beside their results)."""
        if self.chat_template:
            return "the chat template: the query is the user turn, the response follows the assistant header"
        return "the raw query text (no chat template)"

    @property
    def first_eos_position(self) -> int:
        """The first position (1-based) where EOS is allowed: L with ``fixed_length``, else ``min_length`` or 1."""
        if self.fixed_length:
            return self.max_length
        return 1 if self.min_length is None else self.min_length

    def decode(self, tokens: torch.Tensor | Sequence[int]) -> str:
        """Text of response ids (the first EOS and what follows are dropped)."""
        ids = [int(t) for t in torch.as_tensor(tokens).tolist()]
        if self.eos_token_id in ids:
            ids = ids[: ids.index(self.eos_token_id)]
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    # ------------------------------------------------------------------ dynamics
    @torch.no_grad()
    def initial_state(self, queries: torch.Tensor) -> LanguageModelState:
        """Encode the queries ``(B,)`` (left-padded, one forward) and score the first candidates."""
        queries = torch.as_tensor(queries, device=self.device, dtype=torch.int64)
        batch = queries.shape[0]
        lengths = self.query_lengths[queries]  # (B,)
        width = int(lengths.max())
        shift = width - lengths  # (B,) left padding per row
        columns = torch.arange(width, device=self.device)[None, :] - shift[:, None]  # (B, W)
        valid = columns >= 0  # (B, W)
        input_ids = self.query_tokens[queries[:, None], columns.clamp(min=0)]  # (B, W)
        input_ids = input_ids.masked_fill(~valid, self.eos_token_id)
        attention_mask = valid.long()  # (B, W)
        position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)  # (B, W)
        hidden, past = self._forward(input_ids, attention_mask, position_ids, ())  # (B, W, H)
        reserve = self.max_length + self.top_k  # the response's entries and the candidates' scratch columns
        past = tuple((preallocated(keys, reserve), preallocated(values, reserve)) for keys, values in past)
        pooled = self.pooling == "query_response"
        counted = valid & pooled  # (B, W): padding never enters the sum, even if its hidden state is not finite
        hidden_sum = torch.where(counted[:, :, None], hidden.float(), 0.0).sum(dim=1)  # (B, H)
        zeros = torch.zeros(batch, dtype=torch.int64, device=self.device)
        state = LanguageModelState(
            queries=queries,
            tokens=torch.full((batch, self.max_length), self.eos_token_id, dtype=torch.int64, device=self.device),
            lengths=zeros,
            finished=torch.zeros(batch, dtype=torch.bool, device=self.device),
            past=past,
            attention_mask=attention_mask,
            next_positions=lengths.clone(),
            hidden_sum=hidden_sum,
            pooled_count=lengths.clone() if pooled else zeros,
            sequence_logprob=torch.zeros(batch, dtype=torch.float64, device=self.device),
            last_hidden=hidden[:, -1],
            candidate_tokens=torch.zeros(batch, self.top_k, dtype=torch.int64, device=self.device),
            candidate_logprobs=torch.zeros(batch, self.top_k, dtype=torch.float32, device=self.device),
            candidate_hidden=None,
            candidate_past=None,
        )
        return self._with_candidates(state, torch.ones(batch, dtype=torch.bool, device=self.device))

    def action_mask(self, state: LanguageModelState) -> torch.Tensor:
        """Allowed candidate indices ``(B, k)`` bool.

        Only the EOS slot at position L and once finished; before :attr:`first_eos_position`
        (``fixed_length``, ``min_length``) every slot but EOS.
        """
        only_eos = state.finished | (state.lengths >= self.max_length - 1)  # (B,)
        is_eos = state.candidate_tokens == self.eos_token_id  # (B, k)
        eos_allowed = self._eos_allowed(state)  # (B,)
        return torch.where(only_eos[:, None], is_eos, ~is_eos | eos_allowed[:, None])

    @torch.no_grad()
    def advance(
        self, state: LanguageModelState, actions: torch.Tensor, active: torch.Tensor | None = None
    ) -> LanguageModelState:
        """Append the candidates at indices ``actions`` ``(B,)`` to the active, unfinished rows.

        Reuses the chosen candidates' cache entries and hidden states; one forward scores the
        next candidates (none when every row is finished).
        """
        actions = torch.as_tensor(actions, device=self.device, dtype=torch.int64)
        if actions.shape != (state.batch_size,):
            raise ValueError(f"actions must have shape ({state.batch_size},), got {tuple(actions.shape)}")
        if actions.numel() and (actions.min() < 0 or actions.max() >= self.top_k):
            raise ValueError(f"actions must lie in [0, {self.top_k}), got {actions.tolist()}")
        if state.candidate_hidden is None or state.candidate_past is None:
            return self.advance_tokens(state, state.candidate_tokens.gather(1, actions[:, None])[:, 0], active)
        grow = self._grow(state, active)  # (B,)
        chosen = actions[:, None]  # (B, 1)
        tokens = state.candidate_tokens.gather(1, chosen)[:, 0]  # (B,)
        logprob = state.candidate_logprobs.gather(1, chosen)[:, 0]  # (B,)
        hidden = state.candidate_hidden[torch.arange(state.batch_size, device=self.device), actions]  # (B, H)
        slots: dict[tuple[int, int], torch.Tensor] = {}  # (B, h, 1, hd) index of the chosen entry, per (h, hd)

        def chosen_entry(entries: torch.Tensor) -> torch.Tensor:
            """The chosen entry ``(B, h, 1, hd)`` of a layer's candidate keys or values ``(B, h, k, hd)``."""
            shape = (entries.shape[1], entries.shape[3])  # layers (and keys vs values) may differ in heads or hd
            slot = slots.get(shape)
            if slot is None:
                slot = slots[shape] = chosen[:, None, :, None].expand(-1, shape[0], 1, shape[1])
            return entries.gather(2, slot)

        past = []  # the chosen entries written into the preallocated cache's next column (copied where it has none)
        reserve = self.max_length + self.top_k
        for (keys, values), (candidate_keys, candidate_values) in zip(state.past, state.candidate_past, strict=True):
            past.append(
                (
                    appended(keys, chosen_entry(candidate_keys), reserve),  # (B, h, P + 1, hd)
                    appended(values, chosen_entry(candidate_values), reserve),
                )
            )
        return self._appended(state, tokens, grow, tuple(past), hidden, logprob)

    @torch.no_grad()
    def advance_tokens(
        self, state: LanguageModelState, tokens: torch.Tensor, active: torch.Tensor | None = None
    ) -> LanguageModelState:
        """Append arbitrary token ids ``tokens`` ``(B,)`` (candidates or not) with one forward of them."""
        tokens = torch.as_tensor(tokens, device=self.device, dtype=torch.int64)
        if tokens.shape != (state.batch_size,):
            raise ValueError(f"tokens must have shape ({state.batch_size},), got {tuple(tokens.shape)}")
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.vocab_size):
            raise ValueError(f"token ids must lie in [0, {self.vocab_size}), got {tokens.tolist()}")
        grow = self._grow(state, active)  # (B,)
        logprob = self._logprobs(state.last_hidden).gather(1, tokens[:, None])[:, 0]  # (B,)
        attention_mask = torch.cat([state.attention_mask, grow.long()[:, None]], dim=1)  # (B, P + 1)
        hidden, past = self._forward(tokens[:, None], attention_mask, state.next_positions[:, None], state.past)
        for keys, values in past:  # the tokens' entries stay: committed where the forward wrote them in place
            commit(keys, 1)
            commit(values, 1)
        return self._appended(state, tokens, grow, past, hidden[:, 0], logprob)

    def utility_of(self, state: LanguageModelState) -> torch.Tensor:
        """Noise-free ``u(x, y)`` ``(B,)`` of the responses in ``state``."""
        value = self.value_map(state.sequence_logprob)  # (B,)
        if not self.embeddings:
            return value
        pooled = state.hidden_sum / state.pooled_count.clamp(min=1)[:, None].float()  # (B, H)
        return self._utility(self._normalise(pooled), value)

    def embedding_of(self, state: LanguageModelState) -> torch.Tensor:
        """Features ``[e(x, y) : v(p(x, y))]`` ``(B, d + 1)`` float64."""
        self._require_embeddings()
        pooled = state.hidden_sum / state.pooled_count.clamp(min=1)[:, None].float()  # (B, H)
        value = self.value_map(state.sequence_logprob)  # (B,)
        return torch.cat([self._normalise(pooled).double(), value[:, None]], dim=1)  # (B, d + 1)

    def candidate_sequence_logprobs(self, state: LanguageModelState) -> torch.Tensor:
        """``log p(y:tau | x)`` ``(B, k)`` float64 for every candidate."""
        return state.sequence_logprob[:, None] + state.candidate_logprobs.double()  # (B, k)

    def candidate_values(self, state: LanguageModelState) -> torch.Tensor:
        """``v`` of every candidate ``(B, k)`` float64.

        ``v`` of :meth:`candidate_sequence_logprobs`, less a forced EOS's ``log p`` unless ``score_forced_eos``.
        """
        scored = state.sequence_logprob[:, None] + self._scored(
            state.candidate_logprobs.double(), state.candidate_tokens, state.lengths[:, None]
        )  # (B, k)
        return self.value_map(scored)

    def _scored(self, logprobs: torch.Tensor, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """``logprobs`` of ``tokens`` appended at ``lengths`` (broadcastable), 0 for an unscored forced EOS."""
        if self.score_forced_eos:
            return logprobs
        forced = (tokens == self.eos_token_id) & (lengths == self.max_length - 1)
        return torch.where(forced, torch.zeros_like(logprobs), logprobs)

    def candidate_pooled(self, state: LanguageModelState) -> torch.Tensor:
        """Raw mean-pooled last-layer hidden states of ``x:y:tau`` ``(B, k, H)`` float32 (before the norm)."""
        self._require_embeddings()
        if state.candidate_hidden is None:
            raise ValueError("the state holds no candidate hidden states (made by a problem with embeddings=False)")
        total = state.hidden_sum[:, None, :] + state.candidate_hidden.float()  # (B, k, H)
        return total / (state.pooled_count + 1)[:, None, None].float()  # (B, k, H)

    def candidate_embeddings(self, state: LanguageModelState) -> torch.Tensor:
        """Features ``[e(x, y:tau) : v(p(x, y:tau))]`` ``(B, k, d + 1)`` float64 (TLB reduction)."""
        embedding = self._normalise(self.candidate_pooled(state)).double()  # (B, k, H)
        value = self.candidate_values(state)  # (B, k)
        return torch.cat([embedding, value[:, :, None]], dim=2)  # (B, k, d + 1)

    def candidate_utilities(self, state: LanguageModelState) -> torch.Tensor:
        """True ``u(x, y:tau)`` ``(B, k)`` float64 for every candidate (masked ones included)."""
        value = self.candidate_values(state)  # (B, k)
        if not self.embeddings:
            return value
        return self._utility(self._normalise(self.candidate_pooled(state)), value)

    # ------------------------------------------------------------------ oracle access
    def state_for(
        self, queries: torch.Tensor, responses: torch.Tensor, lengths: torch.Tensor | None = None
    ) -> LanguageModelState:
        """Replay token ids ``responses`` ``(B, T)`` for ``queries`` ``(B,)`` (rows read ``lengths`` tokens).

        Single-row replays are memoised by prefix, so an oracle that replays a growing response
        each step costs one forward per step.
        """
        queries = torch.as_tensor(queries, device=self.device, dtype=torch.int64).reshape(-1)
        responses = torch.as_tensor(responses, device=self.device, dtype=torch.int64)
        check_replay(queries, responses, self.max_length, self.num_queries)
        if lengths is None and queries.shape[0] == 1:
            return self._memoised_state(int(queries[0]), [int(t) for t in responses[0].tolist()])
        return replayed(self.initial_state(queries), responses, lengths, self.advance_tokens)

    def utility(
        self, queries: torch.Tensor, responses: torch.Tensor, lengths: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Noise-free ``u`` ``(B,)`` of arbitrary responses ``(B, T)``."""
        return self.utility_of(self.state_for(queries, responses, lengths))

    def embed(
        self, queries: torch.Tensor, responses: torch.Tensor, lengths: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The embedding oracle: features ``[e : v(p)]`` ``(B, d + 1)`` of arbitrary responses ``(B, T)``."""
        return self.embedding_of(self.state_for(queries, responses, lengths))

    def greedy_decode(self, queries: torch.Tensor) -> DecodedResponses:
        """Greedy decoding with the true utility over the top-k candidates, ``queries`` ``(B,)``."""
        return self.greedy_continue(self.initial_state(queries))

    def greedy_choice(self, state: LanguageModelState) -> torch.Tensor:
        """The allowed candidate of highest true utility ``u(x, y:tau)`` in each row ``(B,)`` (greedy's action)."""
        return self._allowed_utilities(state).argmax(dim=1)

    def _allowed_utilities(self, state: LanguageModelState) -> torch.Tensor:
        """True ``u(x, y:tau)`` ``(B, k)`` of the allowed candidates, ``-inf`` for the masked ones."""
        return self.candidate_utilities(state).masked_fill(~self.action_mask(state), float("-inf"))

    def greedy_continue(self, state: LanguageModelState) -> DecodedResponses:
        """Finish the responses of ``state`` greedily with the true utility (:meth:`greedy_decode` past a prefix).

        Each row takes :meth:`greedy_choice` until it is complete; from a round's start this is
        :meth:`greedy_decode`. Returns the complete responses ``(B, L)`` and their utility ``(B,)``.
        """
        for _ in range(self.max_length - int(state.lengths.min()) if state.batch_size else 0):
            state = self.advance(state, self.greedy_choice(state))
        return DecodedResponses(self.utility_of(state), state.tokens)

    def beam_search(self, query: int, width: int) -> DecodedResponses:
        """Beam search of ``width`` with the true utility over the top-k tree, for one query.

        Live beams are ranked by ``u(x, y:tau)`` of their partial responses; a beam that picks EOS
        is complete. Returns the best complete response found (utility ``(1,)``, response ``(1, L)``).
        """
        width = check_int("beam_width", width, minimum=1)
        state = self.initial_state(torch.tensor([query], device=self.device))
        best_utility, best_response = float("-inf"), state.tokens[0]
        for _ in range(self.max_length):
            scores = self._allowed_utilities(state)  # (W, k)
            flat = scores.reshape(-1)  # (W * k,)
            order = flat.argsort(descending=True)[:width]
            order = order[torch.isfinite(flat[order])]
            rows, actions = order // self.top_k, order % self.top_k  # (W',), (W',)
            state = self.advance(state.select(rows), actions)
            done = state.finished  # (W',)
            if bool(done.any()):
                utilities = self.utility_of(state)  # (W',)
                utilities = utilities.masked_fill(~done, float("-inf"))
                index = int(utilities.argmax())
                if float(utilities[index]) > best_utility:
                    best_utility, best_response = float(utilities[index]), state.tokens[index]
            if bool(done.all()):
                break
            state = state.select(torch.nonzero(~done)[:, 0])
        return DecodedResponses(
            torch.tensor([best_utility], dtype=torch.float64, device=self.device), best_response[None]
        )

    def oracle_greedy(self, queries: torch.Tensor) -> DecodedResponses:
        """The greedy benchmark (the paper's "optimal greedy"), computed once per query and cached."""
        queries = torch.as_tensor(queries, device=self.device, dtype=torch.int64).reshape(-1)
        missing = sorted({int(q) for q in queries.tolist()} - set(self._greedy))
        if missing:
            decoded = self.greedy_decode(torch.tensor(missing, device=self.device))
            for row, query in enumerate(missing):
                self._greedy[query] = (float(decoded.utility[row]), decoded.responses[row])
        return self._gather(self._greedy, [(int(q)) for q in queries.tolist()])

    def has_oracle_greedy(self, query: int) -> bool:
        """Whether the greedy benchmark of query index ``query`` is cached (:meth:`oracle_greedy` decodes no more)."""
        return int(query) in self._greedy

    def cached_benchmarks(self) -> BenchmarkCache:
        """The benchmarks computed so far (oracle greedy by query, oracle beam by ``(query, width)``), copied."""
        return BenchmarkCache(dict(self._greedy), dict(self._beam))

    def keep_benchmarks(self, cache: BenchmarkCache) -> None:
        """Take ``cache`` (from :meth:`cached_benchmarks` of a problem with the same settings) as computed.

        Raises:
            ValueError: a response in ``cache`` is not ``(L,)`` for this problem's L.
        """
        for _, response in [*cache.greedy.values(), *cache.beam.values()]:
            if tuple(response.shape) != (self.max_length,):
                raise ValueError(
                    f"a cached benchmark response has shape {tuple(response.shape)}, not ({self.max_length},)"
                )
        self._greedy.update(
            {query: (utility, response.to(self.device)) for query, (utility, response) in cache.greedy.items()}
        )
        self._beam.update({key: (utility, response.to(self.device)) for key, (utility, response) in cache.beam.items()})

    def oracle_beam(self, queries: torch.Tensor, width: int) -> DecodedResponses:
        """The better of beam search of ``width`` and greedy decoding, per query (cached)."""
        queries = torch.as_tensor(queries, device=self.device, dtype=torch.int64).reshape(-1)
        greedy = self.oracle_greedy(queries)
        for row, query in enumerate(queries.tolist()):
            if (query, width) not in self._beam:
                beam = self.beam_search(query, width)
                if float(beam.utility[0]) >= float(greedy.utility[row]):
                    self._beam[(query, width)] = (float(beam.utility[0]), beam.responses[0])
                else:
                    self._beam[(query, width)] = (float(greedy.utility[row]), greedy.responses[row])
        return self._gather(self._beam, [(int(q), width) for q in queries.tolist()])

    # ------------------------------------------------------------------ internals
    def _logprobs(self, hidden: torch.Tensor) -> torch.Tensor:
        """Next-token log-probs ``(B, n)`` float32 from last-layer hidden states ``(B, H)`` (pre-norm: normed first)."""
        return self._head.log_probs(self._as_last_hidden(hidden))

    def _as_last_hidden(self, hidden: torch.Tensor) -> torch.Tensor:
        """The LM head's input from the hidden states the state carries ``(..., H)``: the final norm's output."""
        return hidden if self._final_norm is None else self._final_norm(hidden)

    @torch.no_grad()
    def _check_against_model(self, forward_requested: str, batching_requested: str) -> None:
        """Keep the first path that reproduces the model's own forward; refuse the model when none does.

        The paths are the requested ones, ``"auto"`` standing for each it can pick in order
        (:meth:`_paths`: the native forward where the architecture has one, then transformers';
        ``"mask"`` then ``"expand"``). On each, the probe (:meth:`_probe`) runs the first query's
        prefill (as it is and behind two columns of left padding), its k candidates and one step
        over the KV cache (reusing the chosen candidate's cache entries), then the longest query to
        the episode's last position (query length plus L tokens), and compares last hidden states,
        mean-pooled embeddings and sequence log-probs with plain no-cache forwards
        (``model(ids, output_hidden_states=True)``) of the same sequences; the head is checked on the
        model's own logits. A path that raises or differs is recorded and the next one tried.

        Raises:
            ValueError: no path probes right; the message names the model type and, per path
                tried, why it failed.
        """
        tried = []
        for forward, batching in self._paths(forward_requested, batching_requested):
            failure = known_refusal(self.model, forward, batching if self.embeddings else None)
            if failure is None:
                try:
                    decoder = (
                        PreNormForward(self.model)
                        if self._final_norm is not None
                        else select_decoder_forward(self.model, forward)
                    )
                except ValueError as error:
                    failure = str(error)
                else:
                    self._forward = decoder if self._switch is None else self._switch.split_forward(decoder)
                    self.forward_implementation, self.candidate_batching = forward, batching
                    self._memo.clear()
                    failure = self._probe_failure()
            if failure is None:
                return
            tried.append(f"{forward} forward with {batching!r} candidate batching: {failure}")
        model_type = self._head.model_type
        if len(tried) == 1:
            raise ValueError(f"model_type={model_type!r} cannot be stepped here: {tried[0]}")
        raise ValueError(
            f"model_type={model_type!r} cannot be stepped here on any path; tried "
            + "; ".join(f"({number}) {reason}" for number, reason in enumerate(tried, start=1))
        )

    def _paths(self, forward_requested: str, batching_requested: str) -> list[tuple[str, str]]:
        """``(forward, candidate batching)`` pairs the probe tries, in order, for the requested ones."""
        forwards = [forward_requested]
        if forward_requested == "auto":
            native = has_native_forward(self.model) and self._final_norm is None
            forwards = ["native", "transformers"] if native else ["transformers"]
        paths: list[tuple[str, str]] = []
        for forward in forwards:
            batchings = [batching_requested]
            if batching_requested == "auto":
                kernel = getattr(self.model.config, "_attn_implementation", None)
                takes_masks = forward == "native" or kernel in MASKED_KERNELS
                batchings = ["mask", "expand"] if takes_masks and self.embeddings else ["expand"]
                if not self.embeddings:  # no candidate is scored: the batching is never used
                    batchings = ["mask" if takes_masks else "expand"]
            paths.extend((forward, batching) for batching in batchings)
        return paths

    def _probe_failure(self) -> str | None:
        """Why the current path does not reproduce the model's own forward (None when it does)."""
        try:
            checks = self._probe()
        except ValueError as error:
            return str(error)
        failure = self._first_failure(checks)
        return None if failure is None else mismatch_reason(self.model, failure)

    def _probe(self) -> list[ProbeCheck]:
        """The probe's ``(what, got, wanted)``: prefills, the candidates' forwards, an episode's last position.

        Raises:
            ValueError: the model's own code raised on one of these forwards (the message names
                the model type and what failed, :func:`~tokenized_bandit_gym.llm.refusals.described_failure`),
                or its LM head is not reproduced.
        """
        ids = self.query_tokens[:1, : int(self.query_lengths[0])]  # (1, T)
        k = self.top_k
        stage = "a no-cache forward of the first query"
        try:
            output = self.model(input_ids=ids, output_hidden_states=True, use_cache=False)
            self._head.check(output)
            stage = "the first query's prefill behind left padding"
            padded = torch.cat([ids.new_full((1, 2), self.eos_token_id), ids], dim=1)  # (1, T + 2)
            padded_mask = torch.ones_like(padded).index_fill_(1, torch.arange(2, device=self.device), 0)  # (1, T + 2)
            positions = (padded_mask.cumsum(dim=1) - 1).clamp(min=0)  # (1, T + 2)
            padded_hidden = self._forward(padded, padded_mask, positions, ())[0][0]  # (T + 2, H)
            stage = f"the first query's {self.candidate_batching!r} candidate batching over a KV cache"
            state = self.initial_state(torch.zeros(1, dtype=torch.int64, device=self.device))
            sequences = torch.cat([ids.expand(k, -1), state.candidate_tokens[0][:, None]], dim=1)  # (k, T + 1)
            stage = "a step over a KV cache"
            if state.candidate_hidden is None:  # no candidate is scored: one reference sequence is enough
                stepped = self.advance_tokens(state, sequences[:1, -1])
                step = (
                    "a step over the KV cache",
                    self._as_last_hidden(stepped.last_hidden[0]),
                    self._reference_last_hidden(sequences[:1])[0],
                )
            else:
                expected = self._reference_last_hidden(sequences)  # (k, H)
                stepped = self.advance(state, torch.zeros(1, dtype=torch.int64, device=self.device))
                following = stepped.candidate_tokens[0][:, None]  # (k, 1) the next step's candidates
                longer = torch.cat([sequences[:1].expand(k, -1), following], dim=1)  # (k, T + 2)
                stepped_hidden = stepped.candidate_hidden  # scored, as the state it stepped from
                if stepped_hidden is None:
                    raise ValueError("a step over the KV cache dropped the candidates' hidden states")
                step = (
                    "a step over the KV cache",
                    self._as_last_hidden(stepped_hidden[0]),
                    self._reference_last_hidden(longer),
                )
            stage = f"an episode stepped to its last position ({self.max_length} steps)"
            episode = [check for query in self._episode_queries() for check in self._episode_checks(query)]
        except REFUSAL_ERRORS as error:
            raise ValueError(described_failure(self.model, error, stage)) from error
        expected_prefix = output.hidden_states[-1][0]  # (T, H)
        checks = [
            ("the query's prefill", self._as_last_hidden(state.last_hidden[0]), expected_prefix[-1]),
            ("a left-padded prefill", self._as_last_hidden(padded_hidden[2:]), expected_prefix),
        ]
        if state.candidate_hidden is not None:
            batching = f"the {self.candidate_batching!r} candidate batching"
            checks.append((batching, self._as_last_hidden(state.candidate_hidden[0]), expected))
        return [*checks, step, *episode]

    def _episode_queries(self) -> list[int]:
        """Queries the probe steps to an episode's last position: the longest, and one crossing the length switch."""
        queries = [int(self.query_lengths.argmax())]
        if self._switch is not None:
            threshold = self._switch.threshold
            crossing = (self.query_lengths <= threshold) & (self.query_lengths + self.max_length > threshold)  # (Q,)
            if bool(crossing.any()):
                queries.append(int(torch.where(crossing, self.query_lengths, -1).argmax()))
        return list(dict.fromkeys(queries))

    def _episode_checks(self, query: int) -> list[ProbeCheck]:
        """Query ``query`` stepped with non-EOS tokens to its last position, against one no-cache forward.

        Compares, at the last step (every candidate tau of ``x:y``, ``|x:y:tau|`` = query length plus
        L), the candidates' last hidden states (or the prefix's, without embeddings), their
        mean-pooled embeddings and ``log p(y:tau | x)``: a switch that depends on the position
        (rotary scalings, windows) shows there.
        """
        state = self.initial_state(torch.tensor([query], device=self.device))
        for _ in range(self.max_length - 1):
            non_eos = state.candidate_tokens[0] != self.eos_token_id  # (k,)
            if state.candidate_hidden is not None and bool(non_eos.any()):
                state = self.advance(state, non_eos.int().argmax()[None])
            else:
                logprobs = self._logprobs(state.last_hidden)  # (1, n)
                logprobs[:, self.eos_token_id] = float("-inf")
                state = self.advance_tokens(state, logprobs.argmax(dim=1))
        query_length = int(self.query_lengths[query])
        prefix = torch.cat([self.query_tokens[query, :query_length], state.tokens[0, : int(state.lengths[0])]])
        candidates = state.candidate_tokens[0][:, None]  # (k, 1)
        sequences = torch.cat([prefix.expand(candidates.shape[0], -1), candidates], dim=1)  # (k, T)
        with norm_inputs_recorded(self._final_norm or torch.nn.Identity()) as pre_norm:
            output = self.model(input_ids=sequences, output_hidden_states=True, use_cache=False)
        hidden = output.hidden_states[-1]  # (k, T, H)
        pooled = pre_norm[-1] if self._final_norm is not None else hidden  # (k, T, H) the states e pools
        logprobs = output.logits.float().log_softmax(dim=-1)[:, query_length - 1 : -1]  # (k, |y| + 1, n)
        sequence_logprob = logprobs.gather(2, sequences[:, query_length:, None])[..., 0].sum(dim=1)  # (k,)
        what = f"the last position of an episode ({sequences.shape[1]} tokens)"
        checks = [(f"{what}: log p(y:tau | x)", self.candidate_sequence_logprobs(state)[0].float(), sequence_logprob)]
        if state.candidate_hidden is None:
            return [(f"{what}: the prefix", self._as_last_hidden(state.last_hidden[0]), hidden[0, -2]), *checks]
        start = 0 if self.pooling == "query_response" else query_length
        return [
            (what, self._as_last_hidden(state.candidate_hidden[0]), hidden[:, -1]),
            (f"{what}: the mean-pooled embedding", self.candidate_pooled(state)[0], pooled[:, start:].float().mean(1)),
            *checks,
        ]

    def _reference_last_hidden(self, sequences: torch.Tensor) -> torch.Tensor:
        """Last hidden state of the last token of each of ``sequences`` ``(k, T)``: ``(k, H)``, a no-cache forward."""
        return self.model(input_ids=sequences, output_hidden_states=True, use_cache=False).hidden_states[-1][:, -1]

    def _first_failure(self, checks: list[ProbeCheck]) -> str | None:
        """The first ``(what, got, wanted)`` whose hidden states differ beyond rounding, as a phrase; else None."""
        tolerance = self._head.tolerance
        for what, got, wanted in checks:
            if got.shape != wanted.shape:
                return f"{what} has shape {tuple(got.shape)}, not {tuple(wanted.shape)}"
            error = float((got.float() - wanted.float()).abs().max())
            if not error <= tolerance * (1.0 + float(wanted.float().abs().max())):
                return f"{what} differs by {error:.3g} from the model's own no-cache forward"
        return None

    def _with_candidates(self, state: LanguageModelState, grow: torch.Tensor) -> LanguageModelState:
        """Recompute the top-k candidates of the rows ``grow`` ``(B,)`` and score every row's candidates."""
        state = self._across_switch(state, grow)
        values, tokens = self._top_candidates(self._logprobs(state.last_hidden), state)  # (B, k), (B, k)
        tokens = torch.where(grow[:, None], tokens, state.candidate_tokens)  # (B, k)
        values = torch.where(grow[:, None], values, state.candidate_logprobs)  # (B, k)
        candidate_hidden, candidate_past = None, None
        if self.embeddings and not bool(state.finished.all()):
            candidate_hidden, candidate_past = self._score(state, tokens)
        elif self.embeddings:
            candidate_hidden, candidate_past = state.candidate_hidden, state.candidate_past
        return LanguageModelState(
            **{
                **state.__dict__,
                "candidate_tokens": tokens,
                "candidate_logprobs": values,
                "candidate_hidden": candidate_hidden,
                "candidate_past": candidate_past,
            }
        )

    def _top_candidates(self, logprobs: torch.Tensor, state: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The k candidates' log-probs and tokens ``(B, k)`` each from next-token ``logprobs`` ``(B, n)``.

        ``state`` is anything with the rows' ``finished`` and ``lengths`` ``(B,)`` (the static step's rounds too).
        EOS is ranked only where it may come next, and put in the last slot where it is allowed and missing.
        """
        eos_allowed = self._eos_allowed(state)  # (B,)
        ranked = logprobs
        if self.first_eos_position > 1:  # EOS is no candidate where it may not be chosen: k other tokens
            ranked = logprobs.clone()
            ranked[:, self.eos_token_id] = torch.where(eos_allowed, ranked[:, self.eos_token_id], float("-inf"))
        values, tokens = ranked.topk(self.top_k, dim=1)  # (B, k), (B, k)
        missing = ~(tokens == self.eos_token_id).any(dim=1) & eos_allowed  # (B,)
        if not self.eos_candidate:
            missing &= state.finished | (state.lengths >= self.max_length - 1)  # only where EOS is the one action
        tokens[:, -1] = torch.where(missing, self.eos_token_id, tokens[:, -1])
        values[:, -1] = torch.where(missing, logprobs[:, self.eos_token_id], values[:, -1])
        return values, tokens

    def _across_switch(self, state: LanguageModelState, grow: torch.Tensor) -> LanguageModelState:
        """``state`` with the prefix of the rows ``grow`` whose candidates first cross the length switch recomputed.

        Longrope (:mod:`~tokenized_bandit_gym.llm.length_switch`): ``x:y:tau`` of more than
        ``original_max_position_embeddings`` tokens runs the long factors at every position, so a
        row whose ``x:y`` holds exactly that many gets its cache, pooled sum, ``log p(y | x)`` and
        last hidden state from one forward of ``x:y`` with the long factors, as ``generate()``
        recomputes at the switch. The state's own ``u(x, y)`` is then the long factors' too.
        """
        if self._switch is None:
            return state
        rows = torch.nonzero(grow & ~state.finished & (state.next_positions == self._switch.threshold))[:, 0]
        if rows.numel() == 0:
            return state
        queries, lengths = state.queries[rows].tolist(), state.lengths[rows].tolist()
        query_lengths = [int(self.query_lengths[query]) for query in queries]
        sequences = [
            torch.cat([self.query_tokens[query, :query_length], state.tokens[row, :length]])
            for query, query_length, row, length in zip(queries, query_lengths, rows.tolist(), lengths, strict=True)
        ]
        hidden_sum, past, sequence_logprob, last_hidden = recomputed_prefix(
            self._forward,
            self._logprobs,
            sequences,
            query_lengths,
            state.attention_mask[rows],
            self.pooling == "query_response",
            self.eos_token_id,
        )
        return replace(
            state,
            past=tuple(
                (keys.index_copy(0, rows, new_keys), values.index_copy(0, rows, new_values))
                for (keys, values), (new_keys, new_values) in zip(state.past, past, strict=True)
            ),
            hidden_sum=state.hidden_sum.index_copy(0, rows, hidden_sum),
            sequence_logprob=state.sequence_logprob.index_copy(0, rows, sequence_logprob),
            last_hidden=state.last_hidden.index_copy(0, rows, last_hidden.to(state.last_hidden.dtype)),
        )

    def _score(self, state: LanguageModelState, tokens: torch.Tensor) -> tuple[torch.Tensor, KeyValues]:
        """One forward of the ``B * k`` candidates over the prefix cache: hidden ``(B, k, H)`` and their entries.

        Rows that are the same partial round (:meth:`_distinct_rows`: the same query, response, cache columns
        and candidates, as the runs of several agents on one query are until their choices part) are
        forwarded once and their results shared: the candidates of ``x:y`` are scored once per distinct
        ``x:y``, not once per row. Where those rows are evenly spaced (as the first rows of B rounds over a pool
        of queries are) their caches are read as a view, with no copy of their prefix; else they are gathered.
        """
        distinct, inverse = self._distinct_rows(state, tokens)
        if distinct is None:
            return self._score_rows(state.attention_mask, state.next_positions, state.past, tokens)
        spaced = _evenly_spaced(distinct)
        if spaced is not None:  # the rows' caches as views (a row index map): their prefix is not copied
            past = tuple((keys[spaced], values[spaced]) for keys, values in state.past)
        else:
            past = tuple(
                (keys.index_select(0, distinct), values.index_select(0, distinct)) for keys, values in state.past
            )
        hidden, candidate_past = self._score_rows(
            state.attention_mask[distinct], state.next_positions[distinct], past, tokens[distinct]
        )
        return hidden[inverse], tuple((keys[inverse], values[inverse]) for keys, values in candidate_past)

    @staticmethod
    def _distinct_rows(
        state: LanguageModelState, tokens: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor] | tuple[None, None]:
        """The first row of each group of equal rows ``(U,)`` ascending, and each row's group ``(B,)``; else None, None.

        Rows are equal when they hold the same query, response ``tokens`` (EOS-padded), next position, cache
        columns (``attention_mask``) and candidate ``tokens`` ``(B, k)``: their caches then hold the model's
        entries of the same ``x:y`` at the same columns (to the float rounding of the forwards that wrote them),
        so one forward of their candidates serves all. Row ``i``'s results are row ``distinct[inverse[i]]``'s.
        """
        batch = state.batch_size
        if batch < 2:
            return None, None
        rows = torch.cat(
            [
                state.queries[:, None],
                state.next_positions[:, None],
                state.tokens,
                tokens,
                state.attention_mask.to(torch.int64),
            ],
            dim=1,
        )  # (B, 2 + L + k + P)
        groups, inverse = torch.unique(rows, dim=0, return_inverse=True)  # (U, ...), (B,)
        if groups.shape[0] == batch:
            return None, None
        first = torch.full((groups.shape[0],), batch, dtype=torch.int64, device=inverse.device)
        distinct = first.scatter_reduce(0, inverse, torch.arange(batch, device=inverse.device), reduce="amin")
        distinct, order = distinct.sort()  # ascending rows (evenly spaced ones are then read as a view)
        rank = torch.empty_like(order).scatter_(0, order, torch.arange(order.shape[0], device=order.device))
        return distinct, rank[inverse]

    def _score_rows(
        self, attention_mask: torch.Tensor, next_positions: torch.Tensor, past: KeyValues, tokens: torch.Tensor
    ) -> tuple[torch.Tensor, KeyValues]:
        """Hidden ``(B, k, H)`` and cache entries ``(B, h, k, hd)`` per layer of the candidates ``tokens`` ``(B, k)``.

        The rows have the cache ``past``, its columns ``attention_mask`` ``(B, P)`` and next positions ``(B,)``.
        """
        if self.candidate_batching == "mask":
            return self._score_with_mask(attention_mask, next_positions, past, tokens)
        return self._score_expanded(attention_mask, next_positions, past, tokens)

    def _score_with_mask(
        self, attention_mask: torch.Tensor, next_positions: torch.Tensor, past: KeyValues, tokens: torch.Tensor
    ) -> tuple[torch.Tensor, KeyValues]:
        """The k candidates as k tokens of each row, at the same position, under a 4-D mask.

        Candidate j attends to the row's prefix and to itself only, so it sees exactly ``x:y:tau_j``;
        the prefix cache is read once per row (not copied k times).
        """
        batch, k = tokens.shape
        prefix = attention_mask.shape[1]
        dtype = self._lm_head.weight.dtype
        blocked = torch.finfo(dtype).min
        prefix_mask = (1 - attention_mask).to(dtype).mul_(blocked)  # (B, P) additive: 0 or -inf-like
        mask = torch.cat(
            [prefix_mask[:, None, None, :].expand(batch, 1, k, prefix), self._self_only_mask(k, dtype, batch)], dim=3
        )  # (B, 1, k, P + k)
        positions = next_positions[:, None].expand(batch, k)  # (B, k)
        hidden, new_past = self._forward(tokens, mask, positions, past)  # (B, k, H)
        candidate_past = tuple(
            (detached(keys[:, :, prefix:]), detached(values[:, :, prefix:])) for keys, values in new_past
        )  # candidate entries (B, h, k, hd), copied out of the cache's scratch columns (later steps overwrite those)
        return hidden, candidate_past

    def _self_only_mask(self, k: int, dtype: torch.dtype, batch: int) -> torch.Tensor:
        """Additive mask ``(B, 1, k, k)`` letting candidate j see only itself (built once per k and dtype)."""
        key = (k, dtype)
        block = self._self_masks.get(key)
        if block is None:
            eye = torch.eye(k, dtype=torch.bool, device=self.device)
            block = torch.zeros(k, k, dtype=dtype, device=self.device).masked_fill_(~eye, torch.finfo(dtype).min)
            self._self_masks[key] = block
        return block.expand(batch, 1, k, k)

    def _score_expanded(
        self, attention_mask: torch.Tensor, next_positions: torch.Tensor, past: KeyValues, tokens: torch.Tensor
    ) -> tuple[torch.Tensor, KeyValues]:
        """The k candidates as ``B * k`` one-token rows over the prefix cache repeated along the batch."""
        batch, k = tokens.shape
        mask = torch.cat([attention_mask, torch.ones_like(attention_mask[:, :1])], dim=1)  # (B, P + 1)
        repeated_past = tuple(
            (keys.repeat_interleave(k, dim=0), values.repeat_interleave(k, dim=0))  # (B * k, h, P, hd)
            for keys, values in past
        )
        hidden, new_past = self._forward(
            tokens.reshape(-1, 1),  # (B * k, 1)
            mask.repeat_interleave(k, dim=0),  # (B * k, P + 1)
            next_positions.repeat_interleave(k)[:, None],  # (B * k, 1)
            repeated_past,
        )
        candidate_past = tuple(
            (
                keys[:, :, -1].reshape(batch, k, *keys.shape[1:2], keys.shape[-1]).transpose(1, 2),  # (B, h, k, hd)
                values[:, :, -1].reshape(batch, k, *values.shape[1:2], values.shape[-1]).transpose(1, 2),
            )
            for keys, values in new_past
        )
        return hidden[:, 0].reshape(batch, k, -1), candidate_past  # (B, k, H)

    def _appended(
        self,
        state: LanguageModelState,
        tokens: torch.Tensor,
        grow: torch.Tensor,
        past: KeyValues,
        hidden: torch.Tensor,
        logprob: torch.Tensor,
    ) -> LanguageModelState:
        """The state after appending ``tokens`` ``(B,)`` to the rows ``grow`` (cache already extended)."""
        position = state.lengths.clamp(max=self.max_length - 1)[:, None]  # (B, 1)
        new_tokens = state.tokens.scatter(1, position, tokens[:, None])  # (B, L)
        grown_by = grow.long()  # (B,) 1 where the row grows
        grow_column = grow[:, None]  # (B, 1)
        grown = LanguageModelState(
            queries=state.queries,
            tokens=torch.where(grow_column, new_tokens, state.tokens),
            lengths=state.lengths + grown_by,
            finished=state.finished | (grow & (tokens == self.eos_token_id)),
            past=past,
            attention_mask=torch.cat([state.attention_mask, grown_by[:, None]], dim=1),  # (B, P + 1)
            next_positions=state.next_positions + grown_by,
            hidden_sum=state.hidden_sum + torch.where(grow_column, hidden.float(), 0.0),  # (B, H)
            pooled_count=state.pooled_count + grown_by,
            sequence_logprob=state.sequence_logprob
            + torch.where(grow, self._scored(logprob.double(), tokens, state.lengths), 0.0),
            last_hidden=torch.where(grow_column, hidden, state.last_hidden),
            candidate_tokens=state.candidate_tokens,
            candidate_logprobs=state.candidate_logprobs,
            candidate_hidden=state.candidate_hidden,
            candidate_past=state.candidate_past,
        )
        return self._with_candidates(grown, grow)

    def _eos_allowed(self, state: LanguageModelState) -> torch.Tensor:
        """Rows ``(B,)`` where EOS may come next: finished, or at position :attr:`first_eos_position` or later."""
        return state.finished | (state.lengths >= self.first_eos_position - 1)

    def _grow(self, state: LanguageModelState, active: torch.Tensor | None) -> torch.Tensor:
        """Rows ``(B,)`` to extend: active, unfinished and shorter than L."""
        grow = ~state.finished & (state.lengths < self.max_length)
        if active is not None:
            grow = grow & torch.as_tensor(active, device=self.device, dtype=torch.bool)
        return grow

    def _utility(self, embedding: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """``gamma * v + (1 - gamma) * <theta, e>`` for embeddings ``(..., H)`` and values ``(...)``."""
        return self.gamma * value + (1.0 - self.gamma) * (embedding.double() @ self.latent_theta)

    def _normalise(self, pooled: torch.Tensor) -> torch.Tensor:
        """``e`` from mean-pooled hidden states ``(..., H)`` (unit L2 norm unless ``embedding_norm="none"``)."""
        if self.embedding_norm == "none":
            return pooled
        return pooled / pooled.norm(dim=-1, keepdim=True).clamp(min=1e-12)

    def _require_embeddings(self) -> None:
        if not self.embeddings:
            raise ValueError("this problem computes no embeddings (embeddings=False)")

    def _make_theta(self, theta: torch.Tensor | Sequence[float] | None) -> torch.Tensor:
        """The latent theta ``(d,)`` float64; default ``0.5 * 1``, unit-normed unless ``theta_scale="literal"``."""
        if theta is None:
            halves = torch.full((self.hidden_size,), 0.5, dtype=torch.float64, device=self.device)
            return halves if self.theta_scale == "literal" else halves / halves.norm()
        tensor = torch.as_tensor(theta, dtype=torch.float64, device=self.device)
        if tensor.shape != (self.hidden_size,):
            raise ValueError(f"theta must have shape ({self.hidden_size},) (hidden size), got {tuple(tensor.shape)}")
        if not bool(torch.isfinite(tensor).all()):
            raise ValueError("theta must be finite")
        return tensor

    def _check_chat_template(self, chat_template: bool | None) -> bool:
        has_template = bool(getattr(self.tokenizer, "chat_template", None))
        if chat_template is None:
            return has_template
        if not isinstance(chat_template, bool):
            raise TypeError(f"chat_template must be a bool or None, got {chat_template!r}")
        if chat_template and not has_template:
            raise ValueError("chat_template=True but the tokenizer has no chat template")
        return chat_template

    def _tokenize_queries(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Query ids ``(Q, Lq)`` (right-padded with EOS) and lengths ``(Q,)``, template and BOS included."""
        rows = []
        for text in texts:
            if self.chat_template:
                # ids, or a BatchEncoding holding them (transformers types it as any of its outputs, str included)
                templated: Any = self.tokenizer.apply_chat_template(
                    [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
                )
                ids = templated if isinstance(templated, list) else templated["input_ids"]
            else:
                ids = self.tokenizer(text)["input_ids"]
            if not ids:
                raise ValueError(f"query {text!r} tokenizes to no tokens")
            rows.append(self._fitted([int(i) for i in ids], text))
        width = max(len(row) for row in rows)
        tokens = torch.full((len(rows), width), self.eos_token_id, dtype=torch.int64)
        for index, row in enumerate(rows):
            tokens[index, : len(row)] = torch.tensor(row)
        lengths = torch.tensor([len(row) for row in rows], dtype=torch.int64)
        return tokens.to(self.device), lengths.to(self.device)

    def _fitted(self, ids: list[int], text: str) -> list[int]:
        """``ids`` of one query, checked (or left-truncated) so that ids plus L fit the model's positions."""
        positions = getattr(self.model.config.get_text_config(), "max_position_embeddings", None)
        if not isinstance(positions, int) or positions <= 0 or len(ids) + self.max_length <= positions:
            return ids
        room = positions - self.max_length
        bos = getattr(self.tokenizer, "bos_token_id", None)
        kept_bos = ids[:1] if bos is not None and ids[0] == bos else []
        if self.query_truncation == "none" or room <= len(kept_bos):
            shown = text if len(text) <= 60 else text[:57] + "..."
            raise ValueError(
                f"query {shown!r} is {len(ids)} tokens and max_length={self.max_length}: {len(ids) + self.max_length} "
                f"positions exceed the model's {positions} (max_position_embeddings of model_type="
                f"{self._head.model_type!r}); shorten the query or "
                f"max_length, or pass query_truncation='left'"
            )
        return kept_bos + ids[len(ids) - (room - len(kept_bos)) :]

    def _memoised_state(self, query: int, response: list[int]) -> LanguageModelState:
        """Single-row :meth:`state_for` that extends the longest memoised prefix."""
        if self.eos_token_id in response:
            response = response[: response.index(self.eos_token_id) + 1]
        cut = len(response)
        while cut > 0 and (query, tuple(response[:cut])) not in self._memo:
            cut -= 1
        key = (query, tuple(response[:cut]))
        state = self._memo.get(key) or self.initial_state(torch.tensor([query], device=self.device))
        for position in range(cut, len(response)):
            state = self.advance_tokens(state, torch.tensor([response[position]], device=self.device))
        if len(self._memo) >= 4 * self.max_length:
            self._memo.clear()
        self._memo[(query, tuple(response))] = state
        return state

    def _gather(self, table: dict[Any, tuple[float, torch.Tensor]], keys: list[Any]) -> DecodedResponses:
        utility = torch.tensor([table[key][0] for key in keys], dtype=torch.float64, device=self.device)
        responses = torch.stack([table[key][1] for key in keys])  # (B, L)
        return DecodedResponses(utility, responses)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle (and copy) as the :attr:`recipe` and the cached benchmarks, never the model's weights.

        Raises:
            TypeError: the problem has no recipe (its model was passed in loaded, not by name or path).
        """
        if self.recipe is None:
            raise TypeError(
                "an LLM problem over a model passed in loaded cannot be pickled or copied (that would copy its "
                "weights): make the env with model= a hub name or a local path instead"
            )
        return (_rebuilt_problem, (self.recipe, self._greedy, self._beam))


ARGUMENT_NAMES = frozenset(inspect.signature(LanguageModelProblem).parameters)
"""The constructor's arguments, read once when the class is defined (a config gives them by name)."""


class BenchmarkCache(NamedTuple):
    """An LLM problem's computed benchmarks: utility (float) and response ``(L,)`` int64 per key."""

    greedy: dict[int, tuple[float, torch.Tensor]]
    """The oracle greedy decode by query index."""
    beam: dict[tuple[int, int], tuple[float, torch.Tensor]]
    """The oracle beam search by ``(query index, width)``."""


def _evenly_spaced(rows: torch.Tensor) -> slice | None:
    """``rows`` ``(U,)`` ascending as a slice where evenly spaced (``a, a + s, ...``), else None (read back)."""
    values = rows.tolist()
    step = values[1] - values[0] if len(values) > 1 else 1
    if step < 1 or any(later - earlier != step for earlier, later in itertools.pairwise(values)):
        return None
    return slice(values[0], values[-1] + 1, step)


def _rebuilt_problem(
    recipe: LanguageModelRecipe,
    greedy: dict[int, tuple[float, torch.Tensor]],
    beam: dict[tuple[int, int], tuple[float, torch.Tensor]],
) -> LanguageModelProblem:
    """Unpickle a problem: build it from ``recipe`` and keep the benchmarks it had already computed."""
    problem = recipe.build()
    problem.keep_benchmarks(BenchmarkCache(greedy, beam))
    return problem
