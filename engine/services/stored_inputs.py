"""A stored run's inputs and captured tables, read back from the ledger as ``certa run`` read them.

The ledger stores each input's bytes as they were (an evaluator's export, a model's manifest, a CSV file); a
replay, an audit and ``--recompute-evidence`` read them through the same format registry and input limits
(``certa.engine.core.input_formats``), so a run that could be recorded can be read back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from certa.engine.core.input_formats import read_input
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.inputs import InputSource
from certa.engine.core.tables import Table
from certa.ledger import Ledger

__all__ = ["stored_source", "stored_table"]


def stored_source(ledger: Ledger, record: Mapping[str, Any]) -> InputSource:
    """A stored input (a row of ``read_stored_run(...).inputs``) as its bytes, to be read by
    ``certa.engine.core.inputs.load_tables`` with the options its spec declares; its SHA-256 is checked."""
    return InputSource(record["name"], record["format"], ledger.blob(record["sha256"]), sha256=record["sha256"])


def stored_table(ledger: Ledger, record: Mapping[str, Any], limits: InputLimits | None = None) -> Table:
    """A table a stage captured (a row of ``read_stored_run(...).captured``), read by its format within
    ``limits`` (default ``InputLimits.from_env()``)."""
    return read_input(record["name"], ledger.blob(record["sha256"]), record["format"],
                      limits=limits or InputLimits.from_env())
