"""Evaluation: the online run loop, and (later) leaderboard specs, stores, statistics, plots."""

from tokenized_bandit_gym.evaluation.online_result import OnlineResult
from tokenized_bandit_gym.evaluation.run_online import run_online
from tokenized_bandit_gym.evaluation.run_online_vector import run_online_vector

__all__ = ["OnlineResult", "run_online", "run_online_vector"]
