"""Config dataclasses as command-line flags (as TRL's ``HfArgumentParser`` does): one definition of each option.

:func:`add_dataclass_arguments` adds one argparse flag per dataclass field: the type, the default and
the help text come from the field (its annotation, its default, and either ``metadata["help"]`` or the
``Attributes:`` entry of the class docstring); :func:`dataclass_from_arguments` builds the dataclass
back from the parsed namespace. Where a documented flag name differs from the field (``--timeout`` for
``timeout_s``) or reads inverted (``--keep-invalid`` for ``valid_only``), a :class:`Flag` says so at
the call site, so the flag names and defaults in the README stay as they are.

A field declared with :func:`option` carries the rest of what a hand-written ``add_argument`` would
say, as TRL's ``metadata`` does: its help, choices, further option strings (``--memory`` beside
``--modes``), a parser for its text (:func:`at_least`, :func:`iso_day`, :func:`calendar_day`), ``nargs="+"``, a positional
argument or a repeatable flag. A field without a default is a required flag. Every subcommand's
flags are such dataclasses (``tests/test_cli_flags.py`` lists them all, so none disappears unnoticed).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from forecast_dojo.errors import ConfigError


@dataclass(frozen=True)
class Flag:
    """How one field appears on the command line when the default (``--field-name``) is not what is documented.

    Attributes:
        name: The flag, e.g. ``"--timeout"`` (default: ``--`` and the field name with ``-`` for ``_``).
        help: The help text (default: ``metadata["help"]`` or the class docstring's entry).
        invert: A boolean field that defaults to True and that the flag switches off
            (``--keep-invalid`` sets ``valid_only=False``).
        zero_is_none: An ``int | None`` field whose "none" is written ``0`` on the command line
            (``--best-of 0`` keeps every record).
        choices: The allowed values.
        type: What parses the flag's text into the field's value, for a field type the generator
            does not know (``JsonObject`` for a ``--extra '{...}'`` field).
        required: A field without a default that the command needs: its flag must be given (an
            :func:`option` without a default is required anyway; a plain field without one is not).
    """

    name: str | None = None
    help: str | None = None
    invert: bool = False
    zero_is_none: bool = False
    choices: Sequence[str] | None = None
    type: Callable[[str], Any] | None = None
    required: bool = False


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str | None = None,  # noqa: A002 (the argparse name)
    choices: Sequence[str] | None = None,
    aliases: Sequence[str] = (),
    parse: Callable[[str], Any] | None = None,
    nargs: str | None = None,
    positional: bool = False,
    append: bool = False,
) -> Any:
    """A dataclass field that says how its flag reads (what ``add_argument`` would otherwise be told).

    Args:
        default: The field's default (none: a required flag, or a required positional argument; a
            plain dataclass field without a default is an optional flag whose absence reads None).
        help: The flag's help (default: the class docstring's ``Attributes:`` entry).
        choices: The allowed values.
        aliases: Further option strings of the same flag, e.g. ``("--memory",)``.
        parse: The function that reads the flag's text (an argparse ``type``), e.g. :func:`at_least`.
        nargs: ``"+"`` for a list flag that needs at least one value (sequences default to ``"*"``).
        positional: A positional argument named after the field rather than a ``--flag``.
        append: A repeatable flag (``--polymarket a --polymarket b``) collecting a list.

    Returns:
        The :func:`dataclasses.field`.
    """
    metadata: dict[str, Any] = {"help": help, "choices": choices, "aliases": tuple(aliases), "parse": parse}
    metadata |= {"nargs": nargs, "positional": positional, "append": append}
    metadata = {"option": True} | {k: v for k, v in metadata.items() if v not in (None, (), False)}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum`` (a clear usage error otherwise)."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from err
        if number < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {number}")
        return number

    parse.__name__ = f"integer >= {minimum}"
    return parse


def iso_day(value: str) -> str:
    """An argparse type: a ``YYYY-MM-DD`` date, kept as that text (reports compare dates as text)."""
    try:
        parsed = date.fromisoformat(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not a YYYY-MM-DD date: {value!r}") from err
    if parsed.isoformat() != value:  # 3.11 also reads 20240501 and 2024-W18
        raise argparse.ArgumentTypeError(f"not a YYYY-MM-DD date: {value!r}")
    return value


def calendar_day(value: str) -> date:
    """An argparse type: a date (``YYYY-MM-DD``), as a :class:`~datetime.date`."""
    try:
        return date.fromisoformat(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not a YYYY-MM-DD date: {value!r}") from err


def field_docs(cls: type) -> dict[str, str]:
    """The ``Attributes:`` entries of a class's Google-style docstring, by field name (continuation lines joined)."""
    doc = inspect.getdoc(cls) or ""
    docs: dict[str, str] = {}
    section = False
    current: str | None = None
    for line in doc.splitlines():
        if not line.strip():
            current = None
            continue
        if re.fullmatch(r"[A-Z][A-Za-z ]*:", line.strip()):
            section = line.strip() == "Attributes:"
            current = None
            continue
        if not section:
            continue
        entry = re.match(r"\s{2,}(\w+)(?: \([^)]*\))?: (.*)", line)
        if entry and len(line) - len(line.lstrip()) <= 4:
            current = entry.group(1)
            docs[current] = entry.group(2).strip()
        elif current is not None:
            docs[current] += " " + line.strip()
    return docs


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    """``(X, True)`` for ``X | None``, else ``(hint, False)``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0], True
    return hint, False


class _Computed:
    """The flag default of a field whose ``default_factory`` is a function: the dataclass calls it, not the parser.

    Building a parser then runs no such function (one that probes the hardware imports torch), and a
    flag left out keeps whatever the dataclass computes.
    """

    def __repr__(self) -> str:
        return "computed when the run starts"


COMPUTED: Any = _Computed()


def _field_default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        factory = f.default_factory
        if (
            isinstance(factory, type) or "option" in f.metadata
        ):  # list, dict, JsonObject, option()'s list copy: cheap
            return factory()
        return COMPUTED
    return None


def add_dataclass_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    *,
    only: Iterable[str] | None = None,
    flags: Mapping[str, Flag] | None = None,
    style: str = "cli",
) -> list[str]:
    """Add one flag per field of the dataclass ``cls`` (or of the fields in ``only``).

    Supported field types: ``bool``, ``int``, ``float``, ``str``, ``Path``, their ``| None`` forms,
    ``Sequence[str]`` / ``tuple[str, ...]`` / ``tuple[Path, ...]`` (``nargs="*"``), and any type whose
    field names a ``parse`` function (:func:`option`). The flag's ``dest`` is the field name.

    Args:
        parser: The parser or argument group.
        cls: The dataclass.
        only: The fields to expose, in this order (default: every field).
        flags: Per-field :class:`Flag` overrides (name, help, inversion, ``0`` for None, choices, type).
        style: ``"cli"``: ``--field-name``, a boolean is a switch; ``"trl"``: the flags of
            ``transformers.HfArgumentParser`` (the training scripts, ``trl sft``): ``--field_name``
            (``--field-name`` too), a boolean takes an optional value (``--bf16``, ``--bf16 false``)
            and one that defaults to True (or to what a ``default_factory`` computes) also gets ``--no_<field>``.

    Returns:
        The names of the fields added.

    Raises:
        ConfigError: A field type the generator does not support, or an unknown field in ``only``/``flags``.
    """
    hints = typing.get_type_hints(cls)
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    names = list(only) if only is not None else list(by_name)
    flags = dict(flags or {})
    unknown = [n for n in [*names, *flags] if n not in by_name]
    if unknown:
        raise ConfigError(f"{cls.__name__} has no field(s) {unknown}")
    if style not in ("cli", "trl"):
        raise ConfigError(f"style must be 'cli' or 'trl', not {style!r}")
    docs = field_docs(cls)
    for name in names:
        _add_field(parser, cls.__name__, by_name[name], hints[name], flags.get(name, Flag()), docs, style)
    return names


def _add_field(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    owner: str,
    f: dataclasses.Field[Any],
    annotation: Any,
    spec: Flag,
    docs: Mapping[str, str],
    style: str,
) -> None:
    """Add the flag (or positional argument) of one field; see :func:`add_dataclass_arguments`."""
    name, meta = f.name, f.metadata
    help_text = spec.help or meta.get("help") or docs.get(name)
    if help_text:
        help_text = re.sub(r"``([^`]*)``", r"\1", help_text).rstrip(".").replace("%", "%%")
    # an option() without a default is required; a plain field without one is left out as None
    missing = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    required = missing and ("option" in meta or spec.required)
    default = _field_default(f)
    hint, optional = _unwrap_optional(annotation)
    kwargs: dict[str, Any] = {"help": help_text}
    if meta.get("positional"):
        strings = [name]
    else:
        flag = spec.name or "--" + name.replace("_", "-")
        strings = [flag, *meta.get("aliases", ())]
        if style == "trl" and spec.name is None:  # HfArgumentParser's --field_name, and --field-name too
            flag = f"--{name}"
            dashed = [f"--{name.replace('_', '-')}"] if "_" in name else []
            strings = [flag, *dashed, *meta.get("aliases", ())]
        kwargs["dest"] = name
        if flag.lstrip("-").replace("-", "_") != name and hint is not bool:
            kwargs["metavar"] = flag.lstrip("-").replace("-", "_").upper()
        if required:
            kwargs["required"] = True
    choices = spec.choices or meta.get("choices")
    if choices is not None:
        kwargs["choices"] = list(choices)
        kwargs.pop("metavar", None)
    if spec.type is not None:
        parser.add_argument(*strings, type=spec.type, default=default, **kwargs)
        return
    if hint is bool and style == "trl":
        kwargs["metavar"] = "{true,false}"
        parser.add_argument(*strings, nargs="?", const=True, type=parse_bool, default=default, **kwargs)
        if default is True or default is COMPUTED:  # a computed default may be True
            negated = [f"--no_{name}"] + ([f"--no-{name.replace('_', '-')}"] if "_" in name else [])
            parser.add_argument(
                *negated,
                dest=name,
                action="store_false",
                default=argparse.SUPPRESS,
                help=f"the same as {flag} false",
            )
        return
    if hint is bool:
        action = "store_false" if spec.invert else "store_true"
        if spec.invert and default is not True:
            raise ConfigError(f"{owner}.{name}: an inverted flag needs the default True")
        parser.add_argument(*strings, action=action, **kwargs)
        parser.set_defaults(**{name: default})
        return
    origin = typing.get_origin(hint)
    if origin in (tuple, Sequence, list, typing.get_origin(Sequence[str])) or hint in (tuple, list):
        item_types = [a for a in typing.get_args(hint) if a is not Ellipsis] or [str]
        if item_types[0] not in (str, Path):
            raise ConfigError(f"{owner}.{name}: only sequences of str or Path become flags, not {hint}")
        kwargs["type"] = meta.get("parse") or (Path if item_types[0] is Path else None)
        if not required:
            kwargs["default"] = default if default is COMPUTED or default is None else list(default)
        if meta.get("append"):
            kwargs["action"] = "append"
        else:
            kwargs["nargs"] = meta.get("nargs", "*")
        parser.add_argument(*strings, **{k: v for k, v in kwargs.items() if v is not None or k == "default"})
        return
    parse = meta.get("parse")
    if parse is None and hint not in (int, float, str, Path):
        raise ConfigError(f"{owner}.{name}: a {hint} field cannot become a flag")
    if spec.zero_is_none:
        if not (optional and hint is int):
            raise ConfigError(f"{owner}.{name}: zero_is_none needs an int | None field")
        default = 0 if default is None else default
    if not required:
        kwargs["default"] = default
    parser.add_argument(*strings, type=parse or hint, **kwargs)


def add_command(
    subparsers: argparse._SubParsersAction,
    name: str,
    run: Callable[[argparse.Namespace], int] | None = None,
    *,
    help: str,  # noqa: A002 (the argparse name)
    description: str | None = None,
    arguments: type | None = None,
    flags: Mapping[str, Flag] | None = None,
) -> argparse.ArgumentParser:
    """Add one (sub)command: its parser, the fields of ``arguments`` as its flags, and what it runs.

    Args:
        subparsers: Where it goes (``parser.add_subparsers()``).
        name: The command's name.
        run: What the command runs (``args.func``); None for a command group whose subcommands run.
        help: The line ``--help`` of the parent shows.
        description: The text its own ``--help`` shows (default: none).
        arguments: A dataclass whose fields are its flags (:func:`add_dataclass_arguments`); more
            dataclasses, or groups of flags, are added to the returned parser.
        flags: Per-field :class:`Flag` overrides for ``arguments``.

    Returns:
        The command's parser.
    """
    parser = subparsers.add_parser(name, help=help, description=description)
    if arguments is not None:
        add_dataclass_arguments(parser, arguments, flags=flags)
    if run is not None:
        parser.set_defaults(func=run)
    return parser


def parse_bool(text: str) -> bool:
    """A boolean flag's value as ``HfArgumentParser`` reads it: true/false, yes/no, t/f, y/n, 1/0."""
    value = text.strip().lower()
    if value in ("true", "yes", "t", "y", "1"):
        return True
    if value in ("false", "no", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def dataclass_from_arguments(
    cls: type,
    args: argparse.Namespace,
    *,
    only: Iterable[str] | None = None,
    flags: Mapping[str, Flag] | None = None,
    **values: Any,
) -> Any:
    """Build ``cls`` from the flags :func:`add_dataclass_arguments` added (plus ``values``, which win).

    Args:
        cls: The dataclass.
        args: The parsed namespace.
        only: The fields that were exposed (default: every field found in ``args``).
        flags: The same overrides given to :func:`add_dataclass_arguments` (``0`` becomes None where asked).
        **values: Fields set by the caller rather than by a flag.

    Returns:
        The dataclass instance.
    """
    flags = dict(flags or {})
    names = list(only) if only is not None else [f.name for f in dataclasses.fields(cls)]
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for name in names:
        if name in values or not hasattr(args, name):
            continue
        value = getattr(args, name)
        if value is COMPUTED:
            continue  # not given: the dataclass's default_factory decides
        if flags.get(name, Flag()).zero_is_none and value == 0:
            value = None
        if isinstance(value, list) and typing.get_origin(_unwrap_optional(hints[name])[0]) is not list:
            value = tuple(value)  # a list[str] field keeps its list
        kwargs[name] = value
    return cls(**kwargs, **values)
