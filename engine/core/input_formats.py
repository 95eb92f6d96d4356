"""The input formats: how an input's bytes become a ``Table``, one registry for every command.

A format is anything with a ``name``, the ``read_options`` it takes (a spec's ``read:``), the ``companions``
among them (an option whose value names another input, with the format that input must have) and
``read(name, raw, options=, companions=, limits=) -> Table``. ``certa run``, the workers of ``certa batch``,
``certa replay`` / ``certa audit`` and ``certa report --recompute-evidence`` all read inputs through
``read_input`` (by way of ``certa.engine.core.inputs.load_tables``), so an input one of them accepts, every
one accepts, within the same ``InputLimits``.

Built in:

=================================================  ===========================================================
format                                             read by
=================================================  ===========================================================
``csv``, ``jsonl``, ``parquet``                    ``certa.engine.core.tables.parse_table``
``lm-eval-samples``, ``lm-eval-results``,          ``certa.engine.core.evidence.formats`` (the evaluator
``inspect-eval``, ``inspect-json``,                exports; docs/evidence.md)
``promptfoo-jsonl``
``hf-model``                                       ``certa.engine.core.models.manifest`` (a model folder's
                                                   manifest; a spec declares it with ``model:``)
``endpoint``                                       ``certa.engine.core.endpoint_input`` (a served model's
                                                   declaration; a spec declares it with ``endpoint:``)
=================================================  ===========================================================

A package adds a format through the ``certa.input_formats`` entry-point group, naming an object that
satisfies ``InputFormat`` (its ``name`` must equal the entry point's)::

    [project.entry-points."certa.input_formats"]
    my-eval-log = "my_package.certa_format:MY_EVAL_LOG"

A spec may then declare ``format: my-eval-log`` and the format's ``read:`` options; the spec schema takes
registered names and options (``certa.engine.core.spec``). A registered format never replaces a built-in one.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

import numpy as np

from certa.engine.core.endpoint_input import EndpointFormat
from certa.engine.core.evidence.formats import EXPORT_READERS
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.models.manifest import MODEL_FORMAT, read_manifest
from certa.engine.core.tables import FORMATS, Columns, Table, column_of_cells, column_of_numbers, parse_table
from certa.engine.foundation.canonical import sha256_hex
from certa.engine.foundation.errors import InputError, SpecError

__all__ = ["ENTRY_POINT_GROUP", "FORMAT_NAME", "InputFormat", "BUILTIN_FORMATS", "input_format", "input_formats", "read_input"]

ENTRY_POINT_GROUP = "certa.input_formats"
FORMAT_NAME = re.compile(r"[a-z0-9][a-z0-9._+-]*")
"""What a format's name may be (``schemas/certificate.schema.json`` states the same pattern)."""


@runtime_checkable
class InputFormat(Protocol):
    """What an input format provides (module docstring)."""

    @property
    def name(self) -> str:
        """The format's name, as a spec's ``format:`` and the certificate state it."""
        ...

    @property
    def read_options(self) -> frozenset[str]:
        """The ``read:`` options the format takes."""
        ...

    @property
    def companions(self) -> Mapping[str, str]:
        """Option -> the format of the input whose name the option's value is."""
        ...

    def read(self, name: str, raw: bytes, *, options: Mapping[str, Any], companions: Mapping[str, bytes],
             limits: InputLimits) -> Table:
        """The input ``name`` read from its bytes ``raw`` with its ``read:`` options (``companions``: the
        bytes of the inputs its companion options name, by option), within ``limits``."""
        ...


@dataclass(frozen=True)
class TableFormat:
    """A plain table file: CSV, JSON Lines or Parquet (``parse_table``); no read options."""

    name: str
    read_options: frozenset[str] = frozenset()
    companions: Mapping[str, str] = field(default_factory=dict)

    def read(self, name: str, raw: bytes, *, options: Mapping[str, Any], companions: Mapping[str, bytes],
             limits: InputLimits) -> Table:
        """``raw`` parsed as a table of this format."""
        return parse_table(name, raw, self.name, limits)


@dataclass(frozen=True)
class ModelManifestFormat:
    """A model input: its bytes are the manifest of its folder (``certa.engine.core.models.manifest``), its table
    the manifest's files (``path``, ``sha256``, ``size``)."""

    name: str = MODEL_FORMAT
    read_options: frozenset[str] = frozenset()
    companions: Mapping[str, str] = field(default_factory=dict)

    def read(self, name: str, raw: bytes, *, options: Mapping[str, Any], companions: Mapping[str, bytes],
             limits: InputLimits) -> Table:
        """The manifest ``raw`` (checked to be one certa wrote) as a table of its files."""
        columns = read_manifest(name, raw).columns()
        return Table(name=name, columns=Columns({column: (column_of_numbers(values) if values.dtype == np.float64
                                                          else column_of_cells(values))
                                                 for column, values in columns.items()}),
                     sha256=sha256_hex(raw), fmt=self.name, raw=raw)


BUILTIN_FORMATS: tuple[InputFormat, ...] = (*(TableFormat(name) for name in FORMATS), *EXPORT_READERS,
                                            ModelManifestFormat(), EndpointFormat())
"""The formats certa ships (module docstring)."""


@cache
def input_formats() -> Mapping[str, InputFormat]:
    """Every format by name: the built-in ones, then those registered in the ``certa.input_formats`` group.

    A registered object that is not an ``InputFormat``, whose ``name`` is not its entry point's, or that
    takes a built-in name is a ``SpecError`` naming the entry point."""
    formats: dict[str, InputFormat] = {f.name: f for f in BUILTIN_FORMATS}
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        where = f"input format '{point.name}' ({point.value}, entry-point group {ENTRY_POINT_GROUP})"
        if not FORMAT_NAME.fullmatch(point.name):
            raise SpecError(f"{where}: a format's name is lower-case letters, digits and . _ + - "
                            "(the certificate schema's pattern)")
        if point.name in formats:
            raise SpecError(f"{where} takes the name of a built-in format; register it under another name")
        try:
            loaded = point.load()
        except Exception as exc:  # a plugin's import error, whatever its type, is reported, not raised
            raise SpecError(f"{where} cannot be loaded: {type(exc).__name__}: {exc}") from None
        if not isinstance(loaded, InputFormat) or loaded.name != point.name:
            raise SpecError(f"{where} must be an object with name '{point.name}', read_options, companions and "
                            "read(name, raw, options=, companions=, limits=)")
        formats[point.name] = loaded
    return formats


def input_format(fmt: str, *, name: str) -> InputFormat:
    """The format ``fmt`` of input ``name``; an ``InputError`` lists the known ones when it is not one."""
    formats = input_formats()
    if fmt in formats:
        return formats[fmt]
    hint = difflib.get_close_matches(fmt, list(formats), n=1, cutoff=0.6)
    raise InputError(f"input '{name}': unknown format {fmt!r}"
                     + (f"; did you mean '{hint[0]}'?" if hint else f"; use one of {', '.join(formats)}"))


def read_input(name: str, raw: bytes, fmt: str, *, options: Mapping[str, Any] | None = None,
               companions: Mapping[str, bytes] | None = None, limits: InputLimits) -> Table:
    """The input ``name`` of format ``fmt`` read from ``raw`` with its ``read:`` ``options``: the one way
    every command turns an input's bytes into a table. An option the format does not take is an ``InputError``
    (a spec is checked before, ``certa.engine.core.spec.read_option_problems``; this guards the Python API)."""
    reader = input_format(fmt, name=name)
    options = dict(options or {})
    unknown = sorted(set(options) - reader.read_options)
    if unknown:
        raise InputError(f"input '{name}': format {fmt} has no read option {', '.join(map(repr, unknown))} "
                         f"(its options: {', '.join(sorted(reader.read_options)) or 'none'})")
    return reader.read(name, raw, options=options, companions=dict(companions or {}), limits=limits)
