"""The adversarial sweep's summary: collected after every other module of tests/adversarial (file order), it
prints the counts of the whole sweep, by category, and asserts that tracebacks, lost runs and partial files are
all 0 (each case asserts its own invariants too)."""

from __future__ import annotations

import pytest

from .conftest import BY_CATEGORY, CASES_BY_CATEGORY, COUNTS, MUST_BE_ZERO

pytestmark = pytest.mark.adversarial

TOTALS = ("tried", "refused", "accepted", "tracebacks", "lost runs", "partial files", "sigkills", "kill leftovers",
          "usage errors")
"""``kill leftovers``: ``.certa-tmp`` files a SIGKILL between a file's fsync and its rename left (documented)."""


def test_zz_summary() -> None:
    """Prints the counts and asserts the must-be-0 ones."""
    print(f"\nadversarial sweep: {sum(CASES_BY_CATEGORY.values())} cases")
    for category, n in CASES_BY_CATEGORY.items():
        kinds = ("tried", "refused", "accepted") + (("sigkills",) if BY_CATEGORY[category, "sigkills"] else ())
        print(f"  {category}: {n} cases, " + ", ".join(f"{BY_CATEGORY[category, k]} {k}" for k in kinds))
    line = "adversarial sweep commands: " + ", ".join(f"{COUNTS[k]} {k}" for k in TOTALS)
    print(line)
    assert all(COUNTS[k] == 0 for k in MUST_BE_ZERO), line
