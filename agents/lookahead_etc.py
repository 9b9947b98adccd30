"""k-LookaheadETC: explore-then-commit over k-token blocks per level (paper appendix B)."""

from __future__ import annotations

import itertools
from typing import Any

from tokenized_bandit_gym.agents.candidates import allowed_tokens
from tokenized_bandit_gym.agents.explore_then_commit import LevelByLevelETC, commit_block
from tokenized_bandit_gym.core.validation import check_int


class LookaheadETC(LevelByLevelETC):
    """k-LookaheadETC (paper appendix B, Algorithm "k-LookaheadETC"), for k-DDMC utilities.

    Like :class:`~tokenized_bandit_gym.agents.greedy_etc.GreedyETC`, level by level from ``y = ()``: if ``|y| = L - 1``
    the response is ``y:EOS``; otherwise every k-token block ``z`` is submitted as ``y:z:EOS``
    (or as ``y:z`` when ``z`` ends with EOS) for ``N`` consecutive rounds, and the agent commits
    to the best average: ``y <- y:z*``, stopping if ``z*`` holds EOS. After exploration the
    committed ``y`` is submitted forever. ``k = 1`` is GreedyETC, round for round.

    Choices where the pseudocode is loose (documented, and tested):

    * The algorithm's loop reads "submit ``y:t:EOS``"; the block version ``y:z:EOS`` is meant.
    * Blocks with an EOS inside name the same response as their prefix up to the first EOS
      (tokens after EOS are ignored, paper Assumption 1), so each distinct response is
      explored once: the arms are ``y:w:EOS`` for every EOS-free ``w`` with ``|w| <= k``,
      ``sum_{j <= k} (n - 1)^j`` of them, ordered as the blocks ``w:EOS...EOS`` are
      lexicographically in candidate order. Ties go to the first.
    * Near the end the block shrinks to ``k' = min(k, L - 1 - |y|)`` so that ``y:z:EOS`` fits
      in L tokens.
    * The block alphabet is the allowed candidates observed at ``y``, so the candidate set must
      not depend on the prefix (synthetic envs; not LLM top-k candidates).
    * ``fixed_length=True`` forbids early EOS; as in GreedyETC, :meth:`reset` raises unless a
      ``completion_token`` pads submissions to length L (a heuristic outside the analysis).

    Exploration per level takes ``N sum_{j <= k'} (n - 1)^j`` rounds, so k trades exploration
    cost (exponential in k) for the weaker k-DDMC assumption.

    Args:
        lookahead: k >= 1, the block length.
        exploration_rounds: N; None means ``T^(2/3) (log T)^(1/3)`` of the horizon, rounded up.
        completion_token: padding token under ``fixed_length`` (not EOS).
    """

    name = "lookahead_etc"
    explores = "stopped sequences y:z:EOS (paper appendix B)"
    block_notation = "y:z"
    level_arms: list[tuple[int, ...]] | None
    """The level's blocks (see :meth:`_block_arms`), None until the level is observed."""

    def __init__(
        self,
        lookahead: int = 2,
        exploration_rounds: int | None = None,
        completion_token: int | None = None,
    ) -> None:
        self.lookahead = check_int("lookahead", lookahead, minimum=1)
        super().__init__(exploration_rounds, completion_token)

    def _explored_token(self, observation: dict[str, Any], position: int) -> int | None:
        """The explored block's token at ``position`` (the level's blocks built on its first visit), else None."""
        if self.committed:
            return None
        if self.level_arms is None:
            self.level_arms = self._block_arms(allowed_tokens(observation))
            self._new_level(len(self.level_arms))
        block = self.level_arms[self._arm]
        offset = position - len(self.prefix)
        return block[offset] if offset < len(block) else None

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Credit the reward to the block explored this round; commit once all had N rounds."""
        task = self._require_task()
        if self.committed or self.level_arms is None:
            return
        if not self._credit_explored_arm(reward, len(self.level_arms)):
            return
        best = self.level_arms[self._best_arm()]  # ties: first block
        self.committed: bool = commit_block(self.prefix, best, task)
        self._start_level()

    def _block_arms(self, alphabet: list[int]) -> list[tuple[int, ...]]:
        """Distinct blocks at this level: EOS-free ``w`` with ``|w| = k'``, or ``w:EOS`` with ``|w| < k'``.

        Enumerated as the length-``k'`` blocks over ``alphabet`` in lexicographic candidate
        order, keeping those with only EOS after their first EOS, cut after that EOS.
        """
        task = self._require_task()
        eos = task.eos_token_id
        width = min(self.lookahead, task.max_length - 1 - len(self.prefix))
        arms = []
        for block in itertools.product(alphabet, repeat=width):
            if eos in block:
                first = block.index(eos)
                if any(token != eos for token in block[first:]):
                    continue
                block = block[: first + 1]
            arms.append(tuple(int(token) for token in block))
        return arms

    def _start_level(self) -> None:
        """Forget the level's blocks and statistics; its blocks are built at the next visit of ``y``."""
        self.level_arms = None
        super()._start_level()
