"""The answers of an interrupted served run kept for the next one (``certa.engine.core.runtimes.transcript_cache``):
kept atomically one file a request, read back only when a file is one answer to its request, never an identity
query's, and removed on demand; a cache that cannot be written keeps nothing and stops no run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from certa.engine.core.runtimes.http_client import Exchange, request_key
from certa.engine.core.runtimes.transcript_cache import TranscriptCache, cache_folder


def _exchange(path: str = "/completions", body: str = '{"prompt":[[1,2]]}') -> Exchange:
    return Exchange(key=request_key("POST", path, body.encode()), method="POST", path=path, request=body, status=200,
                    response='{"choices":[]}', elapsed_ms=12.5, attempts=1)


def test_answers_are_kept_one_file_a_request_and_read_back(tmp_path: Path) -> None:
    cache = TranscriptCache("ab" * 32, root=tmp_path)
    kept = [_exchange(), _exchange("/../tokenize", '{"prompt":"x"}')]
    for exchange in kept:
        cache.keep(exchange)
    cache.keep(_exchange("/models", ""))  # an identity query is asked again, never kept
    assert sorted(p.name for p in cache.folder.iterdir()) == sorted(f"{e.key}.json" for e in kept)
    assert sorted(cache.load(), key=lambda e: e.key) == sorted(kept, key=lambda e: e.key)
    assert oct(next(cache.folder.iterdir()).stat().st_mode & 0o777) == "0o600"
    cache.clear()
    assert not cache.folder.exists() and cache.load() == []


def test_a_file_that_is_not_an_answer_to_its_request_is_ignored(tmp_path: Path) -> None:
    cache = TranscriptCache("cd" * 32, root=tmp_path)
    good, other = _exchange(), _exchange(body='{"prompt":[[3]]}')
    cache.keep(good)
    (cache.folder / f"{other.key}.json").write_text(json.dumps({**good.__dict__}))  # named by another request
    (cache.folder / "garbage.json").write_text("{not json")
    forged = {**other.__dict__, "request": '{"prompt":[[4]]}'}  # a body whose key is not the file's
    (cache.folder / "forged.json").write_text(json.dumps(forged))
    assert cache.load() == [good]


def test_a_cache_that_cannot_be_written_keeps_nothing_and_stops_nothing(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    cache = TranscriptCache("ef" * 32, root=blocked)
    cache.keep(_exchange())
    assert cache.writable is False and cache.load() == []


def test_the_cache_folder_follows_certa_cache_dir_then_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CERTA_CACHE_DIR", str(tmp_path / "c"))
    assert cache_folder() == tmp_path / "c" / "transcripts"
    monkeypatch.delenv("CERTA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_folder() == tmp_path / "x" / "certa" / "transcripts"
