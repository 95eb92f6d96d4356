"""Audit operations over a ledger: ``verify`` (integrity plus method identities), ``verify_bundle`` (one
certificate, offline, against a signed checkpoint) and ``replay``.

``verify`` re-checks the hash chain, the stored inputs and the runs index (``ledger.verify``), and every
certificate's schema, ``content_sha256`` and the method identities its stage types declare (for example
``display_ci == exp(ci)`` for paired ratios). ``replay`` re-executes a stored run from the ledger alone
(spec text, stored input bytes, captured tables, seed) and compares the new ``content_sha256`` with the
recorded one; the replay is itself recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger import Ledger, VerifyReport, verify_ledger
from ledger.bundle import BundleReport, check_bundle

from .canonical import canonical_sha256
from .certificate import certificate_problems, computing_platform, library_versions
from .errors import LedgerError, LedgerIntegrityError
from .interpreter import AbortedExecution, Notify, execute, load_tables, throttled_progress
from .jsondiff import FieldChange, json_diff
from .spec import load_plan
from .stages import REGISTRY
from .tables import Table, parse_table

__all__ = ["check_certificate", "verify", "verify_bundle", "replay", "ReplayResult"]


def check_certificate(certificate: Mapping[str, Any]) -> list[str]:
    """Problems with one stored certificate: schema, hash, and each stage type's method identities."""
    problems = certificate_problems(certificate)
    if problems:  # the method checks below read the structure the schema guarantees
        return problems
    content = certificate["content"]
    stage_uses = {str(s.get("id")): s.get("use") for s in content["knobs"].get("stages", []) if isinstance(s, Mapping)}
    for stage_id, outputs in content["stages"].items():
        stage_type = REGISTRY.get(str(stage_uses.get(stage_id, "")))
        if stage_type is None:
            problems.append(f"stage '{stage_id}' uses unknown stage type {stage_uses.get(stage_id)!r}")
        elif stage_type.audit_checks is not None:
            try:
                problems.extend(f"stage '{stage_id}': {p}" for p in stage_type.audit_checks(outputs))
            except (AttributeError, KeyError, TypeError, ValueError, IndexError) as error:
                problems.append(f"stage '{stage_id}': outputs are malformed ({type(error).__name__}: {error})")
    return problems


def verify(ledger: Ledger, *, run_id: str | None = None, expect_head: tuple[int, str] | None = None,
           expect_root: str | None = None, notify: Notify | None = None) -> VerifyReport:
    """Verify the whole ledger (see module docstring); ``notify`` gets progress lines about once a second."""
    full = ledger.resolve_run_id(run_id) if run_id else None
    progress = None
    if notify is not None:
        report = throttled_progress(notify, "verify: ")

        def progress(done: int, total: int) -> None:
            report(done, total, "entries")
    return verify_ledger(ledger, check_certificate=check_certificate, expect_head=expect_head,
                         expect_root=expect_root, run_id=full, progress=progress)


def verify_bundle(bundle: Mapping[str, Any], public_keys: Sequence[Ed25519PublicKey]) -> BundleReport:
    """Verify a certificate bundle offline (``ledger.bundle``), with the engine's certificate checks; the
    checkpoint must be signed by every one of ``public_keys``."""
    return check_bundle(bundle, public_keys, check_certificate=check_certificate)


@dataclass(frozen=True)
class ReplayResult:
    run_id: str
    reproduced: bool
    recorded_sha256: str
    replayed_sha256: str | None
    changes: tuple[FieldChange, ...]
    note: str
    entry_seq: int


def _stored_table(ledger: Ledger, record: Mapping[str, Any]) -> Table:
    return parse_table(record["name"], ledger.blob(record["sha256"]), record["format"])


def _version_differences(recorded: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """{library: (recorded version, installed version)} for the libraries whose versions differ."""
    installed = library_versions()
    return {name: (str(version), installed[name]) for name, version in sorted(recorded.items())
            if name in installed and installed[name] != version}


def version_mismatch_warning(recorded: Mapping[str, Any]) -> str | None:
    """A warning naming the recorded library versions that differ from the installed ones, with the pip
    command that installs the recorded ones (a bit-for-bit replay needs them); None when all agree."""
    differing = _version_differences(recorded)
    if not differing:
        return None
    listed = ", ".join(f"{name} {then} (installed {now})" for name, (then, now) in differing.items())
    packages = " ".join(f"{name}=={then}" for name, (then, _) in differing.items() if name != "python")
    advice = f"; to reproduce it bit for bit: python -m pip install {packages}" if packages else ""
    return f"warning: this run was recorded with {listed}{advice}"


def _divergence_hint(recorded: Mapping[str, Any]) -> str:
    """Why a replay may differ: other library versions, or another machine (numpy's SIMD targets)."""
    hints = [f"{name} {then} -> {now}" for name, (then, now) in
             _version_differences(recorded.get("content", {}).get("versions", {})).items()]
    then = recorded.get("issued", {}).get("platform")
    now = computing_platform()
    if then and then != now:
        hints.append(f"recorded on {then.get('machine')} {'/'.join(then.get('numpy_simd', []))}, replayed on "
                     f"{now['machine']} {'/'.join(now['numpy_simd'])}")
    return f"; recorded with other versions or on another machine: {'; '.join(hints)}" if hints else ""


def replay(ledger: Ledger, run_id: str, *, notify: Notify | None = None) -> ReplayResult:
    """Re-execute a stored run from the ledger alone and compare certificates; records the replay."""
    full = ledger.resolve_run_id(run_id)
    row = ledger.run(full)
    if row.status != "completed":
        raise LedgerError(f"run {full} was {row.status}: it has no certificate to reproduce")
    recorded = ledger.certificate(full)
    if notify is not None:
        warning = version_mismatch_warning(recorded.get("content", {}).get("versions", {}))
        if warning:
            notify(warning)
    run_record: Mapping[str, Any] = {}
    tables: dict[str, Table] = {}
    captured: dict[str, dict[str, Table]] = {}
    for entry in ledger.entries(run_id=full, kinds=["run", "input", "captured"]):
        data = entry.data()
        if entry.kind == "run":
            run_record = data
        elif entry.kind == "input":
            tables[data["name"]] = _stored_table(ledger, data)
        else:
            captured.setdefault(data["stage"], {})[data["name"]] = _stored_table(ledger, data)
    try:
        plan = load_plan(run_record["spec_text"])
    except (KeyError, TypeError) as error:
        raise LedgerIntegrityError(f"run {full}: its recorded run entry is malformed ({type(error).__name__}: "
                                   f"{error}); run 'certa verify'") from None
    replayed_sha: str | None
    try:
        execution = execute(plan, load_tables(plan, inputs=tables), ledger=ledger, captured=captured, notify=notify)
    except AbortedExecution as aborted:
        replayed_sha, changes, note = None, (), f"the replay was aborted by a profile rule: {aborted.abort}"
    else:
        replayed_sha = canonical_sha256(execution.content)
        changes = tuple(json_diff(recorded["content"], execution.content))
        note = ("same content_sha256" if replayed_sha == recorded["content_sha256"]
                else f"{len(changes)} field(s) differ" + _divergence_hint(recorded))
    reproduced = replayed_sha == recorded["content_sha256"]
    seq = ledger.record_note(full, "replay", {
        "outcome": "REPRODUCED" if reproduced else "DIVERGED", "recorded_sha256": recorded["content_sha256"],
        "replayed_sha256": replayed_sha, "note": note, "platform": computing_platform(),
        "changes": [{"path": c.path, "recorded": c.before, "replayed": c.after} for c in changes[:200]],
    })
    return ReplayResult(run_id=full, reproduced=reproduced, recorded_sha256=recorded["content_sha256"],
                        replayed_sha256=replayed_sha, changes=changes, note=note, entry_seq=seq)
