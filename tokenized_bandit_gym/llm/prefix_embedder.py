"""Mean-pooled last-layer embeddings of every prefix of a token sequence, from one forward pass.

The paper (section 6, "we adopt mean pooling to obtain d-dimensional embedding vectors from the model's
last-layer hidden states") embeds a sequence ``z`` as ``e(z) = (1/|z|) sum_i h_i(z)``. In a causal LM the
hidden state ``h_i`` depends only on ``z^(1:i)``, so the embeddings of all prefixes ``z^(1:k)`` are the running
means of one forward's hidden states: ``e(z^(1:k)) = cumsum(h)_k / k``. Pooling spans the whole tokenized
``query:answer`` text, special tokens (e.g. BOS) included. This is the LLM envs' ``e`` (with
``pooling="query_response"``, ``embedding_norm="none"``): the model comes from the package's one loader
(:func:`~tokenized_bandit_gym.llm.load_language_model.load_language_model`) and runs the envs' forward
(:func:`~tokenized_bandit_gym.llm.decoder_forward.select_decoder_forward`, sliding windows included).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import torch

from tokenized_bandit_gym.core.validation import check_device, check_int
from tokenized_bandit_gym.llm.decoder_forward import select_decoder_forward
from tokenized_bandit_gym.llm.load_language_model import DEFAULT_MODEL_NAME, load_language_model, resolve_model_source


class PrefixEmbedder:
    """Tokenizes texts and returns the mean-pooled last-layer embedding of every prefix.

    Args:
        model: ``"stories260K"`` (shipped), a local directory, or a cached Hugging Face causal-LM id.
        device: Torch device for the forward passes.
        batch_size: Sequences per forward pass.
        max_tokens: Sequences are truncated to this many tokens (default: the model's
            ``max_position_embeddings`` when set, else 1024).
        dtype: Torch dtype the model is loaded in.
        trust_remote_code: Run code shipped with the model (off unless turned on).
        attn_implementation: The attention kernel (``"auto"``: SDPA where supported, else eager).

    Attributes:
        model: The base model (``LlamaModel``, ``GPT2Model``, ...): the final-normed last hidden
            state without the ``(B, T, vocab)`` logits.
        language_model: The causal LM it belongs to.

    Example:
        >>> embedder = PrefixEmbedder()  # doctest: +SKIP
        >>> prefixes = embedder.prefix_embeddings([embedder.tokenize("Once upon a time")])  # doctest: +SKIP
        >>> prefixes[0].shape  # doctest: +SKIP
        torch.Size([5, 64])
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_MODEL_NAME,
        device: str | torch.device = "cpu",
        batch_size: int = 16,
        max_tokens: int | None = None,
        dtype: str | torch.dtype = "float32",
        trust_remote_code: bool = False,
        attn_implementation: str = "auto",
    ) -> None:
        self.device = check_device(device)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.model_path = resolve_model_source(model)
        self.language_model, self.tokenizer = load_language_model(
            self.model_path, dtype, self.device, trust_remote_code, attn_implementation
        )
        self.model = self.language_model.base_model
        self._forward = select_decoder_forward(self.language_model)
        limit = getattr(self.language_model.config.get_text_config(), "max_position_embeddings", None) or 1024
        self.max_tokens = check_int("max_tokens", limit if max_tokens is None else max_tokens, minimum=1)

    @property
    def embedding_dim(self) -> int:
        """Width ``d`` of the embeddings (the model's hidden size)."""
        weight = self.language_model.get_input_embeddings().weight  # torch types it Tensor | Module
        return int(weight.shape[1])  # type: ignore[index]

    def tokenize(self, text: str) -> list[int]:
        """Return the token ids of ``text`` (the tokenizer's special tokens added), truncated to ``max_tokens``."""
        return list(self.tokenizer(text, truncation=True, max_length=self.max_tokens)["input_ids"])

    @torch.no_grad()
    def prefix_embeddings(
        self,
        sequences: Sequence[Sequence[int]],
        on_batch: Callable[[list[int], list[torch.Tensor]], None] | None = None,
    ) -> list[torch.Tensor]:
        """Return ``e(z^(1:k))`` for every ``k`` of every sequence.

        Args:
            sequences: Token-id sequences, each non-empty and at most ``max_tokens`` long.
            on_batch: Called after each forward with the indices (into ``sequences``) of the batch and their
                embeddings (a progress bar, or a cache that lets an interrupted run resume).

        Returns:
            One float32 CPU tensor of shape ``(|z|, d)`` per sequence; row ``k - 1`` is the mean of the last-layer
            hidden states of positions ``1..k``.

        Raises:
            ValueError: A sequence is empty or longer than ``max_tokens``.
        """
        for index, sequence in enumerate(sequences):
            if not 0 < len(sequence) <= self.max_tokens:
                raise ValueError(f"sequence {index} has {len(sequence)} tokens; need 1..{self.max_tokens}")
        results: list[torch.Tensor | None] = [None] * len(sequences)
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))  # similar lengths share a batch
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            lengths = [len(sequences[i]) for i in batch]
            width = max(lengths)
            ids = torch.zeros((len(batch), width), dtype=torch.long)  # (B, T) right-padded
            mask = torch.zeros((len(batch), width), dtype=torch.long)  # (B, T)
            for row, i in enumerate(batch):
                ids[row, : lengths[row]] = torch.as_tensor(list(sequences[i]), dtype=torch.long)
                mask[row, : lengths[row]] = 1
            positions = torch.arange(width)[None].expand(len(batch), width)  # (B, T)
            hidden, _ = self._forward(ids.to(self.device), mask.to(self.device), positions.to(self.device), ())
            running = hidden.double().cumsum(dim=1)  # (B, T, d) sums over positions 1..k
            counts = torch.arange(1, width + 1, device=running.device, dtype=running.dtype)  # (T,)
            means = (running / counts[None, :, None]).float().cpu()  # (B, T, d)
            for row, i in enumerate(batch):
                results[i] = means[row, : lengths[row]]  # (|z|, d)
            if on_batch is not None:
                on_batch(batch, [means[row, : lengths[row]] for row in range(len(batch))])
        return [r for r in results if r is not None]
