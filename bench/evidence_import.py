"""Speed of importing evaluator exports (certa.engine.core.evidence) against plain ``json.loads`` of the same records.

Usage: PYTHONPATH=. python bench/evidence_import.py [--records 100000] [--repeats 5]
       PYTHONPATH=. python bench/evidence_import.py --scale [--records 200000] [--repeats 3] [--dir DIR]

Each export holds --records records, made by repeating a record of the real fixtures in
``tests/data/evaluators/`` under new item keys (and new digests), so records have the size and shape the tools
write (Inspect samples without their event transcript, which would make 10^5 samples about 1 GB). Timed, best
and median of --repeats (the machine is shared: the best is the figure of an idle machine, the median what a
loaded one gives): bytes -> ``EvidenceRecords`` for each format, beside a reference timed in the same run, the
least a Python reader of the same bytes through ``json`` pays: one ``json.loads`` per line (JSON Lines), of
the document (Inspect JSON), or per member after zstd decompression (Inspect ``.eval``); for tables,
``json.loads`` of each row written as a JSON line. The ratio is best over best.

End to end (issue 19: < 2 s): two lm-eval multiple-choice exports of --records documents each (a baseline and
a subject whose answers differ on some documents) read, paired (``pair_records``) and certified as the stage
``paired.metric_delta`` certifies a binary metric: the 2×2 table, Tango's interval, the exact McNemar test,
the minimum detectable difference and Tango's non-inferiority test at a margin of 0.01.

At scale (``--scale``, issue 36): each export of --records records is written to a file in --dir (lm-eval
multiple choice, Inspect ``.eval`` and JSON form, promptfoo results shaped as ``promptfoo eval --output`` writes
them: ``tests/core/evidence/promptfoo_export.py``, about 1.2 KB a line), and read from its path in a fresh
process, as ``certa run`` reads an input: the reader, and beside it a floor, the least a streaming Python reader
pays: orjson of each line as the file is read in blocks (JSON Lines), of each member after zstd decompression
(``.eval``), of the document (JSON form). Each process reports its CPU seconds (``time.process_time``) and wall
seconds of the work, best of --repeats, and its peak RSS (``VmHWM``) against the input's size; the RSS after
the imports, before the work, is shown beside it (the interpreter and libraries: about 100 MB). Goals: CPU
<= 2x the floor, peak RSS <= 1.5x the input.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import zstandard

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from certa.engine.core.evidence import (EvidenceRecords, TableMapping, pair_records, read_inspect_eval,  # noqa: E402
                                  read_inspect_json, read_lm_eval_samples, read_mapped_table, read_promptfoo_jsonl)
from certa.engine.core.input_formats import read_input  # noqa: E402
from certa.engine.core.input_limits import InputLimits  # noqa: E402
from certa.engine.core.stats.paired_metric import (mcnemar_exact_test, minimum_detectable_difference,  # noqa: E402
                                             paired_table_from_outcomes, tango_interval, tango_noninferiority_test)
from tests.core.evidence.promptfoo_export import provider as promptfoo_provider  # noqa: E402
from tests.core.evidence.promptfoo_export import result_line  # noqa: E402
from tests.core.evidence.zstd_zip import zstd_zip  # noqa: E402

FIXTURES = ROOT / "tests" / "data" / "evaluators"


def timed(repeats: int, work: Callable[[], object]) -> tuple[float, float]:
    """(best, median) seconds of ``repeats`` runs of ``work``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times), float(np.median(times))


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def lm_eval_lines(task: str, n: int, seed: int = 0) -> bytes:
    """``n`` records shaped as the fixture's first record of ``task``, with doc ids 0..n-1; for a multiple-choice
    task, ``acc`` and ``acc_norm`` drawn per document (70 % correct) from ``seed``."""
    return b"".join(lm_eval_records(task, n, seed))


def lm_eval_records(task: str, n: int, seed: int = 0) -> Iterator[bytes]:
    """The lines of ``lm_eval_lines``, one at a time."""
    (path,) = (FIXTURES / "lm_eval" / "baseline").glob(f"samples_{task}_*.jsonl")
    template = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    correct = np.random.default_rng(seed).random((n, 2)) < 0.7
    for doc_id in range(n):
        template.update(doc_id=doc_id, doc_hash=digest(f"d{doc_id}"), prompt_hash=digest(f"p{doc_id}"))
        if "acc" in template:
            template.update(acc=float(correct[doc_id, 0]), acc_norm=float(correct[doc_id, 1]))
        yield json.dumps(template, ensure_ascii=False).encode() + b"\n"


def inspect_samples(n: int) -> tuple[dict, list[dict]]:
    """The fixture's JSON log without samples, and ``n`` copies of its first sample with ids 0..n-1, without the
    sample's ``events`` (the transcript: 8 of its 9 KB, which the readers skip)."""
    log = json.loads(gzip.decompress((FIXTURES / "inspect" / "baseline.json.gz").read_bytes()))
    template = {key: value for key, value in log.pop("samples")[0].items() if key != "events"}
    log["results"]["total_samples"] = log["results"]["completed_samples"] = n  # reconciled with the samples read
    return log, [{**template, "id": f"s{i}", "epoch": 1} for i in range(n)]


def promptfoo_lines(n: int) -> Iterator[bytes]:
    """``n`` results of one provider as ``promptfoo eval --output results.jsonl`` writes them (about 1.2 KB each),
    one line at a time."""
    chosen = promptfoo_provider("openai:gpt-4o-mini", "small")
    for i in range(n):
        yield json.dumps(result_line(provider_=chosen, template="Answer the question: {{question}}", label=None,
                                     question=f"What is {i} + 1?", answer=str(i + 1), passed=i % 3 > 0, test_idx=i,
                                     prompt_idx=0), separators=(",", ":")).encode() + b"\n"


SCALE_FORMATS = {"lm-eval": "samples_certa_mc.jsonl", "Inspect .eval": "log.eval", "Inspect JSON": "log.json",
                 "promptfoo": "results.jsonl"}
"""The exports measured at scale and their file names."""


def write_scale_exports(n: int, folder: Path, only: str) -> dict[str, Path]:
    """The exports of ``--scale`` written to ``folder`` (one at a time: never two in memory)."""
    paths = {}
    for label, file_name in SCALE_FORMATS.items():
        if only not in label:
            continue
        path = paths[label] = folder / f"{n}_{file_name}"
        if path.exists():
            continue
        if label in ("lm-eval", "promptfoo"):
            with path.open("wb") as file:  # line by line: a 2x10^6-record export is never held
                file.writelines(lm_eval_records("certa_mc", n) if label == "lm-eval" else promptfoo_lines(n))
            continue
        log, samples = inspect_samples(n)
        if label == "Inspect JSON":
            data = json.dumps({**log, "samples": samples}).encode()
        else:
            data = zstd_zip({"header.json": json.dumps(log).encode(),
                             **{f"samples/{s['id']}_epoch_1.json": json.dumps(s).encode() for s in samples}})
        del samples
        path.write_bytes(data)
        del data
    return paths


def read_export(label: str, path: Path) -> None:
    """The reader of ``label`` on the file ``path``, within limits that admit it (the limits are not measured)."""
    limits = InputLimits(bytes=1 << 40, text_bytes=1 << 40)
    if label == "lm-eval":
        read_lm_eval_samples(path, limits=limits)
    elif label == "Inspect .eval":
        read_inspect_eval(path, limits=limits)
    elif label == "Inspect JSON":
        read_inspect_json(path, limits=limits)
    else:
        read_promptfoo_jsonl(path, limits=limits)


def floor_export(label: str, path: Path) -> None:
    """The floor of ``label``: orjson of what the file holds, streamed where the format allows (module docstring)."""
    import orjson

    if label == "Inspect JSON":
        orjson.loads(path.read_bytes())
    elif label == "Inspect .eval":
        raw = path.read_bytes()
        archive, dctx = zipfile.ZipFile(io.BytesIO(raw)), zstandard.ZstdDecompressor()
        for info in archive.infolist():
            start = info.header_offset + 30 + len(info.filename.encode())
            orjson.loads(dctx.decompress(raw[start:start + info.compress_size], max_output_size=info.file_size))
    else:
        with path.open("rb") as file:
            rest = b""
            while block := file.read(1 << 24):
                lines = (rest + block).split(b"\n")
                rest = lines.pop()
                for line in lines:
                    orjson.loads(line)
            if rest.strip():
                orjson.loads(rest)


def measured_child(kind: str, label: str, path: str) -> None:
    """In a fresh process: the work's CPU and wall seconds, and the RSS before it and at the peak, as JSON."""
    with open("/proc/self/statm") as statm:
        before = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    work = read_export if kind == "reader" else floor_export
    cpu, wall = time.process_time(), time.perf_counter()
    work(label, Path(path))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    with open("/proc/self/status") as status:  # VmHWM: this process's own peak (ru_maxrss keeps the parent's)
        peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
    print(json.dumps({"cpu": cpu, "wall": wall, "before": before, "peak": peak}))


def scale(n: int, repeats: int, folder: Path, only: str) -> None:
    """The ``--scale`` table (module docstring)."""
    paths = write_scale_exports(n, folder, only)
    print(f"{n:,} records per export, best of {repeats} fresh processes; {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'export':14} {'MB':>7} {'reader CPU s':>12} {'wall s':>7} {'floor CPU s':>11} {'wall s':>7} {'ratio':>6} "
          f"{'peak MB':>8} {'(imports)':>9} {'peak/input':>10} {'floor peak MB':>13}")
    for label, path in paths.items():
        runs = {kind: [json.loads(subprocess.run([sys.executable, __file__, "--child", kind, label, str(path)],
                                                 check=True, capture_output=True, text=True).stdout)
                       for _ in range(repeats)] for kind in ("reader", "floor")}
        best = {kind: min(results, key=lambda r: r["cpu"]) for kind, results in runs.items()}
        peak = min(r["peak"] for r in runs["reader"])
        size = path.stat().st_size
        print(f"{label:14} {size / 1e6:7.1f} {best['reader']['cpu']:12.2f} {best['reader']['wall']:7.2f} "
              f"{best['floor']['cpu']:11.2f} {best['floor']['wall']:7.2f} "
              f"{best['reader']['cpu'] / best['floor']['cpu']:6.2f} {peak / 1e6:8.0f} "
              f"{best['reader']['before'] / 1e6:9.0f} {peak / size:10.2f} "
              f"{min(r['peak'] for r in runs['floor']) / 1e6:13.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default="", help="only the exports whose label holds this text (no end to end)")
    parser.add_argument("--scale", action="store_true", help="CPU and peak RSS of each reader in a fresh process")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "certa-evidence-bench",
                        help="where --scale writes its exports (kept for the next run)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        measured_child(*args.child)
        return
    n, repeats = args.records, args.repeats
    if args.scale:
        args.dir.mkdir(parents=True, exist_ok=True)
        scale(n, repeats, args.dir, args.only)
        return
    print(f"{n:,} records per export, best and median of {repeats}; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f}")

    ppl, mc = lm_eval_lines("certa_ppl", n), lm_eval_lines("certa_mc", n)
    log, samples = inspect_samples(n)
    json_log = json.dumps({**log, "samples": samples}).encode()
    members = {"header.json": json.dumps(log).encode()}
    members |= {f"samples/{s['id']}_epoch_1.json": json.dumps(s).encode() for s in samples}
    eval_log = zstd_zip(members)
    promptfoo = b"".join(json.dumps({"evalId": "e", "promptIdx": 0, "testIdx": i, "testCase": {"vars": {"q": f"q{i}"}},
                                     "prompt": {"raw": "Answer {{q}}", "label": "p"},
                                     "provider": {"id": "echo", "label": "echo"}, "success": i % 3 > 0,
                                     "score": float(i % 3 > 0), "namedScores": {}, "latencyMs": 3}).encode() + b"\n"
                         for i in range(n))
    rng = np.random.default_rng(0)
    table = pa.table({"item": [f"item-{i}" for i in range(n)], "acc": (rng.random(n) < 0.7).astype(float),
                      "tokens": rng.integers(1, 500, n).astype(float), "slice": [f"s{i % 7}" for i in range(n)]})
    csv_out = io.BytesIO()
    pacsv.write_csv(table, csv_out, pacsv.WriteOptions(quoting_style="none"))
    parquet_out = io.BytesIO()
    pq.write_table(table, parquet_out)
    rows_jsonl = b"".join(json.dumps(row).encode() + b"\n" for row in table.to_pylist())
    mapping = TableMapping(item_id="item", metrics=("acc",), weight="tokens", slice="slice")

    def per_line(raw: bytes) -> Callable[[], object]:
        return lambda: [json.loads(line) for line in raw.splitlines() if line]

    def per_member() -> list:
        archive = zipfile.ZipFile(io.BytesIO(eval_log))
        dctx = zstandard.ZstdDecompressor()
        out = []
        for info in archive.infolist():
            start = info.header_offset + 30 + len(info.filename.encode())
            out.append(json.loads(dctx.decompress(eval_log[start:start + info.compress_size],
                                                  max_output_size=info.file_size)))
        return out

    cases = [
        ("lm-eval samples, perplexity", lambda: read_lm_eval_samples(ppl, name="samples_certa_ppl.jsonl"),
         per_line(ppl), len(ppl)),
        ("lm-eval samples, multiple choice", lambda: read_lm_eval_samples(mc, name="samples_certa_mc.jsonl"),
         per_line(mc), len(mc)),
        ("Inspect .eval (zstd members)", lambda: read_inspect_eval(eval_log, name="log.eval"), per_member,
         len(eval_log)),
        ("Inspect JSON log", lambda: read_inspect_json(json_log, name="log.json"), lambda: json.loads(json_log),
         len(json_log)),
        ("promptfoo JSONL", lambda: read_promptfoo_jsonl(promptfoo, name="r.jsonl"), per_line(promptfoo),
         len(promptfoo)),
        ("table CSV + mapping", lambda: read_mapped_table(csv_out.getvalue(), mapping, fmt="csv", name="t.csv"),
         per_line(rows_jsonl), len(csv_out.getvalue())),
        ("table Parquet + mapping", lambda: read_mapped_table(parquet_out.getvalue(), mapping, fmt="parquet",
                                                              name="t.parquet"), per_line(rows_jsonl),
         len(parquet_out.getvalue())),
        ("table JSON Lines + mapping", lambda: read_mapped_table(rows_jsonl, mapping, fmt="jsonl", name="t.jsonl"),
         per_line(rows_jsonl), len(rows_jsonl)),
    ]
    print(f"{'export':34} {'MB':>6} {'import s (best, median)':>24} {'json.loads s (best, median)':>28} {'ratio':>6}")
    for label, read, reference, size in [case for case in cases if args.only in case[0]]:
        (seconds, seconds_median), (base, base_median) = timed(repeats, read), timed(repeats, reference)
        print(f"{label:34} {size / 1e6:6.1f} {seconds:12.3f} {seconds_median:11.3f} {base:16.3f} {base_median:11.3f} "
              f"{seconds / base:6.2f}")

    if args.only:
        return
    subject_mc = lm_eval_lines("certa_mc", n, seed=1)
    (seconds, seconds_median), (base, base_median) = timed(repeats, lambda: certify(mc, subject_mc, reader)), \
        timed(repeats, lambda: (per_line(mc)(), per_line(subject_mc)()))
    records = "2×10⁵" if n == 100_000 else f"2×{n:,}"
    print(f"import {records} records + pair + certify: {seconds:.3f} s ({'goal < 2 s; ' if n == 100_000 else ''}"
          f"median {seconds_median:.3f} s; json.loads of the same lines {base:.3f} s, median {base_median:.3f} s)")
    seconds, seconds_median = timed(repeats, lambda: certify(mc, subject_mc, stage_input))
    print(f"  the same through the stage's input path (input_formats.read_input: the input's digest and table "
          f"columns too): {seconds:.3f} s (median {seconds_median:.3f} s)")


def reader(name: str, export: bytes) -> EvidenceRecords:
    """An export's records as the reader returns them."""
    return read_lm_eval_samples(export, name=f"samples_certa_mc_{name}.jsonl")


def stage_input(name: str, export: bytes) -> EvidenceRecords:
    """An export's records as ``paired.metric_delta`` gets them: read into the input's table."""
    evidence = read_input(name, export, "lm-eval-samples", limits=InputLimits()).evidence
    assert evidence is not None
    return evidence


def certify(baseline_export: bytes, subject_export: bytes, read: Callable[[str, bytes], EvidenceRecords]) -> float:
    """Read two lm-eval exports with ``read``, pair them and certify ``acc`` as ``paired.metric_delta`` does a
    binary metric (confidence level 0.95, margin 0.01, power 0.8); the interval's lower bound."""
    baseline, subject = read("baseline", baseline_export), read("subject", subject_export)
    paired = pair_records(baseline, subject)
    assert paired.report.complete
    table = paired_table_from_outcomes(paired.subject.metrics["acc"], paired.baseline.metrics["acc"])
    interval = tango_interval(table, 0.95)
    mcnemar_exact_test(table)
    minimum_detectable_difference(table, alpha=0.05, power=0.8)
    tango_noninferiority_test(table, 0.01)
    return float(interval.low)


if __name__ == "__main__":
    main()
