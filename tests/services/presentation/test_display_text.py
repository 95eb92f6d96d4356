"""Terminal and Markdown safety (certa.engine.services.presentation.display_text): user strings (spec description, reviewer names, notes,
recorded names, stage output strings) reach ``certa show``, ``verify``, ``list``, ``decisions``, ``diff``, the
Markdown report and the HTML report without bidi or control characters, and without raw HTML, table pipes or
backticks in Markdown. Nothing recorded changes: the certificate keeps the strings as given."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from certa.cli import main
from certa.engine import run
from certa.engine.services.presentation.display_text import json_display, markdown_code, markdown_strings, markdown_text, plain_text
from certa.engine.foundation.jsondiff import FieldChange
from certa.engine.services.presentation.markdown import certificate_markdown, change_text, decision_line
from certa.ledger import Ledger

from tests.conftest import SMALL_SPEC

BIDI = [chr(c) for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))]
CONTROLS = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0)) if chr(c) not in "\t\n\r"]
INVISIBLE = re.compile("[" + re.escape("".join(BIDI + CONTROLS)) + "]")
HOSTILE = "<script>alert(1)</script> a|b `tick` &amp; \u202eevil\u202c \x1b[31mred\x1b[0m \u2066iso\u2069 \x9bx"


def _seen(text: str) -> None:
    """No bidi or control character but newline in ``text``, no tab, no raw ESC sequence opener."""
    assert not INVISIBLE.search(text), repr(INVISIBLE.search(text))
    assert "\t" not in text and "\r" not in text


@pytest.mark.parametrize("character", BIDI + CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
def test_every_bidi_and_control_character_is_removed(character: str) -> None:
    assert plain_text(f"a{character}b") == "ab"
    assert markdown_text(f"a{character}b", newlines=True) == "ab"


def test_newlines_only_where_a_paragraph_allows_them() -> None:
    assert plain_text("one\ntwo\r\nthree\rfour\u2028five\tsix") == "one two three four five six"
    assert plain_text("one\ntwo\r\nthree\u2029four\tfive", newlines=True) == "one\ntwo\nthree\nfour five"


def test_a_lone_surrogate_is_replaced_not_a_crash() -> None:
    shown = plain_text("a\ud800b")
    assert shown == "a\ufffdb" and shown.encode("utf-8")


def test_markdown_text_and_code() -> None:
    assert markdown_text("<b>x</b> & a|b `c`") == "&lt;b>x&lt;/b> & a\\|b \\`c\\`"
    assert markdown_text("0.85 <= 1.05, a < b, R&D, &amp;") == "0.85 <= 1.05, a < b, R&D, &amp;amp;"  # reads as is
    assert markdown_text("llama_edit-vs.base 1.05") == "llama_edit-vs.base 1.05"  # ordinary names unchanged
    assert markdown_code("ratio.primary_metric.display_ci[1]") == "`ratio.primary_metric.display_ci[1]`"
    assert markdown_code("a`b``c|d\u202e") == "``` a`b``c\\|d ```"
    assert markdown_strings({"v<": ["<x>", 1.5, None], "n": 3}) == {"v<": ["&lt;x>", 1.5, None], "n": 3}


@given(st.recursive(st.text() | st.floats(allow_nan=False) | st.none(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)))
def test_json_for_the_terminal_is_the_same_json_value(value: object) -> None:
    shown = json_display(json.dumps(value, indent=2, ensure_ascii=False))
    _seen(shown)
    assert json.loads(shown) == value and shown.encode("utf-8")


@given(st.text())
def test_no_hostile_character_survives(text: str) -> None:
    _seen(plain_text(text))
    _seen(plain_text(text, newlines=True))
    shown = markdown_text(text)
    _seen(shown)
    assert "\n" not in shown
    assert not re.search(r"(?<!\\)[|`]", shown)  # every pipe and backtick escaped
    assert not re.search(r"<[A-Za-z/!?]", shown)  # no raw HTML can open
    assert not re.search(r"&(?!amp;|lt;)(#|[A-Za-z][A-Za-z0-9]*;)", shown)  # no entity but certa's own
    code = markdown_code(text)
    _seen(code)
    assert "\n" not in code and not re.search(r"(?<!\\)\|", code)


def test_decision_and_change_lines_are_plain() -> None:
    line = decision_line(3, {"stage": "ra\u202etio", "kind": "pai\x1bring", "detail": {"column": "x\u2066y\x85"}})
    _seen(line)
    assert "ratio" in line and "pairing" in line and "xy" in line
    _seen(change_text(FieldChange("spec.description", HOSTILE, "calm\u200f"), sides=("recorded", "replayed")))


@pytest.fixture
def hostile_runs(small_spec: Path, tmp_path: Path) -> tuple[Path, str, str]:
    """A ledger with two runs whose spec descriptions are hostile (the second one differs), a review by a
    hostile reviewer name and note, and a runs index whose name was edited to a hostile one."""
    db = tmp_path / "hostile.db"
    described = SMALL_SPEC.replace("seed: 7\n", f"seed: 7\ndescription: {json.dumps(HOSTILE)}\n")
    small_spec.write_text(described, encoding="utf-8")
    with Ledger.open(db) as ledger:
        first = run(small_spec, ledger=ledger).run_id
        small_spec.write_text(described.replace("evil", "worse"), encoding="utf-8")
        second = run(small_spec, ledger=ledger).run_id
    reviewed = CliRunner().invoke(main, ["review", first, "--by", "mal\u202elory <i>x</i>", "--decision", "comment",
                                         "--note", "see `this` | \x1b]8;;http://evil\x07link", "--ledger", str(db)])
    assert reviewed.exit_code == 0, reviewed.output
    return db, first, second


def _certa(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    _seen(result.stdout)
    _seen(result.stderr)
    return result.stdout


def test_show_escapes_the_description_and_keeps_the_recorded_bytes(hostile_runs) -> None:
    db, first, _ = hostile_runs
    shown = _certa("show", first, "--explain", "--ledger", str(db))
    assert "<script>" not in shown and "&lt;script>" in shown and "a\\|b" in shown and "\\`tick\\`" in shown
    assert "evil" in shown and "&amp;amp;" in shown
    with Ledger.open(db) as ledger:  # the certificate still holds the description exactly as given
        assert ledger.certificate(first)["content"]["spec"]["description"] == HOSTILE
    exported = json.loads(_certa("show", first, "--json", "--ledger", str(db)))
    assert exported["content"]["spec"]["description"] == HOSTILE  # --json is data, not display


def test_markdown_report_escapes_stage_output_strings(hostile_runs) -> None:
    db, first, _ = hostile_runs
    with Ledger.open(db) as ledger:
        certificate = ledger.certificate(first)
    stage = next(iter(certificate["content"]["stages"]))
    certificate["content"]["stages"][stage]["token_perplexity"]["kind"] = "<img src=x>|\u202e"
    certificate["content"]["gates"][0]["id"] = "gate|<b>"
    report = certificate_markdown(certificate, explain=True, warnings=["column <x> \u202e unused"])
    _seen(report)
    assert "<img" not in report and "<b>" not in report and "<x>" not in report
    assert "| gate\\|&lt;b> |" in report


def test_verify_list_and_diff_show_plain_names(hostile_runs) -> None:
    db, first, second = hostile_runs
    verified = _certa("verify", "--ledger", str(db))
    assert "claims to be 'mallory <i>x</i>'" in verified  # the terminal is not Markdown: only the controls go
    diffed = _certa("diff", first, second, "--only-changed", "--ledger", str(db))
    assert "spec.description" in diffed and "worse" in diffed
    _certa("decisions", first, "--ledger", str(db))
    with sqlite3.connect(db) as conn:  # an edited index (verify names it) must still print safely
        conn.execute("UPDATE runs SET name = ?, profile = ? WHERE run_id = ?", ("na\u202eme\x1b[2J", "de\x9bv", first))
    listed = _certa("list", "--ledger", str(db))
    assert "name[2J" in listed
    tampered = _certa("verify", "--ledger", str(db))
    assert "TAMPERED" in tampered


def test_html_report_strips_controls_and_escapes_html(hostile_runs, tmp_path: Path) -> None:
    pytest.importorskip("jinja2")
    db, first, _ = hostile_runs
    page = tmp_path / "run.html"
    _certa("report", first, "-o", str(page), "--ledger", str(db))
    html = page.read_text(encoding="utf-8")
    _seen(html)
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "mallory &lt;i&gt;x&lt;/i&gt;" in html
