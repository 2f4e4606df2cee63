"""Config dataclasses as command-line flags (as TRL's ``HfArgumentParser`` does): one definition of each option.

:func:`add_dataclass_arguments` adds one argparse flag per dataclass field: the type, the default and
the help text come from the field (its annotation, its default, and either ``metadata["help"]`` or the
``Attributes:`` entry of the class docstring); :func:`dataclass_from_arguments` builds the dataclass
back from the parsed namespace. Where a documented flag name differs from the field (``--timeout`` for
``timeout_s``) or reads inverted (``--keep-invalid`` for ``valid_only``), a :class:`Flag` says so at
the call site, so the flag names and defaults in the README stay as they are.
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
    """

    name: str | None = None
    help: str | None = None
    invert: bool = False
    zero_is_none: bool = False
    choices: Sequence[str] | None = None
    type: Callable[[str], Any] | None = None


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
        return factory() if isinstance(factory, type) else COMPUTED  # list, dict, JsonObject: cheap
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

    Supported field types: ``bool``, ``int``, ``float``, ``str``, their ``| None`` forms,
    ``Sequence[str]`` / ``tuple[str, ...]`` / ``list[str]`` (``nargs="*"``), and any type a
    :class:`Flag` gives a parser for. The flag's ``dest`` is the field name.

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
        f = by_name[name]
        spec = flags.get(name, Flag())
        flag = spec.name or "--" + name.replace("_", "-")
        aliases: list[str] = []
        if style == "trl" and spec.name is None:
            flag = f"--{name}"
            aliases = [f"--{name.replace('_', '-')}"] if "_" in name else []
        help_text = spec.help or f.metadata.get("help") or docs.get(name, "")
        help_text = re.sub(r"``([^`]*)``", r"\1", help_text).rstrip(".").replace("%", "%%")
        default = _field_default(f)
        hint, optional = _unwrap_optional(hints[name])
        kwargs: dict[str, Any] = {"dest": name, "help": help_text}
        choices = spec.choices or f.metadata.get("choices")
        if choices is not None:
            kwargs["choices"] = list(choices)
        elif hint is not bool:
            kwargs["metavar"] = flag.lstrip("-").replace("-", "_").upper()
        if spec.type is not None:
            parser.add_argument(flag, *aliases, type=spec.type, default=default, **kwargs)
            continue
        if hint is bool and style == "trl":
            kwargs["metavar"] = "{true,false}"
            parser.add_argument(
                flag, *aliases, nargs="?", const=True, type=parse_bool, default=default, **kwargs
            )
            if default is True or default is COMPUTED:  # a computed default may be True
                negated = [f"--no_{name}"] + ([f"--no-{name.replace('_', '-')}"] if "_" in name else [])
                parser.add_argument(
                    *negated,
                    dest=name,
                    action="store_false",
                    default=argparse.SUPPRESS,
                    help=f"the same as {flag} false",
                )
            continue
        if hint is bool:
            if spec.invert:
                if default is not True:
                    raise ConfigError(f"{cls.__name__}.{name}: an inverted flag needs the default True")
                parser.add_argument(flag, action="store_false", **kwargs)
            else:
                parser.add_argument(flag, action="store_true", **kwargs)
            parser.set_defaults(**{name: default})
            continue
        origin = typing.get_origin(hint)
        if origin in (tuple, Sequence, list, typing.get_origin(Sequence[str])) or hint in (tuple, list):
            item_types = [a for a in typing.get_args(hint) if a is not Ellipsis]
            if item_types and item_types[0] is not str:
                raise ConfigError(f"{cls.__name__}.{name}: only sequences of str become flags, not {hint}")
            listed = default if default is COMPUTED else list(default or ())
            parser.add_argument(flag, *aliases, nargs="*", default=listed, **kwargs)
            continue
        if hint not in (int, float, str):
            raise ConfigError(f"{cls.__name__}.{name}: a {hint} field cannot become a flag")
        if spec.zero_is_none:
            if not (optional and hint is int):
                raise ConfigError(f"{cls.__name__}.{name}: zero_is_none needs an int | None field")
            default = 0 if default is None else default
        parser.add_argument(flag, *aliases, type=hint, default=default, **kwargs)
    return names


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
