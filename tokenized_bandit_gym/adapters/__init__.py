"""Adapters to other frameworks: Stable-Baselines3 glue, a PettingZoo arena and its SuperSuit wrapper.

Modules are imported on demand (``from tokenized_bandit_gym.adapters.pettingzoo_arena import ...``),
so importing this package loads neither Stable-Baselines3 nor PettingZoo.
"""
