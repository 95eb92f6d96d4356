"""A run's approval in words for ``certa show`` (Markdown): the decision under the trust policy
(``certa.engine.core.approvals.evaluate_approval``) and each review with who signed it
(``certa.engine.core.approvals.review_signer``). A name a review claims is shown only as a claim, never as
who approved; every recorded string is escaped (``certa.engine.services.presentation.display_text``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from certa.engine.core.approvals import APPROVED, NOT_CHECKED, ApprovalDecision, review_signer
from certa.engine.services.presentation.display_text import markdown_code, markdown_text

if TYPE_CHECKING:
    from certa.engine.core.trust_policy import TrustPolicy
    from certa.engine.services.reviews import ReviewRecord

__all__ = ["approval_markdown"]


def approval_markdown(decision: ApprovalDecision, reviews: Sequence[ReviewRecord],
                      policy: TrustPolicy | None) -> list[str]:
    """The ``## Approval`` section: the decision (bold APPROVED / NOT APPROVED, italic when not checked), the
    policy's file and SHA-256, then one line per review: entry, decision, signer and note."""
    text = markdown_text
    if decision.status == NOT_CHECKED:
        why = text(decision.basis) if decision.basis else "give `--policy FILE` to check who may approve"
        lines = ["## Approval", "", f"_{decision.headline()}_: {why}.", ""]
    else:
        word = "**APPROVED**" if decision.status == APPROVED else "**NOT APPROVED**"
        lines = ["## Approval", "", f"{word} {text(decision.detail())}", ""]
        if policy is not None:
            lines += [f"Policy {text(policy.source)} (sha256 {markdown_code(policy.sha256)}).", ""]
    if not reviews:
        return [*lines, "No reviews recorded."]
    lines += [f"Reviews ({len(reviews)}):", ""]
    for r in reviews:
        note = f": {text(r.note)}" if r.note else ""
        lines.append(f"- entry {r.seq}, {text(r.decision)}; signer: {text(review_signer(r, policy).text)}{note}")
    return lines
