"""Ledgers shared by the tests of the read paths (``certa.ledger.sqlite_read``, ``certa.ledger.sqlite_reader``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from certa.engine import run
from certa.engine.foundation.errors import ProfileAbort
from certa.ledger import Ledger


@pytest.fixture
def three_runs(small_spec: Path, tmp_path: Path) -> Path:
    """A ledger file with two completed runs and one a profile rule aborted (no verdict)."""
    aborting = small_spec.with_name("aborting.yaml")  # 60 windows are too few for the release profile
    aborting.write_text(small_spec.read_text(encoding="utf-8").replace("profile: dev", "profile: release"),
                        encoding="utf-8")
    path = tmp_path / "three.db"
    with Ledger.open(path) as ledger:
        run(small_spec, ledger=ledger)
        with pytest.raises(ProfileAbort):  # recorded, then raised
            run(aborting, ledger=ledger)
        run(small_spec, ledger=ledger)
    return path
