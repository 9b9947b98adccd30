"""Save Python state to a file that holds no pickle, and read it back without running code from the file.

What a run writes and reads back (a checkpoint of agents, a cache of benchmarks) is data that users share: a
pickle in a results folder runs whatever its author chose the moment it is loaded. This module writes the same
state as one NumPy ``.npz`` file: the arrays and tensors as ``.npy`` members, and one JSON document
(``state.json``, stored as a ``uint8`` member) that says how they fit together. It is read with
``allow_pickle=False``, so a planted pickle, whatever its name, is refused unread.

What it holds: ``None``, bools, ints, floats, strings, bytes, lists, tuples, sets, dicts, NumPy arrays and
scalars (not of object dtype), torch tensors (any device and dtype), NumPy and torch random generators,
torch devices and dtypes, NumPy dtypes, objects passed in ``shared`` (saved by name, so a resume supplies its own),
and objects of other classes (their ``__getstate__``). An object's class is never looked up from the file: it is
rebuilt only when its class is one of the classes the reader passes (the types of its own live objects, see
:func:`classes_of`), and otherwise the file is refused. Identity is kept: an object, array or tensor met twice is
saved once, and a NumPy array that views a CPU tensor's memory (or the reverse) is a view again after the read.
"""

from __future__ import annotations

import functools
import io
import json
import os
import types
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

STATE_MEMBER = "state.json"
"""The ``.npz`` member that holds the JSON document of the state."""

HEADER_MEMBER = "header.json"
"""The ``.npz`` member that holds the header: plain JSON, read on its own before the state (:func:`read_header`)."""

_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")
"""The NumPy bit generators a saved ``np.random.Generator`` may name (looked up in ``numpy.random`` only)."""

_PLAIN = (type(None), bool, int, float, str)

_NOT_DATA = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType, functools.partial)


class StateError(ValueError):
    """The state cannot be saved (a value of an unsupported type) or a file is not a state file this code reads."""


def classes_of(*roots: Any) -> dict[str, type]:
    """The classes of the objects reachable from ``roots`` (through attributes and containers), by qualified name.

    A reader passes them to :func:`read_state`: an object in the file is rebuilt only as one of them.
    """
    found: dict[str, type] = {}
    seen: set[int] = set()
    pending = list(roots)
    while pending:
        value = pending.pop()
        if id(value) in seen or isinstance(value, (*_PLAIN, bytes, np.ndarray, np.generic, torch.Tensor)):
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, (list, tuple, set, frozenset)):
            pending.extend(value)
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            found.setdefault(_qualified_name(type(value)), type(value))
            pending.extend(vars(value).values())
    return found


def write_state(
    path: str | os.PathLike[str], header: Any, document: Any, shared: Mapping[str, Any] | None = None
) -> None:
    """Write ``header`` and ``document`` to ``path`` atomically as a pickle-free ``.npz`` (the module docstring).

    Args:
        path: the file (its folder is created).
        header: what the state is (settings, the code version): read back as :func:`as_header` gives it.
        document: the state.
        shared: objects saved by name only (``{name: object}``); the reader passes its own under the same names.

    Raises:
        StateError: ``document`` holds a value of a type this format does not hold (named in the message).
    """
    from tokenized_bandit_gym.evaluation.atomic_files import write_bytes_atomically

    encoder = _Encoder(shared or {})
    try:
        tree = encoder.encode(document)
    except RecursionError as error:
        raise StateError(f"cannot save state nested this deeply ({error})") from error
    members = {f"a{index}": array for index, array in enumerate(encoder.arrays)}
    members[STATE_MEMBER] = np.frombuffer(json.dumps(tree).encode(), dtype=np.uint8)
    members[HEADER_MEMBER] = np.frombuffer(json.dumps(as_header(header)).encode(), dtype=np.uint8)
    stream = io.BytesIO()
    np.savez(stream, **members)  # type: ignore[arg-type]  # NumPy's stub: a member could be named allow_pickle
    write_bytes_atomically(path, stream.getvalue())


def as_header(value: Any) -> Any:
    """``value`` as a header is read back: JSON (tuples become lists; other values their ``repr``), for comparing."""
    return json.loads(json.dumps(value, default=repr))


def _members(path: str | os.PathLike[str], header_only: bool) -> dict[str, np.ndarray]:
    """The arrays of a saved-state file (its header alone with ``header_only``), read with ``allow_pickle=False``."""
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise StateError(f"{os.fspath(path)} is not a saved-state file (a single array, not an .npz)")
        with loaded as members:
            if STATE_MEMBER not in members.files or HEADER_MEMBER not in members.files:
                raise StateError(f"{os.fspath(path)} is not a saved-state file (no {STATE_MEMBER})")
            names = [HEADER_MEMBER] if header_only else members.files
            return {name: members[name] for name in names}
    except StateError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as error:
        raise StateError(f"{os.fspath(path)} is not a saved-state file this code reads: {error}") from error


def _json_member(path: str | os.PathLike[str], member: np.ndarray) -> Any:
    try:
        return json.loads(member.tobytes().decode())
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise StateError(f"{os.fspath(path)} is not a saved-state file this code reads: {error}") from error


def read_header(path: str | os.PathLike[str]) -> Any:
    """The header of a file :func:`write_state` wrote (its state unread).

    Raises:
        StateError: the file is not such a file (a pickle, another format, damaged).
    """
    return _json_member(path, _members(path, header_only=True)[HEADER_MEMBER])


def read_state(
    path: str | os.PathLike[str], shared: Mapping[str, Any] | None = None, classes: Mapping[str, type] | None = None
) -> Any:
    """The state of a file :func:`write_state` wrote, running no code from it (check :func:`read_header` first).

    Args:
        path: the file.
        shared: this call's objects for the names the writer passed in ``shared``.
        classes: the classes an object in the file may be rebuilt as (:func:`classes_of`), by qualified name.

    Raises:
        StateError: the file is not such a file (a pickle, another format, damaged) or names a class, shared
            object or bit generator not passed here.
    """
    arrays = _members(path, header_only=False)
    tree = _json_member(path, arrays.pop(STATE_MEMBER))
    del arrays[HEADER_MEMBER]
    try:
        return _Decoder(arrays, shared or {}, classes or {}, os.fspath(path)).decode(tree)
    except StateError:
        raise
    except (RuntimeError, TypeError, ValueError, KeyError, AttributeError) as error:
        raise StateError(f"{os.fspath(path)} holds state this code cannot rebuild: {error}") from error


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class _Encoder:
    """Turns state into a JSON tree and a list of arrays (the tree names them ``a<index>``)."""

    def __init__(self, shared: Mapping[str, Any]) -> None:
        self.arrays: list[np.ndarray] = []
        self._shared = {id(value): name for name, value in shared.items()}
        self._memo: dict[int, int] = {}  # id of an object already saved -> its reference number
        self._keep: list[Any] = []  # keeps each memoised object alive, so no id is reused while encoding
        self._memory: dict[tuple, int] = {}  # (address, shape, strides, dtype) of a saved CPU buffer -> reference

    def encode(self, value: Any) -> Any:
        if type(value) in _PLAIN:
            return value
        if id(value) in self._shared:
            return {"t": "shared", "v": self._shared[id(value)]}
        if id(value) in self._memo:
            return {"t": "ref", "v": self._memo[id(value)]}
        reference = len(self._memo)
        self._memo[id(value)] = reference
        self._keep.append(value)
        node = self._encode_new(value, reference)
        node["id"] = reference
        return node

    def _array(self, array: np.ndarray) -> str:
        self.arrays.append(array if array.flags.c_contiguous else array.copy(order="C"))
        return f"a{len(self.arrays) - 1}"

    def _alias(self, array: np.ndarray, reference: int, kind: str) -> dict[str, Any] | None:
        """An alias node when an array or tensor saved before has the memory and layout of ``array``, else None."""
        key = (array.__array_interface__["data"][0], array.shape, array.strides, array.dtype.str)
        if key in self._memory:
            return {"t": "alias", "v": self._memory[key], "as": kind}
        self._memory[key] = reference
        return None

    def _encode_new(self, value: Any, reference: int) -> dict[str, Any]:
        if isinstance(value, (list, tuple, set, frozenset)):
            kind = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}.get(type(value))
            if kind is None:
                raise StateError(f"cannot save a {type(value).__qualname__} (a subclass of {type(value).__mro__[1]})")
            return {"t": kind, "v": [self.encode(item) for item in value]}
        if type(value) is dict:
            return {"t": "dict", "v": [[self.encode(key), self.encode(item)] for key, item in value.items()]}
        if isinstance(value, bytes):
            return {"t": "bytes", "v": value.hex()}
        if isinstance(value, np.ndarray):
            return self._encode_ndarray(value, reference)
        if isinstance(value, np.generic):
            return {"t": "scalar", "v": self._array(np.asarray(value))}
        if isinstance(value, torch.Tensor):
            return self._encode_tensor(value, reference)
        if isinstance(value, np.random.Generator):
            bit_generator = type(value.bit_generator).__name__
            if bit_generator not in _BIT_GENERATORS:
                raise StateError(f"cannot save a random generator over {bit_generator}")
            return {"t": "generator", "bit_generator": bit_generator, "v": self.encode(value.bit_generator.state)}
        if isinstance(value, torch.Generator):
            return {"t": "torch_generator", "device": str(value.device), "v": self._array(value.get_state().numpy())}
        if isinstance(value, torch.device):
            return {"t": "device", "v": str(value)}
        if isinstance(value, torch.dtype):
            return {"t": "torch_dtype", "v": str(value).removeprefix("torch.")}
        if isinstance(value, np.dtype):
            return {"t": "numpy_dtype", "v": self.encode(value.descr if value.fields else value.str)}
        cls = type(value)
        if isinstance(value, _NOT_DATA) or not (hasattr(value, "__dict__") or hasattr(cls, "__slots__")):
            raise StateError(f"cannot save {value!r} ({_qualified_name(cls)}): not data")
        if cls.__reduce_ex__ is not object.__reduce_ex__ or cls.__reduce__ is not object.__reduce__:
            raise StateError(f"cannot save a {_qualified_name(cls)}: it pickles by its own recipe")
        return {"t": "object", "type": _qualified_name(type(value)), "v": self.encode(value.__getstate__())}

    def _encode_ndarray(self, array: np.ndarray, reference: int) -> dict[str, Any]:
        if array.dtype.hasobject:
            raise StateError(f"cannot save an array of dtype {array.dtype} (it holds Python objects)")
        return self._alias(array, reference, "numpy") or {"t": "array", "v": self._array(array)}

    def _encode_tensor(self, tensor: torch.Tensor, reference: int) -> dict[str, Any]:
        if type(tensor) is not torch.Tensor:
            raise StateError(f"cannot save a {_qualified_name(type(tensor))} (a tensor subclass)")
        tensor = tensor.detach()
        if tensor.device.type == "cpu" and tensor.dtype in _NUMPY_TENSOR_DTYPES:
            alias = self._alias(tensor.numpy(), reference, "tensor")
            if alias is not None:
                return alias
        dtype = str(tensor.dtype).removeprefix("torch.")
        host = tensor.cpu()
        if host.dtype not in _NUMPY_TENSOR_DTYPES:  # bfloat16, float8: their bits, as integers of their size
            host = host.view(_BITS_OF_SIZE[host.element_size()])
        return {"t": "tensor", "dtype": dtype, "device": str(tensor.device), "v": self._array(host.numpy())}


_NUMPY_TENSOR_DTYPES = frozenset(
    {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16}
    | {torch.float32, torch.float64, torch.complex64, torch.complex128}
)
_BITS_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class _Decoder:
    """Rebuilds what :class:`_Encoder` saved, from the JSON tree and the arrays."""

    def __init__(
        self, arrays: dict[str, np.ndarray], shared: Mapping[str, Any], classes: Mapping[str, type[object]], path: str
    ):
        self._arrays = arrays
        self._shared = shared
        self._classes = classes
        self._path = path
        self._memo: dict[int | None, Any] = {}  # reference number -> object (None: a node saved without one)

    def _refuse(self, what: str) -> StateError:
        return StateError(f"{self._path} {what}")

    def _array(self, name: object) -> np.ndarray:
        if not isinstance(name, str) or name not in self._arrays:
            raise self._refuse(f"names a missing array {name!r}")
        return self._arrays[name]

    def _known(self, reference: object) -> Any:
        if not isinstance(reference, int) or reference not in self._memo:
            raise self._refuse(f"refers to an unknown object {reference!r}")
        return self._memo[reference]

    def decode(self, node: Any) -> Any:
        if type(node) in _PLAIN:
            return node
        if not isinstance(node, dict) or not isinstance(node.get("t"), str):
            raise self._refuse(f"holds an unknown entry {str(node)[:80]!r}")
        kind, value = node["t"], node.get("v")
        if kind == "shared":
            if not isinstance(value, str) or value not in self._shared:
                raise self._refuse(f"names a shared object {value!r} this call does not have")
            return self._shared[value]
        if kind == "ref":
            return self._known(value)
        method = getattr(self, f"_decode_{kind}", None)
        if method is None:
            raise self._refuse(f"holds an entry of unknown kind {kind!r}")
        return method(node, value)

    def _remember(self, node: dict[str, Any], value: Any) -> Any:
        self._memo[node.get("id")] = value
        return value

    def _decode_list(self, node: dict[str, Any], items: Any) -> list:
        result = self._remember(node, [])
        result.extend(self.decode(item) for item in items)
        return result

    def _decode_tuple(self, node: dict[str, Any], items: Any) -> tuple:
        return self._remember(node, tuple(self.decode(item) for item in items))

    def _decode_set(self, node: dict[str, Any], items: Any) -> set:
        return self._remember(node, {self.decode(item) for item in items})

    def _decode_frozenset(self, node: dict[str, Any], items: Any) -> frozenset:
        return self._remember(node, frozenset(self.decode(item) for item in items))

    def _decode_dict(self, node: dict[str, Any], pairs: Any) -> dict:
        result = self._remember(node, {})
        for key, item in pairs:
            result[self.decode(key)] = self.decode(item)
        return result

    def _decode_bytes(self, node: dict[str, Any], text: Any) -> bytes:
        return self._remember(node, bytes.fromhex(text))

    def _decode_array(self, node: dict[str, Any], name: Any) -> np.ndarray:
        return self._remember(node, self._array(name).copy())

    def _decode_scalar(self, node: dict[str, Any], name: Any) -> np.generic:
        return self._remember(node, self._array(name)[()])

    def _decode_alias(self, node: dict[str, Any], reference: Any) -> np.ndarray | torch.Tensor:
        base = self._known(reference)
        if not isinstance(base, (np.ndarray, torch.Tensor)):
            raise self._refuse(f"makes a view of a {type(base).__qualname__}")
        if node.get("as") == "numpy":
            return self._remember(node, base.numpy() if isinstance(base, torch.Tensor) else base.view())
        return self._remember(node, base.view(base.shape) if isinstance(base, torch.Tensor) else torch.from_numpy(base))

    def _decode_tensor(self, node: dict[str, Any], name: Any) -> torch.Tensor:
        dtype = getattr(torch, str(node.get("dtype")), None)
        if not isinstance(dtype, torch.dtype):
            raise self._refuse(f"names an unknown tensor dtype {node.get('dtype')!r}")
        tensor = torch.from_numpy(self._array(name).copy())
        if tensor.dtype != dtype:
            tensor = tensor.view(dtype)
        return self._remember(node, tensor.to(torch.device(str(node.get("device")))))

    def _decode_generator(self, node: dict[str, Any], state: Any) -> np.random.Generator:
        name = node.get("bit_generator")
        if name not in _BIT_GENERATORS:
            raise self._refuse(f"names an unknown bit generator {name!r}")
        bit_generator = getattr(np.random, name)()
        bit_generator.state = self.decode(state)
        return self._remember(node, np.random.Generator(bit_generator))

    def _decode_torch_generator(self, node: dict[str, Any], name: Any) -> torch.Generator:
        generator = torch.Generator(device=torch.device(str(node.get("device"))))
        generator.set_state(torch.from_numpy(self._array(name).copy()))
        return self._remember(node, generator)

    def _decode_device(self, node: dict[str, Any], name: Any) -> torch.device:
        return self._remember(node, torch.device(str(name)))

    def _decode_torch_dtype(self, node: dict[str, Any], name: Any) -> torch.dtype:
        dtype = getattr(torch, str(name), None)
        if not isinstance(dtype, torch.dtype):
            raise self._refuse(f"names an unknown torch dtype {name!r}")
        return self._remember(node, dtype)

    def _decode_numpy_dtype(self, node: dict[str, Any], description: Any) -> np.dtype:
        dtype = np.dtype(self.decode(description))
        if dtype.hasobject:
            raise self._refuse(f"names an object dtype {dtype}")
        return self._remember(node, dtype)

    def _decode_object(self, node: dict[str, Any], state: Any) -> Any:
        type_name = node.get("type")
        cls = self._classes.get(type_name) if isinstance(type_name, str) else None
        if cls is None:
            raise self._refuse(f"holds an object of class {node.get('type')!r}, which this call does not have")
        instance = self._remember(node, cls.__new__(cls))
        restored = self.decode(state)
        if hasattr(instance, "__setstate__"):
            instance.__setstate__(restored)
        elif isinstance(restored, tuple) and len(restored) == 2:
            attributes, slots = restored
            vars(instance).update(attributes or {})
            for name, item in (slots or {}).items():
                object.__setattr__(instance, name, item)
        else:
            vars(instance).update(restored or {})
        return instance
