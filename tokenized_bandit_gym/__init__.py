"""tokenized-bandit-gym: Gymnasium environments, agents and leaderboards for tokenized bandits.

Implements "Tokenized Bandit for LLM Decoding and Alignment" (ICML 2025). Importing the package
registers its environment ids with Gymnasium; heavy modules (torch, transformers) load only when
an environment is made.
"""

from tokenized_bandit_gym.registration import register_envs, registered_ids
from tokenized_bandit_gym.threads import register_fork_hook

__version__ = "0.1.0"

register_envs()
register_fork_hook()  # forked workers (AsyncVectorEnv, SubprocVecEnv) never wait on the parent's OpenMP pool

__all__ = ["__version__", "register_envs", "registered_ids"]
