"""Greedy decoding with the true utility: the paper's "Optimal greedy" benchmark (oracle)."""

from __future__ import annotations

from tokenized_bandit_gym.agents.oracle_action import OracleAgent


class OracleGreedy(OracleAgent):
    """At each position, the allowed candidate with the highest true ``u(x, y:tau)``.

    Oracle baseline: it reads the hidden instance (``task.problem``) and the round's query index
    (``info["query_index"]``), and emits ``problem.oracle_greedy(x_t)`` token by token: the greedy
    decode the env itself uses as the ``oracle_greedy_utility`` benchmark (ties to the lowest
    candidate), computed once per query. Its regret against the exact optimum is the greedy gap,
    the floor under any greedy-based agent (zero on exact-DDMC families with
    ``fixed_length=True``, Theorem 5.1).
    """

    name = "oracle_greedy"
    feedback_channels = ("scalar", "pairwise")  # it does not learn: any channel
    benchmark = "oracle_greedy"
