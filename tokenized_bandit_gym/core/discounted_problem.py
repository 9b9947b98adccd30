"""The discounted TLB family: ``e(x, y:tau) = alpha * e(x, y) + phi(x, tau, |y| + 1)``."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.instance_sizes import InstanceSizes
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem, check_theta_norm
from tokenized_bandit_gym.core.tokenized_problem import DecodedResponses
from tokenized_bandit_gym.core.validation import check_real

# Below this many entries (Q * L * n * d) every phi(x, tau, j) is tabulated once at construction,
# so a step costs one gather instead of a normalisation per candidate.
FEATURE_TABLE_LIMIT = 1 << 22
# From this many entries per row (n * d) the oracle greedy screens its candidates (_greedy_tokens)
# instead of scoring each: about where both cost the same for the pool (measured at n = 128, d = 16,
# Q = 32 on the CPU: 2.1-2.2 ms either way; the screen's dozen small calls a step cost more below,
# the passes over (Q, n, d) more above), so the choice makes no cost jump.
GREEDY_SCREEN_MIN_ENTRIES = 2048


class DiscountedProblem(LinearTokenizedProblem):
    """TLB family with exact DDMC (paper Assumption 3) on same-length pairs.

    The embedding of ``x:y:tau`` discounts the embedding of ``x:y`` by ``alpha`` and adds a
    token feature that depends on the query, the token and its position::

        e(x, empty) = 0,   e(x, y:tau) = alpha * e(x, y) + phi(x, tau, |y| + 1)
        phi(x, tau, j) = c * g_tau * normalize(a_tau + q_x + p_j)

    with ``q_x`` the mean of the query's token vectors, gains ``g_tau`` in ``[0.5, 1]`` and
    ``c = 1 / sum_{i < L} alpha^i`` so that ``||e|| <= 1``. For two different responses y, z of
    the same length, ``u(y:tau) - u(z:tau) = alpha * (u(y) - u(z))``: DDMC holds exactly.

    DDMC is a claim about same-length pairs without an interior EOS. Once EOS freezes the
    utility (monotonicity) a pair such as ``(y:EOS, z:tau)`` no longer contracts, so greedy
    decoding can stop too early or too late even here; with ``fixed_length=True`` (EOS only
    at position L) greedy decoding with the true utility is exactly optimal (Theorem 5.1).

    The exact optimum is a dynamic program: the utility of a complete response of length m is
    ``sum_{j <= m} alpha^(m - j) <theta, phi(x, y_j, j)>``, so for each m the best non-EOS
    token is chosen independently at each position, and the best m is kept.

    Args:
        sizes: n (EOS is id ``n - 1``), L, d, the query pool, the instance seed (every parameter
            of the instance), ``fixed_length``, device and dtype.
        alpha: the discount in ``[0, 1]``.
        theta_norm: ``||theta||`` in ``(0, 1]``.
    """

    def __init__(self, sizes: InstanceSizes, alpha: float = 0.8, theta_norm: float = 1.0) -> None:
        self.alpha = check_real("alpha", alpha, low=0.0, high=1.0)
        theta_norm = check_theta_norm(theta_norm)
        generator = self._start_query_pool_instance(sizes)
        dimension, dtype = int(sizes.embedding_dim), self.dtype
        query_tokens, query_lengths = self.query_tokens.cpu(), self.query_lengths.cpu()
        n, length = self.vocab_size, self.max_length
        token_vectors = torch.randn(n, dimension, generator=generator, dtype=torch.float64)  # (n, d)
        query_token_vectors = torch.randn(n, dimension, generator=generator, dtype=torch.float64)  # (n, d)
        position_vectors = 0.5 * torch.randn(length, dimension, generator=generator, dtype=torch.float64)  # (L, d)
        token_gains = 0.5 + 0.5 * torch.rand(n, generator=generator, dtype=torch.float64)  # (n,)
        theta = torch.randn(dimension, generator=generator, dtype=torch.float64)  # (d,)
        self._init_extra_parameters(generator, dimension)
        padding = torch.arange(query_tokens.shape[1])[None, :] >= query_lengths[:, None]  # (Q, Lq)
        query_sum = query_token_vectors[query_tokens].masked_fill(padding[..., None], 0.0).sum(1)  # (Q, d)
        query_vectors = query_sum / query_lengths[:, None]  # (Q, d)
        self.scale = 1.0 / sum(self.alpha**i for i in range(length))  # c, so that ||e|| <= 1
        to: dict[str, Any] = {"device": self.device, "dtype": dtype}
        self.token_vectors = token_vectors.to(**to)
        self.query_vectors = query_vectors.to(**to)
        self.position_vectors = position_vectors.to(**to)
        self.token_gains = token_gains.to(**to)
        self.theta = (theta / theta.norm() * theta_norm).to(**to)
        self._feature_table: torch.Tensor | None = None
        self._scaled_feature_rows: torch.Tensor | None = None  # (Q * (L + 1), n * d) c * table, on first use
        self._gathered_rows: torch.Tensor | None = None  # (B, n * d) scratch of observed_candidate_embeddings
        self._host_scaled_rows: np.ndarray | None = None  # (Q * (L + 1), n, d) NumPy view of c * table, on the CPU
        self._scaled_row_scores: torch.Tensor | None = None  # (Q * (L + 1), n) <theta, c * phi>, on first use
        if self.num_queries * length * n * dimension <= FEATURE_TABLE_LIMIT:
            self._feature_table = self._compute_feature_table()  # (Q, L + 1, n, d)

    def _init_extra_parameters(self, generator: torch.Generator, dimension: int) -> None:
        """Hook for subclasses that draw more CPU parameters from the instance generator."""

    @property
    def ddmc(self) -> bool:
        """Exact DDMC on same-length pairs without an interior EOS."""
        return True

    def token_features(self, queries: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """``phi(x, tau, j) / c``, the unit-bounded feature of each candidate, ``(B, m, d)``.

        Args:
            queries: ``(B,)`` query indices.
            tokens: ``(B, m)`` candidate tokens.
            positions: ``(B,)`` 1-based positions.
        """
        rows = self._position_index(positions)  # (B,)
        if self._feature_table is not None:
            return self._feature_table[queries[:, None], rows[:, None], tokens]  # (B, m, d)
        return self._compute_token_features(queries, tokens, rows)

    def every_token_features(self, queries: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """:meth:`token_features` of every token at position ``lengths + 1``, ``(B, n, d)``.

        Args:
            queries: ``(B,)`` query indices.
            lengths: ``(B,)`` ``|y|`` in ``[0, L]`` (position L + 1, past the end, reads L).
        """
        if self._feature_table is not None:
            return self._feature_table[queries, lengths]  # (B, n, d); row L repeats row L - 1
        rows = lengths.clamp(min=0, max=self.max_length - 1)  # (B,) = _position_index(lengths + 1)
        return self._compute_token_features(queries, self.vocabulary.expand(queries.shape[0], -1), rows)

    def _compute_token_features(self, queries: torch.Tensor, tokens: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """``phi / c`` from the parameters for ``(B,)`` queries, ``(B, m)`` tokens, ``(B,)`` 0-based rows."""
        raw = (
            self.token_vectors[tokens]  # (B, m, d)
            + self.query_vectors[queries][:, None, :]  # (B, 1, d)
            + self.position_vectors[rows][:, None, :]  # (B, 1, d)
        )
        unit = raw / raw.norm(dim=-1, keepdim=True).clamp_min(1e-12)  # (B, m, d)
        return unit * self.token_gains[tokens][..., None]  # (B, m, d)

    def _compute_feature_table(self) -> torch.Tensor:
        """Every ``phi / c``, ``(Q, L + 1, n, d)``.

        Row ``j - 1`` holds position j; row L repeats row L - 1 (where candidates past the end
        are clamped to), so :meth:`every_token_features` reads it without clamping.
        """
        queries = torch.arange(self.num_queries, device=self.device)  # (Q,)
        tokens = torch.arange(self.vocab_size, device=self.device).expand(self.num_queries, -1)  # (Q, n)
        columns = [
            self._compute_token_features(queries, tokens, torch.full_like(queries, row))
            for row in range(self.max_length)
        ]  # L x (Q, n, d)
        columns.append(columns[-1])
        return torch.stack(columns, dim=1)

    def initial_carry(self, queries: torch.Tensor) -> torch.Tensor:
        """``e(x, empty) = 0``, ``(B, d)``."""
        return torch.zeros(queries.shape[0], self.embedding_dim, device=self.device, dtype=self.dtype)

    def append(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        last_tokens: torch.Tensor,
        tokens: torch.Tensor,
        positions: torch.Tensor,
    ) -> torch.Tensor:
        """``alpha * e(x, y) + phi(x, tau, |y| + 1)`` for each candidate, ``(B, m, d)``."""
        return self._next_carries(carry, last_tokens, tokens, self.token_features(queries, tokens, positions))

    def append_every_token(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        last_tokens: torch.Tensor,
        lengths: torch.Tensor,
    ) -> torch.Tensor:
        """:meth:`append` for every token at once (one row of the feature table), ``(B, n, d)``.

        With the feature table, one gather of the ``c * phi`` rows (:meth:`_scaled_rows`) and one in-place
        add of ``alpha * e(x, y)``: the float operations of :meth:`_next_carries` (a product each, then
        their sum), so the same values bit for bit, with one pass less over ``(B, n, d)``.
        """
        if self._carries_from_scaled_rows():
            rows = queries * (self.max_length + 1) + lengths  # (B,) table row (query, |y|); row L repeats L - 1
            return self._scaled_row_block(rows).add_((self.alpha * carry)[:, None, :])  # (B, n, d)
        return self._next_carries(carry, last_tokens, None, self.every_token_features(queries, lengths))

    def candidate_utilities(self, state: DecodingState) -> torch.Tensor:
        """``u(x, y:tau) = <theta, e(x, y:tau)>`` for every token tau, ``(B, n)`` (the oracle greedy's scores).

        With the feature table, the candidates' carries (:meth:`append_every_token`'s values) are
        gathered into a scratch reused from call to call and multiplied by ``theta`` in place, then
        summed per row: the row-wise product and sum of :meth:`utility_of_states` (the carry is the
        embedding), so the same scores bit for bit, without two fresh ``(B, n, d)`` tensors a call.
        """
        if not self._carries_from_scaled_rows():
            return super().candidate_utilities(state)
        batch = state.queries.shape[0]
        rows = state.queries * (self.max_length + 1) + state.lengths  # (B,) table row (query, |y|)
        carries = self._scaled_row_block(rows, self._scratch_rows(batch))  # (B, n, d) c * phi
        carries.add_((self.alpha * state.carry)[:, None, :])  # (B, n, d) alpha * e(x, y) + c * phi
        return carries.mul_(self.theta).sum(dim=-1)  # (B, n)

    def _carries_from_scaled_rows(self) -> bool:
        """Whether a candidate's carry is ``alpha * e(x, y) + (c * phi)``, ``c * phi`` read from the table."""
        return self._feature_table is not None

    def _scaled_row_block(self, rows: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """The ``c * phi`` of every token on the table rows ``rows`` ``(B,)``, ``(B, n, d)``: new, or in ``out``.

        Args:
            rows: ``(B,)`` rows of :meth:`_scaled_rows`.
            out: ``(B, n * d)`` of the table's dtype (a scratch from :meth:`_scratch_rows`), or None.
        """
        gathered = torch.index_select(self._scaled_rows(), 0, rows, out=out)  # (B, n * d)
        return gathered.view(rows.shape[0], self.vocab_size, -1)

    def _scratch_rows(self, batch: int) -> torch.Tensor:
        """A ``(B, n * d)`` scratch of the table's dtype, reused from call to call while B stays the same.

        A fresh tensor of that size per call costs its page faults again (the allocator returns large
        blocks to the system when they are freed), which is most of a pass over ``(B, n, d)``.
        """
        if self._gathered_rows is None or self._gathered_rows.shape[0] != batch:
            self._gathered_rows = torch.empty_like(self._scaled_rows()[:1]).expand(batch, -1).contiguous()
        return self._gathered_rows

    def _next_carries(
        self,
        carry: torch.Tensor,
        last_tokens: torch.Tensor,
        tokens: torch.Tensor | None,
        features: torch.Tensor,
    ) -> torch.Tensor:
        """Carries ``(B, m, d)`` from the candidates' ``features`` ``(B, m, d)`` (``phi / c``).

        Args:
            carry: ``(B, d)`` ``e(x, y)``.
            last_tokens: ``(B,)`` last token of ``x:y`` (unused here; the Markov family reads it).
            tokens: ``(B, m)`` the candidates, or None for every token of the vocabulary.
            features: ``(B, m, d)`` their token features.
        """
        return self.alpha * carry[:, None, :] + self.scale * features

    def host_candidate_carries(self, query: int, length: int, carry: np.ndarray) -> np.ndarray | None:
        """``alpha * e(x, y) + c phi(x, tau, |y| + 1)`` for every token in NumPy, ``(n, d)``, from the table.

        The float operations of :meth:`_next_carries` (two products, then their sum; ``c * phi`` is
        read from :meth:`host_carry_rows`) on the row :meth:`every_token_features` reads, so equal
        to :meth:`candidate_carries` bit for bit.
        None without the feature table or off the CPU.
        """
        carry_rows = self.host_carry_rows()
        if carry_rows is None:
            return None
        alpha, rows = carry_rows  # rows: (Q * (L + 1), n, d) the products c * phi, computed once
        return alpha * carry[None, :] + rows[query * (self.max_length + 1) + length]

    def host_carry_rows(self) -> tuple[float, np.ndarray] | None:
        """``(alpha, c * phi)`` with the rows ``(Q * (L + 1), n, d)`` in NumPy; None without the table or off the CPU.

        The rows are those :meth:`observed_candidate_embeddings` gathers (the products
        ``c * phi`` of :meth:`_next_carries`), so ``alpha * carry + rows[row, tau]`` is the
        candidate's carry bit for bit.
        """
        if self._feature_table is None or self.device.type != "cpu":
            return None
        if self._host_scaled_rows is None:
            rows = self._scaled_rows().numpy()  # (Q * (L + 1), n * d)
            self._host_scaled_rows = rows.reshape(rows.shape[0], self.vocab_size, -1)
        return self.alpha, self._host_scaled_rows

    def _scaled_rows(self) -> torch.Tensor:
        """``c * phi``, one row per (query, length): ``(Q * (L + 1), n * d)`` (built on first use)."""
        assert self._feature_table is not None
        if self._scaled_feature_rows is None:
            self._scaled_feature_rows = (self.scale * self._feature_table).flatten(0, 1).flatten(1)
        return self._scaled_feature_rows

    def candidate_embeddings(self, state: DecodingState, carries: torch.Tensor | None = None) -> torch.Tensor:
        """``e(x, y:tau)`` for every token tau, ``(B, n, d)``: the carries themselves."""
        return self.candidate_carries(state) if carries is None else carries

    def observed_candidate_embeddings(
        self, state: DecodingState, carries_out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The candidates' embeddings rounded to float32, ``(B, n, d)``, a new tensor.

        With the feature table, one gather of ``c * phi`` rows (tabulated on first use) and one
        in-place add of ``alpha * e(x, y)``: the same float operations as :meth:`_next_carries`
        (a product each, then their sum), so the values are equal, bit for bit, to
        :meth:`candidate_embeddings` rounded, with two fewer passes over ``(B, n, d)``.

        Args:
            state: the current state.
            carries_out: ``(B, n, d)`` of :attr:`dtype` or None; when given, it holds the
                candidates' carries (:meth:`candidate_carries`) afterwards.
        """
        if self._feature_table is None:
            return super().observed_candidate_embeddings(state, carries_out)
        scaled_rows = self._scaled_rows()  # (Q * (L + 1), n * d)
        batch = state.queries.shape[0]
        rows = state.queries * (self.max_length + 1) + state.lengths  # (B,) table row (query, |y|)
        carries_wanted = carries_out is not None
        if carries_out is None:  # only the float32 result is returned: the carries go to the scratch
            carries_out = self._scratch_rows(batch).view(batch, self.vocab_size, -1)
        gathered = torch.index_select(scaled_rows, 0, rows, out=carries_out.view(batch, -1))
        gathered = gathered.view(batch, self.vocab_size, -1)  # (B, n, d) c * phi
        shift = (self.alpha * state.carry)[:, None, :]  # (B, 1, d)
        if not carries_wanted and (self.device.type != "cpu" or torch.compiler.is_compiling()):
            # The sum computed in the carries' dtype and rounded as it is written (one kernel on a GPU: a pass less
            # over (B, n, d) of the carries' dtype, so the same values); on the CPU, eager, the sum would go to a
            # fresh temporary of the carries' dtype first, so there it is summed in the scratch
            embeddings = torch.empty(gathered.shape, dtype=torch.float32, device=gathered.device)
            return torch.add(gathered, shift, out=embeddings)
        return gathered.add_(shift).to(torch.float32)  # (B, n, d)

    def embedding_of_states(self, queries: torch.Tensor, carry: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The carry is the embedding itself, ``(N, d)``."""
        return carry

    def position_scores(self, queries: torch.Tensor) -> torch.Tensor:
        """``<theta, c phi(x, tau, j)>`` for every token and position, ``(B, n, L)``.

        With the feature table, ``c * phi`` is read from :meth:`_scaled_rows` (the same products, so
        the same scores bit for bit) instead of gathered and scaled. On the CPU one matrix-vector
        product scores every row of the table in place (:meth:`_row_scores`: each row's dot product
        alone, as in a gathered block's ``(m, d) @ (d,)``, checked bit for bit against it), and the
        queries' rows of scores are gathered: one pass over the table instead of three over a
        ``(B, n, d)`` block per position. Elsewhere each position's block is gathered and scored.
        """
        if self._feature_table is not None and self.device.type == "cpu":
            per_row = self._row_scores().view(self.num_queries, self.max_length + 1, self.vocab_size)  # (Q, L + 1, n)
            return per_row[queries, : self.max_length].transpose(1, 2)  # (B, n, L)
        if self._feature_table is not None:
            first_rows = queries * (self.max_length + 1)  # (B,) the table row of position 1
            scratch = self._scratch_rows(queries.shape[0])  # (B, n * d) each position's rows in turn
            columns = [self._scaled_row_block(first_rows + row, scratch) @ self.theta for row in range(self.max_length)]
            return torch.stack(columns, dim=2)  # (B, n, L)
        tokens = torch.arange(self.vocab_size, device=self.device).expand(queries.shape[0], -1)  # (B, n)
        columns = []
        for position in range(1, self.max_length + 1):
            positions = torch.full_like(queries, position)
            columns.append(self.scale * self.token_features(queries, tokens, positions) @ self.theta)  # (B, n)
        return torch.stack(columns, dim=2)  # (B, n, L)

    def _row_scores(self) -> torch.Tensor:
        """``<theta, c phi>`` of every row of :meth:`_scaled_rows` and token, ``(Q * (L + 1), n)`` (built on first use).

        One matrix-vector product over the table, shared by the exact optimum (:meth:`position_scores`)
        and the oracle greedy's screen (:meth:`_greedy_tokens`).
        """
        if self._scaled_row_scores is None:
            scores = self._scaled_rows().view(-1, self.embedding_dim) @ self.theta  # (Q * (L + 1) * n,)
            self._scaled_row_scores = scores.view(-1, self.vocab_size)
        return self._scaled_row_scores

    def _greedy_tokens(self, state: DecodingState) -> torch.Tensor:
        """:meth:`candidate_utilities`' allowed argmax per row, ``(B,)``, scoring only the tokens that can win.

        With the feature table, ``u(x, y:tau)`` is first estimated from the table's scores
        (:meth:`_row_scores`) as ``<theta, c phi> + <theta, alpha e(x, y)>``, whose distance to
        :meth:`candidate_utilities`' value is at most ``E = 4 (d + 4) u (|c| max_tau g_tau ||theta||
        + <|alpha e|, |theta|>)`` (``u`` the unit roundoff; ``||c phi|| <= |c| g_tau`` as ``phi`` is a
        unit vector times the token's gain, so ``<|c phi|, |theta|>`` is at most the first term; each
        of the two is within half of ``E`` of the exact sum, whatever the order of its additions,
        with a factor 2 to spare). A token whose estimate is more than ``2 E``
        below the best allowed estimate scores below that token, so it cannot be the argmax; the
        others (one, but for near-ties) are scored with :meth:`candidate_utilities`' own float
        operations (the carry's sum, the product by theta, the row's sum), so the argmax, ties to
        the lowest id included, is the same token, bit for bit, without a pass over ``(B, n, d)``.
        On the CPU only, where a row's sum was checked to be the same in any batch, and from
        :data:`GREEDY_SCREEN_MIN_ENTRIES` entries ``n d`` on (below, scoring every candidate is
        cheaper); elsewhere, and without the table, every candidate is scored.
        """
        screened = self.vocab_size * self.embedding_dim >= GREEDY_SCREEN_MIN_ENTRIES
        if not screened or not self._carries_from_scaled_rows() or self.device.type != "cpu":
            return super()._greedy_tokens(state)
        n, d = self.vocab_size, self.embedding_dim
        allowed = self.action_mask(state)  # (B, n)
        rows = state.queries * (self.max_length + 1) + state.lengths  # (B,) table row (query, |y|)
        shift = self.alpha * state.carry  # (B, d) candidate_utilities' alpha * e(x, y)
        absolute_theta = self.theta.abs()  # (d,)
        feature_bound = abs(self.scale) * self.token_gains.abs().max() * self.theta.norm()  # () >= <|c phi|, |theta|>
        magnitude = feature_bound + shift.abs() @ absolute_theta  # (B,)
        precision = torch.finfo(self.dtype)
        margin = 8.0 * (d + 4) * (precision.eps / 2) * magnitude + precision.tiny  # (B,) 2 E, and underflow's slack
        estimates = (self._row_scores()[rows] + (shift @ self.theta)[:, None]).masked_fill(~allowed, float("-inf"))
        contenders = allowed & (estimates >= (estimates.max(dim=1).values - margin)[:, None])  # (B, n)
        row_index, token_index = contenders.nonzero(as_tuple=True)  # (K,) each
        carries = torch.index_select(self._scaled_rows().view(-1, d), 0, rows[row_index] * n + token_index)  # (K, d)
        scores = carries.add_(shift[row_index]).mul_(self.theta).sum(dim=-1)  # (K,) candidate_utilities' values
        full = torch.full_like(estimates, float("-inf")).index_put_((row_index, token_index), scores)  # (B, n)
        return full.argmax(dim=1)

    def _exact_optimum(self, queries: torch.Tensor) -> DecodedResponses:
        """Dynamic program over the response length m (see the class docstring)."""
        scores = self.position_scores(queries)  # (B, n, L)
        eos = self.eos_token_id
        body = scores.clone()
        body[:, eos, :] = float("-inf")
        best_body, best_token = body.max(dim=1)  # (B, L) each
        lengths = [self.max_length] if self.fixed_length else range(1, self.max_length + 1)
        values = []
        for m in lengths:
            weights = torch.tensor(
                [self.alpha ** (m - j) for j in range(1, m)], device=self.device, dtype=self.dtype
            )  # (m - 1,)
            values.append((best_body[:, : m - 1] * weights).sum(1) + scores[:, eos, m - 1])  # (B,)
        stacked = torch.stack(values, dim=1)  # (B, |lengths|)
        best_value, best_index = stacked.max(dim=1)
        best_length = torch.tensor(list(lengths), device=self.device)[best_index]  # (B,)
        positions = torch.arange(self.max_length, device=self.device)[None, :]  # (1, L)
        responses = torch.where(positions < best_length[:, None] - 1, best_token, eos)  # (B, L)
        return DecodedResponses(best_value, responses)
