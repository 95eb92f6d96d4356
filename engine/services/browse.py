"""Reading recorded runs for people: one run's report (``certa show``), its decisions page by page (``certa
decisions``), two runs compared (``certa diff``), a certificate written out (``certa export``) and the chain
head (``certa head``); and a bundle's certificate without a ledger (``certa show BUNDLE_FILE``,
``open_bundle``). Nothing here writes to the ledger."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from certa.ledger.rows import RunRow
from certa.engine.foundation.atomic_files import write_atomically
from certa.engine.services.documents import write_certificate
from certa.engine.foundation.jsondiff import ArrayChange, FieldChange, flatten, json_diff, summarised
from certa.engine.services.presentation.display_text import json_display
from certa.engine.services.presentation.markdown import recorded_abort, recorded_decisions, recorded_warnings
from certa.engine.services.policy_record import run_policies
from certa.engine.services.reviews import ReviewRecord, reviews_of, run_approval
from certa.engine.core.approvals import ApprovalDecision
from certa.engine.core.trust_policy import TrustPolicy

if TYPE_CHECKING:  # 'certa show RUN' loads no signing, schema or stage module (tests/cli/test_startup.py)
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from certa.ledger import Ledger
    from certa.ledger.rows import RunReads

    from certa.engine.services.audit import BundleVerification

__all__ = ["RunView", "show_run", "BundleView", "open_bundle", "DecisionListing", "list_decisions", "RunDiff",
           "diff_runs", "ExportedCertificate",
           "export_certificate", "LedgerHead", "ledger_head", "DIFF_SIDES"]

DIFF_SIDES = ("a", "b")
"""The names of a ``certa diff`` change's two values in its JSON form."""


@dataclass(frozen=True)
class RunView:
    """One run as ``certa show`` prints it: a completed run's ``certificate`` (with its recorded ``warnings``,
    and the plain-language paragraphs when ``explain``), or an aborted run's ``abort`` and failed ``rules``.
    ``ledger`` names the ledger in the command it suggests."""

    row: RunRow
    certificate: Mapping[str, Any] | None
    warnings: tuple[str, ...]
    abort: Mapping[str, Any] | None
    rules: tuple[dict[str, Any], ...]
    explain: bool
    ledger: str
    reviews: tuple[ReviewRecord, ...] = ()
    policy: TrustPolicy | None = None
    approval: ApprovalDecision | None = None
    """A completed run's approval under ``policy`` (``certa.engine.services.reviews.run_approval``)."""

    def as_json(self) -> Mapping[str, Any]:
        """The whole certificate, or an aborted run's reason and failed rules."""
        if self.certificate is not None:
            return self.certificate
        return {"run_id": self.row.run_id, "status": "aborted", "abort": self.abort, "failed_rules": list(self.rules)}


def show_run(ledger: RunReads, run_id: str, *, explain: bool = False, ledger_name: str,
             policy: TrustPolicy | None = None) -> RunView:
    """``run_id``'s certificate, warnings, reviews and approval under ``policy`` (None: the policy the run's spec
    names, as the ledger recorded it, else not checked; ``certa.engine.services.policy_record.run_policies``), or
    (an aborted run) the reason and the rules that stopped it; ``ledger_name`` is the ledger as the user gave it
    (for the command the text suggests)."""
    row = ledger.run(run_id)
    if row.status == "aborted":
        abort, rules = recorded_abort(ledger, row.run_id)
        return RunView(row=row, certificate=None, warnings=(), abort=abort, rules=rules, explain=explain,
                       ledger=ledger_name)
    reviews = tuple(reviews_of(ledger, row.run_id))
    decides = run_policies(ledger, [row], policy)[row.run_id]
    return RunView(row=row, certificate=ledger.certificate(row.run_id), warnings=recorded_warnings(ledger, row.run_id),
                   abort=None, rules=(), explain=explain, ledger=ledger_name, reviews=reviews, policy=decides.policy,
                   approval=run_approval(ledger, row.run_id, decides, reviews))


@dataclass(frozen=True)
class BundleView:
    """A bundle's certificate as ``certa show`` and ``certa report`` render it without a ledger. ``verification``
    is ``certa.engine.services.audit.verify_bundle``'s outcome when public keys were given, None when none was
    (then only the bundle's shape was checked, and its reviews are not shown: none is proven)."""

    file: Path
    certificate: Mapping[str, Any]
    recorded_at: str
    """When the certificate's entry was recorded (the bundle's ``entry.recorded_at``, unverified without keys)."""
    verification: BundleVerification | None
    explain: bool = False

    @property
    def verified(self) -> bool:
        """Verified with the keys given (False when none was given)."""
        return self.verification is not None and self.verification.verified

    def as_json(self) -> dict[str, Any]:
        """The certificate, with where it came from and what was verified (``verify-bundle --json``'s outcome, or
        null when no key was given)."""
        checked = self.verification
        return {"ok": checked is None or checked.verified, "certificate": self.certificate,
                "source": {"bundle": str(self.file), "verified": self.verified,
                           "verification": None if checked is None else checked.as_json()}}


def open_bundle(path: Path, public_keys: Sequence[Ed25519PublicKey], *, explain: bool = False) -> BundleView:
    """The bundle in the file at ``path``, verified (``verify_bundle``) when ``public_keys`` are given, else only
    shape-checked. ``BundleError`` if it is not a bundle; ``SignatureVerificationError`` if its checkpoint is not
    signed by every key given; a bundle that fails a check is returned with its problems (``verified`` false)."""
    from certa.engine.services.audit import read_bundle, verify_bundle
    from certa.ledger.bundle import check_bundle_shape
    bundle = read_bundle(path)
    verification = verify_bundle(bundle, public_keys) if public_keys else None
    if verification is None:
        check_bundle_shape(bundle)
    return BundleView(file=path, certificate=bundle["certificate"], recorded_at=str(bundle["entry"]["recorded_at"]),
                      verification=verification, explain=explain)


@dataclass
class DecisionListing:
    """A page of a run's decisions (``limit`` of them, 0: all) recorded after entry ``after``, read from the
    ledger as it is printed: ``json_chunks`` or ``decisions`` (the text form:
    ``certa.engine.services.presentation.terminal.decision_listing_text``) consume it once, while the ledger is
    open. Then ``last`` is the seq of the last decision listed and ``more`` says whether another page follows."""

    run_id: str
    kind: str | None
    limit: int
    after: int
    ledger: str
    """The ledger as the user gave it (for the command that reads the next page)."""
    found: Iterator[tuple[int, dict[str, Any]]] = field(repr=False)
    last: int | None = None
    more: bool = False

    def decisions(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(seq, decision) of each decision of the page, in order."""
        page = self.found if not self.limit else itertools.islice(self.found, self.limit)
        for seq, payload in page:
            self.last = seq
            yield seq, payload
        self.more = bool(self.limit) and self.last is not None and next(self.found, None) is not None

    def json_chunks(self) -> Iterator[str]:
        """The page as one JSON object, streamed: run, kind, the decisions, and the seq to read the next page
        after (null on the last page)."""
        yield f'{{"run_id": {json.dumps(self.run_id)}, "kind": {json.dumps(self.kind)}, "decisions": ['
        for index, (seq, payload) in enumerate(self.decisions()):
            item = json_display(json.dumps({"seq": seq, **payload}, sort_keys=True, ensure_ascii=False))
            yield ("\n  " if index == 0 else ",\n  ") + item
        yield f'\n], "next_after": {json.dumps(self.last if self.more else None)}}}\n'


def list_decisions(ledger: Ledger, run_id: str, *, kind: str | None = None, limit: int = 100, after: int = 0,
                   ledger_name: str) -> DecisionListing:
    """The decisions of ``run_id`` (of ``kind`` only, if given) recorded after entry ``after``, ``limit`` at a
    time (0: all); ``ledger_name`` is the ledger as the user gave it."""
    full = ledger.resolve_run_id(run_id)
    return DecisionListing(run_id=full, kind=kind, limit=limit, after=after, ledger=ledger_name,
                           found=recorded_decisions(ledger, full, kind=kind, after=after))


@dataclass(frozen=True)
class RunDiff:
    """Two runs' certificate contents compared: every changed field (``changes``), the ``lines`` shown (long
    arrays folded unless every element was asked for) and how many fields are ``equal``."""

    run_a: str
    run_b: str
    same_content: bool
    changes: tuple[FieldChange, ...]
    lines: tuple[FieldChange | ArrayChange, ...]
    equal: int
    only_changed: bool

    def as_json(self) -> dict[str, Any]:
        """Both runs, whether the contents are the same, every change, and the lines shown."""
        return {"run_a": self.run_a, "run_b": self.run_b, "same_content": self.same_content,
                "changes": [c.as_json(DIFF_SIDES) for c in self.changes],
                "summary": [c.as_json() if isinstance(c, ArrayChange) else c.as_json(DIFF_SIDES) for c in self.lines]}


def diff_runs(ledger: Ledger, run_a: str, run_b: str, *, every_element: bool = False,
              only_changed: bool = False) -> RunDiff:
    """Compare the certificates of ``run_a`` and ``run_b`` field by field, most material first
    (``certa.engine.foundation.jsondiff``); ``every_element`` lists each changed element of a long array."""
    a, b = ledger.certificate(run_a), ledger.certificate(run_b)
    changes = json_diff(a["content"], b["content"])
    return RunDiff(run_a=a["issued"]["run_id"], run_b=b["issued"]["run_id"],
                   same_content=a["content_sha256"] == b["content_sha256"], changes=tuple(changes),
                   lines=tuple(changes if every_element else summarised(changes)),
                   equal=len(flatten(a["content"])) - len(changes), only_changed=only_changed)


@dataclass(frozen=True)
class ExportedCertificate:
    """A run's certificate written to ``path``."""

    run_id: str
    path: Path
    content_sha256: str

    def as_json(self) -> dict[str, Any]:
        """The run, the file and the certificate's digest."""
        return {"ok": True, "run_id": self.run_id, "path": str(self.path), "certificate_sha256": self.content_sha256}

    def text(self) -> str:
        """The file and the certificate's digest."""
        return f"wrote {self.path} (content_sha256 {self.content_sha256})"


def export_certificate(ledger: Ledger, run_id: str, output: Path, *, form: str = "certificate",
                       hf_dataset: str = "", hf_task: str = "default",
                       source_url: str | None = None) -> ExportedCertificate:
    """Write ``run_id``'s certificate to ``output`` atomically, in the ``form`` given: the
    certificate itself (indented JSON), a Hugging Face ``.eval_results`` YAML file on the Hub benchmark
    ``hf_dataset`` and its task ``hf_task``, pointing at ``source_url``
    (``certa.engine.services.presentation.hf_eval_results``), or a CycloneDX 1.6 ML-BOM
    (``certa.engine.services.presentation.cyclonedx_bom``)."""
    certificate = ledger.certificate(run_id)
    if form == "hf-eval-results":
        from certa.engine.services.presentation.hf_eval_results import hf_eval_results
        text = hf_eval_results(certificate, dataset=hf_dataset, task_id=hf_task, source_url=source_url)
        write_atomically(output, text.encode("utf-8"), what="the evaluation results")
    elif form == "cyclonedx":
        from certa.engine.services.presentation.cyclonedx_bom import cyclonedx_bom
        write_atomically(output, (json.dumps(cyclonedx_bom(certificate), indent=2, ensure_ascii=False) + "\n")
                         .encode("utf-8"), what="the CycloneDX BOM")
    else:
        write_certificate(certificate, output)
    return ExportedCertificate(run_id=certificate["issued"]["run_id"], path=output,
                               content_sha256=certificate["content_sha256"])


@dataclass(frozen=True)
class LedgerHead:
    """The chain head: entry ``seq`` has hash ``entry_hash``."""

    seq: int
    entry_hash: str

    def as_json(self) -> dict[str, Any]:
        """The head, also as ``SEQ:HASH``."""
        return {"seq": self.seq, "entry_hash": self.entry_hash, "head": self.text()}

    def text(self) -> str:
        """``SEQ:HASH``, as ``certa verify --expect-head`` takes it."""
        return f"{self.seq}:{self.entry_hash}"


def ledger_head(ledger: Ledger) -> LedgerHead:
    """The ledger's chain head."""
    seq, digest = ledger.head()
    return LedgerHead(seq=seq, entry_hash=digest)
