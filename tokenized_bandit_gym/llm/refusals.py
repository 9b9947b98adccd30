"""Why a causal LM cannot run on one forward and candidate batching, in words that name the feature.

Every refusal of the LLM core names the model type and what about the model is not supported, and
what to do instead where there is something: a user reads "uses ALiBi position biases ... use
candidate_batching='expand'", not the ``ValueError: too many values to unpack`` that the model's
code raised. :func:`known_refusal` names what is known before a path is tried;
:func:`described_failure` turns an error the model's own code raised while the path was probed
into such a sentence.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from tokenized_bandit_gym.llm.transformers_decoder_forward import decoder_of

REFUSAL_ERRORS = (RuntimeError, ValueError, TypeError, AttributeError, LookupError, NotImplementedError, AssertionError)
"""What a model's own code raises when the core's calls are not what it supports."""


def model_type_of(model: Any) -> str:
    """The text config's ``model_type`` (the class name when there is none)."""
    config = model.config.get_text_config()
    return str(getattr(config, "model_type", type(model).__name__))


def uses_alibi(model: Any) -> bool:
    """Whether the model adds ALiBi position biases (Bloom, MPT, Falcon with ``alibi=True``)."""
    config = model.config.get_text_config()
    attention_config = getattr(config, "attn_config", None)
    return (
        getattr(config, "model_type", None) == "bloom"
        or getattr(config, "alibi", False) is True
        or getattr(attention_config, "alibi", False) is True
    )


def known_refusal(model: Any, forward: str, batching: str | None) -> str | None:
    """Why ``model`` cannot run the ``forward`` with the ``batching`` of candidates, known before a probe; else None.

    Args:
        model: a loaded causal LM.
        forward: ``"native"`` or ``"transformers"``.
        batching: ``"mask"``, ``"expand"``, or None when no candidate is scored (no embeddings).
    """
    model_type = model_type_of(model)
    config = model.config.get_text_config()
    loops = {name: value for name, value in vars(config).items() if "loop" in name and isinstance(value, int)}
    if any(value > 1 for value in loops.values()):
        return (
            f"model_type={model_type!r} runs its layers in loops ({loops}) that keep cache entries per loop, "
            "which the envs' cache of one key and value per layer does not hold"
        )
    decoder, parameters = _decoder_parameters(model)
    if forward == "transformers" and parameters and "attention_mask" not in parameters:
        return (
            f"model_type={model_type!r} takes no attention mask (its {type(decoder).__name__}.forward has "
            "no attention_mask argument, as in recurrent models such as xLSTM): the envs batch rows of different "
            "lengths with padding and score candidates under masks"
        )
    if batching == "mask" and uses_alibi(model):
        return (
            f"model_type={model_type!r} adds ALiBi position biases that its forward builds from a 0/1 "
            "attention mask, so it cannot take the 4-D mask of candidate_batching='mask'; "
            "candidate_batching='expand' (or 'auto', which picks it) runs it"
        )
    return None


def described_failure(model: Any, error: BaseException, stage: str) -> str:
    """A refusal sentence for ``error``, raised by the model's own code at ``stage`` of the probe.

    Errors the core raises itself (ValueError naming ``model_type=``) are kept as they are; an
    error of the model's code is named by what the model lacks where that is recognisable, else
    reported as the model's forward failing on a KV cache step with the exception's own words.
    """
    model_type = model_type_of(model)
    message = str(error)
    if isinstance(error, ValueError) and "model_type=" in message:
        return message
    if "unpack" in message and uses_alibi(model):
        return known_refusal(model, "transformers", "mask") or message
    if "'mask' candidate batching" in stage:
        return (
            f"model_type={model_type!r} cannot take the k candidates as k new tokens at one position under a 4-D "
            f"attention mask (the model's own message: {message}); candidate_batching='expand' (or 'auto', which "
            "tries it) scores them as one-token rows"
        )
    return (
        f"model_type={model_type!r}: the model's own forward fails on {stage} (its code raises "
        f"{type(error).__name__}: {message}); this architecture is not supported by the LLM envs' KV-cache steps"
    )


def mismatch_reason(model: Any, failure: str) -> str:
    """``failure`` (a probe's numeric difference) with what about the model it points to."""
    decoder, parameters = _decoder_parameters(model)
    if "left-padded" in failure and parameters and "position_ids" not in parameters:
        return (
            f"{failure}: its {type(decoder).__name__}.forward takes no position_ids and counts positions from the "
            "batch's first column, so a left-padded row (how the envs batch queries of different lengths) is shifted"
        )
    return (
        f"{failure}: its forward does not give the same numbers over a KV cache, batched and masked as the envs run "
        "it (an attention or position feature that the forward does not take from the envs' masks and positions)"
    )


def _decoder_parameters(model: Any) -> tuple[Any, set[str]]:
    """The decoder stack and the names of its forward's named parameters (empty when they cannot be read).

    A wrapper whose forward only passes ``*args, **kwargs`` on (BART's ``DecoderWrapper``) is
    looked through to its ``decoder``.
    """
    decoder = decoder_of(model)
    for _ in range(2):
        try:
            signature = inspect.signature(type(decoder).forward)
        except (TypeError, ValueError):
            return decoder, set()
        named = {
            name
            for name, parameter in signature.parameters.items()
            if name != "self" and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
        }
        if named or not isinstance(getattr(decoder, "decoder", None), torch.nn.Module):
            return decoder, named
        decoder = decoder.decoder
    return decoder, set()
