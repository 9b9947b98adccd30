"""k-Lookahead-EOFUL: EOFUL that commits blocks of k tokens (paper appendix B, Algorithm k-Lookahead-EOFUL)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import torch

from tokenized_bandit_gym.agents.candidates import candidate_index
from tokenized_bandit_gym.agents.eoful import beta_scale
from tokenized_bandit_gym.agents.linear_confidence import LinearConfidence, agent_confidence, check_ridge_arguments
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.validation import check_int
from tokenized_bandit_gym.task import Task


def lookahead_blocks(
    vocab_size: int,
    eos_token_id: int,
    max_length: int,
    fixed_length: bool,
    length: int,
    k: int,
) -> list[tuple[int, ...]]:
    """Every allowed continuation ``z`` of a response of ``length`` tokens, with ``|z| = k`` up to EOS.

    Blocks have ``min(k, L - length)`` tokens, with tokens after the first EOS dropped (they are
    ignored, paper Assumption 1), so a block may be shorter when it ends with EOS. A non-EOS token
    is allowed at positions ``< L`` and EOS at any position (only at ``L`` when ``fixed_length``).
    Ordered lexicographically by token id, so ties go to the lowest ids as in EOFUL.

    Returns:
        The blocks, as tuples of token ids (distinct).
    """
    width = min(k, max_length - length)
    blocks: list[tuple[int, ...]] = []
    seen: set[tuple[int, ...]] = set()
    for sequence in itertools.product(range(vocab_size), repeat=width):
        block = sequence[: sequence.index(eos_token_id) + 1] if eos_token_id in sequence else sequence
        if block in seen:
            continue
        allowed = True
        for offset, token in enumerate(block):
            position = length + offset + 1  # 1-based position in the response
            if token == eos_token_id:
                allowed = not fixed_length or position == max_length
            else:
                allowed = position < max_length
            if not allowed:
                break
        if allowed:
            seen.add(block)
            blocks.append(block)
    return blocks


class LookaheadEOFUL:
    """EOFUL whose decoding step maximises the optimistic utility over k-token continuations.

    At each decision point with response ``y`` it computes ``z* = argmax_{|z| = k, v in C_t}
    <v, e(x_t, y:z)>`` over every allowed block (see :func:`lookahead_blocks`), scoring all of
    them with one call of the embedding oracle ``task.problem.embed`` (the TLB's public query
    access to ``e``) and one UCB matrix product, then emits ``z*`` one token per :meth:`act`
    call. The confidence set, ``beta_t`` and updates are EOFUL's (eq. update-theta,
    update-c). k = 1 is EOFUL. The number of blocks grows like ``n^k``; construction refuses
    more than ``max_blocks``.

    Needs the round's query index (``info["query_index"]``, which every env info carries) and a
    problem with the embedding oracle (TLB).

    On the CPU, where the family's carry recursion is a table
    (:meth:`~tokenized_bandit_gym.core.TokenizedProblem.host_carry_rows`: the discounted TLB), the
    blocks' embeddings follow that recursion in NumPy (the oracle's own float operations, so the
    same values) from ``e(x, y)``, which is the chosen block's embedding of the previous decision,
    and the scores are :meth:`LinearConfidence.ucb_host`'s: no torch call per decision.

    Args:
        k: lookahead depth (>= 1).
        beta: ``"theory"`` or a number multiplying ``sqrt(beta_t)``.
        lambda_: ridge parameter.
        delta: failure probability in ``beta_t``.
        sigma: noise scale in ``beta_t``.
        refactor_every: exact refactorisation period of ``Sigma^-1``.
        max_blocks: refuse tasks with more blocks per decision than this.
    """

    name = "lookahead_eoful"

    def __init__(
        self,
        k: int = 2,
        beta: str | float = "theory",
        lambda_: float = 1.0,
        delta: float = 0.05,
        sigma: float = 0.1,
        refactor_every: int = 1000,
        max_blocks: int = 100_000,
    ) -> None:
        self.k = check_int("k", k, minimum=1)
        self.beta_scale = beta_scale(beta)
        self.lambda_, self.delta, self.sigma, self.refactor_every = check_ridge_arguments(
            lambda_, delta, sigma, refactor_every
        )
        self.max_blocks = check_int("max_blocks", max_blocks, minimum=1)
        self.confidence: LinearConfidence | None = None
        self._problem: LinearTokenizedProblem | None = None
        self._blocks: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._host_blocks: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._carry_rows: tuple[float, np.ndarray] | None = None  # (alpha, (Q * (L + 1), n, d)) on the host path
        self._block_end: tuple[int, int, np.ndarray] | None = None  # (query, |y:z*|, e(x, y:z*)) of the last decision
        self._pending: list[int] = []

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Start from ``Sigma_1 = lambda I`` (deterministic; seed unused)."""
        problem = task.problem
        if not isinstance(problem, LinearTokenizedProblem):
            raise ValueError(
                f"LookaheadEOFUL needs a TLB problem with an embedding oracle, got {type(problem).__name__}"
            )
        width = min(self.k, task.max_length)
        count = (task.vocab_size) ** width
        if count > self.max_blocks:
            raise ValueError(
                f"k={self.k} gives up to {count} blocks per decision, more than max_blocks={self.max_blocks}"
            )
        self._problem = problem
        self.confidence = agent_confidence(self, problem.embedding_dim, task.max_length, problem.device)
        self._blocks = {}
        self._host_blocks = {}
        self._carry_rows = problem.host_carry_rows() if self.confidence.on_host else None
        self._block_end = None
        self._pending = []

    def _blocks_at(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(N, w)`` blocks padded with EOS and ``(N,)`` their lengths, for a response of ``length`` tokens."""
        if length not in self._blocks:
            problem = self._problem
            if problem is None:
                raise ValueError("LookaheadEOFUL used before reset(task)")
            blocks = lookahead_blocks(
                problem.vocab_size, problem.eos_token_id, problem.max_length, problem.fixed_length, length, self.k
            )
            width = max(len(block) for block in blocks)
            padded = [list(block) + [problem.eos_token_id] * (width - len(block)) for block in blocks]
            self._blocks[length] = (
                torch.tensor(padded, dtype=torch.int64, device=problem.device),  # (N, w)
                torch.tensor([len(block) for block in blocks], dtype=torch.int64, device=problem.device),  # (N,)
            )
        return self._blocks[length]

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The next token of the committed block, choosing a new block when the last one is spent."""
        if self.confidence is None or self._problem is None:
            raise ValueError("LookaheadEOFUL.act() called before reset(task)")
        if not self._pending:
            if "query_index" not in info:
                raise ValueError("LookaheadEOFUL needs info['query_index'] to query the embedding oracle")
            self._pending = self._best_block(observation, int(info["query_index"]))
        return candidate_index(observation, self._pending.pop(0))

    def _best_block(self, observation: dict[str, Any], query_index: int) -> list[int]:
        """``z*``: the allowed block with the highest UCB score of ``e(x, y:z)``."""
        problem, confidence = self._problem, self.confidence
        if problem is None or confidence is None:
            raise ValueError("LookaheadEOFUL used before reset(task)")
        length = int(observation["length"])
        if self._carry_rows is not None:
            return self._best_block_on_host(observation, query_index, length, *self._carry_rows)
        blocks, block_lengths = self._blocks_at(length)  # (N, w), (N,)
        count = blocks.shape[0]
        prefix = torch.as_tensor(np.asarray(observation["response"])[:length], device=problem.device)  # (m,)
        responses = torch.cat([prefix.expand(count, -1), blocks], dim=1)  # (N, m + w)
        queries = torch.full((count,), query_index, dtype=torch.int64, device=problem.device)  # (N,)
        embeddings = problem.embed(queries, responses, length + block_lengths)  # (N, d)
        scores = confidence.ucb(embeddings, self.beta_scale)  # (N,)
        best = int(scores.argmax())
        return blocks[best, : int(block_lengths[best])].tolist()

    def _best_block_on_host(
        self, observation: dict[str, Any], query_index: int, length: int, alpha: float, carry_rows: np.ndarray
    ) -> list[int]:
        """:meth:`_best_block` in NumPy from the carry table ``carry_rows`` ``(Q * (L + 1), n, d)``.

        ``e(x, y:z) = alpha^|z| e(x, y) + ...``: one ``alpha * e + rows[x, |y| + i, z_i]`` per token
        of the block, as the oracle replays it (blocks ended by EOS keep their embedding after it).
        """
        confidence = self.confidence
        assert confidence is not None and self._problem is not None
        blocks, block_lengths = self._host_blocks_at(length)  # (N, w), (N,)
        stride = self._problem.max_length + 1
        embedding = self._prefix_embedding(observation, query_index, length, alpha, carry_rows, stride)  # (d,)
        embeddings = np.broadcast_to(embedding, (blocks.shape[0], embedding.shape[0]))  # (N, d) e(x, y)
        for offset in range(blocks.shape[1]):
            extended = alpha * embeddings + carry_rows[query_index * stride + length + offset][blocks[:, offset]]
            embeddings = extended if offset == 0 else np.where((offset < block_lengths)[:, None], extended, embeddings)
        best = int(confidence.ucb_host(embeddings, self.beta_scale).argmax())  # first maximum, as torch's
        self._block_end = (query_index, length + int(block_lengths[best]), embeddings[best])
        return blocks[best, : block_lengths[best]].tolist()

    def _prefix_embedding(
        self,
        observation: dict[str, Any],
        query_index: int,
        length: int,
        alpha: float,
        carry_rows: np.ndarray,
        stride: int,
    ) -> np.ndarray:
        """``e(x, y)`` ``(d,)``: zero at the round start, else the last decision's block end (replayed if it is not)."""
        if length == 0:
            return np.zeros(carry_rows.shape[2], dtype=carry_rows.dtype)
        if self._block_end is not None and self._block_end[:2] == (query_index, length):
            return self._block_end[2]
        embedding = np.zeros(carry_rows.shape[2], dtype=carry_rows.dtype)  # (d,) not this agent's prefix: replay it
        for position, token in enumerate(np.asarray(observation["response"])[:length].tolist()):
            embedding = alpha * embedding + carry_rows[query_index * stride + position, token]
        return embedding

    def _host_blocks_at(self, length: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_blocks_at` as NumPy arrays: ``(N, w)`` blocks padded with EOS and ``(N,)`` their lengths."""
        if length not in self._host_blocks:
            blocks, block_lengths = self._blocks_at(length)
            self._host_blocks[length] = (blocks.cpu().numpy(), block_lengths.cpu().numpy())
        return self._host_blocks[length]

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Learn from ``(e(x_t, y_t), r_t)`` as EOFUL does."""
        if self.confidence is None or self._problem is None:
            raise ValueError("LookaheadEOFUL.update() called before reset(task)")
        if "response_embedding" in info:
            response = info["response_embedding"]
        else:
            played = np.asarray(info["response"])[: int(info["response_length"])]  # (m,) without the EOS padding
            tokens = torch.as_tensor(played, device=self._problem.device)[None]  # (1, m)
            query = torch.tensor([int(info["query_index"])], device=self._problem.device)
            response = self._problem.embed(query, tokens)[0]  # (d,)
        self.confidence.update(response, float(reward))
        self._pending = []
        self._block_end = None
