"""The LLM vector env's ``step_mode="captured"``: the rounds advance through the static step, a CUDA graph on CUDA.

:class:`CapturedLanguageModelAdvance` takes the place of the round batch's eager advance
(``LanguageModelProblem.advance``: the chosen candidates appended, the next candidates scored): it builds a
:class:`~tokenized_bandit_gym.llm.captured_step.StaticLanguageModelStep` of the batch's rounds in a
:class:`~tokenized_bandit_gym.core.cuda_graph_step.CapturedStep` and steps it, and hands the batch back a
:class:`~tokenized_bandit_gym.llm.language_model_state.LanguageModelState` whose tensors are views of the static
step's (the cache's columns in use, the candidates' entries in its scratch columns), so observing, summarising
and restarting rounds stay the batch's own eager code. A restart (``reset``, an autoreset) puts a new state in the
batch, and the next advance builds the static step again from it (on CUDA: a capture again), so the mode pays
most when rounds restart together. The states equal the eager core's to float rounding (the static step's
sums run over more, masked, columns), and the tokens chosen are the same.
"""

from __future__ import annotations

import warnings

import torch

from tokenized_bandit_gym.core.cuda_graph_step import CapturedStep
from tokenized_bandit_gym.envs.language_model_round_batch import LanguageModelRoundBatch
from tokenized_bandit_gym.llm.captured_step import StaticLanguageModelStep, static_step_refusal
from tokenized_bandit_gym.llm.language_model_state import LanguageModelState


class CapturedLanguageModelAdvance:
    """The round batch's advance through a :class:`StaticLanguageModelStep` in a :class:`CapturedStep`.

    The batch's benchmark rows (the oracle-greedy decodes of the rounds' queries, after the B rounds) step in
    the static step too, on their greedy choices, as in the eager advance; one whose benchmark was taken keeps
    decoding there (the eager advance holds it still), which nothing reads.

    Args:
        rounds: the batch (before its first restart).

    Raises:
        ValueError: the batch's problem is one the static step does not compute (named: a forward other than
            the native one, ``embeddings=False``, a length switch).
    """

    def __init__(self, rounds: LanguageModelRoundBatch) -> None:
        refusal = static_step_refusal(rounds.problem)
        if refusal is not None:
            raise ValueError(f"step_mode='captured' cannot step this model: {refusal}")
        self.rounds = rounds
        self.static: StaticLanguageModelStep | None = None
        self._step: CapturedStep | None = None
        self._queries = torch.zeros(0, dtype=torch.int64)
        self._view: LanguageModelState | None = None  # the state this advance last handed the batch
        self._refusal_said = False

    @property
    def captured(self) -> bool:
        """Whether the current static step replays a CUDA graph."""
        return self._step is not None and self._step.captured

    def advance(self, actions: torch.Tensor, stepping: torch.Tensor | None) -> LanguageModelState | None:
        """The batch's state after appending ``actions`` ``(B,)`` (EOS forced) on ``stepping`` ``(B,)`` rows.

        Every unfinished row shorter than L steps (the env steps all but the finished rows, which ride along
        unchanged, as in the eager advance), the benchmark rows on their greedy choice. Returns the state of the
        B rounds and the benchmark rows, or None where the static step refuses them (positions past the model's
        rotary table: said once): the batch then advances eagerly.
        """
        rounds = self.rounds
        rows = rounds._started_rows()
        if rows is not self._view:  # the rounds restarted since the last step (or never stepped)
            self._build(rows)
        if self._step is None or self.static is None:
            return None
        if rows.batch_size > rounds.num_rows:  # the benchmark rows choose as greedy decoding does
            greedy = rounds.problem.greedy_choice(rows.select(slice(rounds.num_rows, None)))  # (R,)
            actions = torch.cat([actions, greedy])  # (B + R,)
        self._step(actions)
        self._view = self._state_view(self.static)
        return self._view

    def _build(self, rows: LanguageModelState) -> None:
        """A static step of ``rows`` (the batch's state after a restart), captured on CUDA."""
        self._step = self.static = None
        try:
            static = StaticLanguageModelStep(self.rounds.problem, rows)
        except ValueError as error:  # positions past the rotary table: this round advances eagerly
            if not self._refusal_said:
                warnings.warn(f"step_mode='captured' steps these rounds eagerly: {error}", RuntimeWarning, stacklevel=3)
                self._refusal_said = True
            return
        example = torch.zeros(rows.batch_size, dtype=torch.int64, device=rows.queries.device)
        self._step = CapturedStep(static.step, [example], static.buffers())
        self.static, self._queries = static, rows.queries

    def _state_view(self, static: StaticLanguageModelStep) -> LanguageModelState:
        """The static step's rounds as a :class:`LanguageModelState` of views (reads the cache's width back)."""
        width, k = int(static.width), self.rounds.problem.top_k
        layers = list(zip(static.keys, static.values, strict=True))
        past = tuple((keys[:, :, :width], values[:, :, :width]) for keys, values in layers)  # (B, h, P, hd) each
        candidate_past = tuple(
            (keys[:, :, width : width + k], values[:, :, width : width + k]) for keys, values in layers
        )  # (B, h, k, hd) each: the scratch columns the candidates' forward wrote
        return LanguageModelState(
            queries=self._queries,
            tokens=static.tokens,
            lengths=static.lengths,
            finished=static.finished,
            past=past,
            attention_mask=static.visible[:, :width].long(),
            next_positions=static.next_positions,
            hidden_sum=static.hidden_sum,
            pooled_count=static.pooled_count,
            sequence_logprob=static.sequence_logprob,
            last_hidden=static.last_hidden,
            candidate_tokens=static.candidate_tokens,
            candidate_logprobs=static.candidate_logprobs,
            candidate_hidden=static.candidate_hidden,
            candidate_past=candidate_past,
        )
