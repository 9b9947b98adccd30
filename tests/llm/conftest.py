"""Fixtures for the LLM-backed tests: offline, one torch thread, tiny random GPT-2 and Llama models."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

from tests.llm.tiny_models import randomised
from tokenized_bandit_gym.evaluation.ddmc.resources import PACKAGE_DATA

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DATA = PACKAGE_DATA


@pytest.fixture(scope="session", autouse=True)
def _one_thread() -> Any:
    """Tiny models run fastest on one thread (and do not fight other test processes for cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def stories() -> tuple[Any, Any]:
    """The shipped pretrained stories260K and its tokenizer."""
    from tokenized_bandit_gym.llm.load_language_model import load_language_model

    return load_language_model()


@pytest.fixture(scope="session")
def tiny_llama(stories: tuple[Any, Any]) -> tuple[Any, Any]:
    """A random 2-layer Llama (GQA) with the stories260K tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=512,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=2,
    )
    return randomised(LlamaForCausalLM(config), 1), stories[1]


@pytest.fixture(scope="session")
def tiny_gpt2() -> tuple[Any, Any]:
    """A random 2-layer GPT-2 with the real GPT-2 BPE tokenizer (50,257 tokens)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    files = DATA / "models" / "gpt2-tokenizer"
    backend = Tokenizer(models.BPE.from_file(str(files / "vocab.json"), str(files / "merges.txt")))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>", bos_token="<|endoftext|>")
    config = GPT2Config(vocab_size=50257, n_positions=256, n_embd=32, n_layer=2, n_head=2)
    return randomised(GPT2LMHeadModel(config), 2), tokenizer


@pytest.fixture(params=["GenuineIntel", "AuthenticAMD"])
def cpu_vendor(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each vendor's product path for large float32 CPU weights, whatever this machine's CPU is: MKL's packed
    GEMM on Intel, oneDNN's linear on AMD (``native_decoder_forward.onednn_preferred``)."""
    from tokenized_bandit_gym.llm import native_decoder_forward

    monkeypatch.setattr(native_decoder_forward, "cpu_vendor", lambda: request.param)
    if request.param != "GenuineIntel" and not native_decoder_forward.onednn_preferred():
        pytest.skip("no oneDNN linear in this torch build, or not an x86 CPU")
    return str(request.param)
