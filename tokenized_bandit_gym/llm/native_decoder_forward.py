"""The base of the native forwards: each computes one architecture family and refuses any other model.

Their projections go through :class:`FrozenLinear`: on an Intel CPU with MKL, a float32 weight is packed
once into MKL's GEMM layout and every later product reads it packed. With the few rows of a step (the
k candidates of each row), ``F.linear``'s unpacked GEMM runs far below the machine's matmul rate:
SmolLM2-135M's 210 decoder products took 1.7x as long at 15 rows, and longer at 15 rows than at 30
(``benchmarks/RESULTS.md``, issue 28 item 4). On other x86 CPUs (AMD) MKL's small products are slow,
packed or not, and oneDNN's linear is used instead: on a 2-core AMD EPYC the same products ran at 182
GFLOP/s through oneDNN at 135 rows, 141 packed and 154 through ``F.linear``, against 195 for a 1024^3
matmul (``benchmarks/RESULTS.md``, "The whole runs against their floor").
"""

from __future__ import annotations

import functools
import itertools
import platform
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch.utils.weak import WeakIdKeyDictionary

from tokenized_bandit_gym.llm.additive_attention_mask import additive_attention_mask
from tokenized_bandit_gym.llm.language_model_state import KeyValues
from tokenized_bandit_gym.llm.static_kv_cache import appended


class NativeDecoderForward(ABC):
    """A :data:`~tokenized_bandit_gym.llm.decoder_forward.DecoderForward` over the model's own weights.

    The call turns a 0/1 ``(N, S)`` mask into the additive ``(N, 1, T, S)`` one, then runs the
    family's layers (:meth:`_layers`).

    Args:
        model: a loaded causal LM for which :meth:`unsupported_reason` is None.

    Raises:
        ValueError: the model is not one this forward computes exactly (the reason is named).
    """

    architecture: ClassVar[str]
    """The family's name, for messages."""

    def __init__(self, model: Any) -> None:
        reason = self.unsupported_reason(model)
        if reason is not None:
            raise ValueError(f"no native {self.architecture} forward for this model: {reason}")
        self._base = model.base_model
        self._dtype = model.get_input_embeddings().weight.dtype  # of the hidden states, hence of the mask

    @staticmethod
    @abstractmethod
    def unsupported_reason(model: Any) -> str | None:
        """None when this forward computes exactly ``model``, else why not."""

    def __call__(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        past: KeyValues,
    ) -> tuple[torch.Tensor, KeyValues]:
        """Hidden ``(N, T, H)`` of ``input_ids`` ``(N, T)`` over ``past``, and the cache with their entries."""
        if attention_mask.dim() == 2:
            attention_mask = additive_attention_mask(attention_mask, input_ids.shape[1], self._dtype)
        return self._layers(input_ids, attention_mask, position_ids, past)

    @abstractmethod
    def _layers(
        self, input_ids: torch.Tensor, additive_mask: torch.Tensor, position_ids: torch.Tensor, past: KeyValues
    ) -> tuple[torch.Tensor, KeyValues]:
        """The family's forward with the additive mask ``(N, 1, T, S)``: hidden ``(N, T, H)`` and cache."""


def with_past(
    past: KeyValues | ScratchColumns, layer: int, keys: torch.Tensor, values: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer ``layer``'s cache ``(N, h, S, hd)``: the new entries ``(N, h, T, hd)`` after its past, if any.

    The entries are scratch columns of the past's preallocated cache where it has room (written in place,
    :mod:`~tokenized_bandit_gym.llm.static_kv_cache`), else a concatenation; the caller commits them
    (:func:`~tokenized_bandit_gym.llm.static_kv_cache.commit`) if they are to stay.
    """
    if isinstance(past, ScratchColumns):
        return past.written(layer, keys, values)
    if not past:
        return keys, values
    return appended(past[layer][0], keys, commit=False), appended(past[layer][1], values, commit=False)


class ScratchColumns:
    """A static cache ``(N, h, C, hd)`` per layer and the columns ``(T,)`` a forward's T new entries go to.

    Passed as a native forward's ``past``: each layer writes its new keys and values into those columns in place
    and attends over all C columns (the additive mask hides the columns a row must not see), so the forward's
    shapes do not depend on how many columns are in use: what a captured step (a CUDA graph, ``torch.compile``)
    needs. The rotary table is read without checking the positions' range (the caller keeps them in it).

    Args:
        keys: per layer ``(N, h, C, hd)``, written in place.
        values: per layer ``(N, h, C, hd)``, written in place.
        columns: ``(T,)`` int64 where the new entries go.
    """

    def __init__(self, keys: Sequence[torch.Tensor], values: Sequence[torch.Tensor], columns: torch.Tensor) -> None:
        self.keys, self.values, self.columns = keys, values, columns

    def written(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer``'s whole cache ``(N, h, C, hd)`` with ``keys``, ``values`` ``(N, h, T, hd)`` written in."""
        self.keys[layer].index_copy_(2, self.columns, keys)
        self.values[layer].index_copy_(2, self.columns, values)
        return self.keys[layer], self.values[layer]


PACKED_ROWS_HINT = 256
"""Rows MKL packs a weight for. The layout it picks depends on this and on the threads; measured on
SmolLM2-135M's projections (2026-11-26, ``benchmarks/RESULTS.md``), 256 was faster than ``F.linear``
from 15 to 240 rows on one and on two threads, where 15 rows lost from 45 rows on and 1024 lost on two."""
PACKED_MIN_WEIGHTS = 2**16
"""Smallest weight (entries) :class:`FrozenLinear` packs: below it (a 256 x 256 matrix) the packed call's
fixed cost outweighs what it saves; such small CPU weights are kept transposed instead (stories260K)."""

_prepared_weights = WeakIdKeyDictionary()
"""A stored weight -> (its :func:`weight_state` when prepared, the path, its MKL-packed, ``(out, in)`` or ``(in, out)``
copy), shared by every forward."""


@functools.cache
def cpu_vendor() -> str:
    """The CPU's vendor as Linux names it (``GenuineIntel``, ``AuthenticAMD``, ...); ``""`` where it is unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("vendor_id"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return ""


def onednn_preferred() -> bool:
    """Whether large float32 CPU products go through oneDNN's linear instead of MKL's packed GEMM.

    True on an x86 CPU whose vendor is known and is not Intel (AMD, Hygon, ...), where torch has oneDNN's
    linear: on an AMD EPYC, MKL's GEMMs ran at 0.6-0.8x the 1024^3 matmul rate at the 60-180 rows of a step
    (0.2-0.3x at 15), packed or not, oneDNN's at 0.8-0.94x (0.44x at 15). Elsewhere (Intel, or a vendor that
    cannot be read) MKL's packed GEMM, measured at or above that rate on Intel Xeons. A fixed rule, not a
    timing, so a machine always takes the same path and a seed the same trajectory.
    """
    return (
        platform.machine().lower() in ("x86_64", "amd64")
        and cpu_vendor() not in ("", "GenuineIntel")
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


def _large_float32_on_cpu(weight: torch.Tensor) -> bool:
    """A float32 CPU matrix of >= :data:`PACKED_MIN_WEIGHTS` entries: one :class:`FrozenLinear` prepares."""
    return (
        weight.device.type == "cpu"
        and weight.dtype == torch.float32
        and weight.dim() == 2
        and weight.numel() >= PACKED_MIN_WEIGHTS
    )


def mkl_packs(weight: torch.Tensor) -> bool:
    """Whether :class:`FrozenLinear` packs ``weight`` for MKL's packed GEMM.

    Float32 on the CPU, >= :data:`PACKED_MIN_WEIGHTS` entries, where torch has the packed GEMM and
    :func:`onednn_preferred` does not hold.
    """
    return (
        _large_float32_on_cpu(weight)
        and torch.backends.mkl.is_available()
        and hasattr(torch.ops.mkl, "_mkl_linear")
        and hasattr(torch.ops.mkl, "_mkl_reorder_linear_weight")
        and not onednn_preferred()
    )


def onednn_multiplies(weight: torch.Tensor) -> bool:
    """Whether :class:`FrozenLinear` multiplies ``weight`` through oneDNN's linear.

    Float32 on the CPU, >= :data:`PACKED_MIN_WEIGHTS` entries, where :func:`onednn_preferred` holds.
    """
    return _large_float32_on_cpu(weight) and onednn_preferred()


def _onednn_linear(inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``inputs @ weight.T + bias`` ``(..., out)`` through oneDNN, ``weight`` ``(out, in)`` contiguous."""
    return torch.ops.mkldnn._linear_pointwise(inputs, weight, bias, "none", [None], "")


def kept_transposed(weight: torch.Tensor) -> bool:
    """Whether :class:`FrozenLinear` keeps ``weight`` as ``W.T``: on the CPU, below :data:`PACKED_MIN_WEIGHTS`."""
    return weight.device.type == "cpu" and weight.numel() < PACKED_MIN_WEIGHTS


def _product_path(weights: Sequence[torch.Tensor]) -> str | None:
    """How :class:`FrozenLinear` (one weight) or :class:`FrozenLinears` (a group) multiplies ``weights``.

    ``"packed"`` (:func:`mkl_packs` for every weight), ``"onednn"`` (:func:`onednn_multiplies`), ``"transposed"``
    (:func:`kept_transposed`), or None: ``F.linear``, one product per weight in a group.
    """
    for path, holds in (("packed", mkl_packs), ("onednn", onednn_multiplies), ("transposed", kept_transposed)):
        if all(holds(weight) for weight in weights):
            return path
    return None


def _prepared_copy(weight: torch.Tensor, path: str) -> torch.Tensor:
    """The copy of ``W`` ``(out, in)`` that ``path`` multiplies: MKL-packed, or ``(out, in)`` or ``(in, out)``."""
    if path == "packed":
        return torch.ops.mkl._mkl_reorder_linear_weight(weight.contiguous(), PACKED_ROWS_HINT)
    if path == "onednn":
        return weight.contiguous()
    return weight.t().contiguous()


def weight_state(tensor: torch.Tensor) -> tuple[int, int]:
    """``(version, storage address)`` of a stored weight: a prepared copy of it is current while both are unchanged.

    An in-place write (``copy_``, ``load_state_dict``) moves the version; ``module.float()``, ``.to(dtype)`` or an
    assignment to ``weight.data`` keeps the Parameter (and its version) but gives it new storage.
    """
    return tensor._version, tensor.data_ptr()


class FrozenLinear:
    """``inputs @ W.T + bias`` ``(..., out)`` for ``inputs`` ``(..., in)`` and a frozen weight ``W`` ``(out, in)``.

    The weight is prepared once for the few rows a step multiplies, on the CPU:

    * where :func:`mkl_packs` holds, MKL's packed GEMM over a packed copy of ``W`` (one more copy of
      the weights in memory);
    * where :func:`onednn_multiplies` holds (a large float32 weight on an AMD CPU), oneDNN's linear over ``W``
      ``(out, in)`` contiguous (a copy only when stored transposed);
    * a smaller weight as ``W.T`` ``(in, out)`` contiguous (a copy unless stored so, as ``Conv1D`` does),
      multiplied by ``torch.matmul`` (``addmm`` with a bias): ``F.linear``'s transposed view and dispatch
      cost more than the product of a 64-wide layer;
    * any other weight (GPU, half precision), and whenever gradients are recorded: ``F.linear``.

    A prepared copy is shared by every forward over the same weight and freed with it. It is prepared again
    when the weight changes: in place (its version moves) or to new storage (``module.float()``, ``.to()``,
    ``weight.data = ...``; the path is chosen again for the new dtype and device). Every path sums each product
    in float32 (for float32 weights): the results agree to float32 rounding, not bit for bit.

    Args:
        weight: the stored weight, ``W`` ``(out, in)``, or ``W.T`` ``(in, out)`` with ``transposed``
            (transformers' ``Conv1D``, GPT-2's projections).
        bias: ``(out,)`` or None.
        transposed: ``weight`` is stored ``(in, out)``.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None, transposed: bool = False) -> None:
        self.stored_weight, self.bias, self.transposed = weight, bias, transposed
        self.packed = False
        """Whether the products read an MKL-packed copy of the weight (decided again when the weight changes)."""
        self.onednn = False
        """Whether the products go through oneDNN's linear (decided again when the weight changes)."""
        self._version: tuple[int, int] = (-1, 0)  # the weight's (version, storage) the prepared copy is of
        self._prepared: torch.Tensor | None = None
        self._prepare()

    @property
    def weight(self) -> torch.Tensor:
        """``W`` ``(out, in)``: the stored weight as it is now (a view when stored transposed)."""
        return self.stored_weight.t() if self.transposed else self.stored_weight

    def __call__(self, inputs: torch.Tensor) -> torch.Tensor:
        """``inputs @ W.T + bias`` ``(..., out)`` (``F.linear`` while torch.compile traces: a graph of plain ops)."""
        if torch.is_grad_enabled() or torch.compiler.is_compiling():
            return F.linear(inputs, self.weight, self.bias)
        if weight_state(self.stored_weight) != self._version:
            self._prepare()
        if self._prepared is None:
            return F.linear(inputs, self.weight, self.bias)
        if self.packed:
            # the op reads the packed copy only when ``rows`` equals its last argument; MKL's packed layout serves any
            rows = inputs.numel() // inputs.shape[-1]
            return torch.ops.mkl._mkl_linear(inputs, self._prepared, self.weight, self.bias, rows)
        if self.onednn:
            return _onednn_linear(inputs, self._prepared, self.bias)
        return _times_transposed(inputs, self._prepared, self.bias)

    def _prepare(self) -> None:
        """Take the shared prepared copy of the weight as it is now, preparing it if none is current.

        Which copy (packed, ``W`` for oneDNN, ``W.T``, or none: ``F.linear``) is decided here from the weight's
        dtype, device and size, so a weight moved to another dtype or device after construction gets the path
        that fits it.
        """
        stored = self.stored_weight
        version = weight_state(stored)
        path = _product_path((stored,))
        self.packed, self.onednn = path == "packed", path == "onednn"
        if path is None:
            self._version, self._prepared = version, None
            return
        if (path == "onednn" and self.weight.is_contiguous()) or (
            path == "transposed" and self.weight.t().is_contiguous()
        ):  # stored as the product reads it: used as it is
            self._version, self._prepared = version, stored
            return
        entry = _prepared_weights.get(stored)
        if entry is None or entry[:2] != (version, path):
            with torch.no_grad():
                entry = _prepared_weights[stored] = (version, path, _prepared_copy(self.weight, path))
        self._version, _, self._prepared = entry


def _times_transposed(inputs: torch.Tensor, transposed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``inputs @ W.T + bias`` ``(..., out)`` for ``inputs`` ``(..., in)`` and ``transposed`` = ``W.T`` ``(in, out)``.

    Without a bias one ``torch.matmul``, which folds the leading dimensions into one ``mm`` itself (one call
    from Python instead of a reshape, the product and a view); with one, ``addmm`` over the folded rows.
    """
    if bias is None:
        return torch.matmul(inputs, transposed)
    flat = inputs.reshape(-1, inputs.shape[-1])  # (rows, in)
    return torch.addmm(bias, flat, transposed).view(*inputs.shape[:-1], -1)


class FrozenLinears:
    """Several linears of the same inputs (a layer's q, k, v projections): ``inputs @ W_i.T + b_i`` ``(..., out_i)``.

    On the CPU they are multiplied as one product over one prepared copy of the concatenated weight
    ``W`` ``(sum out_i, in)``, then split into views: where :func:`mkl_packs` holds for every weight, MKL's
    packed GEMM over a packed copy of ``W`` (the layer's q, k, v products one GEMM, as its gate and up:
    fewer, wider products than one each); where :func:`onednn_multiplies` holds for every weight, oneDNN's
    linear over ``W``; where every weight is small, ``addmm`` over ``W.T`` ``(in, sum out_i)``.
    Any other weights (GPU, half precision, mixed sizes) get one :class:`FrozenLinear` each, and ``F.linear``
    runs whenever gradients are recorded. A prepared copy is shared by every group over the same weights and
    made again when any weight or bias changes in place; each product sums in float32, as
    :class:`FrozenLinear`'s do.

    Args:
        linears: ``(W_i (out_i, in), b_i (out_i,) or None)``, the same ``in`` and device for all.
        outputs: how many consecutive linears each returned tensor holds (their outputs side by side, as one
            wider linear gives them); default one each. The Llama forward takes q and k as one tensor, to
            rotate them together.
    """

    def __init__(
        self, linears: Sequence[tuple[torch.Tensor, torch.Tensor | None]], outputs: Sequence[int] | None = None
    ) -> None:
        self.weights = tuple(weight for weight, _ in linears)
        self.biases = tuple(bias for _, bias in linears)
        self._tensors = tuple(tensor for tensor in (*self.weights, *self.biases) if tensor is not None)
        self._tensor_ids = tuple(id(tensor) for tensor in self._tensors)  # which weights a shared fused copy is of
        self.outputs = tuple(outputs) if outputs is not None else (1,) * len(self.weights)
        if sum(self.outputs) != len(self.weights) or min(self.outputs) < 1:
            raise ValueError(f"outputs {self.outputs} must be positive counts summing to {len(self.weights)} linears")
        widths = [int(weight.shape[0]) for weight in self.weights]
        bounds = [0, *itertools.accumulate(self.outputs)]
        self.sizes = [sum(widths[start:end]) for start, end in itertools.pairwise(bounds)]
        """Widths of the returned tensors."""
        self.packed = False
        """Whether the product reads an MKL-packed copy of the concatenated weight (decided again on a change)."""
        self.onednn = False
        """Whether the product goes through oneDNN's linear over the concatenated weight (decided again on a change)."""
        self.parts: list[FrozenLinear] | None = None
        self._fused: _FusedWeights | None = None
        self._fuse()

    def __call__(self, inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``inputs`` ``(..., in)`` through the linears: ``(..., size)`` per :attr:`sizes` (views if fused)."""
        if self.parts is not None or torch.is_grad_enabled() or torch.compiler.is_compiling():
            return self._grouped([self._unfused(inputs, index) for index in range(len(self.weights))])
        fused = self._fused
        if fused is None or fused.versions != self._current_versions():
            fused = self._fuse()
            if fused is None:  # the weights no longer fit one fused copy: one product each from now on
                return self(inputs)
        if self.packed:
            # the op reads the packed copy, and of its third argument only the sizes, when ``rows`` is its last
            rows = inputs.numel() // inputs.shape[-1]
            product = torch.ops.mkl._mkl_linear(inputs, fused.weight, fused.shape, fused.bias, rows)
            return product.split(self.sizes, dim=-1)  # (..., out_i) views
        if self.onednn:
            return _onednn_linear(inputs, fused.weight, fused.bias).split(self.sizes, dim=-1)
        return _times_transposed(inputs, fused.weight, fused.bias).split(self.sizes, dim=-1)

    def _unfused(self, inputs: torch.Tensor, index: int) -> torch.Tensor:
        """Linear ``index`` alone: ``(..., out_index)``."""
        if self.parts is not None:
            return self.parts[index](inputs)
        return F.linear(inputs, self.weights[index], self.biases[index])

    def _grouped(self, products: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """The linears' products ``(..., out_i)`` side by side as :attr:`outputs` groups them."""
        grouped, start = [], 0
        for count in self.outputs:
            group = products[start : start + count]
            grouped.append(group[0] if count == 1 else torch.cat(group, dim=-1))
            start += count
        return tuple(grouped)

    def _fuse(self) -> _FusedWeights | None:
        """The shared fused copy of the weights and biases as they are now, prepared if none is current.

        None when the weights do not fit one fused copy (GPU, half precision, mixed sizes): :attr:`parts` then
        holds one :class:`FrozenLinear` each, used from then on.
        """
        path = _product_path(self.weights)
        self.packed, self.onednn = path == "packed", path == "onednn"
        if path is None:
            self.parts = [FrozenLinear(weight, bias) for weight, bias in zip(self.weights, self.biases, strict=True)]
            self._fused = None
            return None
        versions = self._current_versions()
        fused = _fused_weights.get(self.weights[0])
        if fused is None or (fused.tensor_ids, fused.versions, fused.path) != (self._tensor_ids, versions, path):
            with torch.no_grad():
                weight = torch.cat(self.weights, dim=0)  # (sum out_i, in)
                prepared = _prepared_copy(weight, path)
                bias = None
                if any(b is not None for b in self.biases):
                    parts = zip(self.weights, self.biases, strict=True)
                    bias = torch.cat([w.new_zeros(w.shape[0]) if b is None else b for w, b in parts])  # (sum out_i,)
            shape = weight.new_zeros(()).expand(weight.shape)  # (sum out_i, in), no storage: the op's sizes
            fused = _fused_weights[self.weights[0]] = _FusedWeights(
                self._tensor_ids, versions, path, prepared, bias, shape
            )
        self._fused = fused
        return fused

    def _current_versions(self) -> tuple[tuple[int, int], ...]:
        """The :func:`weight_state` of the weights and biases now, checked every call."""
        return tuple(weight_state(tensor) for tensor in self._tensors)


class _FusedWeights(NamedTuple):
    """A prepared concatenation of a group's weights, its bias, and its sizes.

    The weight is MKL-packed, ``(sum out_i, in)`` for oneDNN or ``(in, sum out_i)``, as :attr:`path` names.
    """

    tensor_ids: tuple[int, ...]
    versions: tuple[tuple[int, int], ...]
    path: str
    weight: torch.Tensor
    bias: torch.Tensor | None
    shape: torch.Tensor


_fused_weights = WeakIdKeyDictionary()
"""A group's first stored weight -> its :class:`_FusedWeights` (prepared again when another group's ids, or any
version, differ)."""
