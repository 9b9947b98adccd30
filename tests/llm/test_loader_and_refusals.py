"""The one model loader, the context-length check, and the refusals that name the model type and feature."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401
from tests.llm.tiny_models import LLAMA_SHAPE, SHARED, WINDOW, randomised, tiny_family
from tokenized_bandit_gym.llm.attention_layout import attention_layout
from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem
from tokenized_bandit_gym.llm.load_language_model import DEFAULT_MODEL, load_language_model
from tokenized_bandit_gym.llm.prefix_embedder import PrefixEmbedder


@pytest.fixture(scope="module")
def saved_gemma2(tmp_path_factory: pytest.TempPathFactory, stories: tuple[Any, Any]) -> Path:
    """A tiny Gemma-2 (attention softcapping, alternating windows) saved as safetensors with a tokenizer."""
    path = tmp_path_factory.mktemp("gemma2")
    tiny_family("gemma2").save_pretrained(path)
    stories[1].save_pretrained(path)
    return path


def test_offline_unknown_hub_name_fails_within_seconds() -> None:
    """A fresh process, offline, a made-up name: a clear error, not a minute of network retries."""
    code = (
        "from tokenized_bandit_gym.llm import load_language_model\n"
        "try:\n    load_language_model('made-up-org/no-such-model-14')\n"
        "except ValueError as error:\n    print('REFUSED', error)\n"
    )
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True
    )
    elapsed = time.perf_counter() - start
    assert "REFUSED" in result.stdout and "no-such-model-14" in result.stdout and "offline" in result.stdout
    assert elapsed < 30, elapsed  # imports included; the refusal itself reads one cache lookup


def test_unreachable_hub_unknown_hub_name_fails_within_seconds() -> None:
    """No HF_HUB_OFFLINE, but no hub either (a closed local port): refused after one connection, no retries."""
    code = (
        "from tokenized_bandit_gym.llm import load_language_model\n"
        "try:\n    load_language_model('made-up-org/no-such-model-14b')\n"
        "except ValueError as error:\n    print('REFUSED', error)\n"
    )
    environment = {
        key: value for key, value in os.environ.items() if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    }
    environment["HF_ENDPOINT"] = "http://127.0.0.1:9"  # discard port: nothing listens, the connection is refused
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    assert "REFUSED" in result.stdout and "no-such-model-14b" in result.stdout, result.stdout + result.stderr
    assert "cannot be reached" in result.stdout and "127.0.0.1:9" in result.stdout
    assert elapsed < 30, elapsed  # transformers' own retries take about 25 s before the import time


def test_gemma2_loads_by_path_with_eager_attention_and_steps_right(saved_gemma2: Path) -> None:
    model, _ = load_language_model(saved_gemma2)
    assert model.config._attn_implementation == "eager"  # auto: SDPA does not apply softcapping
    env = gym.make("TokenizedAlignment-v0", model=str(saved_gemma2), max_length=4, top_k=3, noise_scale=0.0)
    observation, _ = env.reset(seed=0)
    assert observation["candidate_embeddings"].shape == (3, 33)
    with pytest.raises(ValueError, match="could not load .* does not support .*scaled_dot_product_attention"):
        gym.make("TokenizedAlignment-v0", model=str(saved_gemma2), attn_implementation="sdpa")  # transformers refuses


def test_pickled_weights_are_refused(tmp_path: Path, stories: tuple[Any, Any]) -> None:
    model = tiny_family("llama")
    model.config.save_pretrained(tmp_path)
    stories[1].save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"no \*\.safetensors weights; found pickled weights \['pytorch_model.bin'\]"):
        load_language_model(tmp_path)
    with pytest.raises(ValueError, match="pickled"):
        PrefixEmbedder(tmp_path)  # the DDMC diagnostics load through the same loader


def test_stories260k_name_and_ddmc_embedder_share_the_loader() -> None:
    assert load_language_model("stories260K") is load_language_model(DEFAULT_MODEL)
    embedder = PrefixEmbedder("stories260K")
    assert embedder.language_model is load_language_model(DEFAULT_MODEL)[0]


def test_attn_implementation_goes_with_loading_only(stories: tuple[Any, Any]) -> None:
    with pytest.raises(ValueError, match="loaded model keeps"):
        gym.make("TokenizedAlignment-v0", model=stories[0], tokenizer=stories[1], attn_implementation="eager")
    env = gym.make("TokenizedDecoding-v0", attn_implementation="eager", max_length=3)
    assert env.unwrapped.problem.model.config._attn_implementation == "eager"


def test_over_long_query_raises_naming_both_lengths_or_is_truncated_left(stories: tuple[Any, Any]) -> None:
    """stories260K has 512 positions: a query of ~1,000 tokens was accepted silently before."""
    long_query = "Once upon a time there was a little dog. " * 100
    with pytest.raises(ValueError, match=r"is \d+ tokens and max_length=30: \d+ positions exceed the model's 512"):
        gym.make("TokenizedAlignment-v0", queries=[long_query, "Hi"])
    env = gym.make("TokenizedAlignment-v0", queries=[long_query], query_truncation="left", noise_scale=0.0)
    problem = env.unwrapped.problem
    assert int(problem.query_lengths[0]) == 512 - 30
    assert int(problem.query_tokens[0, 0]) == stories[1].bos_token_id  # the BOS is kept
    observation, _ = env.reset(seed=0)
    for _ in range(30):
        observation, _, terminated, _, info = env.step(0)
        if terminated:
            break
    assert terminated and np.isfinite(info["utility"])
    with pytest.raises(ValueError, match="query_truncation"):
        gym.make("TokenizedAlignment-v0", query_truncation="right")


def test_learned_positions_refuse_at_construction_instead_of_an_index_error(tiny_gpt2: tuple[Any, Any]) -> None:
    model, tokenizer = tiny_gpt2  # 256 learned positions
    long_query = "word " * 300
    with pytest.raises(ValueError, match="exceed the model's 256"):
        LanguageModelProblem(
            model, tokenizer, [long_query], max_length=8, top_k=2, fixed_length=False, embedding_norm="l2"
        )
    problem = LanguageModelProblem(
        model,
        tokenizer,
        [long_query],
        max_length=8,
        top_k=2,
        query_truncation="left",
        fixed_length=False,
        embedding_norm="l2",
    )
    state = problem.initial_state(torch.tensor([0]))
    state = problem.advance(state, torch.tensor([0]))
    assert int(problem.query_lengths[0]) == 248 and int(state.next_positions[0]) == 249


def test_sdpa_with_attention_softcapping_is_refused() -> None:
    import transformers as hf

    model = randomised(hf.Gemma2ForCausalLM(hf.Gemma2Config(**SHARED, **LLAMA_SHAPE, head_dim=8)), 0)
    model.config._attn_implementation = "sdpa"  # as a user who forces the kernel on a loaded model would
    with pytest.raises(ValueError, match=r"model_type='gemma2' uses attention softcapping"):
        attention_layout(model)


def test_mixed_windows_under_one_mask_and_chunked_attention_are_refused() -> None:
    import transformers as hf

    mistral = randomised(hf.MistralForCausalLM(hf.MistralConfig(**SHARED, **LLAMA_SHAPE, sliding_window=WINDOW)), 0)
    mistral.config.layer_types = ["full_attention", "sliding_attention"]  # Mistral's forward takes one mask
    with pytest.raises(ValueError, match=r"model_type='mistral' mixes full-attention and sliding-window layers"):
        attention_layout(mistral)
    mistral.config.layer_types = ["linear_attention", "full_attention"]
    with pytest.raises(ValueError, match=r"model_type='mistral' has \['linear_attention'\] layers"):
        attention_layout(mistral)
    mistral.config.layer_types = None
    mistral.config.attention_chunk_size = 8
    with pytest.raises(ValueError, match="chunked attention"):
        attention_layout(mistral)


def test_a_head_that_is_not_reproduced_is_refused(stories: tuple[Any, Any]) -> None:
    """A model whose forward rescales logits in a way the head does not know about is refused, never stepped."""
    import transformers as hf

    class RescaledLlama(hf.LlamaForCausalLM):
        def forward(self, *args: Any, **kwargs: Any) -> Any:
            output = super().forward(*args, **kwargs)
            output.logits = output.logits * 3.0
            return output

    model = randomised(RescaledLlama(hf.LlamaConfig(**SHARED, **LLAMA_SHAPE)), 0)
    with pytest.raises(ValueError, match=r"model_type='llama': the LM head's logits"):
        LanguageModelProblem(
            model, stories[1], ["Once upon a time"], max_length=3, top_k=2, fixed_length=False, embedding_norm="l2"
        )


def test_ddmc_embedder_honours_windows_like_the_envs(tmp_path: Path, stories: tuple[Any, Any]) -> None:
    """The DDMC prefix embeddings run the envs' forward: windows honoured, equal to a plain forward."""
    tiny_family("mistral-window").save_pretrained(tmp_path)
    stories[1].save_pretrained(tmp_path)
    embedder = PrefixEmbedder(tmp_path, batch_size=2)
    model = embedder.language_model
    sequences = [embedder.tokenize("Once upon a time there was a big dog in the park."), embedder.tokenize("Hi")]
    prefixes = embedder.prefix_embeddings(sequences)
    with torch.no_grad():
        for sequence, rows in zip(sequences, prefixes, strict=True):
            hidden = model(input_ids=torch.tensor([sequence]), output_hidden_states=True).hidden_states[-1][0]
            expected = hidden.double().cumsum(dim=0) / torch.arange(1, len(sequence) + 1)[:, None]
            torch.testing.assert_close(rows.double(), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("bars_on", [True, False])
def test_loading_prints_no_weight_bar_and_keeps_the_users_setting(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], bars_on: bool
) -> None:
    """A weight-loading bar per env would bury ``tbg run``'s progress; the user's own choice is left as it was."""
    import shutil

    from transformers.utils import logging as transformers_logging

    shutil.copytree(DEFAULT_MODEL, tmp_path / "model")  # a path not loaded before (loads are cached per path)
    (transformers_logging.enable_progress_bar if bars_on else transformers_logging.disable_progress_bar)()
    try:
        capfd.readouterr()
        load_language_model(str(tmp_path / "model"))
        assert "Loading weights" not in capfd.readouterr().err
        assert transformers_logging.is_progress_bar_enabled() is bars_on
    finally:
        transformers_logging.enable_progress_bar()
