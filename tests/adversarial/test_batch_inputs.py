"""``certa batch`` over a folder of specs of every input kind (issue 31): CSV, JSON Lines, Parquet, an
lm-evaluation-harness run, Inspect logs (``.eval`` and JSON), a promptfoo results file and, with torch, a model
folder; beside them hostile specs of the same kinds (a truncated samples file, a lone surrogate in a log's model
name or in an item id the certificate lists, a duplicate promptfoo result, a ``nan`` in a CSV, a FIFO in place of a
file, a broken tokenizer, a spec with an unknown key) and a YAML file that is no spec.

``certa batch`` runs as users run it: without ``--scheduler``, so on the LocalCluster it starts (2 worker
processes). Every spec is recorded exactly once or refused by one line (its row's error, exit 2), the hostile ones
never stop the others, the ledger verifies intact, and the same command again records nothing more (every valid
spec "already recorded", the same run ids). The counts go to the sweep's summary (``conftest.count``).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import TINY_MODEL_TEXT, columns_to_csv_bytes, small_spec_folder, window_columns
from tests.core.evidence.inspect_epochs import fixture_members
from tests.core.evidence.promptfoo_export import evaluation, provider, write_jsonl
from tests.core.evidence.zstd_zip import zstd_zip
from .conftest import INTERNAL_ERROR, TMP_SUFFIX, count, invoke, leftovers, run_count

pytestmark = pytest.mark.adversarial

ROOT = Path(__file__).resolve().parents[2]
MODEL_LIBRARIES = ("torch", "transformers", "tokenizers", "safetensors", "distributed")
MISSING = next((m for m in MODEL_LIBRARIES if importlib.util.find_spec(m) is None), None)


def _spec_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _fifo(path: Path) -> None:
    """A FIFO, unblocked within 5 s by a writer that closes it should certa open it (the case then fails on its
    row, never hangs the sweep)."""
    os.mkfifo(path)

    def unblock() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and path.exists():
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                return
            except OSError:
                time.sleep(0.1)

    threading.Thread(target=unblock, daemon=True).start()


# ------------------------------------------------------------------------------------------ the specs


def _tables(folder: Path, suffix: str, *, seed: int, surrogate_id: bool = False, nan: bool = False) -> Path:
    """``SMALL_SPEC``'s paired-ratio spec on 60 windows in ``suffix`` files (csv, jsonl, parquet)."""
    spec = small_spec_folder(folder, seed=seed)
    base, subj = window_columns(60, seed=seed)
    if surrogate_id:  # the subject's window 3 unmatched, its id (listed in the certificate) not text
        subj = {**subj, "window_id": [f"{w}\ud800" if i == 3 else w for i, w in enumerate(subj["window_id"])]}
    for side, columns in (("baseline", base), ("subject", subj)):
        target = folder / "data" / f"{side}.{suffix}"
        if suffix == "csv":
            lines = columns_to_csv_bytes(columns).split(b"\n")
            if nan and side == "subject":  # the third window's mean_nll
                lines[3] = lines[3].rpartition(b",")[0] + b",nan"
            target.write_bytes(b"\n".join(lines))
        elif suffix == "jsonl":
            rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
            target.write_text("".join(json.dumps({k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()})
                                      + "\n" for row in rows), encoding="utf-8")
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq
            pq.write_table(pa.table({k: list(v) for k, v in columns.items()}), target)
    for side in ("baseline", "subject"):
        if suffix != "csv":
            (folder / "data" / f"{side}.csv").unlink()
    spec.write_text(_spec_text(spec).replace(".csv", f".{suffix}"), encoding="utf-8")
    return spec


def _example(folder: Path, example: str) -> Path:
    shutil.copytree(ROOT / "specs" / example, folder, ignore=shutil.ignore_patterns("README.md"))
    return folder / "spec.yaml"


def _lm_eval(folder: Path, *, truncated: bool = False) -> Path:
    spec = _example(folder, "lm-eval-accuracy")
    if truncated:
        (samples,) = (folder / "data" / "subject").glob("samples_*.jsonl")
        raw = samples.read_bytes()
        samples.write_bytes(raw[: len(raw) // 2])
    return spec


def _inspect(folder: Path, *, model: str | None = None, form: str = "eval") -> Path:
    spec = _example(folder, "inspect-accuracy")
    if model is not None:
        members = fixture_members("subject")
        members["header.json"]["eval"]["model"] = model
        (folder / "data" / "subject.eval").write_bytes(zstd_zip({n: json.dumps(v).encode() for n, v in members.items()}))
    if form == "json":
        for side in ("baseline", "subject"):
            raw = gzip.decompress((ROOT / "tests" / "data" / "evaluators" / "inspect" / f"{side}.json.gz").read_bytes())
            (folder / "data" / f"{side}.json").write_bytes(raw)
            (folder / "data" / f"{side}.eval").unlink()
        spec.write_text(_spec_text(spec).replace(".eval, format: inspect-eval}", ".json, format: inspect-json}"),
                        encoding="utf-8")
    return spec


def _promptfoo(folder: Path, *, duplicate: bool = False) -> Path:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(7)
    passes = [[(rng.random(25) < chance).tolist() for _ in range(2)] for chance in (0.8, 0.7)]
    lines = evaluation((provider("openai:gpt-4o-mini"), provider("ollama:chat:llama3.1:8b", "llama-8b")), passes)
    write_jsonl(folder / "results.jsonl", lines + (lines[:1] if duplicate else []))
    inputs = {arm: {"path": "results.jsonl", "format": "promptfoo-jsonl", "read": {"provider": {"id": chosen}}}
              for arm, chosen in (("baseline", "openai:gpt-4o-mini"), ("subject", "ollama:chat:llama3.1:8b"))}
    document = {"certa": 1, "name": f"promptfoo{'-duplicate' if duplicate else ''}", "seed": 3, "profile": "dev",
                "inputs": inputs, "stages": [{"id": "delta", "use": "paired.metric_delta", "with": {
                    "baseline": "baseline", "subject": "subject", "metric": "success", "margin": 0.3}}]}
    (folder / "spec.yaml").write_text(json.dumps(document, indent=1), encoding="utf-8")
    return folder / "spec.yaml"


def _model(folder: Path, tiny_models: dict[str, Path], *, broken_tokenizer: bool = False) -> Path:
    folder.mkdir(parents=True)
    for arm in ("baseline", "subject"):
        shutil.copytree(tiny_models[arm], folder / arm)
    if broken_tokenizer:
        (folder / "subject" / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "BPE"')
    documents = [d for d in TINY_MODEL_TEXT.split("\n\n") if d.strip()][:6]
    (folder / "text.jsonl").write_text("".join(json.dumps({"body": d}) + "\n" for d in documents), encoding="utf-8")
    (folder / "spec.yaml").write_text(f"""\
certa: 1
name: model-{'broken' if broken_tokenizer else 'folder'}
seed: 5
profile: dev
inputs:
  base: {{model: baseline}}
  subj: {{model: subject}}
  text: {{path: text.jsonl}}
stages:
  - {{id: w, use: model.windows, with: {{baseline: base, subject: subj, text: text, column: body, seq_len: 32,
      stride: 24, batch_size: 8, unit: tokens}}}}
  - {{id: ratio, use: paired.ppl_ratio, with: {{baseline: w.baseline, subject: w.subject, replicates: 200}}}}
""", encoding="utf-8")
    return folder / "spec.yaml"


def _fifo_input(folder: Path) -> Path:
    spec = small_spec_folder(folder, seed=41)
    (folder / "data" / "subject.csv").unlink()
    _fifo(folder / "data" / "subject.csv")
    return spec


def _unknown_key(folder: Path) -> Path:
    spec = small_spec_folder(folder, seed=42)
    spec.write_text(_spec_text(spec) + "bogus: 1\n", encoding="utf-8")
    return spec


def build_batch(root: Path, tiny_models: dict[str, Path] | None) -> dict[str, tuple[Path, str]]:
    """The batch's specs under ``root``: name -> (spec, expected status: ``recorded`` or ``error``)."""
    specs = {
        "csv": (_tables(root / "csv", "csv", seed=11), "recorded"),
        "jsonl": (_tables(root / "jsonl", "jsonl", seed=12), "recorded"),
        "parquet": (_tables(root / "parquet", "parquet", seed=13), "recorded"),
        "lm-eval": (_lm_eval(root / "lm-eval"), "recorded"),
        "inspect-eval": (_inspect(root / "inspect-eval"), "recorded"),
        "inspect-json": (_inspect(root / "inspect-json", form="json"), "recorded"),
        "promptfoo": (_promptfoo(root / "promptfoo"), "recorded"),
        "hostile-lm-eval-truncated": (_lm_eval(root / "hostile-lm-eval-truncated", truncated=True), "error"),
        "hostile-inspect-model-surrogate": (_inspect(root / "hostile-inspect-model-surrogate", model="mock\ud800"),
                                            "error"),
        "hostile-jsonl-id-surrogate": (_tables(root / "hostile-jsonl-id-surrogate", "jsonl", seed=14,
                                               surrogate_id=True), "error"),
        "hostile-csv-nan": (_tables(root / "hostile-csv-nan", "csv", seed=15, nan=True), "error"),
        "hostile-promptfoo-duplicate": (_promptfoo(root / "hostile-promptfoo-duplicate", duplicate=True), "error"),
        "hostile-fifo": (_fifo_input(root / "hostile-fifo"), "error"),
        "hostile-unknown-key": (_unknown_key(root / "hostile-unknown-key"), "error"),
    }
    if tiny_models is not None:
        specs["model"] = (_model(root / "model", tiny_models), "recorded")
        specs["hostile-model-tokenizer"] = (_model(root / "hostile-model-tokenizer", tiny_models,
                                                   broken_tokenizer=True), "error")
    (root / "notes.yaml").write_text("owner: governance\nreview: monthly\n", encoding="utf-8")  # no spec: skipped
    return specs


# ------------------------------------------------------------------------------------------ the batch


BATCH_ID = "sweep-every-input-kind"


def _batch(paths: list[Path], db: Path) -> tuple[Any, dict[str, Any] | None]:
    result = invoke("batch", *paths, "--batch-id", BATCH_ID, "--ledger", db, "--json", "--workers", 2)
    try:
        return result, json.loads(result.stdout)
    except ValueError:
        return result, None


def _check_batch(case: str, result: Any, report: dict[str, Any] | None, folders: tuple[Path, ...], *,
                 exit_code: int) -> None:
    """The sweep's invariants for one ``certa batch --json``: counted, no traceback nor internal error (in the
    output or any row), the JSON report, no ``*.certa-tmp`` file, and ``exit_code`` (the worst row's)."""
    count("tried")
    out = (result.stdout or "") + (result.stderr or "")
    rows = (report or {}).get("runs", [])
    errors = [str(row.get("error") or "") for row in rows]
    traceback = ("Traceback" in out or INTERNAL_ERROR.removeprefix("error: ") in out
                 or (result.exception is not None and not isinstance(result.exception, SystemExit)))
    if traceback:
        count("tracebacks")
    count("accepted" if result.exit_code == 0 else "refused")
    partial = leftovers(*folders)
    if partial:
        count("partial files", len(partial))
    detail = f"{case}: exit {result.exit_code}, exception {result.exception!r}\nstdout {result.stdout!r}\nstderr {result.stderr!r}"
    assert not traceback, detail
    assert report is not None, detail
    assert not partial, f"{detail}\nleft behind: {partial}"
    assert result.exit_code == exit_code, detail
    assert all("\n" not in error and "Traceback" not in error for error in errors), detail


def test_batch_every_input_kind(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    tiny_models = None
    if MISSING is None:
        tiny_models = request.getfixturevalue("tiny_models")
    elif MISSING == "distributed":
        pytest.skip("certa batch needs Dask (distributed): pip install 'certa[dask]'")
    root, db = tmp_path / "specs", tmp_path / "ledger.db"
    specs = build_batch(root, tiny_models)
    result, report = _batch([root], db)
    _check_batch("batch of every input kind", result, report, (tmp_path,), exit_code=2)
    assert report is not None and "runs" in report, report
    rows = {Path(row["spec"]).parent.name: row for row in report["runs"]}
    assert sorted(rows) == sorted(specs), sorted(rows)
    assert [Path(s["path"]).name for s in report["skipped"]] == ["notes.yaml"], report["skipped"]
    for name, (spec, expected) in specs.items():
        row = rows[name]
        assert row["status"] == expected, (name, row)
        if expected == "recorded":
            assert row["verdict"] in ("PASS", "FAIL") and row["exit_code"] in (0, 1) and row["run_id"], (name, row)
        else:
            assert row["run_id"] is None and row["exit_code"] == 2 and row["error"], (name, row)
    recorded = {name: rows[name]["run_id"] for name, (_, expected) in specs.items() if expected == "recorded"}
    assert len(set(recorded.values())) == len(recorded)
    assert run_count(db) == len(recorded), f"{run_count(db)} runs recorded for {len(recorded)} valid specs"
    assert invoke("verify", "--ledger", db).exit_code == 0
    if tiny_models is None:
        print(f"\nbatch of every input kind: the model folder specs left out ({MISSING} is not installed)")

    # the same batch again (its id given: the valid specs alone, so that no cluster need start) records nothing more
    again, second = _batch([spec for spec, expected in specs.values() if expected == "recorded"], db)
    _check_batch("the same batch again", again, second, (tmp_path,),
                 exit_code=max(row["exit_code"] for row in report["runs"] if row["status"] == "recorded"))
    assert second is not None
    rows_again = {Path(row["spec"]).parent.name: row for row in second["runs"]}
    for name, run_id in recorded.items():
        assert rows_again[name]["status"] == "already recorded" and rows_again[name]["run_id"] == run_id, rows_again[name]
    assert run_count(db) == len(recorded) and invoke("verify", "--ledger", db).exit_code == 0
    assert not list(tmp_path.rglob(f"*{TMP_SUFFIX}"))
