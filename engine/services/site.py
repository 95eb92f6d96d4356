"""A static site of the whole ledger (``certa site -o DIR``): opens from ``file://``, needs no server.

Pages (all relative links, one shared stylesheet ``certa.css``, no network reference)::

    index.html               every run: time, name, verdict, profile, approval under the trust policy
                             (``--policy``; "not checked" without one), newest replay, chain status;
                             sortable and filterable by a small inline script (engine/services/presentation/html/site_index.js)
    runs/RUN_ID.html         the run's report (``render_report`` with links back to the index)
    diffs/A_RUN-B_RUN.html   the changed certificate fields between consecutive runs of one spec name
                             (``certa.engine.foundation.jsondiff.json_diff`` of the certificates' content)
    chain.html               the chain head, the verification status, how far the last recorded full and
                             incremental ``certa verify`` reached, and each ``--checkpoint`` given

**One verification per build.** ``certa.engine.services.audit.verify`` runs once over the whole ledger; its problems are
mapped to runs exactly as ``verify(run_id=RUN)`` would report them (chain, blob and index problems concern
every run; certificate and review problems only their own run), and each run page gets that status through
``gather_report(..., verification=...)``.

**Incremental rebuilds.** ``DIR/.certa-site.json`` maps each page to the SHA-256 of its inputs (the run's
index row and certificate digest, its review and replay entry seqs, the trust policy's SHA-256, its
verification status, the renderer's
version: a digest of this package's templates, CSS, script and code) and of the bytes written. A page is
rendered again only when its inputs changed, and written atomically (``certa.engine.foundation.atomic_files``). A
run page shows the ledger head of the build that wrote it: "intact as of head N" stays true as the chain
grows, and a changed status rewrites the page. Files that certa did not write are never overwritten or
deleted; a page certa wrote earlier and no longer produces is removed only while its bytes are unchanged.

**A killed build is finished by the next one.** Before the first page is written the manifest lists every
page the build will write as pending (no inputs digest), so a build killed at any moment leaves only pages the
manifest claims: the next build rewrites them and removes the killed build's temporary files
(``.NAME.RANDOM.certa-tmp``). The manifest itself is replaced atomically.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from certa.ledger import EntryRow, Ledger, Problem, RunRow, VerifyReport
from certa.engine.foundation.atomic_files import is_temporary, make_folders, write_atomically
from certa.ledger.bundle import ledger_root
from certa.ledger.checkpoint import open_checkpoint, read_checkpoint_unverified
from certa.ledger.verify_record import VERIFIED_KEYS, read_verifications
from certa.engine.foundation.signing import key_id

from certa.engine.services.audit import verify
from certa.engine.services.checkpoints import verification_line
from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.core.certificate import results_sha256
from certa.engine.foundation.errors import CertaError, LedgerIntegrityError
from certa.engine.foundation.jsondiff import ArrayChange, flatten, json_diff, summarised
from certa.engine.services.presentation.warnings import WARNING_MARK
from certa.engine.services.presentation.markdown import array_change_text, warnings_of
from certa.engine.core.value_text import format_value
from certa.engine.services.presentation.stages import presentation_modules
from certa.engine.services.policy_record import RunPolicy, run_policies
from certa.engine.services.reviews import ReviewRecord, ledger_reviews, policy_approvals
from certa.engine.core.approvals import NOT_CHECKED, ApprovalDecision, review_signer
from certa.engine.core.trust_policy import TrustPolicy
from certa.engine.services.report_data import ReportData, Verification, replay_status, sequential_checks_of
from certa.engine.services.presentation.html.render import Link, render_report, stylesheet, template_environment

HTML_PACKAGE = "certa.engine.services.presentation.html"
"""The package whose templates, stylesheet and script the site pages use (and whose files its version hashes)."""

__all__ = ["MANIFEST_NAME", "CheckpointStatus", "SiteResult", "build_site", "index_script", "site_stylesheet"]

MANIFEST_NAME = ".certa-site.json"
CSS_NAME = "certa.css"
_SITE_FORMAT = 1
Progress = Callable[[int, int], None]
_POOL_MIN_PAGES = 16  # fewer stale run pages than this render in this process (a pool costs ~1 s to start)


@dataclass(frozen=True)
class SiteResult:
    """What one build did: ``pages_written`` were (re)rendered, ``pages_unchanged`` kept as they were."""

    directory: str
    pages_written: int
    pages_unchanged: int
    pages_removed: int
    runs: int
    intact: bool


@dataclass(frozen=True)
class CheckpointStatus:
    """One ``--checkpoint`` file as the chain page shows it. ``matches_ledger``: entry ``seq`` of this ledger
    has ``entry_hash`` and entries 1..seq have ``root_hash`` (None: unreadable). ``signature``: "verified"
    (by every ``--public-key``), "not checked" (no key given) or why it failed."""

    file: str
    seq: int | None
    entry_hash: str
    root_hash: str
    signed_at: str
    signer_key_ids: tuple[str, ...]
    matches_ledger: bool | None
    signature: str
    problem: str


@lru_cache(maxsize=1)
def site_stylesheet() -> str:
    """``certa.css``: the report stylesheet followed by the site's own rules (index table, filter, diffs)."""
    site_css = resources.files(HTML_PACKAGE).joinpath("site.css").read_text(encoding="utf-8")
    return f"{stylesheet()}\n{site_css}"


@lru_cache(maxsize=1)
def index_script() -> str:
    """The index page's inline script (filter and sort, no network, works from ``file://``)."""
    return resources.files(HTML_PACKAGE).joinpath("site_index.js").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def renderer_version() -> str:
    """SHA-256 over this package's templates, CSS, script and code, and the engine modules whose text the pages
    print (``RENDERED_ENGINE_MODULES``): a new certa that renders differently rebuilds every page."""
    digest = hashlib.sha256(f"certa-site {_SITE_FORMAT}".encode())
    root = resources.files(HTML_PACKAGE)
    names = sorted(p.name for p in root.iterdir() if p.name.endswith((".py", ".css", ".js")))
    names += sorted(f"templates/{p.name}" for p in root.joinpath("templates").iterdir() if p.name.endswith(".j2"))
    files = [(name, root.joinpath(name)) for name in names]
    for module in RENDERED_ENGINE_MODULES:
        package, _, name = module.rpartition(".")
        files.append((module, resources.files(package).joinpath(f"{name}.py")))
    for name, path in files:
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


RENDERED_ENGINE_MODULES = ("certa.engine.services.site", "certa.engine.services.report_data", "certa.engine.services.presentation.explain",
                           "certa.engine.core.approvals", "certa.engine.core.gates", "certa.engine.core.value_text", *presentation_modules())
"""Modules outside ``certa.engine.services.presentation.html`` whose text a page prints: this builder and the report's data
(``certa.engine.services.report_data``), the "How to read this" paragraphs
(``certa.engine.services.presentation.explain`` and each stage type's presentation module, which also builds its
section), the gates' displayed numbers (``certa.engine.core.gates.gate_display``) and every formatted value
(``certa.engine.core.value_text``)."""


def _digest(document: Any) -> str:
    return hashlib.sha256(canonical_bytes(document)).hexdigest()


# ------------------------------------------------------------------------------------------ ledger reads

def _run_verification(report: VerifyReport, run_id: str) -> Verification:
    """``verify(ledger, run_id=RUN)`` from one whole-ledger report: every problem except the certificate and
    review problems of other runs (those ``verify`` only checks for the run it is asked about)."""
    problems = tuple(f"{p.where}: {p.message}" for p in report.problems if _concerns(p, run_id))
    return Verification(intact=not problems, entries_checked=report.entries_checked, head_seq=report.head[0],
                        head_hash=report.head[1], problems=problems)


@dataclass(frozen=True)
class _Verified:
    verified: VerifyReport
    reviews: list[tuple[str, ReviewRecord]]


def _verify_once(ledger: Ledger, notify: Callable[[str], None] | None) -> _Verified:
    """``verify(ledger)`` with the reviews read once: the chain, blobs, index and certificates by ``verify``,
    then every review checked by ``ledger_reviews`` (which the index and run pages show too), each failing
    one a problem exactly as ``certa.engine.services.reviews.review_problems`` words it."""
    verified = verify(ledger, notify=notify, check_reviews=False)
    reviews = ledger_reviews(ledger)
    problems = [*verified.problems, *(Problem(f"entry {r.seq} (review, run {run_id})", f"review: {r.problem}", r.seq,
                                              run_id) for run_id, r in reviews if r.problem is not None)]
    problems.sort(key=lambda p: (p.seq is None, p.seq or 0))
    return _Verified(replace(verified, problems=tuple(problems)), reviews)


def _concerns(problem: Problem, run_id: str) -> bool:
    per_run = problem.message.startswith(("certificate: ", "review: "))
    return not per_run or problem.run_id == run_id


def _newest_replays(ledger: Ledger) -> dict[str, EntryRow]:
    """run id -> its newest ``replay`` entry, in one pass over the replay entries."""
    return {entry.run_id: entry for entry in ledger.entries(kinds=["replay"])}


def _certificates(ledger: Ledger, run_ids: set[str]) -> dict[str, Mapping[str, Any]]:
    """run id -> stored certificate (the last one, as ``Ledger.certificate``) of ``run_ids``, in one pass."""
    found: dict[str, Mapping[str, Any]] = {}
    if run_ids:
        for entry in ledger.entries(kinds=["certificate"]):
            if entry.run_id in run_ids:
                try:
                    found[entry.run_id] = entry.data()
                except ValueError:  # an edited payload: verify reports it on the page; show what is left
                    continue
    return found


def _report_data(ledger: Ledger, row: RunRow, certificate: Mapping[str, Any] | None,
                 checks: Mapping[str, tuple[Mapping[str, Any], ...]], verification: Verification,
                 replay: EntryRow | None, reviews: Sequence[ReviewRecord], warnings: tuple[str, ...],
                 policy: TrustPolicy | None, approval: ApprovalDecision | None) -> ReportData:
    """What ``gather_report(ledger, run, verification=..., policy=...)`` returns, from reads done once for the
    whole site (``approval``: the run's, from ``_approvals``)."""
    abort = None
    if row.status == "aborted" or certificate is None:
        abort = next((e.data() for e in ledger.entries(run_id=row.run_id, kinds=["abort"])), {})
        certificate = None
    digest = (certificate.get("results_sha256") or results_sha256(certificate["content"])) if certificate else None
    return ReportData(run_id=row.run_id, name=row.name, status=row.status, verdict=row.verdict or row.status.upper(),
                      profile=row.profile, recorded_at=row.recorded_at, certificate=certificate, results_sha256=digest,
                      abort=abort, checks=checks, verification=verification,
                      replay=replay_status(replay) if replay is not None else None, reviews=tuple(reviews),
                      warnings=warnings, approval=approval if certificate is not None else None,
                      signers=tuple(review_signer(r, policy) for r in reviews))


def _stored_root(ledger: Ledger, seq: int) -> str:
    """The Merkle root of entries 1..seq (hex) as the ledger stores it, or "" when its ``merkle_nodes`` lack a
    row (which ``verify``, shown beside, reports)."""
    try:
        return ledger_root(ledger, seq).hex()
    except LedgerIntegrityError:
        return ""


def _verification_lines(ledger: Ledger, report: VerifyReport) -> list[str]:
    """How far the last full and incremental ``certa verify`` reached (``certa.ledger.verify_record``), one line each."""
    records = read_verifications(ledger)
    return [verification_line(key, records.get(key), report.head, ledger.entry_hash_at) for key in VERIFIED_KEYS]


def _checkpoint_status(path: Path, ledger: Ledger, report: VerifyReport,
                       public_keys: Sequence[Ed25519PublicKey]) -> CheckpointStatus:
    text = path.read_bytes()
    try:
        claimed = read_checkpoint_unverified(text)
        signers = tuple(str(s.get("keyid", "")) for s in json.loads(text).get("signatures", []) if isinstance(s, dict))
    except (CertaError, ValueError, AttributeError) as error:
        return CheckpointStatus(file=path.name, seq=None, entry_hash="", root_hash="", signed_at="",
                                signer_key_ids=(), matches_ledger=None, signature="unreadable", problem=str(error))
    problem = ""
    count = ledger.entry_count()
    if count < claimed.seq:
        matches, problem = False, f"the ledger ends at entry {count}: entries were removed"
    elif claimed.seq and ledger.entry_hash_at(claimed.seq) != claimed.entry_hash:
        matches, problem = False, f"entry {claimed.seq} is not the one signed (the chain was rewritten)"
    elif _stored_root(ledger, claimed.seq) != claimed.root_hash:
        matches, problem = False, f"the Merkle root of entries 1..{claimed.seq} differs from the signed root"
    else:
        matches = report.intact  # the stored hashes are only evidence when the chain re-verifies
        problem = "" if matches else "the chain does not verify (see above)"
    if not public_keys:
        signature = "not checked (no --public-key)"
    else:
        try:
            open_checkpoint(text, public_keys)
            signature = "verified"
        except CertaError as error:
            signature = f"FAILED: {error}"
    return CheckpointStatus(file=path.name, seq=claimed.seq, entry_hash=claimed.entry_hash,
                            root_hash=claimed.root_hash, signed_at=claimed.signed_at, signer_key_ids=signers,
                            matches_ledger=matches, signature=signature, problem=problem)


# ------------------------------------------------------------------------------------------ pages

@dataclass(frozen=True)
class _RunPage:
    path: str
    run_id: str
    verification: Verification
    inputs: str


@dataclass(frozen=True)
class _DiffPage:
    path: str
    run_a: str
    run_b: str
    inputs: str


def _run_path(run_id: str) -> str:
    return f"runs/{run_id}.html"


def _diff_path(run_a: str, run_b: str) -> str:
    return f"diffs/{run_a[:12]}-{run_b[:12]}.html"


def _approval_cell(approval: ApprovalDecision | None) -> dict[str, Any]:
    """The index's approval cell: the headline, what it rests on, and its badge (green APPROVED, red NOT
    APPROVED, grey not checked; none for an aborted run)."""
    if approval is None:
        return {"text": "", "detail": "", "ok": None, "status": ""}
    return {"text": approval.headline(), "detail": approval.detail(), "status": approval.status,
            "ok": None if approval.status == NOT_CHECKED else approval.approved}


def _index_rows(rows: Sequence[RunRow], reviews: Mapping[str, list[ReviewRecord]],
                replays: Mapping[str, EntryRow], verifications: Mapping[str, Verification],
                diffs: Mapping[str, str], approvals: Mapping[str, ApprovalDecision]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        replay = replays.get(row.run_id)
        verification = verifications[row.run_id]
        out.append({
            "run_id": row.run_id, "href": _run_path(row.run_id), "recorded_at": row.recorded_at, "name": row.name,
            "verdict": row.verdict or row.status.upper(), "profile": row.profile, "seq": row.first_seq,
            "reviews": len(reviews.get(row.run_id, [])),
            "approval": _approval_cell(approvals.get(row.run_id)),
            "replay": replay_status(replay).outcome if replay else "", "intact": verification.intact,
            "problems": len(verification.problems), "diff_href": diffs.get(row.run_id, ""),
        })
    return out


def _diff_rows(certificate_a: Mapping[str, Any], certificate_b: Mapping[str, Any]) -> tuple[list[dict[str, str]], int, int]:
    """The rows of a diff page as ``certa diff`` orders and folds them (most material first; an array with many
    changed numbers as one row with a ``summary``), the number of changed fields and of equal ones."""
    changes = json_diff(certificate_a["content"], certificate_b["content"])
    rows = [{"path": c.path, "summary": array_change_text(c)} if isinstance(c, ArrayChange) else
            {"path": c.path, "a": format_value(c.before), "b": format_value(c.after)} for c in summarised(changes)]
    return rows, len(changes), len(flatten(certificate_a["content"])) - len(changes)


# ------------------------------------------------------------------------------------------ writing

def _render_run_page(path: str, data: ReportData, out_dir: Path) -> tuple[str, str, int]:
    links = [Link("All runs", "../index.html"), Link("Chain and checkpoints", "../chain.html")]
    body = render_report(data, links=links, css_href=f"../{CSS_NAME}").encode("utf-8")
    write_atomically(out_dir / path, body)
    return path, hashlib.sha256(body).hexdigest(), len(body)


def _render_run_pages(batch: list[tuple[str, ReportData]], out_dir: str) -> list[tuple[str, str, int]]:
    """A worker's task: render and write a batch of run pages."""
    return [_render_run_page(path, data, Path(out_dir)) for path, data in batch]


def _render_diff_page(page: _DiffPage, out_dir: Path, certificates: Mapping[str, Mapping[str, Any]],
                      names: Mapping[str, RunRow]) -> tuple[str, str, int]:
    certificate_a, certificate_b = certificates[page.run_a], certificates[page.run_b]
    rows, changed, equal = _diff_rows(certificate_a, certificate_b)
    html = template_environment().get_template("site_diff.html.j2").render(
        css_href=f"../{CSS_NAME}", root="../", a=names[page.run_a], b=names[page.run_b],
        a_href=f"../{_run_path(page.run_a)}", b_href=f"../{_run_path(page.run_b)}", rows=rows, changed=changed,
        equal=equal,
        same_content=certificate_a["content_sha256"] == certificate_b["content_sha256"])
    body = html.encode("utf-8")
    write_atomically(out_dir / page.path, body)
    return page.path, hashlib.sha256(body).hexdigest(), len(body)


def _chunks(items: Sequence[Any], size: int) -> list[list[Any]]:
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def _read_manifest(out_dir: Path) -> dict[str, dict[str, Any]]:
    try:
        manifest = json.loads((out_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError as error:
        raise CertaError(f"{out_dir / MANIFEST_NAME} is not a certa site manifest ({error}); move it away "
                         "or choose another directory") from None
    if not isinstance(manifest, dict) or manifest.get("certa_site") != _SITE_FORMAT \
            or not isinstance(manifest.get("pages"), dict):
        raise CertaError(f"{out_dir / MANIFEST_NAME} is not a certa site manifest (format {_SITE_FORMAT})")
    return manifest["pages"]


def _write_manifest(out_dir: Path, version: str, pages: Mapping[str, Mapping[str, Any]]) -> None:
    write_atomically(out_dir / MANIFEST_NAME, json.dumps({"certa_site": _SITE_FORMAT, "renderer": version,
                                                          "pages": dict(sorted(pages.items()))},
                                                         indent=1).encode("utf-8"))


def _remove_temporaries(out_dir: Path, folders: set[Path]) -> None:
    """Remove the temporary files a killed build left in the site's ``folders``."""
    for folder in sorted(folders):
        try:
            names = [entry.name for entry in os.scandir(out_dir / folder) if is_temporary(entry.name)]
        except FileNotFoundError:
            continue
        for name in names:
            (out_dir / folder / name).unlink(missing_ok=True)


def _is_current(out_dir: Path, path: str, inputs: str, manifest: Mapping[str, Mapping[str, Any]]) -> bool:
    known = manifest.get(path)
    if known is None or known.get("inputs") != inputs:
        return False
    try:
        return (out_dir / path).stat().st_size == known.get("size")
    except FileNotFoundError:
        return False


def _policy_input(decides: RunPolicy) -> list[str | None]:
    """What a run page's approval depends on: the deciding policy's SHA-256 and the words saying which it is."""
    return [None if decides.policy is None else decides.policy.sha256, decides.basis]


def _written_by_certa(out_dir: Path, path: str, manifest: Mapping[str, Mapping[str, Any]]) -> bool:
    """True if ``path`` is absent, or certa wrote it (it is in the manifest, perhaps as pending)."""
    return path in manifest or not (out_dir / path).exists()


def build_site(ledger: Ledger, out_dir: str | os.PathLike[str], *, checkpoints: Sequence[Path] = (),
               public_keys: Sequence[Ed25519PublicKey] = (), jobs: int = 1,
               progress: Progress | None = None, notify: Callable[[str], None] | None = None,
               policy: TrustPolicy | None = None) -> SiteResult:
    """Build or update the static site of ``ledger`` in ``out_dir`` (see module docstring).

    ``policy``: the trust policy every completed run's approval is evaluated against (None: not checked); its
    SHA-256 is part of each page's inputs, so another policy rewrites the pages.

    ``checkpoints``: signed checkpoint files to show on the chain page (checked with ``public_keys`` if
    given). ``jobs``: processes rendering run pages (matplotlib plots dominate; 1 renders in this process).
    ``progress(done, total)`` after each batch of pages; ``notify`` gets verify's progress lines.
    """
    out = Path(out_dir)
    make_folders(out)
    manifest = _read_manifest(out)
    version = renderer_version()

    report = _verify_once(ledger, notify)
    rows = ledger.runs()  # newest first
    verified_reviews = report.reviews
    reviews: dict[str, list[ReviewRecord]] = {}
    for run_id, record in report.reviews:
        reviews.setdefault(run_id, []).append(record)
    report = report.verified
    replays = _newest_replays(ledger)
    verifications = {row.run_id: _run_verification(report, row.run_id) for row in rows}
    policies = run_policies(ledger, rows, policy)

    run_pages = []
    for row in rows:
        verification = verifications[row.run_id]
        inputs = _digest({"page": "run", "version": version, "row": [row.run_id, row.name, row.status, row.verdict,
                                                                     row.profile, row.recorded_at,
                                                                     row.certificate_sha256, row.first_seq, row.last_seq],
                          "reviews": [r.seq for r in reviews.get(row.run_id, [])],
                          "policy": _policy_input(policies[row.run_id]),
                          "replay": replays[row.run_id].seq if row.run_id in replays else None,
                          "verification": [verification.intact, list(verification.problems)]})
        run_pages.append(_RunPage(_run_path(row.run_id), row.run_id, verification, inputs))

    by_name: dict[str, list[RunRow]] = {}
    for row in reversed(rows):  # oldest first
        if row.status == "completed":
            by_name.setdefault(row.name, []).append(row)
    diff_pages, diff_of = [], {}
    for series in by_name.values():
        for before, after in itertools.pairwise(series):
            path = _diff_path(before.run_id, after.run_id)
            diff_of[after.run_id] = path
            diff_pages.append(_DiffPage(path, before.run_id, after.run_id, _digest(
                {"page": "diff", "version": version, "a": [before.run_id, before.certificate_sha256],
                 "b": [after.run_id, after.certificate_sha256]})))

    statuses = [_checkpoint_status(Path(p), ledger, report, public_keys) for p in checkpoints]
    approvals = policy_approvals(rows, verified_reviews, policies)
    index_rows = _index_rows(rows, reviews, replays, verifications, diff_of, approvals)
    chain = {"head_seq": report.head[0], "head_hash": report.head[1], "entries": report.entries_checked,
             "certificates": report.certificates_checked, "blobs": report.blobs_checked, "intact": report.intact,
             "problems": [f"{p.where}: {p.message}" for p in report.problems], "runs": len(rows),
             "key_ids": sorted(key_id(k) for k in public_keys),
             "checkpoints": [s.__dict__ for s in statuses], "verifications": _verification_lines(ledger, report)}
    summary = {"runs": len(rows), "intact": report.intact, "head_seq": report.head[0], "head_hash": report.head[1]}

    simple_inputs = {CSS_NAME: _digest({"page": "css", "version": version}),
                     "chain.html": _digest({"page": "chain", "version": version, "chain": chain}),
                     "index.html": _digest({"page": "index", "version": version, "rows": index_rows,
                                            "summary": summary})}
    wanted = {p.path: p.inputs for p in (*run_pages, *diff_pages)} | simple_inputs
    refused = sorted(p for p in wanted if not _written_by_certa(out, p, manifest))
    if refused:
        raise CertaError(f"{out / refused[0]} exists and was not written by 'certa site' (not in {MANIFEST_NAME}); "
                         f"move it away or choose another directory ({len(refused)} such file(s))")
    _remove_temporaries(out, {Path(p).parent for p in wanted})
    pending = {p: {**manifest.get(p, {}), "inputs": None} for p, inputs in wanted.items()
               if not _is_current(out, p, inputs, manifest)}
    if pending:  # claimed before written: a build killed from here on is finished by the next one
        _write_manifest(out, version, {**manifest, **pending})
        for folder in sorted({Path(p).parent for p in pending}):
            make_folders(out / folder)

    new_manifest: dict[str, dict[str, Any]] = {}
    written = unchanged = 0
    total = len(run_pages) + len(diff_pages) + 3
    done = 0

    def record(path: str, inputs: str, sha: str, size: int) -> None:
        nonlocal written
        new_manifest[path] = {"inputs": inputs, "sha256": sha, "size": size}
        written += 1

    def keep(path: str) -> None:
        nonlocal unchanged
        new_manifest[path] = dict(manifest[path])
        unchanged += 1

    def simple_page(path: str, inputs: str, render: Callable[[], str]) -> None:
        nonlocal done
        if _is_current(out, path, inputs, manifest):
            keep(path)
        else:
            body = render().encode("utf-8")
            write_atomically(out / path, body)
            record(path, inputs, hashlib.sha256(body).hexdigest(), len(body))
        done += 1

    try:
        env = template_environment()
        simple_page(CSS_NAME, simple_inputs[CSS_NAME], site_stylesheet)

        stale_runs = []
        for page in run_pages:
            if _is_current(out, page.path, page.inputs, manifest):
                keep(page.path)
                done += 1
            else:
                stale_runs.append(page)
        if progress is not None:
            progress(done, total)
        inputs_of = {page.path: page.inputs for page in stale_runs}
        stale_diffs = [page for page in diff_pages if not _is_current(out, page.path, page.inputs, manifest)]
        wanted_certificates = {page.run_id for page in stale_runs}
        wanted_certificates |= {run for page in stale_diffs for run in (page.run_a, page.run_b)}
        certificates = _certificates(ledger, wanted_certificates)
        stale_ids = {page.run_id for page in stale_runs}
        checks = sequential_checks_of(e for e in ledger.entries(kinds=["decision"]) if e.run_id in stale_ids) \
            if stale_ids else {}
        warnings = warnings_of(e for e in ledger.entries(kinds=["decision"], containing=WARNING_MARK)
                               if e.run_id in stale_ids) if stale_ids else {}
        rows_by_id = {row.run_id: row for row in rows}
        work = [(page.path, _report_data(ledger, rows_by_id[page.run_id], certificates.get(page.run_id),
                                         checks.get(page.run_id, {}), page.verification, replays.get(page.run_id),
                                         reviews.get(page.run_id, []), warnings.get(page.run_id, ()),
                                         policies[page.run_id].policy,
                                         approvals.get(page.run_id)))
                for page in stale_runs]
        batches = _chunks(work, 8)
        names = {row.run_id: row for row in rows}

        def run_pages_written(results: list[tuple[str, str, int]]) -> None:
            nonlocal done
            for path, sha, size in results:
                record(path, inputs_of[path], sha, size)
            done += len(results)
            if progress is not None:
                progress(done, total)

        def diff_pages_of(chunk: Sequence[_DiffPage]) -> None:
            nonlocal done
            for page in chunk:
                if _is_current(out, page.path, page.inputs, manifest):
                    keep(page.path)
                else:
                    path, sha, size = _render_diff_page(page, out, certificates, names)
                    record(path, page.inputs, sha, size)
                done += 1
            if progress is not None:
                progress(done, total)

        diff_chunks = _chunks(diff_pages, 100)
        if jobs > 1 and len(work) >= _POOL_MIN_PAGES:
            import multiprocessing

            start = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(start)) as pool:
                pending = [pool.submit(_render_run_pages, batch, str(out)) for batch in batches]
                for chunk in diff_chunks:  # the diff pages, in this process while the workers draw the plots
                    diff_pages_of(chunk)
                    while pending and pending[0].done():
                        run_pages_written(pending.pop(0).result())
                for future in pending:
                    run_pages_written(future.result())
        else:
            for batch in batches:
                run_pages_written(_render_run_pages(batch, str(out)))
            for chunk in diff_chunks:
                diff_pages_of(chunk)
        del work, batches

        simple_page("chain.html", simple_inputs["chain.html"],
                    lambda: env.get_template("site_chain.html.j2").render(css_href=CSS_NAME, root="", chain=chain,
                                                                          checkpoints=statuses))
        simple_page("index.html", simple_inputs["index.html"],
                    lambda: env.get_template("site_index.html.j2").render(
                        css_href=CSS_NAME, root="", rows=index_rows, summary=summary,
                        names=sorted({r["name"] for r in index_rows}), script=index_script()))
        if progress is not None:
            progress(done, total)

    except BaseException:  # keep what was written: the next build must know these pages are certa's
        _write_manifest(out, version, {**manifest, **pending, **new_manifest})
        raise

    removed = 0
    for path, known in manifest.items():
        if path in new_manifest:
            continue
        target = out / path
        try:
            if hashlib.sha256(target.read_bytes()).hexdigest() == known.get("sha256"):
                target.unlink()
                removed += 1
        except (FileNotFoundError, IsADirectoryError):
            pass
    _write_manifest(out, version, new_manifest)
    return SiteResult(directory=str(out), pages_written=written, pages_unchanged=unchanged, pages_removed=removed,
                      runs=len(rows), intact=report.intact)
