"""Registered environment ids. Entry points are strings, so registering imports nothing heavy.

A change to rewards, noise or dynamics bumps the ``-vN`` suffix and adds a Version History line
to the env's docstring, so leaderboard numbers stay comparable.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

_TLB = "tokenized_bandit_gym.envs.tokenized_linear_bandit_env:TokenizedLinearBanditEnv"
_TMAB = "tokenized_bandit_gym.envs.tokenized_multi_armed_bandit_env:TokenizedMultiArmedBanditEnv"
_ALIGNMENT = "tokenized_bandit_gym.envs.tokenized_alignment_env:TokenizedAlignmentEnv"
_DECODING = "tokenized_bandit_gym.envs.tokenized_decoding_env:TokenizedDecodingEnv"

# single-env entry point -> its native vector env (``gym.make_vec`` uses it by default)
VECTOR_ENTRY_POINTS: dict[str, str] = {
    _TLB: "tokenized_bandit_gym.envs.tokenized_linear_bandit_vector_env:TokenizedLinearBanditVectorEnv",
    _TMAB: "tokenized_bandit_gym.envs.tokenized_multi_armed_bandit_vector_env:TokenizedMultiArmedBanditVectorEnv",
    _ALIGNMENT: "tokenized_bandit_gym.envs.tokenized_alignment_vector_env:TokenizedAlignmentVectorEnv",
    _DECODING: "tokenized_bandit_gym.envs.tokenized_decoding_vector_env:TokenizedDecodingVectorEnv",
}

# id -> (entry point, default kwargs)
SYNTHETIC_ENVS: dict[str, tuple[str, dict[str, object]]] = {
    "TokenizedLinearBandit-v0": (_TLB, {}),
    "TokenizedLinearBanditMeanPool-v0": (_TLB, {"family": "meanpool"}),
    "TokenizedLinearBanditMarkov-v0": (_TLB, {"family": "markov", "ddmc_violation": 1.0}),
    "TokenizedLinearBanditNeedle-v0": (
        _TLB,
        {"family": "needle", "vocab_size": 3, "max_length": 6, "embedding_dim": 2},
    ),
    "TokenizedMultiArmedBandit-v0": (_TMAB, {}),
    "TokenizedMultiArmedBanditRandomTable-v0": (
        _TMAB,
        {"family": "random_table", "vocab_size": 4, "max_length": 5},
    ),
}

# LLM-backed ids (transformers is imported only when one is made); default model: shipped stories260K.
LLM_ENVS: dict[str, tuple[str, dict[str, object]]] = {
    "TokenizedAlignment-v0": (_ALIGNMENT, {}),
    "TokenizedDecoding-v0": (_DECODING, {}),
}


def register_envs() -> None:
    """Register every id once (safe to call again)."""
    for env_id, (entry_point, kwargs) in {**SYNTHETIC_ENVS, **LLM_ENVS}.items():
        if env_id not in registry:
            register(
                id=env_id,
                entry_point=entry_point,
                vector_entry_point=VECTOR_ENTRY_POINTS.get(entry_point),
                kwargs=dict(kwargs),
            )


def registered_ids() -> list[str]:
    """Every id this package registers."""
    return [env_id for env_id in registry if env_id in SYNTHETIC_ENVS or env_id in LLM_ENVS]
