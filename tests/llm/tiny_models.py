"""Random-weight helpers shared by the LLM tests (models are built from configs, nothing downloaded)."""

from __future__ import annotations

from typing import Any

import torch


def randomised(model: Any, seed: int) -> Any:
    """``model`` in eval mode with every parameter drawn from a seeded generator (no global RNG).

    Vectors (norm weights, biases) get ``1 + 0.1 * noise``, matrices ``0.2 * noise``, so biases and
    norms are not the trivial initialisation a test could pass by accident.
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            noise = torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype)
            parameter.copy_(1.0 + 0.1 * noise if parameter.dim() == 1 else 0.2 * noise)
    return model.eval()


SHARED = {"vocab_size": 512, "max_position_embeddings": 64, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
"""Every tiny family shares stories260K's tokenizer (512 ids, BOS 1, EOS 2) and 64 positions."""
LLAMA_SHAPE = {
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}
WINDOW = 4
"""Sliding windows of the tiny families: shorter than every query plus response of the tests."""


def tiny_family(name: str) -> Any:
    """A random 2-layer model of the family ``name`` (one of :data:`FAMILY_NAMES`), built from its config class."""
    import transformers as hf

    llama3_rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0}
    llama3_rope |= {"high_freq_factor": 4.0, "original_max_position_embeddings": 16}
    builders = {
        "llama": lambda: hf.LlamaForCausalLM(hf.LlamaConfig(**SHARED, **LLAMA_SHAPE)),
        "llama-llama3-rope": lambda: hf.LlamaForCausalLM(
            hf.LlamaConfig(**SHARED, **LLAMA_SHAPE, rope_parameters=llama3_rope)
        ),
        "llama-linear-rope": lambda: hf.LlamaForCausalLM(
            hf.LlamaConfig(**SHARED, **LLAMA_SHAPE, rope_parameters={"rope_type": "linear", "factor": 2.0})
        ),
        "llama-bias-tied": lambda: hf.LlamaForCausalLM(
            hf.LlamaConfig(**SHARED, **LLAMA_SHAPE, attention_bias=True, mlp_bias=True, tie_word_embeddings=True)
        ),
        "gpt2": lambda: hf.GPT2LMHeadModel(
            hf.GPT2Config(
                vocab_size=512, n_positions=64, n_embd=32, n_layer=2, n_head=4, bos_token_id=1, eos_token_id=2
            )
        ),
        "qwen2": lambda: hf.Qwen2ForCausalLM(hf.Qwen2Config(**SHARED, **LLAMA_SHAPE)),
        "qwen2-window": lambda: hf.Qwen2ForCausalLM(
            hf.Qwen2Config(**SHARED, **LLAMA_SHAPE, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1)
        ),
        "qwen3": lambda: hf.Qwen3ForCausalLM(hf.Qwen3Config(**SHARED, **LLAMA_SHAPE, head_dim=8)),
        "mistral-window": lambda: hf.MistralForCausalLM(
            hf.MistralConfig(**SHARED, **LLAMA_SHAPE, sliding_window=WINDOW)
        ),
        "gemma": lambda: hf.GemmaForCausalLM(hf.GemmaConfig(**SHARED, **LLAMA_SHAPE, head_dim=8)),
        "gemma2": lambda: hf.Gemma2ForCausalLM(
            hf.Gemma2Config(**SHARED, **LLAMA_SHAPE, head_dim=8, sliding_window=WINDOW, attn_implementation="eager")
        ),
        "gemma3-text": lambda: hf.Gemma3ForCausalLM(
            hf.Gemma3TextConfig(
                **SHARED,
                **LLAMA_SHAPE,
                head_dim=8,
                sliding_window=WINDOW,
                layer_types=["sliding_attention", "full_attention"],
                final_logit_softcapping=5.0,
            )  # fmt: skip
        ),
        "phi3-window": lambda: hf.Phi3ForCausalLM(
            hf.Phi3Config(**SHARED, **{**LLAMA_SHAPE, "num_key_value_heads": 4}, sliding_window=WINDOW)
        ),
        "gpt-neox": lambda: hf.GPTNeoXForCausalLM(
            hf.GPTNeoXConfig(**SHARED, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4)
        ),
        "opt": lambda: hf.OPTForCausalLM(
            hf.OPTConfig(
                **SHARED, hidden_size=32, ffn_dim=48, num_hidden_layers=2, num_attention_heads=4, word_embed_proj_dim=32
            )  # fmt: skip
        ),
        "granite": lambda: hf.GraniteForCausalLM(hf.GraniteConfig(**SHARED, **LLAMA_SHAPE, logits_scaling=4.0)),
        "cohere": lambda: hf.CohereForCausalLM(hf.CohereConfig(**SHARED, **LLAMA_SHAPE, logit_scale=0.25)),
    }
    return randomised(builders[name](), sum(map(ord, name)))


FAMILY_NAMES = (
    "llama",
    "llama-llama3-rope",
    "llama-linear-rope",
    "llama-bias-tied",
    "gpt2",
    "qwen2",
    "qwen2-window",
    "qwen3",
    "mistral-window",
    "gemma",
    "gemma2",
    "gemma3-text",
    "phi3-window",
    "gpt-neox",
    "opt",
    "granite",
    "cohere",
)
"""The named families of the conformance suite (issue 14)."""


SMALL_CONFIG = {
    **SHARED,
    **LLAMA_SHAPE,
    "head_dim": 8,
    "n_embd": 32,
    "d_model": 32,
    "n_layer": 2,
    "num_layers": 2,
    "n_head": 4,
    "num_heads": 4,
    "n_inner": 48,
    "ffn_dim": 48,
    "d_ff": 48,
    "n_positions": 64,
    "decoder_layers": 2,
    "encoder_layers": 2,
    "decoder_attention_heads": 4,
    "encoder_attention_heads": 4,
    "decoder_ffn_dim": 48,
    "encoder_ffn_dim": 48,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 16,
}
"""Small values for the size fields of any causal-LM config (fields a config lacks are ignored)."""

SMALL_CONFIG_COUPLED_SIZES = {
    "rotary_dim": 4,
    "q_lora_rank": 16,
    "kv_lora_rank": 16,
    "qk_rope_head_dim": 4,
    "qk_nope_head_dim": 4,
    "v_head_dim": 8,
    "mamba_n_heads": 8,
    "mamba_d_head": 8,
    "mamba_expand": 2,
}
"""Sizes that must agree with ``SMALL_CONFIG``'s heads (partial rotary, multi-head latent attention, Mamba
heads); tried as a second small config for the families whose defaults contradict the first."""


MULTI_HEAD_LATENT = {
    **SMALL_CONFIG_COUPLED_SIZES,
    "head_dim": 4,  # the rotary part of a query or key head: qk_rope_head_dim
    "num_key_value_heads": 4,  # latent attention expands its keys and values to every head
    "n_group": 1,
    "topk_group": 1,
    "first_k_dense_replace": 1,
}
LATENT_ATTENTION_TYPES = (
    "axk1",
    "axk2",
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "glm4_moe_lite",
    "glm_moe_dsa",
    "longcat_flash",
    "minicpm3",
    "sarvam_mla",
    "youtu",
)
"""Model types with DeepSeek's multi-head latent attention."""
FAMILY_CONFIGS: dict[str, dict[str, Any]] = {
    **dict.fromkeys(LATENT_ATTENTION_TYPES, MULTI_HEAD_LATENT),
    "dbrx": {
        "attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
        "ffn_config": {"ffn_hidden_size": 48, "moe_num_experts": 4, "moe_top_k": 2},
        "max_seq_len": 64,
    },
    "dots1": {"n_shared_experts": 1, "n_group": 1, "topk_group": 1, "first_k_dense_replace": 1},
    "gemma3n_text": {
        "num_kv_shared_layers": 0,
        "layer_types": ["sliding_attention", "full_attention"],
        "activation_sparsity_pattern": [0.0, 0.0],
        "vocab_size_per_layer_input": 512,
        "hidden_size_per_layer_input": 8,
        "laurel_rank": 8,
        "altup_num_inputs": 2,
        "altup_active_idx": 0,
    },
}
"""Per model type, fields that make its small config valid (sizes its defaults tie to others)."""


def discovered_causal_lm_types() -> list[str]:
    """Every model type transformers maps to a ``*ForCausalLM``-style class, but the named families'."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    named = {"llama", "gpt2", "qwen2", "qwen3", "mistral", "gemma", "gemma2", "gemma3_text", "phi3"}
    named |= {"gpt_neox", "opt", "granite", "cohere"}
    return sorted(set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) - named)


def tiny_discovered(model_type: str) -> Any:
    """A random model of ``model_type`` from a small config; pytest.skip (with the reason) where none builds."""
    import pytest
    import transformers as hf
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    class_name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]
    class_name = class_name if isinstance(class_name, str) else class_name[0]
    try:
        model_class = getattr(hf, class_name)
    except (ImportError, AttributeError) as error:  # an optional dependency (kernels, timm, ...) is missing
        pytest.skip(f"{class_name} cannot be imported: {error}")
    reasons = []
    own = FAMILY_CONFIGS.get(model_type, {})
    for small in (SMALL_CONFIG, {**SMALL_CONFIG, **SMALL_CONFIG_COUPLED_SIZES}):
        model, reason = _tiny_from_small_config(model_class, {**small, **own})
        if model is not None:
            return model
        reasons.append(reason)
    pytest.skip(f"{class_name}: " + " / ".join(dict.fromkeys(reasons)))


def _tiny_from_small_config(model_class: Any, small: dict[str, Any]) -> tuple[Any, str]:
    """``(model, "")`` built from ``small`` and run once, or ``(None, why not)``."""
    if "sliding_window" in getattr(model_class.config_class, "__dataclass_fields__", {}):
        small["sliding_window"] = WINDOW  # a window the test's sequences outgrow, wherever the family has one
    try:
        config = model_class.config_class(**small)
    except Exception:  # a config that refuses some small value: shrink field by field instead
        try:
            config = model_class.config_class()
        except Exception as error:  # the reason is reported in the skip, not hidden
            return None, f"{model_class.config_class.__name__}() cannot be built: {type(error).__name__}: {error}"[:300]
        for key, value in small.items():
            try:  # a per-layer field may refuse to be read or set globally: it keeps its value
                if hasattr(config, key):
                    setattr(config, key, value)
            except Exception:
                continue
    try:
        with torch.device("meta"):  # count the parameters before allocating them
            size = sum(parameter.numel() for parameter in model_class(config).parameters())
        if size > 30_000_000:
            return None, f"keeps {size:,} parameters under the small config (sizes it does not expose)"
        model = randomised(model_class(config), 0)
        with torch.no_grad():
            model(input_ids=torch.tensor([[1, 5, 9, 300]]), use_cache=False)  # its own forward runs
        return model, ""
    except Exception as error:  # the reason is reported in the skip, not hidden
        return None, f"cannot be built or run from a small config: {type(error).__name__}: {error}"[:300]
