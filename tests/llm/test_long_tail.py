"""The long tail of causal LMs: right past a length switch, "auto" picking what works, refusals naming the feature.

Every model is a tiny random one built from transformers' own config class (tests/llm/tiny_models.py);
the reference of every candidate is the model's own no-cache forward of ``x:y:tau``
(``play_with_pauses``).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.llm.test_model_families import QUERIES, play_with_pauses
from tests.llm.tiny_models import LLAMA_SHAPE, SHARED, discovered_causal_lm_types, randomised, tiny_discovered
from tokenized_bandit_gym.evaluation.check_model import check_language_model
from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem

SWITCH = 16
"""``original_max_position_embeddings`` of the tiny longrope models: the test's episodes cross it."""
CROSSING_QUERIES = [
    "Tom saw a big dog.",
    "Once upon a time, there was a little girl named Lily.",
    "Hi there, the cat",
    "The cat sat",
]
OBSCURE_MARKERS = ("has no attribute", "values to unpack", "AttributeError", "NoneType", "its code raises")
"""Words of an error the model's code raised, passed on instead of naming what is unsupported."""


def refusal_is_clear(message: str, model_type: str) -> bool:
    """A refusal names the model type and says what is unsupported, not which Python error the model's code raised."""
    return f"model_type={model_type!r}" in message and not any(marker in message for marker in OBSCURE_MARKERS)


def tiny_longrope(family: str) -> Any:
    """A tiny Phi-3 or PhiMoE with longrope scaling switching at :data:`SWITCH` tokens."""
    import transformers as hf

    rope = {
        "rope_type": "longrope",
        "rope_theta": 10000.0,
        "short_factor": [1.0] * 4,
        "long_factor": [4.0, 5.0, 6.0, 7.0],
        "original_max_position_embeddings": SWITCH,
    }
    shape = {**SHARED, **LLAMA_SHAPE, "num_key_value_heads": 4, "original_max_position_embeddings": SWITCH}
    if family == "phi3":
        return randomised(hf.Phi3ForCausalLM(hf.Phi3Config(**shape, rope_parameters=rope)), 3)
    rope |= {"short_mscale": 1.0, "long_mscale": 1.3}  # transformers' PhiMoE switches its scale, not its factors
    config = hf.PhimoeConfig(**shape, rope_parameters=rope, num_local_experts=4, num_experts_per_tok=2)
    return randomised(hf.PhimoeForCausalLM(config), 3)


@pytest.fixture(scope="module")
def tokenizer(stories: tuple[Any, Any]) -> Any:
    return stories[1]


@pytest.mark.parametrize("family", ["phi3", "phimoe"])
@pytest.mark.parametrize("batching", ["mask", "expand"])
def test_longrope_is_right_across_its_switch(family: str, batching: str, tokenizer: Any) -> None:
    model = tiny_longrope(family)
    ids = torch.randint(3, 512, (1, SWITCH + 1), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():  # the model's own forward does switch: a prefix's states change once the sequence is longer
        short = model(input_ids=ids[:, :SWITCH], output_hidden_states=True).hidden_states[-1][0]
        long = model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0, :SWITCH]
    assert float((short - long).abs().max()) > 0.1
    problem = LanguageModelProblem(
        model,
        tokenizer,
        CROSSING_QUERIES,
        max_length=12,
        top_k=3,
        candidate_batching=batching,
        fixed_length=False,
        embedding_norm="l2",
    )
    lengths = problem.query_lengths[:3]
    assert bool((lengths <= SWITCH).all()) and bool((lengths + 12 > SWITCH).all())  # rows 0-2 cross the switch
    assert int(lengths[1]) == SWITCH  # one row starts exactly at it
    assert play_with_pauses(problem, seed=0) >= 3


def test_longrope_decoding_problem_is_right_across_its_switch(tokenizer: Any) -> None:
    """Without embeddings each token is stepped by a forward of its own (advance_tokens), recomputed at the switch."""
    problem = LanguageModelProblem(
        tiny_longrope("phi3"),
        tokenizer,
        CROSSING_QUERIES,
        max_length=12,
        top_k=3,
        embeddings=False,
        gamma=1.0,
        fixed_length=False,
        embedding_norm="l2",
    )
    assert play_with_pauses(problem, seed=1) >= 3


def test_check_model_passes_a_longrope_model_across_its_switch(tokenizer: Any) -> None:
    verdicts = check_language_model(
        tiny_longrope("phi3"), tokenizer, steps=6, seed=0, num_envs=2, max_length=12, top_k=3, queries=CROSSING_QUERIES
    )
    assert all(verdict.passed or verdict.requested.startswith("native") for verdict in verdicts), verdicts


def test_dynamic_rope_is_refused_only_when_an_episode_crosses_its_switch(tokenizer: Any) -> None:
    import transformers as hf

    rope = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0, "original_max_position_embeddings": SWITCH}
    model = randomised(hf.LlamaForCausalLM(hf.LlamaConfig(**SHARED, **LLAMA_SHAPE, rope_parameters=rope)), 4)
    with pytest.raises(ValueError) as refusal:
        LanguageModelProblem(
            model, tokenizer, CROSSING_QUERIES, max_length=12, top_k=3, fixed_length=False, embedding_norm="l2"
        )
    message = str(refusal.value)
    assert refusal_is_clear(message, "llama") and "dynamic NTK" in message and str(SWITCH) in message
    problem = LanguageModelProblem(
        model, tokenizer, ["Hi", "The cat sat"], max_length=4, top_k=3, fixed_length=False, embedding_norm="l2"
    )
    assert problem.query_lengths.max() + 4 <= SWITCH


def tiny_alibi(family: str) -> Any:
    """A tiny Bloom, or a Falcon with ``alibi=True``."""
    import transformers as hf

    if family == "bloom":
        return tiny_discovered("bloom")
    config = hf.FalconConfig(**SHARED, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, alibi=True)
    return randomised(hf.FalconForCausalLM(config), 7)


@pytest.mark.parametrize("family", ["bloom", "falcon"])
def test_alibi_auto_picks_expand_and_mask_is_refused_by_name(family: str, tokenizer: Any) -> None:
    model = tiny_alibi(family)
    problem = LanguageModelProblem(
        model, tokenizer, QUERIES, max_length=4, top_k=3, fixed_length=False, embedding_norm="l2"
    )
    assert problem.candidate_batching == "expand"
    assert play_with_pauses(problem, seed=0) >= 3
    with pytest.raises(ValueError) as refusal:
        LanguageModelProblem(
            model,
            tokenizer,
            QUERIES,
            max_length=4,
            top_k=3,
            candidate_batching="mask",
            fixed_length=False,
            embedding_norm="l2",
        )
    assert refusal_is_clear(str(refusal.value), family) and "ALiBi" in str(refusal.value)
    assert "candidate_batching='expand'" in str(refusal.value)


@pytest.mark.parametrize(
    ("model_type", "feature"),
    [
        ("rwkv", "no key/value cache"),
        ("openai-gpt", "no key/value cache"),
        ("gemma3n_text", "parallel hidden streams"),
        ("llama4_text", "chunked attention"),
    ],
)
def test_refusals_name_the_model_type_and_the_feature(model_type: str, feature: str, tokenizer: Any) -> None:
    with pytest.raises(ValueError) as refusal:
        LanguageModelProblem(
            tiny_discovered(model_type),
            tokenizer,
            QUERIES,
            max_length=4,
            top_k=3,
            fixed_length=False,
            embedding_norm="l2",
        )
    message = str(refusal.value)
    assert refusal_is_clear(message, model_type) and feature in message, message
    assert "(1) transformers forward with 'mask'" in message and "(2) transformers forward with 'expand'" in message


def test_llama4_text_without_chunking_is_right(tokenizer: Any) -> None:
    """A model class that is its own base model: the decoder is its get_decoder()."""
    chunked = tiny_discovered("llama4_text")
    config = chunked.config
    config.attention_chunk_size = None
    config.layer_types = ["full_attention"] * config.num_hidden_layers
    model = randomised(type(chunked)(config), 5)
    problem = LanguageModelProblem(
        model, tokenizer, QUERIES, max_length=4, top_k=3, fixed_length=False, embedding_norm="l2"
    )
    assert play_with_pauses(problem, seed=0) >= 3


def long_tail_outcome(model_type: str, tokenizer: Any) -> tuple[str, str]:
    """``(outcome, detail)`` of one discovered model type: right, refused clearly, refused obscurely,
    silently wrong or crash; ``("not built", why)`` where no small model builds.

    The "auto" path is built and played (:func:`play_with_pauses`); where it is right, the other
    candidate batching and the decoding problem (no embeddings, ``gamma = 1``) are played too.
    """
    try:
        model = tiny_discovered(model_type)
    except pytest.skip.Exception as skipped:
        return "not built", str(skipped)
    embeddings = getattr(model.get_input_embeddings(), "weight", None)
    if embeddings is not None and int(embeddings.shape[0]) < 512:
        return "not built", "the config keeps a vocabulary smaller than the test tokenizer's 512 ids"
    try:
        problem = LanguageModelProblem(
            model, tokenizer, QUERIES, max_length=4, top_k=3, fixed_length=False, embedding_norm="l2"
        )
    except ValueError as error:
        clear = refusal_is_clear(str(error), model.config.get_text_config().model_type)
        return ("refused clearly" if clear else "refused obscurely"), str(error)
    except Exception as error:  # noqa: BLE001  (counted, not hidden)
        return "crash", f"{type(error).__name__}: {error}"
    path = f"{problem.forward_implementation}/{problem.candidate_batching}"
    other = "expand" if problem.candidate_batching == "mask" else "mask"
    variants = {"auto": None, f"candidate_batching={other!r}": {"candidate_batching": other}}
    variants["decoding"] = {"embeddings": False, "gamma": 1.0}
    checked = []
    for name, keywords in variants.items():
        try:
            if keywords is not None:
                problem = LanguageModelProblem(
                    model,
                    tokenizer,
                    QUERIES,
                    max_length=4,
                    top_k=3,
                    fixed_length=False,
                    embedding_norm="l2",
                    **keywords,
                )
            play_with_pauses(problem, seed=0)
        except ValueError as error:  # a refused variant: its wording counts as any refusal's
            if keywords is None or not refusal_is_clear(str(error), model.config.get_text_config().model_type):
                return "refused obscurely", f"{name}: {error}"
            checked.append(f"{name} refused")
            continue
        except AssertionError as error:
            return "silently wrong", f"{name}: {error}"
        except Exception as error:  # noqa: BLE001
            return "crash", f"{name}: {type(error).__name__}: {error}"
        checked.append(name)
    return "right", f"{path} ({', '.join(checked)})"


@pytest.mark.slow
def test_long_tail_count(tokenizer: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Every causal LM transformers ships that builds small: none silently wrong, none refused obscurely."""
    outcomes = {model_type: long_tail_outcome(model_type, tokenizer) for model_type in discovered_causal_lm_types()}
    counts: dict[str, int] = {}
    for outcome, _ in outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    with capsys.disabled():
        for model_type, (outcome, detail) in sorted(outcomes.items()):
            print(f"| {model_type} | {outcome} | {detail} |")
        print("counts:", counts)
    bad = {
        name: value for name, value in outcomes.items() if value[0] in ("silently wrong", "refused obscurely", "crash")
    }
    assert not bad, bad
