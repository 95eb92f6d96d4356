"""The checks of one batch of entries that need nothing from the batches before it, for ``certa.ledger.verify``: run
in its own process or in the caller's (``certa.ledger.verify_pool``), with the same answer.

A batch arrives as columns (seq, run_id, kind, recorded_at, payload, payload_sha256, prev_hash, entry_hash).
``BatchChecker.check_columns`` first checks the chain *within* the batch, column-wise: every cell of the type
certa writes, consecutive seqs, each ``prev_hash`` the hash of the entry before it in the batch, each
``payload_sha256`` the SHA-256 of the payload and each ``entry_hash`` that of the entry's RFC 8785 header. A
batch that fails any of these comes back unchecked (``BatchSummary.clean`` false): the caller checks it entry
by entry, with the chain state of the batches before it, and names every problem. The batch's links to the
chain before it (its first seq and ``prev_hash``) are the caller's to check.

Then every payload, entry by entry (``BatchChecker.check_payload``, which the caller's entry-by-entry path calls
too): valid JSON, a JSON object, its kind's schema (``schemas/ledger-entries.schema.json``), a certificate's own
checks. What the run, blob and incremental checks need of the batch is summed up per run (``RunPart``) and
merged by the caller in chain order, so that checking batches in any process gives the answer one walk would.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from certa.engine.foundation.json_read import parse_json

from certa.ledger import merkle
from certa.ledger.chain import header_template
from certa.ledger.run_record import RECORD_KINDS, RUN_FIELDS, payload_problems, runs_row

__all__ = ["Problem", "BatchChecker", "BatchSummary", "RunPart", "CheckCertificate", "ENTRY_TEMPLATE", "TEMPLATE_QUOTES",
           "MAX_SAFE_INT", "entry_problem", "expected_runs_row"]

CheckCertificate = Callable[[Mapping[str, Any]], list[str]]

MAX_SAFE_INT = 2**53 - 1
ENTRY_TEMPLATE = header_template('"%s"', '"%s"', '"%s"')  # fields: kind, payload, prev, time, run id, seq
TEMPLATE_QUOTES = ENTRY_TEMPLATE.count('"')

_PRINTABLE_ASCII = bytes(range(0x20, 0x7F))
"""Deleted from an ASCII text, they leave its control characters (``str.isprintable`` of ASCII, ten times as fast:
one ``bytes.translate``)."""
_SEPARATOR = "\x1e"
"""Joins a batch's payloads for one search: a control character, which JSON text holds nowhere (RFC 8259
section 7: not inside a string unescaped; outside strings only space, tab, line feed and carriage return)."""
_VALUE_STARTS = bytes.maketrans(b"123456789:,[- \t\n\r", b"000000000" + _SEPARATOR.encode("ascii") * 8)
"""Every digit made ``0``, and every character a JSON number token may follow (RFC 8259 section 2: a value
follows ``:``, ``[``, ``,`` or the text's start, after optional whitespace; a number may begin with ``-``) made
``_SEPARATOR``: a table of bytes, for UTF-8 text (``str.translate`` looks up every character of a text that is not
all ASCII in a dict; ``bytes.translate`` indexes a table, and no byte of a multi-byte UTF-8 sequence is ASCII)."""
_LONG_INTEGER = (_SEPARATOR + "0" * 16).encode("ascii")
"""Where an integer token of 16 digits or more may begin (a number has no leading zeros: its first digit begins the
run), in a text marked by ``_VALUE_STARTS``."""
_MAX_SHAPES = 4096
_RECORD_KINDS = frozenset(RECORD_KINDS)
_UNREAD = object()


_DECODE_JSON = msgspec.json.Decoder().decode
"""msgspec's JSON decoder (https://jcristharif.com/msgspec/), two to three times as fast as the standard library's C
scanner on certa's payloads. Where it reads a text at all it reads it as ``json`` does (the same values, key order
and last duplicate kept; floats correctly rounded, as ``float()``); it refuses more (an escaped lone surrogate, a
float beyond the double range, trailing data), and those texts go to ``parse_json``."""


@dataclass(frozen=True)
class Problem:
    """One integrity failure: where (entry seq / run / blob / table) and what; ``column`` is the edited
    ``table.column`` when the problem is in a table derived from the chain (``runs.seed``)."""

    where: str
    message: str
    seq: int | None = None
    run_id: str | None = None
    column: str | None = None


def entry_problem(seq: Any, kind: Any, run_id: Any, message: str) -> Problem:
    """A problem with one entry, named by its seq, kind and run."""
    return Problem(f"entry {seq} ({kind}, run {run_id})", message, seq, run_id)


def _slim_certificate(data: Mapping[str, Any]) -> tuple[bool, Any, Any]:
    """What ``runs_row`` reads of a certificate, as a tuple (a few hundred bytes less per run than dicts, kept for
    every run until the ``runs`` table is read): whether its content is an object, its content's verdict (or the
    content itself when it is not an object), its ``content_sha256``."""
    content = data.get("content")
    if isinstance(content, Mapping):
        return True, content.get("verdict"), data.get("content_sha256")
    return False, content, data.get("content_sha256")


def expected_runs_row(run: tuple[Any, ...], certificate: tuple[bool, Any, Any] | None) -> dict[str, Any]:
    """``runs_row`` of a run entry's ``RUN_FIELDS`` (in that order) and of its certificate's slim form
    (``_slim_certificate``; None: no certificate), as ``certa.ledger.verify`` keeps them."""
    slim = None
    if certificate is not None:
        is_object, verdict, digest = certificate
        slim = {"content": {"verdict": verdict} if is_object else verdict, "content_sha256": digest}
    return runs_row(dict(zip(RUN_FIELDS, run)), certificate=slim)


RunPart = list[Any]
"""What a batch says of one run, in chain order: [first seq, its recorded_at, last seq of a record kind (None:
none), its run entry's ``RUN_FIELDS`` as a tuple (None: none read), its last certificate's slim form
(``_slim_certificate``; None: none), the first seq of a record entry other than the run entry after
``records_after`` before any run entry (None: none)]."""


@dataclass
class BatchSummary:
    """One batch's checks: ``clean`` (the chain within it holds; otherwise nothing else was checked), its
    Merkle ``leaves`` (``merkle.entry_leaves`` of its entry hashes), the problems its payloads have, what it
    says of each run (``RunPart``), the blobs its entries name and the certificates checked."""

    clean: bool
    leaves: list[bytes] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    runs: dict[Any, RunPart] = field(default_factory=dict)
    referenced: set[str] = field(default_factory=set)
    certificates: int = 0


class BatchChecker:
    """Checks batches; keeps across them only a cache of the decision payload shapes' schema answers."""

    def __init__(self, *, check_certificate: CheckCertificate | None, run_id: str | None,
                 records_after: int | None) -> None:
        self.check_certificate, self.run_id, self.records_after = check_certificate, run_id, records_after
        self.shapes: dict[tuple[Any, ...], list[str]] = {}

    def check_columns(self, columns: Sequence[tuple[Any, ...]]) -> BatchSummary:
        """The batch's chain checks within it, then (when they hold) its payloads' (module docstring)."""
        seqs, run_ids, kinds, times, payloads, digests, prevs, hashes = columns
        if not _chain_holds(columns):
            return BatchSummary(clean=False)
        summary = BatchSummary(clean=True, leaves=merkle.entry_leaves(hashes))
        slow = _slow_payloads(payloads)
        check = self.check_payload
        for i, (seq, run_id, kind, recorded_at, payload) in enumerate(zip(seqs, run_ids, kinds, times, payloads)):
            check(summary, seq, run_id, kind, recorded_at, payload, i not in slow)
        return summary

    def check_payload(self, summary: BatchSummary, seq: int, run_id: str, kind: str, recorded_at: str, payload: str,
                      fast: bool = False) -> None:
        """The payload checks of one well-typed entry, into ``summary``. ``fast``: no integer token of 16 digits
        or more may stand in the payload (``_slow_payloads``), so that every integer in it is within ±(2**53 − 1)
        (RFC 8785's number model) and msgspec's decoder (``_DECODE_JSON``), when it reads the text, reads it as
        ``parse_json`` would, with no Python call per integer (a run or certificate payload of kilobytes holds
        hundreds). A text it refuses (not JSON, a constant such as ``NaN``, nesting too deep), and any payload
        not ``fast``, goes through ``parse_json`` itself, for its answer and its ``ValueError``.

        A decision's schema answer is remembered by its members, their types and the sign and integrality of
        ``index`` (all the decision schema constrains: a finer partition than ``payload_problems``' own, so the
        answer is the same)."""
        part = summary.runs.get(run_id)
        if part is None:
            part = summary.runs[run_id] = [seq, recorded_at, None, None, None, None]
        if kind in _RECORD_KINDS:
            part[2] = seq
            if self.records_after is not None and seq > self.records_after and kind != "run" \
                    and part[3] is None and part[5] is None:
                part[5] = seq
        data: Any = _UNREAD
        if fast:
            try:
                data = _DECODE_JSON(payload)
            except (msgspec.DecodeError, ValueError, RecursionError):  # DecodeError is a ValueError from msgspec 0.19
                pass
        if data is _UNREAD:
            try:
                data = parse_json(payload)
            except ValueError:
                summary.problems.append(entry_problem(seq, kind, run_id, "payload is not valid JSON"))
                return
        if type(data) is not dict:
            summary.problems.append(entry_problem(seq, kind, run_id, "payload is not a JSON object"))
            return
        if kind == "decision":
            index: Any = data.get("index")
            kind_of_index = type(index)
            key = (*data, *map(type, data.values()),
                   index >= 0 if kind_of_index is int else
                   (index >= 0, math.isfinite(index) and index.is_integer()) if kind_of_index is float else None)
            malformed = self.shapes.get(key)
            if malformed is None:
                malformed = payload_problems(kind, data)
                if len(self.shapes) < _MAX_SHAPES:
                    self.shapes[key] = malformed
        else:
            malformed = payload_problems(kind, data)
        if malformed:
            summary.problems.append(entry_problem(seq, kind, run_id,
                                                  f"{kind} payload does not match its schema "
                                                  f"(schemas/ledger-entries.schema.json): {malformed[0]}"))
        if kind == "decision":
            return
        if kind in ("input", "captured"):
            summary.referenced.add(str(data.get("sha256", "")))
        elif kind == "run":
            part[3] = tuple(map(data.get, RUN_FIELDS))
        elif kind == "certificate":
            part[4] = _slim_certificate(data)
            if self.check_certificate is not None and (self.run_id is None or run_id == self.run_id):
                summary.certificates += 1
                summary.problems.extend(entry_problem(seq, kind, run_id, f"certificate: {message}")
                                        for message in self.check_certificate(data))


def _chain_holds(columns: Sequence[tuple[Any, ...]]) -> bool:
    """Whether every cell is of the type certa writes and the chain holds within the batch (module docstring);
    the entry hashes through RFC 8785's fixed template, valid when the header text is printable ASCII (0x20 to
    0x7E) without ``\\`` or a quote beyond the template's own and every seq is within ±(2**53 − 1)."""
    seqs, run_ids, kinds, times, payloads, digests, prevs, hashes = columns
    if set(map(type, seqs)) != {int} or any(set(map(type, column)) != {str} for column in columns[1:]):
        return False
    n = len(seqs)
    if seqs != tuple(range(seqs[0], seqs[0] + n)) or seqs[0] < -MAX_SAFE_INT or seqs[-1] > MAX_SAFE_INT \
            or prevs[1:] != hashes[:-1]:
        return False
    sha256 = hashlib.sha256
    try:
        if [sha256(p.encode("utf-8")).hexdigest() for p in payloads] != list(digests):
            return False
    except UnicodeEncodeError:
        return False
    texts = [ENTRY_TEMPLATE % fields for fields in zip(kinds, digests, prevs, times, run_ids, seqs)]
    joined = "".join(texts)
    if not (joined.isascii() and not joined.encode("ascii").translate(None, _PRINTABLE_ASCII)
            and "\\" not in joined and joined.count('"') == TEMPLATE_QUOTES * n):
        return False
    return [sha256(t.encode("ascii")).hexdigest() for t in texts] == list(hashes)


def _slow_payloads(payloads: Sequence[str]) -> set[int]:
    """The indexes of the payloads ``BatchChecker.check_payload`` must parse with ``parse_json`` (not ``fast``):
    those where an integer token of 16 digits or more may stand, a run of 16 ASCII digits right after a
    character a number may follow (``_LONG_INTEGER``; a float's 16-digit fraction or exponent, as certificates
    hold by the hundred, is not one). Found in all of them joined by ``_SEPARATOR`` (which no JSON text holds,
    so a run of digits never spans two payloads) and marked (``_VALUE_STARTS``), as UTF-8 bytes: one ``bytes.find`` per match."""
    slow: set[int] = set()
    encoded = [payload.encode("utf-8") for payload in payloads]  # text that is not UTF-8 fails the chain checks
    joined = _SEPARATOR.encode("ascii").join(encoded)
    if joined.count(_SEPARATOR.encode("ascii")) != len(payloads) - 1:  # a payload holds one: parse_json says why
        return set(range(len(payloads)))
    marked = _SEPARATOR.encode("ascii") + joined.translate(_VALUE_STARTS)  # joined's byte i is marked's i + 1
    found = marked.find(_LONG_INTEGER)
    if found >= 0:
        ends = list(itertools.accumulate(len(payload) + 1 for payload in encoded))
        while found >= 0:  # the run's first digit is joined's byte ``found``
            index = bisect.bisect_right(ends, found)
            slow.add(index)
            found = marked.find(_LONG_INTEGER, ends[index])  # from the separator before the next payload
    return slow
