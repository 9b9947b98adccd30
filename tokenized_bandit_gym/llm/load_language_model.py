"""Load a Hugging Face causal LM and its tokenizer by name or local path (offline-safe).

Importing this module imports no torch (``tbg ddmc --help`` reads :data:`DEFAULT_MODEL_NAME` from it); loading does.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tokenized_bandit_gym.llm.packaged_models import packaged_model, packaged_model_directory

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

DEFAULT_MODEL = str(Path(__file__).resolve().parent.parent / "data" / "models" / "stories260K")
"""The shipped default: the real pretrained 260K-parameter Llama ``stories260K`` (MIT)."""

DEFAULT_MODEL_NAME = "stories260K"
"""The shipped model's name, which :func:`load_language_model` accepts in place of its path."""

DTYPE_NAMES: tuple[str, ...] = ("float32", "float64", "float16", "bfloat16")
"""The model dtypes the loader accepts, by name (or as the torch dtypes of these names)."""


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """Return the torch dtype named by ``dtype`` (``"float32"``, ``"bfloat16"``, ... or a dtype)."""
    import torch

    dtypes = {name: getattr(torch, name) for name in DTYPE_NAMES}
    if isinstance(dtype, torch.dtype) and dtype in dtypes.values():
        return dtype
    if isinstance(dtype, str) and dtype in dtypes:
        return dtypes[dtype]
    raise ValueError(f"dtype must be one of {DTYPE_NAMES}, got {dtype!r}")


def resolve_model_source(model: str | os.PathLike[str]) -> str:
    """What :func:`load_language_model` loads for ``model``: the shipped model's directory for ``"stories260K"``.

    A packaged model's name (``"smollm2-135m-instruct"``, see
    :mod:`~tokenized_bandit_gym.llm.packaged_models`) gives its converted safetensors directory,
    converting its GGUF on first use. Any other name or path is returned as it is (a local
    directory, or a hub name looked up in the cache). A local path of the same name wins over both.

    Raises:
        ValueError: a packaged model that is not installed (the message names the pip commands).
    """
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"model must be a hub name or a local path, got {model!r}")
    name = os.fspath(model)
    if Path(name).exists():
        return name
    if name == DEFAULT_MODEL_NAME:
        return DEFAULT_MODEL
    packaged = packaged_model(name)
    return str(packaged_model_directory(packaged)) if packaged is not None else name


def load_language_model(
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    dtype: str | torch.dtype = "float32",
    device: str | torch.device = "cpu",
    trust_remote_code: bool = False,
    attn_implementation: str = "auto",
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``(model, tokenizer)`` in eval mode: the one model loader of the package (envs and ``tbg ddmc``).

    Rules: weights from safetensors only (pickled ``pytorch_model.bin`` files are refused, since
    unpickling runs code); no code shipped with the model unless ``trust_remote_code=True``; a
    local directory, ``"stories260K"`` (the shipped model), a packaged model such as
    ``"smollm2-135m-instruct"`` (converted once from its installed GGUF) or a hub name. A hub name not in the
    Hugging Face cache while offline (``HF_HUB_OFFLINE=1``, or the hub unreachable within 3 s) is
    refused at once, before transformers spends half a minute retrying the network.

    Args:
        model: a local directory, ``"stories260K"``, a packaged model name or a Hugging Face hub name.
        dtype: weight dtype.
        device: torch device.
        trust_remote_code: run code shipped with the model; off unless the user turns it on.
        attn_implementation: ``"auto"`` (SDPA where the model supports it and needs nothing SDPA
            cannot do, such as Gemma-2's attention softcapping; eager otherwise), ``"sdpa"``,
            ``"eager"`` or another transformers kernel name.

    Loaded models are cached (four most recent argument tuples) and shared: they are frozen.

    Raises:
        ValueError: the model or tokenizer cannot be loaded (unknown name or path, no safetensors
            weights, offline and not cached), or the tokenizer has no EOS token.
        TypeError: ``trust_remote_code`` is not a bool, or ``model`` / ``attn_implementation`` not strings.
    """
    if not isinstance(trust_remote_code, bool):
        raise TypeError(f"trust_remote_code must be a bool, got {trust_remote_code!r}")
    if not isinstance(attn_implementation, str):
        raise TypeError(f"attn_implementation must be a string such as 'auto', got {attn_implementation!r}")
    from tokenized_bandit_gym.core.validation import check_device

    name = resolve_model_source(model)
    torch_dtype = resolve_dtype(dtype)
    return _load(name, torch_dtype, str(check_device(device)), trust_remote_code, attn_implementation)


@functools.lru_cache(maxsize=4)
def _load(
    name: str, torch_dtype: torch.dtype, device: str, trust_remote_code: bool, attn_implementation: str
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load once per argument tuple: the frozen model is shared by every env built on it."""
    offline = _check_source(name)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    options = {"trust_remote_code": trust_remote_code, "local_files_only": offline}
    try:
        config = AutoConfig.from_pretrained(name, **options)
        kernel = None if attn_implementation == "auto" else attn_implementation  # None: SDPA where supported
        if attn_implementation == "auto" and getattr(config.get_text_config(), "attn_logit_softcapping", None):
            kernel = "eager"  # SDPA does not apply attention softcapping
        tokenizer = AutoTokenizer.from_pretrained(name, **options)
        with _quiet_progress_bars():  # a weight-loading bar per env (and per worker) would bury tbg's own progress
            language_model = AutoModelForCausalLM.from_pretrained(
                name, config=config, dtype=torch_dtype, use_safetensors=True, attn_implementation=kernel, **options
            )
    except (OSError, ValueError, ImportError) as error:
        raise ValueError(f"could not load the causal LM {name!r}: {error}") from error
    if tokenizer.eos_token_id is None:
        raise ValueError(f"the tokenizer of {name!r} has no EOS token: a tokenized bandit needs one to end responses")
    language_model.to(device)  # type: ignore[arg-type]  # transformers types its wrapped .to as unbound
    language_model.eval()
    language_model.requires_grad_(False)
    return language_model, tokenizer


@contextlib.contextmanager
def _quiet_progress_bars() -> Iterator[None]:
    """Turn transformers' progress bars off for the block, then back on if they were on."""
    from transformers.utils import logging as transformers_logging

    was_enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            transformers_logging.enable_progress_bar()


def _check_source(name: str) -> bool:
    """Refuse a missing local directory, one without safetensors weights, or an uncached hub name offline.

    Returns whether the hub is offline (then only cached files are read).
    """
    from huggingface_hub import constants, try_to_load_from_cache

    path = Path(name).expanduser()
    looks_local = name.startswith((".", "/", "~")) or path.exists() or (os.sep in name and not _looks_like_hub_id(name))
    if looks_local:
        if not path.is_dir():
            raise ValueError(f"model path {name!r} does not exist or is not a directory")
        if not any(path.glob("*.safetensors")):
            found = sorted(entry.name for entry in path.iterdir() if entry.suffix in (".bin", ".pt", ".pth", ".ckpt"))
            pickled = f"; found pickled weights {found}, which are refused (unpickling runs code)" if found else ""
            raise ValueError(f"model directory {name!r} has no *.safetensors weights{pickled}")
        return bool(constants.HF_HUB_OFFLINE)
    cached = isinstance(try_to_load_from_cache(name, "config.json"), str)
    not_found = f"model {name!r} is neither a local directory nor in the Hugging Face cache ({constants.HF_HUB_CACHE})"
    if constants.HF_HUB_OFFLINE:
        if not cached:
            raise ValueError(
                f"{not_found}, and the hub is offline (HF_HUB_OFFLINE=1): "
                "download it while online, or pass a local directory"
            )
        return True
    unreachable = _hub_unreachable(constants.ENDPOINT)
    if unreachable is None:
        return False
    if not cached:  # transformers would retry for half a minute before failing
        raise ValueError(
            f"{not_found}, and the hub {constants.ENDPOINT} cannot be reached ({unreachable}): "
            "download it where the hub is reachable, or pass a local directory"
        )
    return True  # cached and no network: read the cache only, without transformers' retries


def _hub_unreachable(endpoint: str, timeout_s: float = 3.0) -> str | None:
    """Why the hub at ``endpoint`` cannot be reached (one TCP connection, at most ``timeout_s``), or None if it can."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "", port), timeout=timeout_s).close()
    except OSError as error:
        return str(error) or type(error).__name__
    return None


def _looks_like_hub_id(name: str) -> bool:
    """Whether ``name`` has the ``owner/model`` form of a hub id (and is no existing path)."""
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not Path(name).exists()
