"""``model.windows`` 1.2.0 with two served models (issue 33: a vendor comparison of perplexity): the baseline's server
tokenizes the documents, the subject's server is checked to tokenize them into the same ids, both score the same
token windows by teacher forcing, and ``paired.ppl_ratio`` compares them. The reference weights' server against
itself gives a ratio of exactly 1; against the impostor the ratio's interval excludes 1. A replay needs neither
server; byte windows, which need a local tokenizer, are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from certa.engine.core.runtimes import http_client
from certa.engine.foundation.errors import InputError
from certa.engine.services.audit import replay
from certa.engine.services.presentation.markdown import certificate_markdown
from certa.engine.services.run import run
from certa.ledger import Ledger
from tests.conftest import VllmServer, write_spec
from tests.served.reference import DOCUMENTS, write_texts


def _spec(folder: Path, server: VllmServer, subject_url: str, unit: str = "tokens") -> Path:
    write_texts(folder / "text.jsonl", DOCUMENTS)
    return write_spec(folder, f"""\
        certa: 1
        name: vendor-perplexity
        seed: 3
        profile: dev
        inputs:
          official: {{endpoint: {{url: '{server.url}', model: {server.name}}}}}
          vendor: {{endpoint: {{url: '{subject_url}', model: {server.name}, client: {{concurrency: 2}}}}}}
          text: {{path: text.jsonl}}
        stages:
          - {{id: w, use: model.windows, with: {{baseline: official, subject: vendor, text: text, unit: {unit},
              seq_len: 96, stride: 64, batch_size: 8}}}}
          - {{id: ratio, use: paired.ppl_ratio, with: {{baseline: w.baseline, subject: w.subject, replicates: 500}}}}
        gates:
          - {{id: ratio-upper, metric: 'ratio.{unit[:-1]}_perplexity.display_ci[1]', max: 1.01}}
        """)


def test_a_server_against_itself_has_a_ratio_of_one_and_replays_without_either(
        vllm_server: VllmServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(_spec(tmp_path, vllm_server, vllm_server.url), ledger=ledger)
        content = result.certificate["content"]
        w = content["stages"]["w"]
        assert w["unit"] == "tokens" and w["tokenizers_match"]
        assert w["nll_per_unit"]["baseline"] == w["nll_per_unit"]["subject"]
        for arm in ("baseline", "subject"):
            model = w["models"][arm]
            assert model["kind"] == "endpoint" and model["tokenizer_sha256"] is None
            assert model["tokens_from"] == "server" and model["tokenizer_of"] == "official"
        shown = certificate_markdown(result.certificate)
        assert "It scored the tokens of its own server" in shown
        assert "It scored the tokens of the server of official (its /tokenize)" in shown
        monkeypatch.setattr(http_client.HTTPTransport, "send", lambda *a, **k: pytest.fail("replay queried"))
        assert replay(ledger, result.run_id).outcome == "REPRODUCED"


def test_the_impostor_as_the_vendor_moves_the_ratio(vllm_server: VllmServer, tmp_path: Path) -> None:
    ratio = run(_spec(tmp_path, vllm_server, vllm_server.impostor_url)).certificate["content"]["stages"]["ratio"]
    low, high = ratio["token_perplexity"]["display_ci"]
    assert low > 1.0 or high < 1.0


def test_byte_windows_need_a_local_tokenizer(vllm_server: VllmServer, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="both served models.*unit bytes needs a local tokenizer"):
        run(_spec(tmp_path, vllm_server, vllm_server.url, unit="bytes"))
