"""Evaluation: the online run loop, and (later) leaderboard specs, stores, statistics, plots."""

from tokenized_bandit_gym.evaluation.online_result import OnlineResult
from tokenized_bandit_gym.evaluation.run_online import run_online

__all__ = ["OnlineResult", "run_online"]
