"""Next-token log-probs from last-layer hidden states, as the model's own forward computes its logits.

The core runs the LM head only on the hidden state that gives the next distribution (one row per
round, not the k candidates), so it applies the head itself: the output embedding (tied or not),
then the post-processing the families' ``*ForCausalLM.forward`` apply: Granite's division by
``logits_scaling``, Cohere's multiplication by ``logit_scale`` and Gemma-2/3's
``final_logit_softcapping``. :meth:`LanguageModelHead.check` compares this against the model's
own logits on a probe sequence and refuses a head it does not reproduce.
"""

from __future__ import annotations

from typing import Any

import torch

from tokenized_bandit_gym.llm.native_decoder_forward import FrozenLinear, mkl_packs, onednn_multiplies


class LanguageModelHead:
    """``log_softmax`` of the model's logits ``(B, n)`` float32 from last-layer hidden states ``(B, H)``.

    A plain ``torch.nn.Linear`` head whose weight :func:`mkl_packs` is multiplied through :class:`FrozenLinear`
    over an MKL-packed copy of the weight (through oneDNN's linear where :func:`onednn_multiplies` holds, on AMD
    CPUs). A step applies the head to one row per round, so the product streams the whole ``(n, H)`` weight for
    a few rows; ``F.linear`` ran 2.4x slower than the packed product on SmolLM2's 49,152 x 576 head at 9 rows
    on an Intel Xeon, and 2.6x slower than oneDNN's on an AMD EPYC (``benchmarks/RESULTS.md``, issue 28 item 4).
    On Intel Xeons the packed product gives a row the same logits in any batch (``F.linear`` does not; on an AMD
    EPYC neither MKL's products nor oneDNN's do, to float32 rounding); all sum in float32, so
    the log-probs agree with the model's own to float32 rounding, within :attr:`tolerance`. Any other head
    (small, GPU, half precision, quantized, hooked) is the module's own call.

    Args:
        model: a loaded causal LM.

    Raises:
        ValueError: the model has no output embedding.
    """

    def __init__(self, model: Any) -> None:
        config = model.config.get_text_config()
        self.model_type = str(getattr(config, "model_type", type(model).__name__))
        self.linear = model.get_output_embeddings()
        if self.linear is None or not hasattr(self.linear, "weight"):
            raise ValueError(f"model_type={self.model_type!r} has no output embedding (LM head) to score tokens with")
        scale = 1.0
        logits_scaling = getattr(config, "logits_scaling", None)  # Granite: logits / logits_scaling
        if logits_scaling is not None:
            scale /= float(logits_scaling)
        logit_scale = getattr(model, "logit_scale", getattr(config, "logit_scale", None))  # Cohere: logits * scale
        if isinstance(logit_scale, (int, float)):
            scale *= float(logit_scale)
        self.scale = scale
        weight = self.linear.weight
        prepared = _plain(self.linear) and (mkl_packs(weight) or onednn_multiplies(weight))
        self._product = FrozenLinear(weight, self.linear.bias) if prepared else self.linear
        softcap = getattr(config, "final_logit_softcapping", None)  # Gemma-2/3: cap * tanh(logits / cap)
        self.softcap = float(softcap) if softcap else None
        # Relative tolerance of a comparison with the model's own forward: the rounding of the weights' dtype.
        self.tolerance = 1e-3 if self.linear.weight.dtype in (torch.float32, torch.float64) else 5e-2

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """Next-token log-probs ``(B, n)`` float32 from last-layer hidden states ``(B, H)``."""
        logits = self._product(hidden).float()  # (B, n)
        if self.scale != 1.0:
            logits = logits * self.scale
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return torch.log_softmax(logits, dim=-1)

    def check(self, output: Any) -> None:
        """Compare with the model's own logits: ``output`` of ``model(ids, output_hidden_states=True)``, one row.

        Raises:
            ValueError: the log-probs differ (the head post-processes its logits in a way not
                reproduced here); the message names the model type and the difference.
        """
        expected = output.logits[0].float().log_softmax(dim=-1)  # (T, n)
        last_hidden = output.hidden_states[-1]
        if last_hidden.dim() != 3:  # e.g. Gemma-3n's AltUp: (streams, B, T, H)
            raise ValueError(
                f"model_type={self.model_type!r} keeps {last_hidden.dim() - 3} extra axis of parallel hidden streams "
                f"per token (its last hidden states have shape {tuple(last_hidden.shape)}, as with Gemma-3n's AltUp): "
                "the envs need one last hidden state per token for the embedding e and the LM head"
            )
        try:
            got = self.log_probs(output.hidden_states[-1][0])  # (T, n)
        except RuntimeError as error:  # e.g. a prediction layer between the last hidden state and the head
            raise ValueError(
                f"model_type={self.model_type!r}: the LM head is not a map of the last hidden state ({error})"
            ) from error
        if got.shape != expected.shape:
            raise ValueError(
                f"model_type={self.model_type!r}: the LM head applied to the last hidden states gives log-probs of "
                f"shape {tuple(got.shape)}, the model's forward {tuple(expected.shape)}: its logits are not a map of "
                "one last hidden state per token"
            )
        finite = torch.isfinite(expected)
        difference = float((got - expected).abs()[finite].max()) if bool(finite.any()) else 0.0
        if difference > self.tolerance * (1.0 + float(expected[finite].abs().max())) or not torch.equal(
            finite, torch.isfinite(got)
        ):
            raise ValueError(
                f"model_type={self.model_type!r}: the LM head's logits are not lm_head(h) with the known "
                f"post-processing (scale {self.scale}, final softcapping {self.softcap}): log-probs differ by "
                f"{difference:.3g} from the model's own forward, so they cannot be reproduced"
            )


def _plain(linear: Any) -> bool:
    """Whether ``linear`` is a plain ``torch.nn.Linear``: no subclass (quantized, adapted) and no hooks."""
    return (
        type(linear) is torch.nn.Linear
        and not linear._forward_hooks
        and not linear._forward_pre_hooks
        and not hasattr(linear, "_hf_hook")
    )
