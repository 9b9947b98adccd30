"""Load a Hugging Face causal LM and its tokenizer by name or local path (offline-safe)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import torch

DEFAULT_MODEL = str(Path(__file__).resolve().parent.parent / "data" / "models" / "stories260K")
"""The shipped default: the real pretrained 260K-parameter Llama ``stories260K`` (MIT)."""

_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """Return the torch dtype named by ``dtype`` (``"float32"``, ``"bfloat16"``, ... or a dtype)."""
    if isinstance(dtype, torch.dtype) and dtype in _DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in _DTYPES:
        return _DTYPES[dtype]
    raise ValueError(f"dtype must be one of {tuple(_DTYPES)}, got {dtype!r}")


def load_language_model(
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    dtype: str | torch.dtype = "float32",
    device: str | torch.device = "cpu",
    trust_remote_code: bool = False,
    attn_implementation: str | None = "sdpa",
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` in eval mode, weights from safetensors only.

    Args:
        model: a Hugging Face hub name (needs network or a warm cache) or a local directory.
        dtype: weight dtype.
        device: torch device.
        trust_remote_code: run code shipped with the model; off unless the user turns it on.
        attn_implementation: ``"sdpa"``, ``"eager"`` or None (transformers' choice).

    Loaded models are cached (four most recent argument tuples) and shared: they are frozen.

    Raises:
        ValueError: the model or tokenizer cannot be loaded (unknown name or path), or the
            tokenizer has no EOS token.
        TypeError: ``trust_remote_code`` is not a bool.
    """
    if not isinstance(trust_remote_code, bool):
        raise TypeError(f"trust_remote_code must be a bool, got {trust_remote_code!r}")
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"model must be a hub name or a local path, got {model!r}")

    torch_dtype = resolve_dtype(dtype)
    name = os.fspath(model)
    return _load(name, torch_dtype, str(torch.device(device)), trust_remote_code, attn_implementation)


@functools.lru_cache(maxsize=4)
def _load(
    name: str, torch_dtype: torch.dtype, device: str, trust_remote_code: bool, attn_implementation: str | None
) -> tuple[Any, Any]:
    """Load once per argument tuple: the frozen model is shared by every env built on it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    looks_local = name.startswith((".", "/", "~")) or os.sep in name and not _looks_like_hub_id(name)
    if looks_local and not Path(name).expanduser().is_dir():
        raise ValueError(f"model path {name!r} does not exist or is not a directory")
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
        language_model = AutoModelForCausalLM.from_pretrained(
            name,
            dtype=torch_dtype,
            trust_remote_code=trust_remote_code,
            use_safetensors=True,
            attn_implementation=attn_implementation,
        )
    except (OSError, ValueError) as error:
        raise ValueError(f"could not load the causal LM {name!r}: {error}") from error
    if tokenizer.eos_token_id is None:
        raise ValueError(f"the tokenizer of {name!r} has no EOS token: a tokenized bandit needs one to end responses")
    language_model.to(device)
    language_model.eval()
    language_model.requires_grad_(False)
    return language_model, tokenizer


def _looks_like_hub_id(name: str) -> bool:
    """Whether ``name`` has the ``owner/model`` form of a hub id (and is no existing path)."""
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not Path(name).exists()
