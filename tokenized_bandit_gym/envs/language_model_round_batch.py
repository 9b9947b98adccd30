"""The round batch of the LLM-backed envs: B rows of the LLM core's KV-cached state."""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces

from tokenized_bandit_gym.envs.env_contract import InfoSchema, round_summary, rows_observation
from tokenized_bandit_gym.envs.round_batch import RoundBatch
from tokenized_bandit_gym.llm.language_model_problem import BenchmarkCache, LanguageModelProblem
from tokenized_bandit_gym.llm.language_model_state import LanguageModelState


class LanguageModelRoundBatch(RoundBatch[torch.Tensor]):
    """B rounds of one LLM-backed instance: the single env (B = 1), the vector env and the arena step it.

    The state is the core's :class:`LanguageModelState` (tensors on the model's device): a step
    is one :meth:`LanguageModelProblem.advance` over the KV cache of every stepping row (the
    others ride along masked), an action is an index into a row's k candidates, and the forced
    EOS is the index of the EOS candidate (the only allowed one at position L: the inherited
    :meth:`RoundBatch.forced_actions`).

    Rounds restart row by row: the restarting rows' initial states (the query's KV cache and its
    first scored candidates) are put in place by :meth:`LanguageModelState.with_new_rows`, which
    left-pads the caches to a common width under the attention mask and trims the columns no row
    needs. With ``cache_initial_states`` the whole (fixed) query pool is encoded once, on first
    use, and a restart is a gather of its rows; otherwise each restart encodes the distinct
    queries of the restarting rows in one forward (rows on the same query, such as the arena's
    players, share it).

    Benchmark rows (``benchmark_rows``): when every row starts a round together (the single env's
    reset, the fixed-length vector env, the arena), each of their queries whose oracle-greedy
    benchmark is not cached yet gets one more row in the state, after the B rounds. That row plays
    :meth:`LanguageModelProblem.greedy_choice` (greedy decoding with the true utility) in the same
    forward as the rounds, so the benchmark costs its rows' share of the step, not a decode of its
    own; while it is the same partial response as a round (an agent that chooses as greedy does),
    the two are one row of the forward. When a round on its query ends, the row's response and
    utility are the query's benchmark (a row still short of the end is finished greedily first):
    what :meth:`LanguageModelProblem.oracle_greedy` decodes alone, to the float rounding of
    another batch. Nothing the rounds observe or report changes but that rounding.

    Args:
        problem: the LLM-backed instance.
        num_rows: B.
        optimal_kind: the round's benchmark, ``"oracle_greedy"`` or ``"oracle_beam"``.
        beam_width: the beam's width for ``"oracle_beam"``.
        feature_space: the ``(k, d + 1)`` space of the observed ``[e : v(p)]`` features (the
            observation clips them to it), or None to observe none.
        observe_logprobs: observe the candidates' ``(k,)`` log-probabilities.
        cache_initial_states: keep the initial state of every query of the pool.
        benchmark_rows: decode the missing oracle-greedy benchmarks as rows of the rounds' forward.

    Attributes:
        state: the core's state of the B rounds (None before the first :meth:`restart`): views of
            the first B rows of the state the forward steps, which holds the benchmark rows after them.
        noise: ``(B,)`` float64 the reward noise of each round.
        mask: ``(B, k)`` bool the allowed candidates now.
    """

    on_host = False

    def __init__(
        self,
        problem: LanguageModelProblem,
        num_rows: int,
        *,
        optimal_kind: str,
        beam_width: int,
        feature_space: spaces.Box | None,
        observe_logprobs: bool,
        cache_initial_states: bool,
        benchmark_rows: bool = True,
    ) -> None:
        self.problem = problem
        self.num_rows = num_rows
        self.optimal_kind = optimal_kind
        self.beam_width = beam_width
        self.observe_logprobs = observe_logprobs
        self.cache_initial_states = cache_initial_states
        self.benchmark_rows = benchmark_rows
        self.info_schema = InfoSchema(problem.max_length, problem.embedding_dim, response_logprob=True)
        device = problem.device
        self._feature_bounds: tuple[torch.Tensor, torch.Tensor] | None = None
        if feature_space is not None:  # (k, d + 1) each
            self._feature_bounds = (
                torch.as_tensor(feature_space.low, device=device),
                torch.as_tensor(feature_space.high, device=device),
            )
        self._initial_states: LanguageModelState | None = None  # (Q rows) built on first use
        self._rows: LanguageModelState | None = None  # the B rounds, then one row per benchmark being decoded
        self._rounds: LanguageModelState | None = None  # the B rounds: _rows, or views of its first B rows
        self._benchmark_queries: list[int] = []  # (R,) the query of each benchmark row (rows B, B + 1, ...)
        self._benchmark_live = torch.zeros(0, dtype=torch.bool, device=device)  # (R,) not yet taken
        self.noise = torch.zeros(num_rows, dtype=torch.float64, device=device)  # (B,)
        self.mask = torch.zeros(num_rows, problem.num_candidates, dtype=torch.bool, device=device)  # (B, k)
        self.static_advance: Any = None  # the vector env's step_mode="captured": a CapturedLanguageModelAdvance

    @property
    def state(self) -> LanguageModelState | None:
        """The core's state of the B rounds (None before the first :meth:`restart`)."""
        return self._rounds

    @property
    def queries(self) -> torch.Tensor:  # type: ignore[override]
        """``(B,)`` int64 query index of each round."""
        return self._started().queries

    @property
    def lengths(self) -> torch.Tensor:  # type: ignore[override]
        """``(B,)`` int64 tokens chosen so far."""
        return self._started().lengths

    @property
    def finished(self) -> torch.Tensor:  # type: ignore[override]
        """``(B,)`` bool whether each response is complete."""
        return self._started().finished

    def restart(self, rows: torch.Tensor | None, queries: torch.Tensor, noise: torch.Tensor) -> None:
        """Start new rounds on ``rows`` ``(B,)`` bool (None: every row, with no host read to find them).

        (With ``benchmark_rows``, a restart of every row reads the queries on the host, to find the
        ones with no benchmark yet.)

        The rows' queries are encoded (or gathered from the pool's cached states) and put in place.
        When every row restarts, the benchmark rows of their queries start with them (the class
        docstring); a partial restart starts none and drops those whose benchmark was taken.
        """
        if rows is None:
            if queries.shape != (self.num_rows,) or noise.shape != (self.num_rows,):
                raise ValueError(
                    f"restart(None, ...) starts all {self.num_rows} rows: got queries {tuple(queries.shape)}"
                )
            self._start_every_row(queries)
            self.noise = noise.clone()
            return
        index = torch.nonzero(rows).flatten()  # (R,)
        if index.numel() == 0:
            return
        if self._rows is None and index.numel() != self.num_rows:
            raise ValueError(f"the first restart must start all {self.num_rows} rows, got {index.numel()}")
        self.noise = torch.where(rows, noise, self.noise)
        if self._rows is None or index.numel() == self.num_rows:  # every row restarts, in row order
            self._start_every_row(queries[index])
            return
        fresh = self._initial_state(queries[index])  # R rows
        if self._benchmark_queries and not bool(self._benchmark_live.any()):  # drop them: views of the rounds
            self._set_rows(self._started(), [])
        self._set_rows(self._rows.with_new_rows(index, fresh), self._benchmark_queries)

    def advance(self, actions: torch.Tensor, stepping: torch.Tensor | None) -> None:
        """Append the chosen candidates ``(B,)`` on the rows ``stepping`` ``(B,)`` (None: every row): one forward.

        The other rows ride along in the forward, masked, and keep their state; no forward runs
        when no row steps. The benchmark rows take their greedy choice in the same forward. With
        :attr:`static_advance` (the vector env's ``step_mode="captured"``) the step runs there.
        """
        if stepping is not None and not bool(stepping.any()):
            return
        if self.static_advance is not None:  # step_mode="captured" (None where it steps these rounds eagerly)
            advanced = self.static_advance.advance(actions, stepping)
            if advanced is not None:
                self._set_rows(advanced, self._benchmark_queries)
                return
        problem, rows = self.problem, self._started_rows()
        if not self._benchmark_queries:
            self._set_rows(problem.advance(rows, actions, active=stepping), [])
            return
        benchmark = rows.select(slice(self.num_rows, None))  # the R benchmark rows (views)
        if stepping is None:
            stepping = torch.ones(self.num_rows, dtype=torch.bool, device=problem.device)
        joined_actions = torch.cat([actions, problem.greedy_choice(benchmark)])  # (B + R,)
        active = torch.cat([stepping, self._benchmark_live])  # (B + R,)
        self._set_rows(problem.advance(rows, joined_actions, active=active), self._benchmark_queries)

    def observe(self) -> dict[str, torch.Tensor]:
        """The batched observation (new tensors on the device); updates :attr:`mask`.

        Features and log-probabilities are zero on complete responses; the features are clipped
        to their space (the rounding of a unit-norm embedding only).
        """
        problem, state = self.problem, self._started()
        self.mask = problem.action_mask(state)  # (B, k)
        finished = state.finished[:, None]  # (B, 1)
        features = logprobs = None
        if self._feature_bounds is not None:
            features = problem.candidate_embeddings(state).to(torch.float32)  # (B, k, d + 1)
            features = torch.clamp(features, *self._feature_bounds)
            features = torch.where(finished[:, :, None], 0.0, features)
        if self.observe_logprobs:
            logprobs = torch.where(finished, 0.0, state.candidate_logprobs.to(torch.float32))  # (B, k)
        return rows_observation(
            problem,
            state,
            state.candidate_tokens,
            action_mask=self.mask.to(torch.int8),  # (B, k)
            candidate_embeddings=features,  # (B, k, d + 1) or None
            candidate_logprobs=logprobs,  # (B, k) or None
        )

    def round_summary(self, ended: torch.Tensor) -> dict[str, Any]:
        """Round-end info entries (the schema's fill values off the rows ``ended`` ``(B,)``).

        Reads the host (whether some row ended): the benchmark caches are keyed by query there.
        The ended rows' benchmark rows are taken first; only the ended rows' benchmarks are
        looked up (the others' rows may still be decoding them).
        """
        if not bool(ended.any()):
            return self.pending_summary()
        problem, state = self.problem, self._started()
        self._take_benchmarks({int(query) for query in state.queries[ended].tolist()})
        queries = state.queries  # (B,) each row's, or an ended row's query where the row plays on (masked below)
        if not bool(ended.all()):
            queries = torch.where(ended, queries, queries[torch.nonzero(ended)[0, 0]])
        greedy = problem.oracle_greedy(queries)
        optimum = greedy
        if self.optimal_kind == "oracle_beam":
            optimum = problem.oracle_beam(queries, self.beam_width)
        summary = round_summary(  # masked, so no two entries share memory (at B = 1 summary_row copies each)
            utility=problem.utility_of(state).to(torch.float64),  # (B,)
            optimal_utility=optimum.utility.to(torch.float64),  # (B,)
            oracle_greedy_utility=greedy.utility.to(torch.float64),  # (B,)
            noise=self.noise,  # (B,)
            response=state.tokens.clone(),  # (B, L)
            response_length=state.lengths.clone(),  # (B,)
            optimal_response=optimum.responses,  # (B, L)
            response_embedding=problem.embedding_of(state).to(torch.float32) if problem.embeddings else None,
            ended=None if self.num_rows == 1 else ended,  # masking makes new tensors; one row is read as a copy
            response_logprob=state.sequence_logprob.to(torch.float64),  # (B,)
        )
        if self.num_rows == 1:  # the one-round form says True; a vector env's every entry is (B,), this one too
            summary["round_ended"] = ended.clone()
        return summary

    def _initial_state(self, queries: torch.Tensor) -> LanguageModelState:
        """New rounds on ``queries`` ``(R,)``: rows of the pool's cached states, or one forward of the distinct ones."""
        problem = self.problem
        if self.cache_initial_states:
            if self._initial_states is None:  # the whole pool in one forward, left-padded to the longest query
                self._initial_states = problem.initial_state(torch.arange(problem.num_queries, device=problem.device))
            return self._initial_states.select(queries).trimmed()
        if queries.numel() == 1:
            return problem.initial_state(queries)
        distinct, rows = torch.unique(queries, return_inverse=True)  # (U,), (R,)
        if distinct.numel() == queries.numel():
            return problem.initial_state(queries)
        return problem.initial_state(distinct).select(rows)

    def _start_every_row(self, queries: torch.Tensor) -> None:
        """Every row starts a round on ``queries`` ``(B,)``, with a benchmark row per query not benchmarked yet."""
        problem = self.problem
        self._take_benchmarks(None)  # complete ones (a pairwise round's first responses ended unsummarised)
        wanted = []
        if self.benchmark_rows:
            wanted = sorted({int(query) for query in queries.tolist() if not problem.has_oracle_greedy(int(query))})
        if wanted:
            queries = torch.cat([queries, torch.tensor(wanted, dtype=queries.dtype, device=queries.device)])
        self._set_rows(self._initial_state(queries), wanted)
        self._benchmark_live = torch.ones(len(wanted), dtype=torch.bool, device=problem.device)

    def _take_benchmarks(self, queries: set[int] | None) -> None:
        """Keep the responses of live benchmark rows as their queries' benchmarks.

        With ``queries`` (the queries of rounds that ended), the live rows on them: a row not complete
        yet (its round ended early) is finished greedily first, on its own. With None, the live rows
        that are complete.
        """
        if not self._benchmark_queries:
            return
        problem, rows = self.problem, self._started_rows()
        benchmark = rows.select(slice(self.num_rows, None))  # the R benchmark rows (views)
        live = (self._benchmark_live if queries is not None else self._benchmark_live & benchmark.finished).tolist()
        taken = [
            row
            for row, query in enumerate(self._benchmark_queries)
            if live[row] and (queries is None or query in queries)
        ]
        if not taken:
            return
        index = torch.tensor(taken, dtype=torch.int64, device=problem.device)  # (R',)
        utility = problem.utility_of(benchmark)[index]  # (R',)
        responses = benchmark.tokens[index]  # (R', L)
        unfinished = torch.nonzero(~benchmark.finished[index]).flatten()  # (U,) positions in taken
        if unfinished.numel():
            decoded = problem.greedy_continue(benchmark.select(index[unfinished]))
            utility = utility.index_copy(0, unfinished, decoded.utility.to(utility.dtype))
            responses = responses.index_copy(0, unfinished, decoded.responses)
        taken_queries = [self._benchmark_queries[row] for row in taken]
        fresh = [i for i, query in enumerate(taken_queries) if not problem.has_oracle_greedy(query)]
        utilities = utility.tolist()
        problem.keep_benchmarks(
            BenchmarkCache({taken_queries[i]: (float(utilities[i]), responses[i].clone()) for i in fresh}, {})
        )
        self._benchmark_live = self._benchmark_live.index_fill(0, index, False)

    def _set_rows(self, rows: LanguageModelState, benchmark_queries: list[int]) -> None:
        """The stepped state ``rows`` (B rounds, then one row per query of ``benchmark_queries``)."""
        self._rows, self._benchmark_queries = rows, benchmark_queries
        self._rounds = rows.select(slice(self.num_rows)) if benchmark_queries else rows

    def _started(self) -> LanguageModelState:
        """The state of the B rounds, or ``ValueError`` before the first :meth:`restart`."""
        if self._rounds is None:
            raise ValueError("the environment has no round yet: call reset() first")
        return self._rounds

    def _started_rows(self) -> LanguageModelState:
        """The stepped state (the rounds, then the benchmark rows), or ``ValueError`` before the first restart."""
        self._started()
        assert self._rows is not None
        return self._rows
