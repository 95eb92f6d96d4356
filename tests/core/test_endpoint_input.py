"""An endpoint input (``inputs: {x: {endpoint: {url, model}}}``): declared, validated, identified by its declaration,
overridden by ``--input NAME=URL``, recorded in the certificate without its key (issue 33, item 1)."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest

from certa.engine import run
from certa.engine.core.endpoint_input import (ENDPOINT_FORMAT, check_url, declaration_bytes, is_url,
                                              read_declaration)
from certa.engine.core.inputs import load_tables
from certa.engine.core.spec import load_plan
from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.services.presentation.markdown import certificate_markdown
from certa.engine.foundation.errors import InputError, SpecError

SECRET = "sk-test-0123456789abcdef"


def _spec(tmp_path: Path, endpoint: str) -> Path:
    (tmp_path / "t.csv").write_text("item_id,score\na,1\nb,0\nc,1\n")
    (tmp_path / "u.csv").write_text("item_id,score\na,1\nb,1\nc,1\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent("""\
        certa: 1
        name: endpoint-input
        seed: 1
        inputs:
          served:
            endpoint: ENDPOINT
          t:
            path: t.csv
          u:
            path: u.csv
        stages:
          - id: s
            use: paired.metric_delta
            with: {baseline: t, subject: u, metric: score, margin: 0.1}
        """).replace("ENDPOINT", endpoint))
    return spec


def test_the_declaration_with_its_defaults_is_the_input_and_its_digest(tmp_path: Path) -> None:
    plan = load_plan(_spec(tmp_path, "{url: 'http://127.0.0.1:8000/v1/', model: tiny-llama}"))
    table = load_tables(plan)["served"]
    expected = {"url": "http://127.0.0.1:8000/v1", "model": "tiny-llama", "api_key_env": None,
                "client": {"timeout": 60, "retries": 4, "concurrency": 4, "max_requests": None}}
    assert table.fmt == ENDPOINT_FORMAT and table.raw == canonical_bytes(expected)
    assert table.sha256 == hashlib.sha256(canonical_bytes(expected)).hexdigest()
    assert list(table.text("model")) == ["tiny-llama"] and not table.overridden
    assert read_declaration("served", table.raw).record() == expected


@pytest.mark.parametrize(("endpoint", "where", "said"), [
    ("{url: 'http://h/v1'}", "inputs.served", "model"),
    ("{url: 'ftp://h/v1', model: m}", "inputs.served.endpoint.url", "does not match"),
    ("{url: 'http://h/v1', model: m, client: {retries: -1}}", "inputs.served.endpoint.client.retries", "minimum"),
    ("{url: 'http://h/v1', model: m, api_key_env: 'not a name'}", "inputs.served.endpoint.api_key_env", ""),
    ("{url: 'http://h/v1', model: m, key: x}", "inputs.served.endpoint", "key"),
    ("{url: 'http://h', model: m, api: triton}", "inputs.served.endpoint.api", "triton"),
])
def test_a_bad_declaration_is_refused_with_file_line_and_field(tmp_path: Path, endpoint: str, where: str,
                                                               said: str) -> None:
    with pytest.raises(SpecError) as refused:
        load_plan(_spec(tmp_path, endpoint))
    assert refused.value.path.startswith(where) and refused.value.line == 6 and said in str(refused.value)


def test_an_endpoint_is_not_also_a_file_or_a_model(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "{url: 'http://h/v1', model: m}\n    path: t.csv")
    with pytest.raises(SpecError) as refused:
        load_plan(spec)
    assert refused.value.path == "inputs.served"


@pytest.mark.parametrize(("url", "said"), [
    (f"http://user:{SECRET}@h/v1", "holds credentials"),
    ("http://h/v1?key=1", "query"),
    ("http:///v1", "with a host"),
    ("http://h:port/v1", "not a valid URL"),
])
def test_a_url_with_credentials_query_or_no_host_is_refused_without_echoing_a_secret(url: str, said: str) -> None:
    with pytest.raises(InputError) as refused:
        check_url("served", url)
    assert said in str(refused.value) and SECRET not in str(refused.value)


def test_the_key_comes_from_the_named_variable_and_is_never_recorded(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec(tmp_path, "{url: 'http://h/v1', model: m, api_key_env: SERVED_KEY}")
    monkeypatch.delenv("SERVED_KEY", raising=False)
    table = load_tables(load_plan(spec))["served"]
    declaration = read_declaration("served", table.raw)
    with pytest.raises(InputError, match="SERVED_KEY, which is not set"):
        declaration.api_key()
    monkeypatch.setenv("SERVED_KEY", SECRET)
    assert declaration.api_key() == SECRET
    report = run(spec, ledger=tmp_path / "ledger.db")
    certificate = canonical_bytes(report.certificate).decode()
    assert SECRET not in certificate and SECRET not in repr(declaration)
    (served,) = [i for i in report.certificate["content"]["inputs"] if i["name"] == "served"]
    assert served["endpoint"]["api_key_env"] == "SERVED_KEY" and served["format"] == ENDPOINT_FORMAT
    assert served["sha256"] == table.sha256 and "overridden" not in served
    shown = certificate_markdown(report.certificate)
    assert "Input served is a served model: the model served as 'm' at http://h/v1" in shown
    assert "not proof of what answered" in shown and SECRET not in shown


def test_input_name_url_replaces_the_url_and_the_certificate_says_so(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "{url: 'http://127.0.0.1:8000/v1', model: m}")
    report = run(spec, ledger=tmp_path / "ledger.db", input_paths={"served": "http://127.0.0.1:41234/v1"})
    (served,) = [i for i in report.certificate["content"]["inputs"] if i["name"] == "served"]
    assert served["overridden"] is True and served["endpoint"]["url"] == "http://127.0.0.1:41234/v1"


def test_a_path_for_an_endpoint_or_a_url_for_a_file_is_refused(tmp_path: Path) -> None:
    plan = load_plan(_spec(tmp_path, "{url: 'http://h/v1', model: m}"))
    with pytest.raises(InputError, match="takes its URL"):
        load_tables(plan, input_paths={"served": tmp_path / "t.csv"})
    with pytest.raises(InputError, match="not a URL"):
        load_tables(plan, input_paths={"t": "https://example.org/t.csv"})


def test_bytes_that_are_not_a_canonical_declaration_are_refused() -> None:
    raw = declaration_bytes("served", {"url": "http://h/v1", "model": "m"})
    assert read_declaration("served", raw).url == "http://h/v1"
    with pytest.raises(InputError, match="canonical form"):
        read_declaration("served", raw.replace(b",", b", "))
    with pytest.raises(InputError, match="as JSON"):
        read_declaration("served", b"\xff")
    assert is_url("HTTPS://h") and not is_url("/data/http://x")


def test_api_tgi_is_recorded_and_the_default_api_leaves_the_declaration_as_it_was(tmp_path: Path) -> None:
    default = load_tables(load_plan(_spec(tmp_path, "{url: 'http://h/v1', model: m}")))["served"]
    spelled = load_tables(load_plan(_spec(tmp_path, "{url: 'http://h/v1', model: m, api: openai}")))["served"]
    assert default.raw == spelled.raw and b"api" not in default.raw.replace(b"api_key_env", b"")
    assert read_declaration("served", default.raw).api == "openai"
    tgi = load_tables(load_plan(_spec(tmp_path, "{url: 'http://h:8080', model: org/m, api: tgi}")))["served"]
    declaration = read_declaration("served", tgi.raw)
    assert declaration.api == "tgi" and declaration.record()["api"] == "tgi" and tgi.sha256 != default.sha256
    with pytest.raises(InputError, match="api must be one of openai, tgi"):
        declaration_bytes("served", {"url": "http://h", "model": "m", "api": "triton"})
