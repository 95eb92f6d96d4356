"""Versioned stage types: the registry, pins in a spec, and frozen versions that still compute what they did."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from certa.engine import run
from certa.engine.core.certificate import results_of
from certa.engine.foundation.errors import SpecError, StageError
from certa.engine.core.spec import load_plan
from certa.engine.core.stages import REGISTRY, StageRegistry, UnknownStage
from certa.engine.core.stages.registry import parse_stage_ref, version_key
from certa.engine.core.tables import parse_table

GOLDEN_010 = Path(__file__).resolve().parents[1] / "golden" / "0.1.0" / "ledger.db"


def test_versions_order_numerically_and_parse_strictly() -> None:
    assert version_key("1.10.0") > version_key("1.9.3") > version_key("1.0.0")
    for bad in ("1.0", "v1.0.0", "01.0.0", "1.0.0-rc1", ""):
        with pytest.raises(ValueError, match="MAJOR.MINOR.PATCH"):
            version_key(bad)
    assert parse_stage_ref("bakeoff.compare@1.0.0") == ("bakeoff.compare", "1.0.0")
    assert parse_stage_ref("bakeoff.compare") == ("bakeoff.compare", None)


def test_the_registry_keeps_every_version_and_the_newest_runs() -> None:
    assert [s.version for s in REGISTRY.versions("bakeoff.compare")] == ["1.0.0", "1.1.0", "1.2.0"]
    assert REGISTRY["bakeoff.compare"].version == "1.2.0" == REGISTRY.resolve("bakeoff.compare").version
    assert REGISTRY.resolve("bakeoff.compare@1.0.0").version == "1.0.0"
    assert not REGISTRY.is_newest(REGISTRY.get("bakeoff.merge", "1.0.0"))
    with pytest.raises(UnknownStage, match=r"has no version '2\.0\.0' \(it may have been recorded by a newer certa"):
        REGISTRY.get("bakeoff.compare", "2.0.0")
    with pytest.raises(UnknownStage, match="did you mean 'paired.ppl_ratio'"):
        REGISTRY.newest("paired.ppl_ration")
    one = REGISTRY["paired.ppl_ratio"]
    with pytest.raises(ValueError, match="registered twice"):
        StageRegistry((one, dataclasses.replace(one)))


BAKEOFF_SPEC = Path(__file__).resolve().parents[2] / "specs" / "vendor-bakeoff" / "spec.yaml"


def _pinned(text: str, ref: str) -> str:
    return text.replace("use: bakeoff.compare\n", f"use: {ref}\n")


def test_a_spec_pins_a_version_and_a_bad_pin_names_line_and_choices() -> None:
    text = BAKEOFF_SPEC.read_text(encoding="utf-8")
    newest, old = load_plan(text), load_plan(_pinned(text, "bakeoff.compare@1.0.0"))
    assert [(s.id, s.version) for s in newest.stages] == [("cmp", "1.2.0"), ("calm", "1.1.0"), ("live", "1.2.0"),
                                                           ("merged", "1.2.0")]
    assert [(s.id, s.use, s.version) for s in old.stages][0::2] == [("cmp", "bakeoff.compare", "1.0.0"),
                                                                   ("live", "bakeoff.compare", "1.0.0")]
    assert old.knobs_hash != newest.knobs_hash  # the version is a knob
    assert load_plan(_pinned(text, "bakeoff.compare@1.2.0")).knobs_hash == newest.knobs_hash  # pinning the newest
    with pytest.raises(SpecError) as caught:
        load_plan(_pinned(text, "bakeoff.compare@1.7.0"))
    assert "stages[0].use" in str(caught.value) and ":16:" in str(caught.value)
    assert "this certa has 1.0.0, 1.1.0, 1.2.0" in str(caught.value)
    with pytest.raises(SpecError, match="a pinned version is MAJOR.MINOR.PATCH, e.g. 'bakeoff.compare@1.2.0'"):
        load_plan(_pinned(text, "bakeoff.compare@1.0"))


def _golden_run(name: str) -> tuple[dict, dict, dict]:
    """(run entry, certificate, {input name: table}) of the 0.1.0 golden run of spec ``name``."""
    db = sqlite3.connect(f"file:{GOLDEN_010}?mode=ro&immutable=1", uri=True)
    try:
        run_id = db.execute("SELECT run_id FROM runs WHERE name = ?", (name,)).fetchone()[0]
        rows = db.execute("SELECT kind, payload FROM entries WHERE run_id = ? AND kind IN ('run', 'input', "
                          "'certificate') ORDER BY seq", (run_id,)).fetchall()
        record = next(json.loads(p) for k, p in rows if k == "run")
        certificate = next(json.loads(p) for k, p in rows if k == "certificate")
        tables = {}
        for item in (json.loads(p) for k, p in rows if k == "input"):
            blob = db.execute("SELECT content FROM blobs WHERE sha256 = ?", (item["sha256"],)).fetchone()[0]
            tables[item["name"]] = parse_table(item["name"], bytes(blob), item["format"])
    finally:
        db.close()
    return record, certificate, tables


def test_a_spec_pinned_to_1_0_0_computes_what_certa_0_1_0_certified() -> None:
    """The 0.1.0 vendor bake-off, re-run today as a new spec pinned to the 1.0.0 stages, gives the numbers
    certa 0.1.0 recorded (the same knobs, so the same knobs_hash, and the same outputs bit for bit)."""
    record, certificate, tables = _golden_run("vendor-bakeoff")
    text = record["spec_text"].replace("use: bakeoff.compare\n", "use: bakeoff.compare@1.0.0\n")
    text = text.replace("use: bakeoff.merge\n", "use: bakeoff.merge@1.0.0\n")
    text = text.replace("use: bakeoff.gate\n", "use: bakeoff.gate@1.0.0\n")
    assert text.count("@1.0.0") == 4
    content = run(text, inputs=tables).certificate["content"]
    recorded = certificate["content"]
    assert content["knobs_hash"] == recorded["knobs_hash"]
    assert content["stages"] == recorded["stages"]
    # a gate of content format 3 also states its outcome (issue 34): the same PASS / FAIL as 0.1.0's passed
    assert [{k: v for k, v in g.items() if k != "outcome"} for g in content["gates"]] == recorded["gates"]
    assert [g["outcome"] for g in content["gates"]] == ["PASS" if g["passed"] else "FAIL" for g in recorded["gates"]]
    assert "resampling" not in content["stages"]["cmp"]["bootstrap"]  # 1.0.0 describes its bootstrap as it did
    differing = {k for k in results_of(content) if content[k] != recorded.get(k)}
    # the spec text (and so its SHA-256) differs: it spells the pins; a new run states its family (content format 2)
    # and, for each plain input table, the columns no stage read, and each gate's outcome (format 3): no column
    # unread here, the merge reads them all
    assert differing == {"spec", "certa_format", "family", "inputs", "gates"} and content["family"]["claim"] == "all"
    assert [{k: v for k, v in i.items() if k != "unread_columns"} for i in content["inputs"]] == recorded["inputs"]
    assert [i["unread_columns"] for i in content["inputs"]] == [[], [], []]


def test_sums_pooled_by_one_version_are_refused_by_another_versions_merge() -> None:
    record, _, tables = _golden_run("vendor-bakeoff")
    newest_merge = record["spec_text"].replace("use: bakeoff.compare\n", "use: bakeoff.compare@1.0.0\n")
    with pytest.raises(StageError, match="these sums were pooled under frozen knobs"):
        run(newest_merge, inputs=tables)  # 0.1.0's shards, merged by bakeoff.merge 1.1.0
