"""Where a certificate rendered without a ledger came from, and what was verified: the note ``certa show
BUNDLE_FILE`` opens with (as a Markdown quote) and ``certa report BUNDLE_FILE`` shows under its verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from certa.engine.services.browse import BundleView

__all__ = ["bundle_source_lines"]


def bundle_source_lines(view: BundleView) -> list[str]:
    """Where the certificate of ``view`` came from and what was verified, in sentences: NOT VERIFIED when no key
    was given; else the keys, the checkpoint, the checks and the reviews, then what a bundle cannot show. A
    bundle that failed a check is never rendered (``certa show`` and ``certa report`` print its problems)."""
    where = f"Rendered from the bundle {view.file}, not from a ledger."
    checked = view.verification
    if checked is None:
        return [where, "NOT VERIFIED: no public key was given, so neither the checkpoint's signature, nor the "
                       "certificate's own checks, nor its inclusion proof were checked; its reviews are not shown "
                       f"('certa verify-bundle {view.file} --public-key KEY' checks them)."]
    report = checked.report
    reviews = (f"its {len(checked.reviews)} review(s) proven included and checked" if report.format != 1 else
               "the bundle (format 1) carries no reviews")
    return [where, f"Verified with key(s) {', '.join(report.checkpoint.key_ids)}: the checkpoint they signed at "
                   f"{report.checkpoint.signed_at} (entries 1..{report.checkpoint.seq}, Merkle root "
                   f"{report.checkpoint.root_hash}), the certificate's own checks, its inclusion proof as entry "
                   f"{report.seq}; {reviews}.",
            "Not in a bundle: the run's recorded decisions, warnings and replays, or a review left out of it. "
            "Who holds the keys is not checked: a key id is not a person."]
