"""The native Llama-family and GPT-2 forwards equal the transformers forward, and are picked as asked."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.llm.tiny_models import randomised
from tokenized_bandit_gym.llm import native_decoder_forward
from tokenized_bandit_gym.llm.additive_attention_mask import additive_attention_mask
from tokenized_bandit_gym.llm.decoder_forward import select_decoder_forward
from tokenized_bandit_gym.llm.gpt2_decoder_forward import GPT2DecoderForward
from tokenized_bandit_gym.llm.language_model_head import LanguageModelHead
from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem
from tokenized_bandit_gym.llm.llama_decoder_forward import LlamaDecoderForward, RotaryTable
from tokenized_bandit_gym.llm.native_decoder_forward import FrozenLinear, FrozenLinears, mkl_packs, onednn_multiplies
from tokenized_bandit_gym.llm.transformers_decoder_forward import TransformersDecoderForward

LLAMA_SHAPE = {
    "hidden_size": 32,
    "intermediate_size": 40,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}
"""The Llama-family shape of the tiny random models here (GQA: 4 query heads, 2 KV heads)."""


def _tiny(kind: str) -> Any:
    """A 2-layer random model of the family ``kind`` (configs built here, nothing downloaded)."""
    import transformers

    shared = {"vocab_size": 97, "max_position_embeddings": 64, "eos_token_id": 2}
    llama_shape = LLAMA_SHAPE
    if kind == "llama":
        config = transformers.LlamaConfig(**shared, **llama_shape)
        return randomised(transformers.LlamaForCausalLM(config), 0)
    if kind == "llama-bias-gelu":
        config = transformers.LlamaConfig(
            **shared, **llama_shape, attention_bias=True, mlp_bias=True, hidden_act="gelu", head_dim=16
        )
        return randomised(transformers.LlamaForCausalLM(config), 1)
    if kind == "llama3-rope":
        rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0}
        rope |= {"high_freq_factor": 4.0, "original_max_position_embeddings": 16}
        config = transformers.LlamaConfig(**shared, **llama_shape, rope_parameters=rope)
        return randomised(transformers.LlamaForCausalLM(config), 2)
    if kind == "mistral":
        config = transformers.MistralConfig(**shared, **llama_shape, sliding_window=None)
        return randomised(transformers.MistralForCausalLM(config), 3)
    if kind == "qwen2":
        config = transformers.Qwen2Config(**shared, **llama_shape, use_sliding_window=False)
        return randomised(transformers.Qwen2ForCausalLM(config), 4)
    if kind == "gpt2":
        config = transformers.GPT2Config(vocab_size=97, n_positions=64, n_embd=32, n_layer=2, n_head=4, eos_token_id=2)
        return randomised(transformers.GPT2LMHeadModel(config), 5)
    if kind == "gpt2-layer-scaled-relu":
        config = transformers.GPT2Config(
            vocab_size=97,
            n_positions=64,
            n_embd=32,
            n_layer=2,
            n_head=4,
            eos_token_id=2,
            scale_attn_by_inverse_layer_idx=True,
            activation_function="relu",
        )
        return randomised(transformers.GPT2LMHeadModel(config), 6)
    raise ValueError(kind)


FAMILIES = ["llama", "llama-bias-gelu", "llama3-rope", "mistral", "qwen2", "gpt2", "gpt2-layer-scaled-relu"]


@pytest.mark.filterwarnings("error::FutureWarning")  # e.g. transformers' deprecated past_key_values keyword
@pytest.mark.parametrize("kind", FAMILIES)
def test_native_forward_equals_transformers_over_a_cache(kind: str) -> None:
    """Left-padded prefill (2-D mask), then k candidates under a 4-D mask, then one more token."""
    model = _tiny(kind)
    native, reference = select_decoder_forward(model, "native"), select_decoder_forward(model, "transformers")
    assert isinstance(reference, TransformersDecoderForward) and not isinstance(native, TransformersDecoderForward)
    generator = torch.Generator().manual_seed(7)
    ids = torch.randint(3, 97, (3, 9), generator=generator)  # (B, W)
    mask = torch.ones(3, 9, dtype=torch.int64)
    mask[0, :4], mask[1, :1] = 0, 0  # left padding of different widths
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    with torch.no_grad():
        hidden, cache = native(ids, mask, positions, ())
        expected_hidden, expected_cache = reference(ids, mask, positions, ())
        valid = mask.bool()
        torch.testing.assert_close(hidden[valid], expected_hidden[valid], atol=1e-5, rtol=1e-5)
        for (keys, values), (expected_keys, expected_values) in zip(cache, expected_cache, strict=True):
            # padding columns are never attended: only the real tokens' entries must agree
            torch.testing.assert_close(
                keys.transpose(1, 2)[valid], expected_keys.transpose(1, 2)[valid], atol=1e-5, rtol=1e-5
            )
            torch.testing.assert_close(
                values.transpose(1, 2)[valid], expected_values.transpose(1, 2)[valid], atol=1e-5, rtol=1e-5
            )
        k = 4  # candidates: each sees the row's prefix and itself only
        blocked = torch.finfo(torch.float32).min
        self_only = torch.zeros(k, k).masked_fill_(~torch.eye(k, dtype=torch.bool), blocked)
        prefix = (1 - mask).float().mul_(blocked)[:, None, None, :].expand(3, 1, k, 9)
        candidate_mask = torch.cat([prefix, self_only.expand(3, 1, k, k)], dim=3)  # (B, 1, k, W + k)
        candidates = torch.randint(3, 97, (3, k), generator=generator)
        candidate_positions = positions[:, -1:].add(1).expand(3, k)
        hidden, _ = native(candidates, candidate_mask, candidate_positions, cache)
        expected_hidden, _ = reference(candidates, candidate_mask, candidate_positions, expected_cache)
        torch.testing.assert_close(hidden, expected_hidden, atol=1e-5, rtol=1e-5)
        step_mask = torch.cat([mask, torch.tensor([[1], [0], [1]])], dim=1)  # row 1 does not grow
        hidden, longer = native(candidates[:, :1], step_mask, candidate_positions[:, :1], cache)
        expected_hidden, _ = reference(candidates[:, :1], step_mask, candidate_positions[:, :1], expected_cache)
        torch.testing.assert_close(hidden, expected_hidden, atol=1e-5, rtol=1e-5)
        assert all(keys.shape[2] == 10 for keys, _ in longer)


def test_native_forward_in_bfloat16_is_close_to_transformers() -> None:
    model = _tiny("llama").to(torch.bfloat16)
    ids = torch.randint(3, 97, (2, 6), generator=torch.Generator().manual_seed(8))
    mask = torch.ones_like(ids)
    positions = mask.cumsum(1) - 1
    with torch.no_grad():
        hidden, _ = select_decoder_forward(model, "native")(ids, mask, positions, ())
        expected, _ = select_decoder_forward(model, "transformers")(ids, mask, positions, ())
    assert hidden.dtype == torch.bfloat16
    torch.testing.assert_close(hidden.float(), expected.float(), atol=0.05, rtol=0.02)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rms_norm_equals_transformers_rms_norm(dtype: torch.dtype) -> None:
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    from tokenized_bandit_gym.llm.llama_decoder_forward import _rms_norm

    generator = torch.Generator().manual_seed(9)
    norm = LlamaRMSNorm(96, eps=1e-5).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(96, generator=generator) + 0.5)
        hidden = (4 * torch.randn(3, 5, 96, generator=generator)).to(dtype)
        got, wanted = _rms_norm(hidden, norm), norm(hidden)
    assert got.dtype == wanted.dtype == dtype
    torch.testing.assert_close(got, wanted, atol=0, rtol=1e-6 if dtype == torch.float32 else 0)


def test_additive_mask_is_causal_over_left_padding() -> None:
    mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
    additive = additive_attention_mask(mask, new_tokens=2, dtype=torch.float32)  # (2, 1, 2, 4)
    seen = additive == 0
    assert additive.shape == (2, 1, 2, 4)
    assert seen[0, 0].tolist() == [[False, True, True, False], [False, True, True, True]]
    assert seen[1, 0].tolist() == [[True, True, True, False], [True, True, True, True]]
    assert bool(torch.isfinite(additive).all())


def test_auto_picks_native_where_it_exists_and_transformers_elsewhere() -> None:
    import transformers

    assert isinstance(select_decoder_forward(_tiny("llama"), "auto"), LlamaDecoderForward)
    assert isinstance(select_decoder_forward(_tiny("gpt2"), "auto"), GPT2DecoderForward)
    config = transformers.Qwen2Config(
        vocab_size=97, hidden_size=32, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, use_sliding_window=True, sliding_window=8, max_window_layers=0,
    )  # fmt: skip
    sliding = transformers.Qwen2ForCausalLM(config).eval()
    assert isinstance(select_decoder_forward(sliding, "auto"), TransformersDecoderForward)
    with pytest.raises(ValueError, match="sliding"):
        select_decoder_forward(sliding, "native")
    opt = transformers.OPTForCausalLM(
        transformers.OPTConfig(vocab_size=97, hidden_size=16, num_hidden_layers=1, ffn_dim=16, num_attention_heads=2)
    ).eval()
    assert isinstance(select_decoder_forward(opt, "auto"), TransformersDecoderForward)
    with pytest.raises(ValueError, match="model_type='opt'"):
        select_decoder_forward(opt, "native")
    with pytest.raises(ValueError, match="'fast'"):
        select_decoder_forward(opt, "fast")


def test_llama_forward_needs_torch_2_5(monkeypatch: pytest.MonkeyPatch) -> None:
    """Older torch (which the package admits) lacks F.rms_norm and grouped-query SDPA: auto falls back."""
    from tokenized_bandit_gym.llm import llama_decoder_forward

    monkeypatch.setattr(llama_decoder_forward, "TORCH_HAS_GQA_ATTENTION", False)
    assert isinstance(select_decoder_forward(_tiny("llama"), "auto"), TransformersDecoderForward)
    with pytest.raises(ValueError, match="torch >= 2.5"):
        select_decoder_forward(_tiny("llama"), "native")


def test_problem_reports_its_forward(stories: tuple[Any, Any]) -> None:
    assert (
        LanguageModelProblem(
            *stories, ["Once"], max_length=3, top_k=2, fixed_length=False, embedding_norm="l2"
        ).forward_implementation
        == "native"
    )
    problem = LanguageModelProblem(
        *stories,
        ["Once"],
        max_length=3,
        top_k=2,
        forward_implementation="transformers",
        fixed_length=False,
        embedding_norm="l2",
    )
    assert problem.forward_implementation == "transformers"


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_native_forward_equals_transformers_on_cuda(kind: str) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    model = _tiny(kind).to("cuda")
    ids = torch.randint(3, 97, (2, 7), generator=torch.Generator().manual_seed(9)).to("cuda")
    mask = torch.ones_like(ids)
    mask[0, :2] = 0
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    with torch.no_grad():
        hidden, _ = select_decoder_forward(model, "native")(ids, mask, positions, ())
        expected, _ = select_decoder_forward(model, "transformers")(ids, mask, positions, ())
    valid = mask.bool()
    torch.testing.assert_close(hidden[valid], expected[valid], atol=1e-4, rtol=1e-4)


MACHINE_CPU_VENDOR = native_decoder_forward.cpu_vendor()
"""This machine's CPU vendor (the ``cpu_vendor`` fixture patches what the product path sees, not the hardware)."""
FLOAT32_SUMS = {"atol": 1e-4, "rtol": 1e-5}
"""Two float32 products of a few hundred unit-sized terms summed in another order (MKL's packed GEMM, oneDNN's,
``F.linear``'s) differ by float32 rounding: up to about 3e-5 seen on an AMD EPYC, above assert_close's 1e-5."""


@pytest.mark.parametrize("shape", [(384, 256), (48, 32)])  # (out, in): packed (MKL) or oneDNN's, kept transposed
@pytest.mark.parametrize("transposed", [False, True])
def test_frozen_linear_equals_f_linear_at_every_row_count(
    shape: tuple[int, int], transposed: bool, cpu_vendor: str
) -> None:
    """Packed, oneDNN's or transposed, stored transposed or not, ``FrozenLinear`` is ``F.linear`` to float32
    rounding for 1 to 135 rows."""
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(shape, generator=generator)  # (out, in)
    bias = torch.randn(shape[0], generator=generator)
    stored = weight.t().contiguous() if transposed else weight  # Conv1D stores (in, out)
    for linear_bias in (bias, None):
        linear = FrozenLinear(stored, linear_bias, transposed=transposed)
        assert linear.packed == mkl_packs(weight)
        assert linear.onednn == onednn_multiplies(weight) == (cpu_vendor == "AuthenticAMD" and shape[1] == 256)
        with torch.no_grad():
            for rows in [(1,), (15,), (3, 15), (135,)]:
                inputs = torch.randn(*rows, shape[1], generator=generator)
                expected = torch.nn.functional.linear(inputs, weight, linear_bias)
                torch.testing.assert_close(linear(inputs), expected, **FLOAT32_SUMS)
    inputs = torch.randn(4, shape[1], generator=generator, requires_grad=True)
    linear(inputs).sum().backward()  # with gradients recorded: F.linear, differentiable
    torch.testing.assert_close(inputs.grad, weight.sum(0).expand(4, -1), **FLOAT32_SUMS)


@pytest.mark.parametrize("shape", [(300, 256), (48, 32)])
def test_frozen_linear_follows_an_in_place_change_and_shares_its_copy(shape: tuple[int, int], cpu_vendor: str) -> None:
    weight = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    first, second = FrozenLinear(weight), FrozenLinear(weight)
    assert first._prepared is second._prepared  # one prepared copy per weight
    inputs = torch.randn(15, shape[1], generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        weight.mul_(-2.0)  # e.g. load_state_dict: the version moves, the copy is prepared again
        torch.testing.assert_close(first(inputs), inputs @ weight.T, **FLOAT32_SUMS)
        torch.testing.assert_close(second(inputs), inputs @ weight.T, **FLOAT32_SUMS)


@pytest.mark.parametrize("shape", [(300, 256), (48, 32)])
@pytest.mark.parametrize("transposed", [False, True])
def test_frozen_linear_follows_new_storage_and_a_new_dtype(
    shape: tuple[int, int], transposed: bool, cpu_vendor: str
) -> None:
    """``weight.data = ...`` and ``module.bfloat16()`` keep the Parameter and its version but not its storage."""
    generator = torch.Generator().manual_seed(5)
    parameter = torch.nn.Parameter(torch.randn(shape, generator=generator), requires_grad=False)  # (out, in)
    stored = torch.nn.Parameter(parameter.data.t().contiguous(), requires_grad=False) if transposed else parameter
    linear = FrozenLinear(stored, transposed=transposed)
    inputs = torch.randn(15, shape[1], generator=generator)
    with torch.no_grad():
        linear(inputs)  # prepared for the first storage
        version = stored._version
        stored.data = torch.randn(stored.shape, generator=generator)  # new storage, same version
        assert stored._version == version
        expected = torch.nn.functional.linear(inputs, stored.t() if transposed else stored)
        torch.testing.assert_close(linear(inputs), expected, **FLOAT32_SUMS)
        torch.testing.assert_close(FrozenLinear(stored, transposed=transposed)(inputs), expected, **FLOAT32_SUMS)
        stored.data = stored.data.bfloat16()  # as module.bfloat16() does: the path is chosen again
        halves = inputs.bfloat16()
        expected = torch.nn.functional.linear(halves, stored.t() if transposed else stored)
        torch.testing.assert_close(linear(halves), expected)
        assert not (linear.packed or linear.onednn)


def test_frozen_linears_follow_new_storage_and_fall_back_on_a_new_dtype(cpu_vendor: str) -> None:
    generator = torch.Generator().manual_seed(6)
    weights = [
        torch.nn.Parameter(torch.randn(size, 256, generator=generator), requires_grad=False) for size in (384, 256)
    ]
    linears = FrozenLinears([(weight, None) for weight in weights])
    inputs = torch.randn(15, 256, generator=generator)
    with torch.no_grad():
        linears(inputs)
        weights[1].data = torch.randn(256, 256, generator=generator)  # new storage, same version
        for result, weight in zip(linears(inputs), weights, strict=True):
            torch.testing.assert_close(result, inputs @ weight.T, **FLOAT32_SUMS)
        for weight in weights:
            weight.data = weight.data.bfloat16()
        halves = inputs.bfloat16()
        for result, weight in zip(linears(halves), weights, strict=True):
            torch.testing.assert_close(result, torch.nn.functional.linear(halves, weight))
        assert linears.parts is not None  # bfloat16 weights: one product each


def test_native_forward_follows_the_model_converted_after_it_was_built(cpu_vendor: str) -> None:
    """A forward built before ``model.bfloat16()`` (and one built after) computes the converted model."""
    from transformers import LlamaConfig, LlamaForCausalLM

    wide = {"hidden_size": 256, "intermediate_size": 512}  # projections of >= 65,536 weights: MKL-packed
    config = LlamaConfig(vocab_size=512, max_position_embeddings=256, **(LLAMA_SHAPE | wide))
    model = randomised(LlamaForCausalLM(config), 7)
    ids = torch.randint(3, 500, (2, 9), generator=torch.Generator().manual_seed(8))
    mask, positions = torch.ones_like(ids), torch.arange(9).expand(2, -1)
    with torch.no_grad():
        before = select_decoder_forward(model, "native")
        torch.testing.assert_close(
            before(ids, mask, positions, ())[0], model.base_model(input_ids=ids).last_hidden_state, atol=1e-4, rtol=0
        )
        model.bfloat16()
        wanted = model.base_model(input_ids=ids).last_hidden_state.float()
        for forward in (before, select_decoder_forward(model, "native")):
            got = forward(ids, mask, positions, ())[0]
            assert got.dtype == torch.bfloat16
            assert float((got.float() - wanted).abs().max()) <= 5e-2 * (1 + float(wanted.abs().max()))


@pytest.mark.parametrize("outputs", [(40, 24, 24), (400, 200, 200), (384, 256, 256)])  # small, mixed, all packed
def test_frozen_linears_equal_each_f_linear_and_follow_in_place_changes(
    outputs: tuple[int, ...], cpu_vendor: str
) -> None:
    generator = torch.Generator().manual_seed(3)
    weights = [torch.randn(size, 256 if outputs[0] > 100 else 32, generator=generator) for size in outputs]
    biases = [torch.randn(outputs[0], generator=generator), None, torch.randn(outputs[2], generator=generator)]
    linears = FrozenLinears(list(zip(weights, biases, strict=True)))
    assert linears.packed == all(mkl_packs(weight) for weight in weights)  # (384, 256, 256): one packed product
    assert linears.onednn == all(onednn_multiplies(weight) for weight in weights)  # or one oneDNN product (AMD)
    assert (linears.parts is None) == (linears.packed or linears.onednn or outputs[0] < 100)  # unless sizes are mixed
    inputs = torch.randn(2, 15, weights[0].shape[1], generator=generator)
    with torch.no_grad():
        for change in (False, True):
            if change:  # e.g. load_state_dict: the versions move, the fused copy is made again
                weights[1].mul_(-2.0)
                biases[2].add_(1.0)
            got = linears(inputs)
            assert len(got) == 3
            for result, weight, bias in zip(got, weights, biases, strict=True):
                torch.testing.assert_close(result, torch.nn.functional.linear(inputs, weight, bias), **FLOAT32_SUMS)


@pytest.mark.parametrize("outputs", [(40, 24, 24), (384, 256, 256)])  # fused small weights, one packed product
def test_frozen_linears_grouped_outputs_are_the_linears_side_by_side(outputs: tuple[int, ...], cpu_vendor: str) -> None:
    """``outputs=(2, 1)`` gives ``[x W_0.T + b_0, x W_1.T + b_1]`` and ``x W_2.T + b_2``, with gradients or not."""
    generator = torch.Generator().manual_seed(4)
    width = 256 if outputs[0] > 100 else 32
    weights = [torch.randn(size, width, generator=generator) for size in outputs]
    biases = [None, torch.randn(outputs[1], generator=generator), None]
    linears = FrozenLinears(list(zip(weights, biases, strict=True)), outputs=(2, 1))
    assert linears.sizes == [outputs[0] + outputs[1], outputs[2]]
    inputs = torch.randn(3, 15, width, generator=generator)
    products = [torch.nn.functional.linear(inputs, weight, bias) for weight, bias in zip(weights, biases, strict=True)]
    expected = [torch.cat(products[:2], dim=-1), products[2]]
    for gradients in (False, True):
        with torch.set_grad_enabled(gradients):
            got = linears(inputs)
        assert len(got) == 2
        for result, wanted in zip(got, expected, strict=True):
            torch.testing.assert_close(result, wanted, **FLOAT32_SUMS)
    with pytest.raises(ValueError, match=r"outputs \(2, 2\)"):
        FrozenLinears(list(zip(weights, biases, strict=True)), outputs=(2, 2))


def test_rotary_table_equals_the_models_rotary_embedding_inside_and_past_the_table() -> None:
    rotary = _tiny("llama3-rope").base_model.rotary_emb  # max_position_embeddings = 64
    table = RotaryTable(rotary)
    assert table.positions == 64
    hidden = torch.zeros(2, 3, 32)
    for positions in ([[0, 5, 63], [7, 8, 9]], [[60, 64, 100], [1, 2, 3]]):  # the second reaches past the table
        position_ids = torch.tensor(positions)
        cos, signed_sin = table.of(hidden, position_ids)  # (N, T, 1, hd)
        expected_cos, expected_sin = rotary(hidden, position_ids)  # (N, T, hd)
        half = expected_sin.shape[-1] // 2
        torch.testing.assert_close(cos[:, :, 0], expected_cos)
        torch.testing.assert_close(
            signed_sin[:, :, 0], torch.cat([-expected_sin[..., :half], expected_sin[..., half:]], -1)
        )


def test_rotary_table_is_off_for_a_rope_that_depends_on_the_length() -> None:
    import transformers

    rope = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}
    shape = LLAMA_SHAPE | {"num_hidden_layers": 1}
    config = transformers.LlamaConfig(vocab_size=97, max_position_embeddings=16, **shape, rope_parameters=rope)
    model = randomised(transformers.LlamaForCausalLM(config), 7)
    assert RotaryTable(model.base_model.rotary_emb).positions == 0
    ids = torch.randint(0, 97, (1, 24), generator=torch.Generator().manual_seed(8))  # past 16: the rope rescales
    mask, positions = torch.ones_like(ids), torch.arange(24)[None]
    with torch.no_grad():
        hidden, _ = select_decoder_forward(model, "native")(ids, mask, positions, ())
        expected, _ = select_decoder_forward(model, "transformers")(ids, mask, positions, ())
    torch.testing.assert_close(hidden, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("hooked", [False, True])
def test_language_model_head_equals_the_models_head_and_gives_a_row_the_same_logits_in_any_batch(
    hooked: bool, cpu_vendor: str
) -> None:
    """A head MKL packs is the model's own ``lm_head`` to float32 rounding at 1 to 135 rows, and a row's
    log-probs do not depend on the rows beside it; a hooked head is the module's own call, hook included."""
    import transformers

    config = transformers.LlamaConfig(vocab_size=4096, hidden_size=32, intermediate_size=40, num_hidden_layers=1)
    model = randomised(transformers.LlamaForCausalLM(config), 4)  # head (4096, 32): packed where MKL is
    if hooked:
        model.lm_head.register_forward_hook(lambda module, inputs, output: output * 2.0)
    head = LanguageModelHead(model)
    generator = torch.Generator().manual_seed(5)
    hidden = torch.randn(135, 32, generator=generator)  # (B, H)
    with torch.no_grad():
        for rows in (1, 9, 135):
            expected = model.lm_head(hidden[:rows]).log_softmax(dim=-1)  # (rows, n)
            torch.testing.assert_close(head.log_probs(hidden[:rows]), expected, **FLOAT32_SUMS)
        # measured on Intel Xeons; on an AMD EPYC neither MKL's packed GEMM nor oneDNN's keeps a row's last digits
        if mkl_packs(model.lm_head.weight) and MACHINE_CPU_VENDOR == "GenuineIntel" and not hooked:
            alone = torch.cat([head.log_probs(hidden[row : row + 1]) for row in range(9)])  # (9, n)
            assert torch.equal(head.log_probs(hidden[:9]), alone)


@pytest.mark.parametrize(
    ("vendor", "machine", "onednn"),
    [
        ("GenuineIntel", "x86_64", False),
        ("", "x86_64", False),
        ("AuthenticAMD", "x86_64", True),
        ("AuthenticAMD", "arm64", False),
    ],
)
def test_the_product_path_is_a_fixed_rule_of_the_cpu(
    vendor: str, machine: str, onednn: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """oneDNN on a known non-Intel x86 CPU (where torch has it), MKL's packed GEMM on Intel or an unknown vendor."""
    from tokenized_bandit_gym.llm import native_decoder_forward

    monkeypatch.setattr(native_decoder_forward, "cpu_vendor", lambda: vendor)
    monkeypatch.setattr(native_decoder_forward.platform, "machine", lambda: machine)
    available = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    assert native_decoder_forward.onednn_preferred() == (onednn and available)
    weight = torch.zeros(512, 256)
    assert not (mkl_packs(weight) and onednn_multiplies(weight))  # one path at most
    assert onednn_multiplies(weight) == (onednn and available)
    assert not onednn_multiplies(weight.bfloat16()) and not onednn_multiplies(torch.zeros(48, 32))
