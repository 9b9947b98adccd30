"""Plays the exact optimum of every round (oracle): regret exactly 0, a sanity check."""

from __future__ import annotations

from tokenized_bandit_gym.agents.oracle_action import OracleAgent


class OracleOptimal(OracleAgent):
    """Emits the exact optimal response ``problem.optimal(x_t)`` token by token.

    Oracle baseline: it reads the hidden instance (``task.problem``) and the round's query
    index (``info["query_index"]``). Its regret is exactly 0 on every synthetic env, where the
    optimum is exact (dynamic program or enumeration); anything else is a bug in the env or the
    run loop.
    """

    name = "oracle_optimal"
    benchmark = "optimal"
