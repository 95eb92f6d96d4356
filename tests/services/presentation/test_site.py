"""``certa site`` (certa.engine.services.site): every run's page, the index, diffs and the chain page; offline pages;
one verification per build; incremental rebuilds that rewrite only what changed and never touch foreign files."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine.services.site import MANIFEST_NAME, build_site
from certa.ledger import Ledger

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "specs" / "paired-ratio" / "spec.yaml"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _run(db: Path, spec: Path = EXAMPLE) -> str:
    result = invoke("run", str(spec), "--ledger", str(db), "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["run_id"]


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Two runs of the paired-ratio example (a diff pair) and one sequential run, run once for the module into a
    folder of their own; tests read copies (``ledger_of_three``)."""
    db = tmp_path_factory.mktemp("three-runs") / "ledger.db"
    runs = [_run(db), _run(db), _run(db, ROOT / "specs" / "sequential-diff" / "spec.yaml")]
    return db, runs


@pytest.fixture()
def ledger_of_three(three_runs: tuple[Path, list[str]], tmp_path: Path) -> tuple[Path, list[str]]:
    """A copy of ``three_runs``' ledger folder in this test's folder (the test may add runs, reviews or tamper)."""
    db, runs = three_runs
    shutil.copytree(db.parent, tmp_path / "ledger")
    return tmp_path / "ledger" / db.name, runs


def _site(db: Path, out: Path, *extra: str) -> dict:
    result = invoke("site", "-o", str(out), "--ledger", str(db), "--json", "--jobs", "1", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_site_has_index_run_pages_diff_and_chain_page(ledger_of_three, tmp_path: Path) -> None:
    db, runs = ledger_of_three
    out = tmp_path / "site"
    summary = _site(db, out)
    assert summary == {"ok": True, "dir": str(out), "pages_written": 3 + 1 + 3, "pages_unchanged": 0}
    for run_id in runs:
        page = (out / "runs" / f"{run_id}.html").read_text()
        assert 'href="../index.html"' in page and 'href="../certa.css"' in page and "<style>" not in page
    diffs = list((out / "diffs").glob("*.html"))
    assert [p.name for p in diffs] == [f"{runs[0][:12]}-{runs[1][:12]}.html"]
    diff_page = diffs[0].read_text()
    assert "Identical content" in diff_page  # the same spec, data and seed: the same certificate content
    index = (out / "index.html").read_text()
    for run_id in runs:
        assert f'href="runs/{run_id}.html"' in index
    assert f'href="diffs/{diffs[0].name}"' in index
    assert index.count('<tr data-name="llama-edit-vs-base"') == 2
    chain = (out / "chain.html").read_text()
    with Ledger.open(str(db), create=False) as ledger:
        seq, digest = ledger.head()
    assert f"{seq}:{digest}" in chain and "intact" in chain


def test_pages_reference_nothing_on_the_network(ledger_of_three, tmp_path: Path) -> None:
    db, _ = ledger_of_three
    out = tmp_path / "site"
    _site(db, out)
    for page in out.rglob("*.html"):
        text = page.read_text()
        for url in re.findall(r'(?:href|src)="([^"]*)"', text):
            assert "://" not in url and not url.startswith("//"), (page, url)
        assert "<script src" not in text and "@import" not in text
    assert "url(" not in (out / "certa.css").read_text()


def test_unchanged_rerun_writes_nothing_and_a_review_rewrites_only_its_pages(ledger_of_three, tmp_path: Path) -> None:
    db, runs = ledger_of_three
    out = tmp_path / "site"
    first = _site(db, out)
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*.html")}
    again = _site(db, out)
    assert again["pages_written"] == 0 and again["pages_unchanged"] == first["pages_written"]
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.html")} == stamps
    assert invoke("review", runs[0], "--by", "ann", "--decision", "approved", "--ledger", str(db)).exit_code == 0
    third = _site(db, out)
    changed = {p.relative_to(out).as_posix() for p in out.rglob("*.html") if p.stat().st_mtime_ns != stamps[p]}
    assert changed == {f"runs/{runs[0]}.html", "index.html", "chain.html"}
    assert third["pages_written"] == 3
    page = (out / "runs" / f"{runs[0]}.html").read_text()
    assert "unsigned, claims to be &#39;ann&#39;" in page and "approved by ann" not in page
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert set(manifest["pages"]) == {str(p.relative_to(out).as_posix()) for p in out.rglob("*") if p.is_file()
                                      and p.name != MANIFEST_NAME}


def test_a_new_run_adds_its_pages_and_keeps_the_others(ledger_of_three, tmp_path: Path) -> None:
    db, runs = ledger_of_three
    out = tmp_path / "site"
    _site(db, out)
    newest = _run(db)
    summary = _site(db, out)
    # the new run's page, its diff against the previous paired-ratio run, the index and the chain page
    assert summary["pages_written"] == 4
    assert (out / "diffs" / f"{runs[1][:12]}-{newest[:12]}.html").exists()


def test_foreign_files_are_never_overwritten_or_deleted(ledger_of_three, tmp_path: Path) -> None:
    db, _ = ledger_of_three
    out = tmp_path / "site"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "index.html").write_text("my own index")
    result = CliRunner().invoke(main, ["site", "-o", str(out), "--ledger", str(db), "--jobs", "1"])
    assert result.exit_code != 0 and "was not written by 'certa site'" in result.output
    assert (out / "index.html").read_text() == "my own index"
    (out / "index.html").unlink()
    _site(db, out)
    _site(db, out)
    assert (out / "notes.txt").read_text() == "mine"


def test_tampering_is_shown_on_the_run_it_concerns(ledger_of_three, tmp_path: Path) -> None:
    db, runs = ledger_of_three
    out = tmp_path / "site"
    _site(db, out)
    with sqlite3.connect(db) as connection:  # edit the first run's certificate entry payload
        connection.execute("UPDATE entries SET payload = replace(payload, '\"verdict\":\"PASS\"', '\"verdict\":\"PAZZ\"') "
                           "WHERE run_id = ? AND kind = 'certificate'", (runs[0],))
    summary = _site(db, out)
    assert summary["pages_written"] >= 3  # the status changed on every run page, the index and the chain page
    assert "BROKEN" in (out / "chain.html").read_text()
    assert "payload edited" in (out / "runs" / f"{runs[0]}.html").read_text()


def test_one_verification_per_build(ledger_of_three, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from certa.engine.services import report_data as data, site

    calls = []
    original = site.verify
    monkeypatch.setattr(site, "verify", lambda *a, **k: calls.append(k) or original(*a, **k))
    monkeypatch.setattr(data, "verify", lambda *a, **k: pytest.fail("gather_report verified again"))
    db, _ = ledger_of_three
    with Ledger.open(str(db), create=False) as ledger:
        build_site(ledger, tmp_path / "site")
    assert len(calls) == 1 and calls[0].get("run_id") is None


def test_checkpoints_are_shown_with_their_status(ledger_of_three, tmp_path: Path) -> None:
    db, _ = ledger_of_three
    assert invoke("keygen", "--out-dir", str(tmp_path), "--name", "audit").exit_code == 0
    assert invoke("keygen", "--out-dir", str(tmp_path), "--name", "other").exit_code == 0
    checkpoint = tmp_path / "head.checkpoint"
    result = invoke("checkpoint", "--key", str(tmp_path / "audit.key"), "--out", str(checkpoint), "--ledger", str(db))
    assert result.exit_code == 0, result.output
    out = tmp_path / "site"
    _site(db, out, "--checkpoint", str(checkpoint), "--public-key", str(tmp_path / "audit.pub"))
    chain = (out / "chain.html").read_text()
    assert "head.checkpoint" in chain and ">verified<" in chain and ">yes<" in chain
    _site(db, out, "--checkpoint", str(checkpoint), "--public-key", str(tmp_path / "other.pub"))
    assert "FAILED" in (out / "chain.html").read_text()


def test_parallel_build_gives_the_same_pages(ledger_of_three, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db, _ = ledger_of_three
    with Ledger.open(str(db), create=False) as ledger:
        build_site(ledger, tmp_path / "one", jobs=1)
    from certa.engine.services import site

    monkeypatch.setattr(site, "_POOL_MIN_PAGES", 1)  # the process pool, even for three pages
    with Ledger.open(str(db), create=False) as ledger:
        build_site(ledger, tmp_path / "two", jobs=2)
    one = {p.relative_to(tmp_path / "one"): p.read_bytes() for p in (tmp_path / "one").rglob("*.html")}
    two = {p.relative_to(tmp_path / "two"): p.read_bytes() for p in (tmp_path / "two").rglob("*.html")}
    assert one == two


@pytest.mark.parametrize(("forge", "problem"), [
    (lambda seq, entry, root: (seq + 5, entry, root), "entries were removed"),
    (lambda seq, entry, root: (seq, "0" * 64, root), "is not the one signed"),
    (lambda seq, entry, root: (seq, entry, "1" * 64), "differs from the signed root"),
])
def test_a_checkpoint_this_ledger_does_not_match_is_named_on_the_chain_page(ledger_of_three, tmp_path: Path,
                                                                           forge, problem: str) -> None:
    from certa.ledger.bundle import ledger_root
    from certa.ledger.checkpoint import sign_checkpoint
    from certa.engine.foundation.signing import generate_key_pair, load_private_key

    db, _ = ledger_of_three
    with Ledger.open(db, create=False) as ledger:
        seq, entry = ledger.head()
        root = ledger_root(ledger, seq).hex()
    forged = tmp_path / "forged.checkpoint"
    forged.write_text(json.dumps(sign_checkpoint([load_private_key(generate_key_pair()[0])], *forge(seq, entry, root))))
    out = tmp_path / "site"
    _site(db, out, "--checkpoint", str(forged))
    chain = (out / "chain.html").read_text()
    assert problem in chain and ">NO<" in chain


def test_renderer_version_covers_the_engine_modules_a_page_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    """The "How to read this" texts (engine/services/presentation/explain.py), the stages' presentation modules,
    the gates' displayed numbers (engine/core/gates.py), the approval's words (engine/core/approvals.py) and the
    value formatter (engine/core/value_text.py) are part of a page: a change to them must rebuild every page, as a change to engine/services/presentation/html
    does."""
    from certa.engine.services import site
    from certa.engine.services.presentation.stages import presentation_modules

    assert site.RENDERED_ENGINE_MODULES == ("certa.engine.services.site", "certa.engine.services.report_data",
                                            "certa.engine.services.presentation.explain", "certa.engine.core.approvals",
                                            "certa.engine.core.gates", "certa.engine.core.value_text",
                                            *presentation_modules())
    site.renderer_version.cache_clear()
    with_modules = site.renderer_version()
    monkeypatch.setattr(site, "RENDERED_ENGINE_MODULES", ())
    site.renderer_version.cache_clear()
    try:
        assert site.renderer_version() != with_modules
    finally:
        site.renderer_version.cache_clear()
