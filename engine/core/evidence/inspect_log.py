"""Inspect AI evaluation logs: the native ``.eval`` archive and its JSON form (``inspect log convert --to json``).

A ``.eval`` file is a ZIP archive whose members are zstd-compressed (ZIP method 93), which Python's
``zipfile`` reads only from 3.14: each member's compressed bytes are taken from the archive and decompressed
with the ``zstandard`` binding, bounded by the member's declared size and checked against its CRC-32. Members
read: ``header.json`` (the eval spec and plan) and ``samples/<id>_epoch_<n>.json`` (one sample each). The JSON
form holds the same ``eval``, ``plan`` and a ``samples`` list.

Memory: a sample's event transcript (``messages``, ``events``, ``output``, ``attachments``) can be hundreds of MB
of JSON, which ``json`` would build as Python objects at 10 to 30 bytes per byte. Each member (or the JSON form)
is read as a ``JsonObject``: checked whole as UTF-8 and JSON, its fields kept as unparsed text, and only the
fields certa reads parsed (``_SAMPLE_FIELDS``, ``_LOG_FIELDS``), at most ``cell_bytes`` of JSON text a sample (or
header), checked before any is parsed. A member is decompressed into one buffer as it streams, refused at the
byte that passes its declared size (itself within ``text_bytes``), and released once its sample is read: reading
costs the archive, one member and the fields read (``bench/hostile_inputs.py``). Every member's declared size
(within ``text_bytes``) and the samples' total (within ``bytes``: they are never held together) are checked from
the archive's directory before any member is decompressed. The directory is read as columns by
``zip_directory.central_directory`` where the archive has the layout Inspect writes (by ``zipfile`` otherwise), and
what is kept of each sample goes into columns as it is read (``_SampleColumns``): of a log of 2·10⁵ samples
without transcripts the reader holds the file, about 0.12 KB of directory and 0.4 KB of columns a sample.

Item key (sample ``id``, ``epoch``), the epoch being the repeat field (``EvidenceRecords.repeat_field``: the
epochs of one sample are repeated trials of it, not independent items); identity the SHA-256 of the canonical
JSON of the sample's ``input`` and ``target``. Metrics: one per scorer (``scores.<scorer>.value``), or ``<scorer>.<key>`` for a scorer whose
value is an object. Values become numbers as Inspect's ``value_to_float`` defines them
(``inspect_ai.scorer._metric.value_to_float``, defaults ``CORRECT``/``INCORRECT``/``PARTIAL``/``NOANSWER``):
the letters ``C`` = 1, ``P`` = 0.5, ``I`` = ``N`` = 0; numbers and booleans as they are; the texts ``yes`` and
``true`` = 1, ``no`` and ``false`` = 0, any case; a text of a finite number as that number. Where Inspect warns
and scores 0 (a list, a text it cannot read), certa refuses the log instead.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import struct
import zipfile
import zlib
from array import array
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import zstandard

from certa.engine.foundation.canonical import is_utf8_text
from certa.engine.foundation.errors import InputError
from certa.engine.core.input_limits import InputLimits

from .records import EvidenceRecords, Provenance, require_unique_keys
from .zip_directory import Member, central_directory
from .sources import (JsonObject, Labels, Source, field_of, finite_number, read_source, sha256_hex, stated_text,
                      value_digest)

__all__ = ["LETTER_VALUES", "score_value", "read_inspect_eval", "read_inspect_json"]

LETTER_VALUES = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}
"""Inspect's score letters (correct, partial, incorrect, no answer) and the numbers its metrics give them."""

_WORD_VALUES = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}
_NUMBER_TEXT = re.compile(r"\s*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*")
_ZSTD = 93
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # ZIP local file header (APPNOTE 4.3.7)
_SAMPLE_MEMBER = re.compile(r"samples/.+\.json", re.S)
"""A sample's member, ``samples/<id>_epoch_<n>.json``: an id with ``/`` in it makes a deeper path, read too."""
_SAMPLE_FIELDS = ("id", "epoch", "input", "target", "scores")
"""The fields of a sample certa parses, with ``metadata.<key>`` for ``slice_metadata`` and ``error`` where the sample
has no scores; the others are checked as JSON, never built."""
_LOG_FIELDS = ("eval", "plan", "results", "status")
"""The fields of a log's header (``header.json``, or the JSON form's top level) certa parses."""
_Member = Member | zipfile.ZipInfo
"""A member as the archive's directory states it: read by ``central_directory``, or by ``zipfile``."""
_BLOCK = 1 << 20
"""Bytes decompressed at a time."""


def score_value(value: Any, where: str) -> float:
    """A sample score's value as Inspect's metrics read it (see the module docstring); an ``InputError``
    where Inspect would only warn."""
    if type(value) is str:
        if value in LETTER_VALUES:
            return LETTER_VALUES[value]
        if value.lower() in _WORD_VALUES:
            return _WORD_VALUES[value.lower()]
        if _NUMBER_TEXT.fullmatch(value) and math.isfinite(float(value)):
            return float(value)
    elif type(value) in (int, float, bool) and finite_number(value):
        return float(value)
    raise InputError(f"{where} is {value!r:.60}, not a number, a boolean, a score letter "
                     f"({', '.join(LETTER_VALUES)}) or yes/no/true/false")


def read_inspect_eval(log: Source, *, slice_metadata: str | None = None, name: str | None = None,
                      limits: InputLimits | None = None) -> EvidenceRecords:
    """The per-sample scores of a native ``.eval`` log; ``slice_metadata`` (a spec's ``read.slice``) names a key of
    each sample's ``metadata`` whose value becomes the item's slice."""
    limits = limits or InputLimits.from_env()
    where, raw = read_source(log, name, limits)
    directory = central_directory(raw)
    archive = None
    if directory is None:  # not the plain layout Inspect writes: zipfile reads (or refuses) the archive
        try:
            archive = zipfile.ZipFile(io.BytesIO(raw))
            infos = archive.infolist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
            raise InputError(f"{where}: not an Inspect .eval archive (a ZIP file; {error})") from None
        names = [info.filename for info in infos]
        member_at: Callable[[int], _Member] = infos.__getitem__
    else:
        names, member_at = directory.names, directory.member
    header_at = max((index for index, name in enumerate(names) if name == "header.json"), default=None)  # the last
    if header_at is None:
        raise InputError(f"{where}: member 'header.json' is missing; is it an Inspect .eval log (format 2)?")
    every_sample = [index for index, name in enumerate(names) if _SAMPLE_MEMBER.fullmatch(name)]
    limits.check(where, "rows", len(every_sample), "the number of samples")
    # from the archive's directory, before any member is decompressed: the samples are decompressed one at a
    # time (each within text_bytes), so their total bounds the work, as a file's size does (bytes)
    limits.check(where, "bytes", sum(member_at(index).file_size for index in every_sample),
                 "the declared size in bytes of the samples")
    unpack = _MemberReader(where, raw, archive, limits)
    for index in (header_at, *every_sample):
        unpack.check_declared(member_at(index))
    header = _log_fields(JsonObject.document(f"{where}, member header.json", unpack(member_at(header_at))), limits)
    # a sample logged again (a retry) is a second member of the same name: Inspect reads the last, and so does certa,
    # saying how many it superseded (provenance detail superseded_members)
    chosen = array("q", {names[index]: index for index in every_sample}.values())
    superseded = len(every_sample) - len(chosen)
    del every_sample
    located = Labels("member {}", [names[index] for index in chosen])
    columns = _SampleColumns(where)
    for at_index, index in enumerate(chosen):  # one member's bytes alive at a time
        at = f"{where}, {located[at_index]}"
        columns.add(_sample_row(_sample_fields(JsonObject.document(at, unpack(member_at(index))), slice_metadata,
                                               limits), at, slice_metadata), located, at_index)
    return _records(where, raw, header, columns, located, superseded=superseded)


def read_inspect_json(log: Source, *, slice_metadata: str | None = None, name: str | None = None,
                      limits: InputLimits | None = None) -> EvidenceRecords:
    """The per-sample scores of a log in Inspect's JSON form (``inspect log convert --to json``)."""
    limits = limits or InputLimits.from_env()
    where, raw = read_source(log, name, limits)
    document = JsonObject.document(where, raw)
    stated = _log_fields(document, limits)
    samples = document.objects("samples")
    if samples is None:  # absent or not a list: refused, naming what it is
        if "samples" in document:
            limits.check(where, "cell_bytes", document.text_bytes("samples"), "the JSON text of field 'samples'")
        field_of({"samples": document.value("samples")} if "samples" in document else {}, "samples", (list,), where)
        raise AssertionError("field_of refuses what is not a list")
    limits.check(where, "rows", len(samples), "the number of samples")
    located = Labels("samples[{}]", range(len(samples)))
    columns = _SampleColumns(where)
    for index, sample in enumerate(samples):
        columns.add(_sample_row(_sample_fields(sample, slice_metadata, limits), f"{where}, {located[index]}",
                                slice_metadata), located, index)
    return _records(where, raw, stated, columns, located)


def _log_fields(log: JsonObject, limits: InputLimits) -> dict[str, Any]:
    """The header fields certa reads (``_LOG_FIELDS``, those present), parsed: at most ``cell_bytes`` of JSON."""
    return log.values(_LOG_FIELDS, limits, f"the JSON text of the log's fields {', '.join(_LOG_FIELDS)} in bytes")


_PARSED = ("the JSON text of the sample's fields certa reads (id, epoch, input, target, scores, and the slice's "
           "metadata key or the error) in bytes")


def _sample_fields(sample: JsonObject | None, slice_metadata: str | None, limits: InputLimits) -> dict[str, Any] | None:
    """The fields of one sample certa reads (``_SAMPLE_FIELDS``; of ``metadata`` only the key ``slice_metadata``;
    ``error`` only where the scores are missing or empty), parsed, as ``_sample_row`` reads them; at most
    ``cell_bytes`` of JSON text, checked before any is parsed. ``None``: the sample is not a JSON object."""
    if sample is None:
        return None
    metadata = sample.object("metadata") if slice_metadata is not None else None
    sliced = metadata if metadata is not None and slice_metadata is not None and slice_metadata in metadata else None
    sliced_bytes = sliced.text_bytes(slice_metadata) if sliced is not None and slice_metadata is not None else 0
    fields = sample.values(_SAMPLE_FIELDS, limits, _PARSED, also=sliced_bytes)
    if slice_metadata is not None and "metadata" in sample:  # an object of the one key read, or {} (missing)
        fields["metadata"] = {slice_metadata: sliced.value(slice_metadata)} if sliced is not None else {}
    scores = fields.get("scores")
    if (type(scores) is not dict or not scores) and "error" in sample:  # the error explains the missing scores
        fields |= sample.values(("error",), limits, _PARSED, also=sliced_bytes + sum(map(sample.text_bytes,
                                                                                         _SAMPLE_FIELDS)))
    return fields


class _MemberReader:
    """Members' bytes of one archive, decompressed within each one's declared size (and ``text_bytes``) and
    CRC-checked; one zstd decompression context serves every member."""

    def __init__(self, where: str, raw: bytes, archive: zipfile.ZipFile | None, limits: InputLimits) -> None:
        self.where, self.raw, self.archive, self.limits = where, raw, archive, limits
        self.zstd = zstandard.ZstdDecompressor()

    def check_declared(self, member: _Member) -> None:
        """The member's declared size within ``text_bytes`` (from the archive's directory)."""
        self.limits.check(f"{self.where}, member {member.filename}", "text_bytes", member.file_size,
                          "the member's declared size in bytes")

    def __call__(self, member: _Member) -> bytes | bytearray:
        at = f"{self.where}, member {member.filename}"
        self.check_declared(member)
        if member.compress_type != _ZSTD:
            assert isinstance(member, zipfile.ZipInfo) and self.archive is not None  # central_directory: zstd only
            try:
                with self.archive.open(member) as stream:  # zipfile stops at the declared size, checks the CRC
                    return _gathered(at, member.file_size, stream.read)
            except (zipfile.BadZipFile, NotImplementedError, OSError, ValueError, zlib.error, EOFError) as error:
                raise InputError(f"{at}: cannot be read ({error})") from None
        data = self._zstd_member(at, member)
        if len(data) != member.file_size or zlib.crc32(data) != member.CRC:
            raise InputError(f"{at}: decompressed size or CRC-32 differs from the archive's directory; the file "
                             "is damaged")
        return data

    def _zstd_member(self, at: str, member: _Member) -> bytes | bytearray:
        """The member's compressed bytes (after its local header) decompressed, never past its declared size
        (a frame's own content size is not trusted): one frame whose header states the declared size, and after which
        no byte follows, as Inspect writes a member, is decompressed in one call into a buffer of that size (zstd
        checks the content has the size its header states); any other member is streamed a block at a time."""
        start = member.header_offset
        fixed = self.raw[start:start + _LOCAL_HEADER.size]
        if len(fixed) < _LOCAL_HEADER.size or fixed[:4] != b"PK\x03\x04":
            raise InputError(f"{at}: the member's local header is missing or damaged")
        name_length, extra_length = _LOCAL_HEADER.unpack(fixed)[-2:]
        offset = start + _LOCAL_HEADER.size + name_length + extra_length
        compressed = memoryview(self.raw)[offset:offset + member.compress_size]
        if len(compressed) != member.compress_size:
            raise InputError(f"{at}: the archive ends inside the member")
        try:
            with contextlib.suppress(zstandard.ZstdError):  # the stream below decides every refusal
                if member.file_size and zstandard.frame_content_size(compressed) == member.file_size:
                    return self.zstd.decompress(compressed, max_output_size=member.file_size, allow_extra_data=False)
            return _gathered(at, member.file_size,
                             self.zstd.stream_reader(compressed, read_across_frames=True).read)
        except zstandard.ZstdError as error:
            raise InputError(f"{at}: not valid zstd data ({error})") from None


def _gathered(at: str, size: int, read: Callable[[int], bytes]) -> bytearray:
    """The bytes ``read`` gives, ``_BLOCK`` at a time, into one buffer (no joined copy); refused at the byte
    that passes the declared ``size``."""
    data = bytearray()
    while chunk := read(min(_BLOCK, size + 1 - len(data))):
        data += chunk
        if len(data) > size:
            raise InputError(f"{at}: decompresses to more than its declared {size:,} bytes")
    return data


class _SampleRow(NamedTuple):
    """What certa keeps of one sample."""

    id: int | str
    epoch: int
    scores: dict[str, float]
    input_sha256: str
    target_sha256: str
    slice: str | None


def _sample_row(sample: dict[str, Any] | None, where: str, slice_metadata: str | None) -> _SampleRow:
    """One sample's key, scores, identity digests and slice (the rest of the sample is not kept)."""
    if type(sample) is not dict:
        raise InputError(f"{where}: a sample must be a JSON object")
    epoch = field_of(sample, "epoch", (int,), where)
    if not 1 <= epoch < 2 ** 63:
        raise InputError(f"{where}: field 'epoch' must be an integer from 1 to 2^63 − 1 (got {epoch})")
    sample_id = field_of(sample, "id", (int, str), where)
    if isinstance(sample_id, str) and not is_utf8_text(sample_id):
        raise InputError(f"{where}: field 'id' {sample_id!r:.60} holds a lone surrogate, which no UTF-8 text can hold")
    digests = [value_digest(field_of(sample, field, (str, list), where), f"{where}: field '{field}'")
               for field in ("input", "target")]
    return _SampleRow(sample_id, epoch, _sample_scores(sample, where),
                      digests[0], digests[1],
                      None if slice_metadata is None else _slice(sample, slice_metadata, where))


class _SampleColumns:
    """What certa keeps of the samples read, a column each, filled one sample at a time (no object a sample
    outlives its reading): ids, epochs (int64), input and target digests, slices, and each metric's values (float64)
    under the first sample's scorer names; the first sample whose names differ is remembered, to be refused after
    the keys are checked (as they were checked first when every row was held)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.ids: list[int | str] = []
        self.epochs = array("q")
        self.input_sha256: list[str] = []
        self.target_sha256: list[str] = []
        self.slices: list[str | None] = []
        self.names: list[str] = []
        self.metrics: dict[str, array[float]] = {}
        self.mismatch: str | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, row: _SampleRow, located: Sequence[str], index: int) -> None:
        """Append one sample's row (``located[index]`` names it in a refusal)."""
        if not self.ids:
            self.names = sorted(row.scores)
            self.metrics = {name: array("d") for name in self.names}
        self.ids.append(row.id)
        self.epochs.append(row.epoch)
        self.input_sha256.append(row.input_sha256)
        self.target_sha256.append(row.target_sha256)
        self.slices.append(row.slice)
        if self.mismatch is None:
            if len(row.scores) == len(self.names) and all(name in row.scores for name in self.names):
                for name, values in self.metrics.items():
                    values.append(row.scores[name])
            else:
                self.mismatch = (f"{self.where}, {located[index]}: scores {sorted(row.scores)}, not {self.names} as "
                                 "on the first sample")

    def keys_repeat(self) -> bool:
        """Whether an item key (id, epoch) occurs twice: a set of the ids where every epoch is the same (no tuple a
        sample), of (id, epoch) pairs otherwise."""
        if min(self.epochs) == max(self.epochs):
            return len(set(self.ids)) != len(self.ids)
        return len(set(zip(self.ids, self.epochs))) != len(self.ids)


def _records(where: str, raw: bytes, log: dict[str, Any], columns: _SampleColumns,
             located: Sequence[str], *, superseded: int = 0) -> EvidenceRecords:
    """The records of the samples' columns, with provenance from the log's ``eval`` and ``plan``."""
    count = len(columns)
    if not count:
        raise InputError(f"{where}: the log holds no samples; run the evaluation without --no-log-samples")
    results = log.get("results") if type(log.get("results")) is dict else {}
    declared = results.get("completed_samples")
    if type(declared) is int and declared != count:
        raise InputError(f"{where}: the log's results say {declared} samples were completed (results."
                         f"completed_samples), but it holds {count}; every sample is read or the log refused")
    total = results.get("total_samples")
    if log.get("status") == "success" and type(total) is int and total != count:
        raise InputError(f"{where}: the log's results say the evaluation succeeded over {total} samples (results."
                         f"total_samples, status success), but it holds {count}; every sample is read or the "
                         "log refused")
    if columns.keys_repeat():
        require_unique_keys(where, ("id", "epoch"), list(zip(columns.ids, columns.epochs)), located)
    if columns.mismatch is not None:
        raise InputError(columns.mismatch)
    metrics = {metric: np.frombuffer(values, dtype=np.float64) for metric, values in columns.metrics.items()}
    identity = {"input_sha256": np.array(columns.input_sha256, dtype=object),
                "target_sha256": np.array(columns.target_sha256, dtype=object)}
    slices = None if columns.slices[0] is None else np.array(columns.slices, dtype=object)
    ids = np.empty(count, dtype=object)
    ids[:] = columns.ids
    return EvidenceRecords(source=where, key_fields=("id", "epoch"),
                           keys={"id": ids, "epoch": np.frombuffer(columns.epochs, dtype=np.int64)},
                           metrics=metrics, provenance=_provenance(where, raw, log, superseded), identity=identity,
                           slices=slices, repeat_field="epoch")


def _sample_scores(sample: dict[str, Any], where: str) -> dict[str, float]:
    """``{metric: value}`` of one sample: a scalar scorer value under the scorer's name, an object value's
    entries as ``<scorer>.<key>``."""
    scores = sample.get("scores")
    if type(scores) is not dict or not scores:
        error = sample.get("error")
        reason = f" (the sample failed: {str(error)[:80]})" if error else ""
        raise InputError(f"{where}: field 'scores' is missing or empty{reason}")
    values: dict[str, float] = {}
    for scorer, score in scores.items():
        if type(score) is not dict or "value" not in score:
            raise InputError(f"{where}: scores.{scorer} must be an object with a 'value'")
        value = score["value"]
        named = ({f"{scorer}.{key}": (item, f"scores.{scorer}.value.{key}") for key, item in value.items()}
                 if type(value) is dict else {scorer: (value, f"scores.{scorer}.value")})
        for metric, (item, at) in named.items():
            if metric in values:  # scorer 'a' with {"b": ...} and a scorer named 'a.b' would be one metric
                raise InputError(f"{where}: {at} and another scorer's value are both metric '{metric}'; rename one "
                                 "of the scorers")
            values[metric] = score_value(item, f"{where}: {at}")
    return values



def _slice(sample: dict[str, Any], key: str, where: str) -> str:
    metadata = sample.get("metadata")
    if type(metadata) is not dict or key not in metadata:
        raise InputError(f"{where}: metadata.{key} (the slice, read.slice) is missing")
    value = metadata[key]
    if type(value) not in (str, int, bool):
        raise InputError(f"{where}: metadata.{key} (the slice, read.slice) must be text, an integer or a "
                         "boolean")
    return str(value)


def _provenance(where: str, raw: bytes, log: dict[str, Any], superseded: int = 0) -> Provenance:
    """Tool version (``eval.packages.inspect_ai``), task, configuration digest and model from the log; with
    ``superseded``, how many sample members a later member of the same name replaced."""
    spec = field_of(log, "eval", (dict,), where)
    stated = {key: spec.get(key) for key in ("task_args", "dataset", "config", "scorers", "solver", "solver_args")
              if key in spec}
    if "plan" in log:
        stated["plan"] = log["plan"]
    packages = spec.get("packages") if type(spec.get("packages")) is dict else {}
    models = [(key, stated_text(spec[key])) for key in ("model", "model_base_url") if spec.get(key) not in (None, "")]
    if spec.get("model_args"):
        models.append(("model_args_sha256", value_digest(spec["model_args"], f"{where}: eval.model_args")))
    stated_details = (("status", log.get("status")), ("task_id", spec.get("task_id")), ("run_id", spec.get("run_id")),
                      ("created", spec.get("created")))
    details = [(key, stated_text(value)) for key, value in stated_details if value not in (None, "")]
    if superseded:
        details.append(("superseded_members", str(superseded)))
    version = spec.get("task_version")
    return Provenance(tool="inspect_ai", tool_version=stated_text(packages.get("inspect_ai")),
                      task=stated_text(spec.get("task")), task_version=stated_text(version),
                      task_config_sha256=value_digest(stated, f"{where}: eval"), models=tuple(models),
                      details=tuple(details), sources=((where, sha256_hex(raw)),))
