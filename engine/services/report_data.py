"""Gather everything one run's HTML report shows, from the ledger (or from a bundle file: ``bundle_report_data``),
into a frozen ``ReportData``.

This is the only part of ``certa.engine.services.presentation.html`` that reads a ledger; ``render_report`` is a pure function of the
gathered data. Nothing is recomputed: stage outputs come from the stored certificate, the sequential
trajectory from the run's ``sequential_check`` decisions (and a live scorer's cost from its ``scorer_usage``
decision), reviews from ``certa.engine.services.reviews.reviews_of``. The
verification status (``certa.engine.services.audit.verify``) and the newest replay are render-time data, but they are a
function of the ledger only, so an unchanged ledger gives the same data (and the same report bytes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from certa.ledger import EntryRow, Ledger

from certa.engine.services.audit import newest_replay, verify
from certa.engine.core.certificate import results_sha256
from certa.engine.services.presentation.markdown import recorded_warnings
from certa.engine.services.browse import BundleView
from certa.engine.services.presentation.bundle_note import bundle_source_lines
from certa.engine.services.presentation.html.report_model import BundleSource, ReplayStatus, ReportData, Verification
from certa.engine.services.policy_record import run_policies
from certa.engine.services.reviews import reviews_of, run_approval
from certa.engine.core.approvals import review_signer
from certa.engine.core.trust_policy import TrustPolicy

__all__ = ["ReplayStatus", "ReportData", "Verification", "gather_report", "bundle_report_data", "replay_status", "sequential_checks",
           "sequential_checks_of", "SECTION_DECISIONS"]


def _verification(ledger: Ledger, run_id: str) -> Verification:
    report = verify(ledger, run_id=run_id)
    return Verification(intact=report.intact, entries_checked=report.entries_checked, head_seq=report.head[0],
                        head_hash=report.head[1], problems=tuple(f"{p.where}: {p.message}" for p in report.problems))


def replay_status(newest: EntryRow) -> ReplayStatus:
    """The ``ReplayStatus`` of one ``replay`` entry."""
    payload = newest.data()
    platform = payload.get("platform") or {}
    machine = " ".join(str(part) for part in (platform.get("system"), platform.get("machine"),
                                                "/".join(platform.get("numpy_simd") or ())) if part)
    return ReplayStatus(seq=newest.seq, outcome=str(payload.get("outcome", "?")), recorded_at=newest.recorded_at,
                        machine=machine or "unknown", note=str(payload.get("note") or ""))


SECTION_DECISIONS = ("sequential_check", "scorer_usage")
"""The decision kinds a stage's report section reads beside its outputs: ``sequential.diff``'s checks, and the
forward passes and model calls a live scorer spent (``scorer_usage``)."""


def sequential_checks(ledger: Ledger, run_id: str) -> dict[str, tuple[Mapping[str, Any], ...]]:
    """Stage id -> the details of the run's ``SECTION_DECISIONS`` decisions, in chain order."""
    return sequential_checks_of(ledger.entries(run_id=run_id, kinds=["decision"])).get(run_id, {})


def sequential_checks_of(decisions: Iterable[EntryRow]) -> dict[str, dict[str, tuple[Mapping[str, Any], ...]]]:
    """Run id -> stage id -> the details of its ``SECTION_DECISIONS`` decisions, each with its kind under
    ``decision_kind``, from ``decision`` entries in chain order (one pass over many runs' decisions, for
    ``certa site``)."""
    checks: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for entry in decisions:
        decision = entry.data()
        if isinstance(decision, Mapping) and decision.get("kind") in SECTION_DECISIONS:
            detail = decision.get("detail")
            checks.setdefault(entry.run_id, {}).setdefault(str(decision.get("stage")), []).append(
                {**(detail if isinstance(detail, Mapping) else {}), "decision_kind": decision["kind"]})
    return {run: {stage: tuple(details) for stage, details in stages.items()} for run, stages in checks.items()}


def gather_report(ledger: Ledger, run_id: str, *, verification: Verification | None = None,
                  policy: TrustPolicy | None = None) -> ReportData:
    """Everything the report of ``run_id`` (a unique prefix or ``latest`` works too) shows; its approval is
    evaluated against ``policy`` (None: the one the run's spec names, as recorded, else not checked;
    ``certa.engine.services.policy_record.run_policies``, ``certa.engine.services.reviews.run_approval``).

    ``verification``: a status the caller already has (``certa site`` verifies the whole ledger once and
    maps its problems to runs) instead of ``verify(ledger, run_id=RUN)`` here, which reads the whole chain."""
    row = ledger.run(run_id)
    full = row.run_id
    certificate: Mapping[str, Any] | None = None
    abort = None
    digest = None
    reviews = tuple(reviews_of(ledger, full))
    decides = run_policies(ledger, [row], policy)[full]
    if row.status == "aborted":
        abort = next((e.data() for e in ledger.entries(run_id=full, kinds=["abort"])), {})
    else:
        certificate = ledger.certificate(full)
        digest = certificate.get("results_sha256") or results_sha256(certificate["content"])
    return ReportData(
        run_id=full, name=row.name, status=row.status, verdict=row.verdict or row.status.upper(), profile=row.profile,
        recorded_at=row.recorded_at, certificate=certificate, results_sha256=digest, abort=abort,
        checks=sequential_checks(ledger, full),
        verification=verification if verification is not None else _verification(ledger, full),
        replay=None if (newest := newest_replay(ledger, full)) is None else replay_status(newest),
        reviews=reviews,
        warnings=recorded_warnings(ledger, full),
        approval=run_approval(ledger, full, decides, reviews) if certificate is not None else None,
        signers=tuple(review_signer(r, decides.policy) for r in reviews),
    )


def bundle_report_data(view: BundleView) -> ReportData:
    """What the report of a bundle's certificate shows, without a ledger (``certa report BUNDLE_FILE``): the
    certificate and, when ``view`` was verified, the reviews it proves; the checkpoint's head stands for the
    ledger's. A bundle carries no decisions, warnings or replays, so none is shown. ``view`` is verified, or was
    opened with no key (the page then says NOT VERIFIED)."""
    certificate, checked = view.certificate, view.verification
    content = certificate["content"]
    checkpoint = checked.report.checkpoint if checked is not None else None
    reviews = tuple(checked.reviews) if checked is not None else ()
    return ReportData(
        run_id=str(certificate["issued"]["run_id"]), name=str(content["spec"]["name"]), status="completed",
        verdict=str(content["verdict"]), profile=str(content["spec"].get("profile", "")), recorded_at=view.recorded_at,
        certificate=certificate, results_sha256=certificate.get("results_sha256") or results_sha256(content),
        abort=None, checks={},
        verification=Verification(intact=view.verified, entries_checked=0,
                                  head_seq=checkpoint.seq if checkpoint else 0,
                                  head_hash=checkpoint.entry_hash if checkpoint else ""),
        replay=None, reviews=reviews, signers=tuple(review_signer(r, None) for r in reviews),
        bundle=BundleSource(file=str(view.file), verified=view.verified, lines=tuple(bundle_source_lines(view))),
    )
