"""What a run's HTML report shows, as data: the view model ``render_report`` turns into a page (pure).

``certa.engine.services.report_data.gather_report`` (and the site builder, ``certa.engine.services.site``) read the ledger
and fill it; nothing here reads a ledger.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from certa.engine.core.approvals import ApprovalDecision, SignerView
    from certa.engine.services.reviews import ReviewRecord

__all__ = ["BundleSource", "ReplayStatus", "ReportData", "Verification"]


@dataclass(frozen=True)
class Verification:
    """``certa verify --run RUN`` at render time: the chain and this run's certificate checks."""

    intact: bool
    entries_checked: int
    head_seq: int
    head_hash: str
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReplayStatus:
    """The newest ``replay`` entry of the run."""

    seq: int
    outcome: str
    recorded_at: str
    machine: str
    note: str


@dataclass(frozen=True)
class BundleSource:
    """The report was rendered from the bundle ``file``, not from a ledger: ``verified`` with the keys given,
    ``lines`` saying so in sentences (``certa.engine.services.presentation.bundle_note``)."""

    file: str
    verified: bool
    lines: tuple[str, ...]


@dataclass(frozen=True)
class ReportData:
    """One run, as its report shows it. ``certificate`` is None for an aborted run (``abort`` says why).
    ``checks`` maps a stage id to the details of its recorded ``sequential_check`` and ``scorer_usage`` decisions,
    in order, each with its kind under ``decision_kind``."""

    run_id: str
    name: str
    status: str
    verdict: str
    profile: str
    recorded_at: str
    certificate: Mapping[str, Any] | None
    results_sha256: str | None
    abort: Mapping[str, Any] | None
    checks: Mapping[str, tuple[Mapping[str, Any], ...]]
    verification: Verification
    replay: ReplayStatus | None
    reviews: tuple[ReviewRecord, ...] = field(default=())
    warnings: tuple[str, ...] = field(default=())
    """What the run warned about when it ran (``certa.engine.services.presentation.markdown.recorded_warnings``): shown under the verdict."""
    bundle: BundleSource | None = None
    """Set when rendered from a bundle (``certa report BUNDLE_FILE``): ``verification`` then holds the checkpoint's
    head, and nothing was read from a ledger."""
    approval: ApprovalDecision | None = None
    """A completed run's approval under the trust policy (``certa.engine.core.approvals.evaluate_approval``; NOT
    CHECKED without one): the verdict box shows it; None for an aborted run."""
    signers: tuple[SignerView, ...] = field(default=())
    """Who signed each of ``reviews`` (``certa.engine.core.approvals.review_signer``), in the same order."""
