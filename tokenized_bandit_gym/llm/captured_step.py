"""The LLM core's step with static shapes, which can be traced whole and captured once as a CUDA graph.

:class:`StaticLanguageModelStep` holds B rounds of a
:class:`~tokenized_bandit_gym.llm.language_model_problem.LanguageModelProblem` in preallocated tensors (a KV
cache of C columns per layer, the candidates' entries in its scratch columns, which columns each row sees, the
pooled sums and the candidates) and steps them
from the chosen candidates to the next candidates' ``[e : v]`` features in place: the same shapes every step,
no ``.item()``, no host synchronisation, no Python branch on the data. The candidates' forward attends over all
C columns, the ones a row may not see masked. So the step can be traced whole (``torch.compile(...,
fullgraph=True)``, tested on the CPU with the ``aot_eager`` backend) and captured as a CUDA graph
(:class:`~tokenized_bandit_gym.core.cuda_graph_step.CapturedStep`). It computes what ``problem.advance`` then
``problem.candidate_embeddings`` compute, to float rounding (the masked columns add exact zeros, but the sums
run over more columns).

Supported: a native forward (Llama family, GPT-2), embeddings on, no length switch (longrope); anything else is a
ValueError naming what. The eager core (``LanguageModelProblem.advance``) is unchanged and stays the default.
"""

from __future__ import annotations

from typing import Any

import torch

from tokenized_bandit_gym.llm.language_model_state import LanguageModelState
from tokenized_bandit_gym.llm.native_decoder_forward import NativeDecoderForward, ScratchColumns


def static_step_refusal(problem: Any) -> str | None:
    """Why :class:`StaticLanguageModelStep` cannot step ``problem`` (a ``LanguageModelProblem``), or None if it can."""
    if not isinstance(problem._forward, NativeDecoderForward):
        return f"a static step needs a native forward (Llama family, GPT-2), not {type(problem._forward).__name__}"
    if not problem.embeddings:
        return "a static step needs embeddings=True and a state with its candidates scored"
    if problem._switch is not None:
        return "a static step cannot follow a length switch (longrope): its prefix is recomputed"
    return None


class StaticLanguageModelStep:
    """B rounds of a language-model problem in static tensors, stepped in place (:meth:`step`).

    Each layer's cache holds the rows' columns, then the k candidates' entries in the k scratch columns after them
    (written there by the candidates' forward); a step copies the chosen candidate's entry from its scratch column
    into the next column, with no copy of the candidates' entries in between, for every layer at once (the layers'
    caches are views of one base per shape).

    Args:
        problem: a ``LanguageModelProblem`` with a native forward, embeddings and no length switch.
        state: the rounds to start from (``problem.initial_state`` or a later state).

    Raises:
        ValueError: the problem or state is one the static step does not compute (named).

    Attributes:
        capacity: C, cache columns per layer: the state's columns, then L chosen tokens and k candidates.
    """

    def __init__(self, problem: Any, state: LanguageModelState) -> None:
        refusal = static_step_refusal(problem)
        if refusal is not None:
            raise ValueError(refusal)
        if state.candidate_past is None or state.candidate_hidden is None:
            raise ValueError("a static step needs embeddings=True and a state with its candidates scored")
        self.problem = problem
        batch, width = state.attention_mask.shape
        self.capacity = width + problem.max_length + problem.top_k
        rotary = getattr(problem._forward, "_rotary", None)
        last_position = int(state.next_positions.max()) + problem.max_length
        if rotary is not None and 0 < rotary.positions <= last_position:
            raise ValueError(f"positions up to {last_position} lie past the rotary table's {rotary.positions}")

        # Every layer's keys and values with the same heads, head size and dtype live in one base (all of them, in
        # the Llama family and GPT-2): the chosen entries of every layer move in one gather and one copy a step
        entries = [*(pair[0] for pair in state.past), *(pair[1] for pair in state.past)]  # keys, then values
        candidates = [*(pair[0] for pair in state.candidate_past), *(pair[1] for pair in state.candidate_past)]
        groups: dict[tuple[int, int, torch.dtype], list[int]] = {}
        for index, layer in enumerate(entries):
            groups.setdefault((layer.shape[1], layer.shape[3], layer.dtype), []).append(index)
        caches: list[torch.Tensor] = [torch.empty(0)] * len(entries)
        self._bases: list[torch.Tensor] = []  # (G, B, h, C, hd) each; zeros: masked columns must be finite
        for (heads, head_size, dtype), members in groups.items():
            base = torch.zeros(len(members), batch, heads, self.capacity, head_size, dtype=dtype, device=problem.device)
            for position, index in enumerate(members):  # the state's columns, then the candidates' scratch columns
                base[position, :, :, :width] = entries[index]
                base[position, :, :, width : width + problem.top_k] = candidates[index]
                caches[index] = base[position]  # (B, h, C, hd)
            self._bases.append(base)
        layers = len(state.past)
        self.keys, self.values = caches[:layers], caches[layers:]
        self.visible = torch.zeros(batch, self.capacity, dtype=torch.bool, device=problem.device)  # (B, C)
        self.visible[:, :width] = state.attention_mask.bool()
        self.width = torch.tensor(width, device=problem.device)  # columns in use, a 0-dim tensor
        self.tokens, self.lengths, self.finished = state.tokens.clone(), state.lengths.clone(), state.finished.clone()
        self.next_positions, self.pooled_count = state.next_positions.clone(), state.pooled_count.clone()
        self.hidden_sum, self.sequence_logprob = state.hidden_sum.clone(), state.sequence_logprob.clone()
        self.last_hidden = state.last_hidden.clone()
        self.candidate_tokens, self.candidate_logprobs = (
            state.candidate_tokens.clone(),
            state.candidate_logprobs.clone(),
        )
        self.candidate_hidden = state.candidate_hidden.clone()
        self._slots = torch.arange(problem.top_k, device=problem.device)  # (k,)
        self._columns = torch.arange(self.capacity, device=problem.device)  # (C,)
        mask_dtype = problem._lm_head.weight.dtype
        # the additive mask's two values as 0-dim tensors, made once: one torch.where builds the mask
        self._attended = torch.zeros((), dtype=mask_dtype, device=problem.device)
        self._blocked = torch.full((), torch.finfo(mask_dtype).min, dtype=mask_dtype, device=problem.device)

    def buffers(self) -> list[torch.Tensor]:
        """Every tensor :meth:`step` writes (to save and restore around warm-up runs)."""
        fixed = [self.visible, self.width, self.tokens, self.lengths, self.finished, self.next_positions]
        fixed += [self.pooled_count, self.hidden_sum, self.sequence_logprob, self.last_hidden]
        fixed += [self.candidate_tokens, self.candidate_logprobs, self.candidate_hidden]
        return fixed + self._bases  # the bases hold every layer's keys and values

    @torch.no_grad()
    def step(self, actions: torch.Tensor) -> torch.Tensor:
        """Append the candidates at ``actions`` ``(B,)`` and score the next ones: features ``(B, k, d + 1)`` float64.

        What ``problem.candidate_embeddings(problem.advance(state, actions))`` returns, computed in place; at
        most L steps (the cache's spare columns). The actions are not checked (a check reads them back). Once
        every row is complete the candidates are scored all the same (the eager core keeps the last ones).
        """
        problem = self.problem
        grow = ~self.finished & (self.lengths < problem.max_length)  # (B,)
        chosen = actions[:, None]  # (B, 1)
        token = self.candidate_tokens.gather(1, chosen)[:, 0]  # (B,)
        logprob = self.candidate_logprobs.gather(1, chosen)[:, 0]  # (B,)
        hidden = self.candidate_hidden.gather(1, chosen[:, :, None].expand(-1, 1, self.last_hidden.shape[1]))[:, 0]
        column = self.width.view(1)
        chosen_column = self.width + chosen  # (B, 1) where the last forward wrote the chosen candidate's entries
        for base in self._bases:  # the chosen entries, read from their scratch columns, into column `width`
            slot = chosen_column[None, :, None, :, None].expand(base.shape[0], -1, base.shape[2], 1, base.shape[4])
            base.index_copy_(3, column, base.gather(3, slot))  # (G, B, h, 1, hd) moved
        self.visible.index_copy_(1, column, grow[:, None])
        grow_column, grown_by = grow[:, None], grow.long()
        appended = self.tokens.scatter(1, self.lengths.clamp(max=problem.max_length - 1)[:, None], token[:, None])
        torch.where(grow_column, appended, self.tokens, out=self.tokens)
        scored = problem._scored(logprob.double(), token, self.lengths)  # (B,) 0 for an unscored forced EOS
        self.lengths.add_(grown_by)
        self.finished.logical_or_(grow & (token == problem.eos_token_id))
        self.next_positions.add_(grown_by)
        self.pooled_count.add_(grown_by)
        self.hidden_sum.add_(torch.where(grow_column, hidden.float(), 0.0))
        self.sequence_logprob.add_(torch.where(grow, scored, 0.0))
        torch.where(grow_column, hidden, self.last_hidden, out=self.last_hidden)
        self.width.add_(1)
        values, tokens = problem._top_candidates(problem._logprobs(self.last_hidden), self)  # (B, k) each
        torch.where(grow_column, tokens, self.candidate_tokens, out=self.candidate_tokens)
        torch.where(grow_column, values, self.candidate_logprobs, out=self.candidate_logprobs)
        self._score()
        return problem.candidate_embeddings(self)

    def _score(self) -> None:
        """The candidates' forward: each sees its row's visible columns and itself (written at ``width + j``)."""
        batch, k = self.candidate_tokens.shape
        scratch = self.width + self._slots  # (k,) the candidates' columns
        own = self._columns[None, :] == scratch[:, None]  # (k, C)
        allowed = self.visible[:, None, :] | own[None]  # (B, k, C)
        mask = torch.where(allowed, self._attended, self._blocked)[:, None]  # (B, 1, k, C) additive
        positions = self.next_positions[:, None].expand(batch, k)  # (B, k)
        columns = ScratchColumns(self.keys, self.values, scratch)
        hidden, _ = self.problem._forward(self.candidate_tokens, mask, positions, columns)  # (B, k, H)
        self.candidate_hidden.copy_(hidden)  # their entries stay in the scratch columns, where the next step reads
