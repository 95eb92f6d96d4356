"""HTML for reviewers, written to files: one run's report page (``certa report``) and a static site of the
whole ledger (``certa site``). Importing this module imports matplotlib and Jinja2 (the ``report`` extra):
``ImportError`` when they are missing."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from certa.ledger import Ledger
from certa.engine.core.interpreter import throttled_progress
from certa.engine.core.trust_policy import TrustPolicy
from certa.engine.foundation.atomic_files import write_atomically
from certa.engine.foundation.errors import OutputError
from certa.engine.services.presentation.html import render_report
from certa.engine.services.browse import BundleView
from certa.engine.services.report_data import ReportData, bundle_report_data, gather_report
from certa.engine.services.site import SiteResult, build_site

__all__ = ["WrittenReport", "write_report", "write_bundle_report", "WrittenSite", "write_site"]


@dataclass(frozen=True)
class WrittenReport:
    """The report page of run ``run_id`` (spec ``name``, ``verdict``) written to ``file``; ``sha256`` of its
    bytes. ``bundle``: the page was rendered from that bundle's certificate (None: from a ledger), and
    ``bundle_verified`` says whether it was verified."""

    file: Path
    sha256: str
    run_id: str
    name: str
    verdict: str
    bundle: str | None = None
    bundle_verified: bool = False

    def as_json(self) -> dict[str, Any]:
        """The file, its digest and the run (and, from a bundle, the bundle and whether it was verified)."""
        source = {} if self.bundle is None else {"bundle": self.bundle, "bundle_verified": self.bundle_verified}
        return {"ok": True, "file": str(self.file), "sha256": self.sha256, "run_id": self.run_id, **source}

    def text(self) -> str:
        """The file, the run's name and verdict, the digest (and, from a bundle, NOT VERIFIED when it was not)."""
        unverified = "; from a bundle NOT VERIFIED" if self.bundle is not None and not self.bundle_verified else ""
        return f"wrote {self.file} ({self.name}: {self.verdict}; sha256 {self.sha256}{unverified})"


def write_report(ledger: Ledger, run_id: str, output: Path, *, force: bool = False,
                 policy: TrustPolicy | None = None) -> WrittenReport:
    """Write ``run_id``'s report page to ``output`` (atomically), its approval evaluated against ``policy``
    (None: not checked); ``OutputError`` if it exists, unless ``force``."""
    _refuse_to_overwrite(output, force)
    return _write_report(gather_report(ledger, run_id, policy=policy), output, force)


def write_bundle_report(bundle: BundleView, output: Path, *, force: bool = False) -> WrittenReport:
    """Write the report page of a bundle's certificate (``bundle_report_data``: no ledger) to ``output``, as
    ``write_report`` does; ``bundle`` was verified, or opened with no key (the page says NOT VERIFIED)."""
    _refuse_to_overwrite(output, force)
    return _write_report(bundle_report_data(bundle), output, force)


def _refuse_to_overwrite(output: Path, force: bool) -> None:
    if output.exists() and not force:
        raise OutputError(f"{output} exists; pass --force to overwrite it")


def _write_report(data: ReportData, output: Path, force: bool) -> WrittenReport:
    body = render_report(data).encode("utf-8")
    write_atomically(output, body, overwrite=force, what="the report")
    source = data.bundle
    return WrittenReport(file=output, sha256=hashlib.sha256(body).hexdigest(), run_id=data.run_id, name=data.name,
                         verdict=data.verdict, bundle=source.file if source else None,
                         bundle_verified=bool(source and source.verified))


@dataclass(frozen=True)
class WrittenSite:
    """What ``write_site`` did (``build_site``'s result)."""

    site: SiteResult

    def as_json(self) -> dict[str, Any]:
        """The folder and how many pages were written and kept."""
        return {"ok": True, "dir": self.site.directory, "pages_written": self.site.pages_written,
                "pages_unchanged": self.site.pages_unchanged}

    def text(self) -> str:
        """Pages written and kept, the runs, the chain's state, and the page to open."""
        site = self.site
        return (f"wrote {site.pages_written} page(s), {site.pages_unchanged} unchanged, in {site.directory} "
                f"({site.runs} runs; chain {'intact' if site.intact else 'BROKEN'}); open "
                f"{(site.directory and Path(site.directory) / 'index.html')}")


def write_site(ledger: Ledger, out_dir: Path, *, checkpoints: Sequence[Path] = (),
               public_keys: Sequence[Ed25519PublicKey] = (), jobs: int = 1,
               notify: Callable[[str], None] | None = None, policy: TrustPolicy | None = None) -> WrittenSite:
    """``build_site`` of ``ledger`` in ``out_dir``, approvals evaluated against ``policy``; ``notify`` gets the
    progress lines (verify's, then the pages', about once a second)."""
    report_pages = throttled_progress(notify, "site: ") if notify is not None else None

    def progress(done: int, total: int) -> None:
        if report_pages is not None:
            report_pages(done, total, "pages")

    return WrittenSite(site=build_site(ledger, out_dir, checkpoints=checkpoints, public_keys=public_keys, jobs=jobs,
                                       progress=progress, notify=notify, policy=policy))
