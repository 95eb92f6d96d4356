"""A run's inputs: read from where they are (a file, a model folder, a ledger's blob, the Python API), then
turned into tables by their format (``certa.engine.core.input_formats.read_input``).

Every command loads inputs through ``load_tables``; what differs is only where the bytes come from:

- ``certa run`` and the Python API: the spec's paths (or ``--input NAME=PATH``) read by ``read_source``, or
  tables and columns given in memory;
- ``certa batch``: the client reads each input with ``read_source`` and hashes it, a worker gets the
  ``InputSource`` and loads it;
- ``certa replay`` / ``certa audit`` and ``--recompute-evidence``: the bytes the ledger stored, as an
  ``InputSource``.

So a format, its ``read:`` options, a companion input (lm-eval's results file) and the ``InputLimits`` apply
alike everywhere, and a pinned SHA-256 is checked whatever the source.

A suite (format ``lm-eval-suite`` or ``inspect-suite``) is a folder too: its bytes are the bundle of the files its
``read.glob`` matches (``certa.engine.core.evidence.suite.folder_bundle``: a manifest of their paths, sizes and
SHA-256s, then their bytes), so it has one identity, is stored as one blob and is replayed without the folder.

A model folder is hashed file by file (``certa.engine.core.models.manifest.folder_manifest``). The first model input
a stage's settings name (the model a stage will load) keeps its weight files' bytes, read into private memory as
they were hashed (``InputSource.weights``, then ``Table.weights``): the loader builds the model on those bytes
instead of reading and hashing the files a second time. Only one model's bytes are held this way: a second model
is hashed as it streams by, and read and hashed again when it is loaded (``model.windows`` loads and scores one
model at a time, the held one first, so memory holds one model's weights). While that first model's files hash,
the model libraries its loading needs are imported (``certa.engine.core.models.runtime.warm_model_libraries``,
``folder_manifest(meanwhile=...)``): the loader's first work, done alongside the hashing threads.

A model folder holding ``*.safetensors`` files that are not its weights (``certa.engine.core.models.manifest``: the
weights are the files the checkpoint declares) is refused in the ci and release profiles, naming them; in dev the
run goes ahead with the declared weights and ``unused_weights_detail`` is what the interpreter records as an
``unused_weights`` decision (outcome ``warn``, printed by ``certa run``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from certa.engine.core.endpoint_input import ENDPOINT_FORMAT, declaration_bytes, is_url
from certa.engine.core.evidence.suite import SUITE_GLOBS, folder_bundle
from certa.engine.core.input_formats import input_format, read_input
from certa.engine.core.input_limits import InputLimits, read_input_file
from certa.engine.core.models.manifest import MODEL_FORMAT, WEIGHTS_RULE, HeldWeights, ModelManifest, folder_manifest
from certa.engine.core.models.runtime import examine_weights, warm_model_libraries
from certa.engine.core.models.signature import STRICT_STATUSES, SignatureCheck, SignatureTrust, check_signature
from certa.engine.core.spec import InputSpec, Plan
from certa.engine.core.tables import Table, format_for_path, table_from_columns
from certa.engine.foundation.errors import InputError, SpecError

__all__ = ["InputSource", "read_source", "check_pin", "load_tables", "Columns", "UNUSED_WEIGHTS",
           "unused_weights_detail"]

Columns = Mapping[str, Sequence[Any] | np.ndarray]

UNUSED_WEIGHTS = "unused_weights"
"""The kind of the decision recorded (dev) for a model folder holding ``*.safetensors`` files it does not load."""


@dataclass(frozen=True)
class InputSource:
    """An input's bytes before they are read: its name, format and bytes; ``sha256`` when the bytes were
    hashed already (a batch client, a ledger), checked again when they are read; a model input's folder
    (``origin``) and signature check, when it was read from its folder."""

    name: str
    fmt: str
    raw: bytes = field(repr=False)
    sha256: str | None = None
    origin: Path | None = field(default=None, repr=False)
    signature: SignatureCheck | None = field(default=None, repr=False)
    overridden: bool = False
    """Read from a path given instead of the spec's (``certa run --input NAME=PATH``, ``input_paths``): the
    certificate says so (``inputs[].overridden``), since the spec's description was written for its own path."""
    weights: HeldWeights | None = field(default=None, repr=False)
    """A model input's weight files, read into memory as they were hashed (``read_source(keep_weights=True)``)."""


def read_source(declared: InputSpec, *, path: Path | str | None = None, profile: str, limits: InputLimits,
                keep_weights: bool = False) -> InputSource:
    """The declared input's bytes, from ``path`` (default: the spec's; an endpoint's: its URL, in place of the
    declared one): an endpoint's declaration (``certa.engine.core.endpoint_input``), a regular file within ``limits``
    (``read_input_file``), or for a model input its folder's manifest and signature check (in the ci and
    release profiles a signature that is neither verified nor absent is an ``InputError``), with its weight files'
    bytes as they were hashed when ``keep_weights`` (``InputSource.weights``: the loader then reads and hashes them
    no second time). Not parsed."""
    given_url = path is not None and is_url(str(path))
    if declared.fmt == ENDPOINT_FORMAT:  # a served model: its bytes are its declaration, nothing is read
        if path is not None and not given_url:
            raise InputError(f"input '{declared.name}' is an endpoint: --input {declared.name}= takes its URL "
                             "(http:// or https://), not a path")
        return InputSource(declared.name, ENDPOINT_FORMAT,
                           declaration_bytes(declared.name, declared.endpoint or {},
                                             url=None if path is None else str(path)),
                           overridden=path is not None)
    if given_url:
        raise InputError(f"input '{declared.name}' is read from a file or folder, not a URL (only an endpoint: "
                         "input takes --input NAME=URL)")
    where = Path(path if path is not None else declared.path)
    fmt = declared.fmt or format_for_path(where)
    if fmt in SUITE_GLOBS:  # a folder of exports: its bytes are the bundle of the files read.glob matches
        return InputSource(declared.name, fmt,
                           folder_bundle(declared.name, where, declared.read.get("glob", SUITE_GLOBS[fmt]), limits),
                           overridden=path is not None)
    if fmt != MODEL_FORMAT:
        input_format(fmt, name=declared.name)  # an unknown format is refused before a byte is read
        return InputSource(declared.name, fmt, read_input_file(declared.name, where, fmt, limits),
                           overridden=path is not None)
    manifest = folder_manifest(declared.name, where, limits, keep_weights=keep_weights,
                               meanwhile=partial(warm_model_libraries, where) if keep_weights else None,
                               examine=examine_weights if keep_weights else None)
    unused_weights_detail(declared.name, manifest, profile)  # ci and release refuse unused weight files
    return InputSource(declared.name, fmt, manifest.raw, origin=where,
                       signature=_checked_signature(declared.name, where, manifest, declared.signature, profile),
                       overridden=path is not None, weights=manifest.held)


def _checked_signature(name: str, folder: Path, manifest: ModelManifest, trust: SignatureTrust | None,
                       profile: str) -> SignatureCheck:
    """The model folder's signature check (``certa.engine.core.models.signature``); in the ci and release profiles
    an outcome other than verified or unsigned is an ``InputError``."""
    check = check_signature(folder, manifest, trust)
    if profile != "dev" and check.status not in STRICT_STATUSES:
        raise InputError(f"input '{name}': model signature {check.status.replace('_', ' ')}: {check.reason} "
                         f"(profile {profile} accepts only a verified signature or none)")
    return check


def unused_weights_detail(name: str, manifest: ModelManifest, profile: str) -> dict[str, Any] | None:
    """None when every ``*.safetensors`` file of model input ``name``'s folder is one of its weights. Otherwise, in
    the dev profile, the detail of its ``unused_weights`` decision (the files loaded, the files not loaded, the
    rule, outcome ``warn`` and the message); in ci and release an ``InputError`` naming the unused files."""
    if not manifest.unused_weights:
        return None
    unused = ", ".join(manifest.unused_weights[:5]) + (f" and {len(manifest.unused_weights) - 5} more"
                                                       if len(manifest.unused_weights) > 5 else "")
    what = (f"input '{name}': the model folder holds {len(manifest.unused_weights)} *.safetensors file(s) that are "
            f"not its weights ({unused}); the weights are {', '.join(manifest.weights[:5])} (rule: {WEIGHTS_RULE})")
    if profile != "dev":
        raise InputError(f"{what}; profile {profile} refuses a folder whose weights are ambiguous: remove the other "
                         "weight files or move them out of the folder")
    return {"input": name, "weights": list(manifest.weights), "unused_weights": list(manifest.unused_weights),
            "rule": WEIGHTS_RULE, "profile": profile, "outcome": "warn",
            "message": f"{what}: only the weights were loaded (profile dev; ci and release refuse the folder)"}


def check_pin(declared: InputSpec, sha256: str) -> None:
    """An ``InputError`` when the spec pins a SHA-256 other than ``sha256``, the digest of the input's bytes."""
    if declared.sha256 is not None and declared.sha256 != sha256:
        raise InputError(f"input '{declared.name}': SHA-256 is {sha256} but the spec pins {declared.sha256}; "
                         "the data changed since the spec was written: check it, then update the pin")


def load_tables(plan: Plan, *, inputs: Mapping[str, Columns | Table | InputSource] | None = None,
                input_paths: Mapping[str, str | Path] | None = None,
                limits: InputLimits | None = None) -> dict[str, Table]:
    """Load every declared input: given in ``inputs`` (a table, columns, or bytes as an ``InputSource``),
    else read from ``input_paths`` or the spec's path (``read_source``); then read each by its format with
    the options its spec declares (``read_input``), the inputs those options name supplying their bytes.

    A pinned ``sha256`` is checked whatever the source. Unknown names in ``inputs``/``input_paths`` are a
    ``SpecError``. Files are read and parsed within ``limits`` (default ``InputLimits.from_env()``: the
    ``CERTA_INPUT_LIMITS`` setting); only regular files are read.
    """
    limits = limits or InputLimits.from_env()
    inputs = dict(inputs or {})
    input_paths = dict(input_paths or {})
    for name in list(inputs) + list(input_paths):
        if name not in plan.inputs:
            raise SpecError(f"input '{name}' is not declared in the spec (declared: "
                            f"{', '.join(sorted(plan.inputs)) or 'none'})", file=plan.source, path=f"inputs.{name}")
    given: dict[str, Table | InputSource] = {}
    named = _named_by_stages(plan)
    kept = False  # the first model folder a stage names keeps its weights for the loader: one model's bytes, at most
    for name, declared in plan.inputs.items():
        value = inputs.get(name)
        if value is None:
            path = input_paths.get(name)
            source = read_source(declared, path=path, profile=plan.profile,
                                 limits=limits, keep_weights=not kept and name in named)
            kept = kept or source.weights is not None
            given[name] = source
        elif isinstance(value, (Table, InputSource)):
            given[name] = value
        else:
            given[name] = table_from_columns(name, value, limits)
    tables: dict[str, Table] = {}
    for name, declared in plan.inputs.items():
        value = given[name]
        table = _read(name, declared, value, given, limits) if isinstance(value, InputSource) else value
        if table.name != name:
            table = replace(table, name=name)
        check_pin(declared, table.sha256)
        tables[name] = table
    return tables


def _named_by_stages(plan: Plan) -> set[str]:
    """Every text a stage's settings hold (at any depth): the inputs the stages use are among them (a model input
    a stage loads is named by its settings: ``model.windows``' ``baseline``, ``sequential.diff``'s ``reference``)."""
    named: set[str] = set()
    pending: list[Any] = [stage.knobs for stage in plan.stages]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            named.add(value)
        elif isinstance(value, Mapping):
            pending.extend(value.values())
        elif isinstance(value, (list, tuple)):
            pending.extend(value)
    return named


def _read(name: str, declared: InputSpec, source: InputSource, given: Mapping[str, Table | InputSource],
          limits: InputLimits) -> Table:
    """``source`` read by its format with the declared options; a companion option's input supplies its bytes."""
    companions = {option: given[declared.read[option]].raw
                  for option in input_format(source.fmt, name=name).companions
                  if option in declared.read and declared.read[option] in given}
    table = read_input(name, source.raw, source.fmt, options=declared.read, companions=companions, limits=limits)
    if source.sha256 is not None and table.sha256 != source.sha256:
        raise InputError(f"input '{name}': its bytes have SHA-256 {table.sha256}, not the {source.sha256} they "
                         "were hashed with when read (changed or corrupted in between)")
    return replace(table, origin=source.origin, signature=source.signature, overridden=source.overridden,
                   weights=source.weights)
