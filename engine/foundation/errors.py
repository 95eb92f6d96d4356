"""Errors certa raises, named by what went wrong, each carrying the exit code of the ``certa`` command.

::

    CertaError                          exit 2 unless stated
    ├── SpecError                       the run spec is not valid: file, line, column and key path are named
    │   └── UnknownStage                it names a stage type or version this certa lacks
    ├── InputError                      an input table is missing, unreadable, mis-pinned or malformed
    ├── StageError                      a stage's data cannot support its method (e.g. fewer than 2 pairs)
    ├── ProfileAbort            exit 3  a profile rule (ci / release floors, pairing) stopped the run; recorded
    ├── OutputError                     a file certa was asked to write cannot be written (nothing partial is left)
    │   └── RecordedOutputError exit 4  ... after ``certa run`` recorded the run: do not run it again
    ├── LedgerError                     the ledger cannot be opened or written, or a run id is unknown
    │   └── LedgerIntegrityError exit 1 verify found an edited, deleted or reordered entry
    ├── SigningError                    a key cannot be read or is not Ed25519, or a text is not a DSSE envelope
    │   └── SignatureVerificationError exit 1  a required signature is missing or does not verify
    ├── AttestationError        exit 1  what an attestation signs is not an in-toto statement of a certificate
    ├── BundleError                     a file given as a certificate bundle is not one
    ├── EndpointError           exit 5  a served model's endpoint failed or answered what certa cannot use
    ├── MissingExtraError               an optional extra the command needs is not installed (names the pip command)
    └── InternalError                   a bug in certa: the command reports it in one line, never a traceback

``README.md`` lists the same classes and codes; ``tests/foundation/test_errors.py`` checks that every class here is
documented there and raised somewhere. A replay that diverges is an outcome, not an error:
``certa.engine.services.audit.replay`` returns it (``DIVERGED``), records it, and ``certa replay`` exits 1. So is a
run's verdict: ``certa run`` exits 0 PASS, 1 FAIL, 6 INCONCLUSIVE (``certa.engine.services.run_report.VERDICT_EXIT_CODES``;
no error class uses 6).
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "CertaError",
    "SpecError",
    "UnknownStage",
    "InputError",
    "StageError",
    "ProfileAbort",
    "OutputError",
    "RecordedOutputError",
    "LedgerError",
    "LedgerIntegrityError",
    "SigningError",
    "SignatureVerificationError",
    "AttestationError",
    "BundleError",
    "EndpointError",
    "MissingExtraError",
    "InternalError",
]


class CertaError(Exception):
    """Base class: every certa error carries the exit code the CLI returns for it."""

    exit_code: ClassVar[int] = 2

    def as_json(self) -> dict[str, Any]:
        """The error as a command's ``--json`` output: ``ok`` false, the error's class name, message and exit
        code."""
        return {"ok": False, "error": {"type": type(self).__name__, "message": str(self), "exit_code": self.exit_code}}


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


class UnknownStage(SpecError):
    """The spec names a stage type or version this certa does not have; the message says which it has."""


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
        self.decisions = decisions  # the aborting stage's decisions (certa.engine.core.stages.Decision), recorded too
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


class SigningError(CertaError):
    """A key cannot be read or is not an Ed25519 key, or a text is not a DSSE envelope: nothing was signed."""


class SignatureVerificationError(SigningError):
    """A required key has no signature, a signature does not verify, or the envelope holds another payload type."""

    exit_code: ClassVar[int] = 1


class AttestationError(CertaError):
    """An attestation's signatures verify, but what they sign is not an in-toto statement of a certa certificate."""

    exit_code: ClassVar[int] = 1


class BundleError(CertaError):
    """A file given as a certificate bundle is not one: not JSON, or not shaped as ``bundle.schema.json`` says."""


class EndpointError(CertaError):
    """A served model's endpoint failed (a network error or an error status, after the retries allowed), or answered
    what certa cannot use (not JSON, truncated, an error inside a 200, another model, tokens that do not match): the
    message names the request's path, the attempts and the server's own message; never a credential."""

    exit_code: ClassVar[int] = 5


class MissingExtraError(CertaError):
    """An optional extra (``report``, ``postgres``, ``dask``, ``models``) that the command needs is not installed:
    the message names the extra, the missing module and the pip command that installs it
    (``certa.engine.foundation.extras``)."""

    def __init__(self, message: str, *, extra: str) -> None:
        super().__init__(message)
        self.extra = extra


class InternalError(CertaError):
    """An unexpected exception inside a command: a bug in certa, not in the input. The ``certa`` command reports it
    in one line (its type and message; ``CERTA_TRACEBACK=1`` prints the traceback too) and exits 2, never 1 (FAIL)."""
