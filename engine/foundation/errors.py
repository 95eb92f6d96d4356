"""Errors certa raises, each mapped to one documented exit code of the ``certa`` command.

::

    CertaError                      (exit 2 unless stated)
    ├── SpecError                   the run spec is not valid: file, line, column and key path are named
    ├── InputError                  an input table is missing, unreadable, mis-pinned or malformed
    ├── StageError                  a stage's data cannot support its method (e.g. fewer than 2 pairs)
    ├── ProfileAbort        exit 3  a profile rule (ci / release floors, pairing) stopped the run; recorded
    ├── OutputError                 a file certa was asked to write cannot be written (nothing partial is left)
    │   └── RecordedOutputError exit 4  ... after ``certa run`` recorded the run: do not run it again
    ├── LedgerError                 the ledger cannot be opened or written, or a run id is unknown
    │   └── LedgerIntegrityError exit 1  verify found an edited, deleted or reordered entry
    └── ReplayDivergence    exit 1  a replay produced a different certificate
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "CertaError",
    "SpecError",
    "InputError",
    "StageError",
    "ProfileAbort",
    "OutputError",
    "RecordedOutputError",
    "LedgerError",
    "LedgerIntegrityError",
    "ReplayDivergence",
]


class CertaError(Exception):
    """Base class: every certa error carries the exit code the CLI returns for it."""

    exit_code: ClassVar[int] = 2


class SpecError(CertaError):
    """The run spec is not valid; nothing was run and nothing was recorded."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 column: int | None = None, path: str | None = None) -> None:
        self.file, self.line, self.column, self.path = file, line, column, path
        where = file or "<spec>"
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        prefix = f"{where}: " + (f"{path}: " if path else "")
        super().__init__(prefix + message)
        self.detail = message


class InputError(CertaError):
    """An input table is missing, unreadable, does not match its pinned SHA-256, or is malformed."""


class StageError(CertaError):
    """A stage's data cannot support its method (the message says what to change)."""


class ProfileAbort(CertaError):
    """A profile rule stopped the run; the attempt and the reason are recorded, no certificate is issued."""

    exit_code: ClassVar[int] = 3

    def __init__(self, message: str, *, rule: str = "profile", stage_id: str | None = None,
                 decisions: tuple = ()) -> None:
        super().__init__(message)
        self.rule = rule
        self.stage_id = stage_id
        self.decisions = decisions  # the aborting stage's decisions (engine.core.stages.Decision), recorded too
        self.run_id: str | None = None


class OutputError(CertaError):
    """A file certa was asked to write (certificate, key, checkpoint, bundle, report, site page) cannot be
    written: the message names the path and the system's reason. Nothing partial is left behind and, except
    for ``RecordedOutputError``, nothing was recorded: fix the cause and run the same command again."""


class RecordedOutputError(OutputError):
    """``certa run`` recorded the run, then could not write its output file: the message names the run id
    and the ``certa export`` command that writes the file again. Running the spec again would record it twice."""

    exit_code: ClassVar[int] = 4


class LedgerError(CertaError):
    """The ledger cannot be opened or written, or a run id is unknown."""


class LedgerIntegrityError(LedgerError):
    """``verify`` found an entry, certificate or input that was edited, deleted or reordered."""

    exit_code: ClassVar[int] = 1


class ReplayDivergence(CertaError):
    """A replay produced a certificate whose content differs from the recorded one."""

    exit_code: ClassVar[int] = 1
