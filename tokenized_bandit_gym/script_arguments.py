"""Command-line flags from a dataclass of settings, for the example and benchmark scripts.

Each script states its settings once, as a dataclass with defaults and a docstring under each
field (CleanRL's ``Args`` style); :func:`parse_dataclass_arguments` turns it into ``--field-name``
flags with that docstring as the help.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

SettingsT = TypeVar("SettingsT")


def parse_dataclass_arguments(
    settings_class: type[SettingsT], description: str | None, argv: Sequence[str] | None = None
) -> SettingsT:
    """Parse ``argv`` (default: ``sys.argv[1:]``) into an instance of ``settings_class``.

    One flag per field, ``--field-name`` (``--field_name`` is accepted too) for ``field_name``,
    typed by the field's default, with the field's docstring (or ``metadata["help"]``) as help:
    a ``bool`` default gives ``--flag`` / ``--no-flag``, a non-empty ``tuple`` default takes one
    or more values of its first element's type (returned as a tuple), anything else one value
    of the default's type.

    Args:
        settings_class: a dataclass whose every field has a default.
        description: the ``--help`` text (its first line is used), e.g. the script's ``__doc__``.
        argv: the arguments; None reads the command line.

    Raises:
        TypeError: ``settings_class`` is not a dataclass, or a field has no default or an empty
            tuple default (its flag's type cannot be inferred).
    """
    if not (isinstance(settings_class, type) and dataclasses.is_dataclass(settings_class)):
        raise TypeError(f"settings_class must be a dataclass type, got {settings_class!r}")
    first_line = description.strip().splitlines()[0] if description and description.strip() else None
    parser = argparse.ArgumentParser(description=first_line)
    docs = field_docstrings(settings_class)
    tuple_fields = set()
    for field in dataclasses.fields(settings_class):
        default = field.default
        if default is dataclasses.MISSING:
            raise TypeError(f"{settings_class.__name__}.{field.name} needs a default to become a flag")
        flags = dict.fromkeys([f"--{field.name.replace('_', '-')}", f"--{field.name}"])  # one or two spellings
        options: dict[str, Any] = {"default": default, "help": field.metadata.get("help", docs.get(field.name))}
        if isinstance(default, bool):
            options["action"] = argparse.BooleanOptionalAction
        elif isinstance(default, tuple):
            if not default:
                raise TypeError(f"{settings_class.__name__}.{field.name} has an empty tuple default: no element type")
            options.update(nargs="+", type=type(default[0]))
            tuple_fields.add(field.name)
        else:
            options["type"] = type(default)
        parser.add_argument(*flags, dest=field.name, **options)
    values = vars(parser.parse_args(argv))
    for name in tuple_fields:
        values[name] = tuple(values[name])
    return settings_class(**values)


def field_docstrings(settings_class: type) -> dict[str, str]:
    """Each field's docstring (the string literal right under it), a base class's too; ``{}`` without source."""
    docs: dict[str, str] = {}
    for cls in reversed(settings_class.__mro__[:-1]):  # bases first: a subclass's docstring wins
        try:
            source = textwrap.dedent(inspect.getsource(cls))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0].body  # type: ignore[attr-defined]
        for node, following in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[node.target.id] = following.value.value
    return docs


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` for an integer flag of at least ``minimum``: refused at parsing, naming the value.

    Example:
        >>> int_at_least(1)("3")
        3
    """
    wanted = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer >= {minimum}")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from error
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
        return value

    parse.__name__ = wanted  # argparse names the type in its "invalid ... value" message
    return parse


def run_script(parse: Callable[[], Any], main: Callable[[Any], object]) -> None:
    """A reproduction script's ``__main__``: parse its settings, keep torch to a small work pool, run ``main``.

    A ``SystemExit`` carrying a message (a bad setting, refused by the script) prints that one line and exits 2,
    as argparse does; any other exit status passes through.

    Args:
        parse: returns the script's settings (an object with a ``threads`` field: 0 lets torch choose).
        main: the script's entry point, called with those settings.
    """
    from tokenized_bandit_gym.threads import use_small_work_threads

    try:
        arguments = parse()
        use_small_work_threads(arguments.threads or None)  # one torch thread unless --threads/OMP_NUM_THREADS say
        main(arguments)
    except SystemExit as stop:
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
            sys.exit(2)
        raise


def attribute_docs(settings_class: type) -> dict[str, str]:
    """Each attribute's description in the ``Attributes:`` section of a class's docstring, on one line."""
    docs: dict[str, str] = {}
    lines = inspect.getdoc(settings_class) or ""
    section = lines.split("Attributes:", 1)[1] if "Attributes:" in lines else ""
    current = None
    for line in section.splitlines():
        if not line.strip():
            continue
        if not line.startswith("    "):  # the next section
            break
        head = line[4:]
        if not head.startswith(" ") and ":" in head and head.split(":", 1)[0].isidentifier():
            current, text = head.split(":", 1)
            docs[current] = text.strip()
        elif current is not None:
            docs[current] += " " + head.strip()
    return docs


def unset_flag_fields(settings_class: type, unset: str) -> list[tuple[str, type, Any]]:
    """One optional text flag per choice (``str``) and flag (``bool``) field of a dataclass, for ``make_dataclass``.

    Each field becomes ``(name, str, field(default=""))``: ``""`` means unset (``unset`` says what then holds); a
    ``bool`` field's flag takes ``yes`` or ``no``. The help is the field's description in the dataclass's
    ``Attributes:`` docstring, so a field added there becomes a flag with its help and nothing else to write.

    Args:
        settings_class: a dataclass whose fields have defaults (e.g. a config part).
        unset: what an unset flag leaves, for the help (``"the env id's"``).
    """
    docs = attribute_docs(settings_class)
    specs: list[tuple[str, type, Any]] = []
    for item in dataclasses.fields(settings_class):
        if not isinstance(item.default, (str, bool)):
            continue
        text = docs.get(item.name, item.name).replace("``", "")
        if isinstance(item.default, bool):
            text = f"yes or no: {text}"
        specs.append((item.name, str, dataclasses.field(default="", metadata={"help": f"{text} ('': {unset})"})))
    return specs


def config_option(part: type, name: str, default: Any = dataclasses.MISSING, note: str = "") -> Any:
    """A script's option that is the config field ``part.name``: the field's help, the given default or the field's.

    A script that sets an env option states it as ``top_k: int = config_option(Candidates, "top_k", 15)``: the
    name must be a field of the config part (a renamed field fails when the script is imported, not when a user
    runs it), and the help is the field's description in the part's ``Attributes:`` docstring, so the option's
    meaning is written once, in the config. ``default`` is the script's own experiment setting (omitted: the
    config's default); ``note`` adds what the script means by it.

    Raises:
        TypeError: ``part`` is not a dataclass, or ``name`` is not one of its fields (the message names them).
    """
    if not (isinstance(part, type) and dataclasses.is_dataclass(part)):
        raise TypeError(f"config_option needs a config dataclass, got {part!r}")
    fields = {item.name: item for item in dataclasses.fields(part)}
    if name not in fields:
        raise TypeError(f"{part.__name__} has no field {name!r}; its fields: {', '.join(fields)}")
    if default is dataclasses.MISSING:
        default = fields[name].default
    text = attribute_docs(part).get(name, name).replace("``", "").rstrip(".")
    return dataclasses.field(default=default, metadata={"help": f"{text} ({note})" if note else text})


def yes_or_no(name: str, text: str) -> bool:
    """The bool a ``yes``/``no`` flag says, or a SystemExit naming the flag."""
    if text not in ("yes", "no"):
        raise SystemExit(f"--{name.replace('_', '-')} must be yes or no, got {text!r}")
    return text == "yes"
