"""The adversarial sweep: generated hostile cases, each run through ``certa`` in-process (``CliRunner``), each
checked against the same invariants.

For every case: the exit code is one documented for the command (0-4); ``result.exception`` is None or a
``SystemExit`` (anything else is a traceback); no "Traceback" in stdout or stderr; a refusal prints exactly
one ``error:`` line on stderr (or a documented NOT VERIFIED / TAMPERED line for the verify commands); no
``*.certa-tmp`` file nor partial output is left; after a refusal the ledger's committed runs are all still
there (``certa verify`` intact, run count unchanged).

Categories, one parametrised test each (failures name the case):
1. byte flips in a real bundle, checkpoint and attestation;
2. type swaps in the fields of those documents (and inside their signed payloads);
3. ledger cells changed by SQLite UPDATEs (value or storage type): ``verify`` must say tampered;
4. hostile ``--input`` files for ``certa run``: exit 2, one line, no ledger created;
5. bad environments: ``--ledger`` values, unwritable ``-o`` targets, a read-only ledger.

More categories live beside this file: SIGKILLs of real ``certa`` processes (test_kills.py), a real full disk
(test_full_disk.py), PostgreSQL ledgers (test_postgres_sweep.py), hostile model folders (test_model_folders.py),
index tables and recorded verification state (test_index_tables.py), hostile evaluator exports
(test_exports.py) and ``certa batch`` over specs of every input kind (test_batch_inputs.py). The shared machinery is conftest.py;
test_zz_summary.py, collected last, prints the counts (``python3 -m pytest tests/adversarial -q -s``) and
asserts that tracebacks, lost runs and partial files are all 0.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import sqlite3
import stat
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import rfc8785

from tests.conftest import columns_to_csv_bytes, read_only_folder, window_columns
from .conftest import World, check, doc_command, invoke, run_count

pytestmark = pytest.mark.adversarial

# -------------------------------------------------------------------------- 1-2: the signed documents


def _canonical(data: bytes) -> bytes | None:
    try:
        return rfc8785.dumps(json.loads(data))
    except Exception:  # noqa: BLE001 - not JSON any more
        return None


FLIPS_PER_DOC = {"head.checkpoint": 40, "bundle.json": 70, "attestation.json": 60}
FLIP_CASES = [(doc, i) for doc, n in FLIPS_PER_DOC.items() for i in range(n)]


@pytest.mark.parametrize(("doc", "i"), FLIP_CASES, ids=[f"{d}-{i}" for d, i in FLIP_CASES])
def test_byte_flip(doc: str, i: int, world: World, tmp_path: Path) -> None:
    original = (world.folder / doc).read_bytes()
    n = FLIPS_PER_DOC[doc]
    position = (i * (len(original) - 1)) // (n - 1)  # spread evenly, first and last byte included
    mask = (0x01, 0x80, 0x20, 0xFF)[i % 4]
    flipped = bytearray(original)
    flipped[position] ^= mask
    path = tmp_path / doc
    path.write_bytes(bytes(flipped))
    result = doc_command(world, doc, path)
    same = _canonical(bytes(flipped)) is not None and _canonical(bytes(flipped)) == _canonical(original)
    check(f"{doc} byte {position} ^ {mask:#04x}", result, allowed={0, 1, 2} if same else {1, 2},
          folders=(tmp_path, world.folder), verify_command=True, ledger=world.ledger, runs=world.runs)


def _leaves(value: object, path: tuple = ()) -> Iterator[tuple[tuple, object]]:
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for j, v in enumerate(value[:3]):
            yield from _leaves(v, (*path, j))


def _swaps(value: object) -> list[str]:
    if isinstance(value, bool):
        return ["int", "null"]
    if isinstance(value, int):
        return ["float", "bool", "string", "null"]
    if isinstance(value, float):
        return ["int", "string", "null"]
    if isinstance(value, str):
        return ["int", "null", "list"]
    if isinstance(value, dict):
        return ["list", "null"]
    if isinstance(value, list):
        return ["object", "null"]
    return ["int", "string"]


def _swapped(value: object, to: str) -> object:
    return {"float": lambda v: float(v) + 0.5 if isinstance(v, int) and v == 0 else float(v),
            "bool": lambda v: bool(v), "string": lambda v: str(v), "null": lambda v: None,
            "int": lambda v: 7 if not isinstance(v, (int, float)) else int(v) + (0 if isinstance(v, float) else 1),
            "list": lambda v: [v] if not isinstance(v, dict) else list(v.values()),
            "object": lambda v: {str(j): x for j, x in enumerate(v)}}[to](value)


def _set(doc: object, path: tuple, value: object) -> object:
    if not path:
        return value
    doc = copy.deepcopy(doc)
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return doc


def _type_cases() -> list[tuple[str, str, tuple, str]]:
    """(document, where, path, swap): where is "doc" (the JSON file) or "payload" (inside the base64 signed
    payload of an envelope, re-encoded). Built from the real documents' shapes recorded in SHAPES below."""
    cases = []
    for doc, where, paths in SHAPES:
        for path, kind in paths:
            for to in _swaps(kind):
                cases.append((doc, where, path, to))
    return cases


def _shape_of(sample: object, *, every: int = 1) -> list[tuple[tuple, object]]:
    items = list(_leaves(sample))
    return [item for j, item in enumerate(items) if j % every == 0 or len(item[0]) <= 2]


def _sample_documents() -> list[tuple[str, str, list[tuple[tuple, object]]]]:
    """The shapes of a checkpoint, a bundle and an attestation (the paths swapped and a value of each path's
    type), written by hand from the formats so that the cases are known at collection time without recording a
    ledger; every path exists in the real documents (a case whose path did not would error, not pass)."""
    sig = [{"keyid": "k", "sig": "s"}]
    envelope = {"payload": "p", "payloadType": "t", "signatures": sig}
    checkpoint_payload = {"certa_checkpoint": 1, "entry_hash": "h", "root_hash": "r", "seq": 11, "signed_at": "t"}
    bundle = {"certa_bundle": 1, "certificate": {"certificate_format": 2, "content": {
                  "certa_format": 1, "gates": [{"id": "g", "passed": True, "value": 1.5}], "knobs_hash": "h",
                  "seed": {"root": "7"}, "spec": {"name": "n", "sha256": "h"}},
                  "content_sha256": "h", "issued": {}, "results_sha256": "h"},
              "checkpoint": envelope,
              "entry": {"kind": "certificate", "payload_sha256": "h", "prev_hash": "h", "recorded_at": "t",
                        "run_id": "r", "seq": 11},
              "inclusion": {"leaf_index": 10, "path": ["h", "h"], "tree_size": 11}}
    statement = {"_type": "t", "predicate": {"certificate_format": 2, "content": {"certa_format": 1},
                 "content_sha256": "h", "issued": {}, "results_sha256": "h"}, "predicateType": "t",
                 "subject": [{"digest": {"sha256": "h"}, "name": "spec:n"}]}
    return [("head.checkpoint", "doc", _shape_of(envelope)),
            ("head.checkpoint", "payload", _shape_of(checkpoint_payload)),
            ("bundle.json", "doc", _shape_of(bundle)),
            ("attestation.json", "doc", _shape_of(envelope)),
            ("attestation.json", "payload", _shape_of(statement))]


SHAPES = _sample_documents()
TYPE_CASES = _type_cases()


def _path_exists(doc: object, path: tuple) -> object:
    target = doc
    for part in path:
        target = target[part]
    return target


@pytest.mark.parametrize(("doc", "where", "path", "to"), TYPE_CASES,
                         ids=[f"{d}-{w}-{'/'.join(map(str, p)) or 'root'}-{t}" for d, w, p, t in TYPE_CASES])
def test_type_swap(doc: str, where: str, path: tuple, to: str, world: World, tmp_path: Path) -> None:
    original = json.loads((world.folder / doc).read_bytes())
    if where == "doc":
        value = _path_exists(original, path)
        mutated = _set(original, path, _swapped(value, to))
    else:
        payload = json.loads(base64.b64decode(original["payload"]))
        value = _path_exists(payload, path)
        new_payload = _set(payload, path, _swapped(value, to))
        mutated = dict(original, payload=base64.b64encode(json.dumps(new_payload).encode()).decode())
    path_out = tmp_path / doc
    path_out.write_text(json.dumps(mutated, indent=2), encoding="utf-8")
    same = rfc8785.dumps(mutated) == rfc8785.dumps(original)
    result = doc_command(world, doc, path_out)
    check(f"{doc} {where} {'/'.join(map(str, path)) or '(root)'} -> {to}", result,
          allowed={0, 1, 2} if same else {1, 2}, folders=(tmp_path, world.folder), verify_command=True,
          ledger=world.ledger, runs=world.runs)


# ------------------------------------------------------------------------------------------ 3: ledger cells

LEDGER_COLUMNS = {
    "entries": ["seq", "run_id", "kind", "recorded_at", "payload", "payload_sha256", "prev_hash", "entry_hash"],
    "blobs": ["sha256", "size", "content"],
    "runs": ["run_id", "name", "status", "verdict", "profile", "seed", "knobs_hash", "spec_sha256",
             "certificate_sha256", "recorded_at", "first_seq", "last_seq"],
}
ROW_OF = {"entries": "seq = 5", "blobs": "rowid = (SELECT min(rowid) FROM blobs)",
          "runs": "rowid = (SELECT max(rowid) FROM runs)"}
CELL_CHANGES = {  # name: SQL expression of the old value (x)
    "value": "CASE typeof(x) WHEN 'integer' THEN x + 1 WHEN 'real' THEN x + 0.5 "
             "WHEN 'blob' THEN x || X'00' ELSE x || '0' END",
    "text": "CAST(x AS TEXT) || ' '",
    "integer": "7",
    "real": "2.5",
    "blob": "CAST(x AS BLOB)",
    "null": "NULL",
}
CELL_CASES = [pytest.param(t, c, k, id=f"{t}.{c}-{k}") for t, cols in LEDGER_COLUMNS.items() for c in cols for k in CELL_CHANGES]


@pytest.mark.parametrize(("table", "column", "change"), CELL_CASES)
def test_ledger_cell(table: str, column: str, change: str, world: World, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    shutil.copyfile(world.ledger, db)
    conn = sqlite3.connect(db)
    where = ROW_OF[table]
    select = f'SELECT typeof("{column}"), "{column}" FROM {table} WHERE {where}'
    before = conn.execute(select).fetchone()
    try:
        with conn:
            new_value = CELL_CHANGES[change].replace("x", f'"{column}"')
            conn.execute(f'UPDATE {table} SET "{column}" = {new_value} WHERE {where}')
    except sqlite3.IntegrityError:  # NOT NULL, CHECK, UNIQUE: the database refused the edit itself
        pass
    after = conn.execute(select).fetchone()
    conn.close()
    changed = after != before
    case = f"{table}.{column} {change}: {before[0]} -> {after[0]}"
    failures = []
    for command in (("verify",), ("list",), ("show", "latest"), ("head",)):
        result = invoke(*command, "--ledger", db)
        try:
            if command == ("verify",):
                check(f"verify after {case}", result, allowed={1} if changed else {0}, folders=(tmp_path,),
                      verify_command=True)
            else:
                check(f"{' '.join(command)} after {case}", result, allowed={0, 1, 2}, folders=(tmp_path,))
        except AssertionError as failure:
            failures.append(str(failure).split("\n")[0])
    assert not failures, "\n".join(failures)


# -------------------------------------------------------------------------------------- 4: hostile inputs


def _huge_cell_csv() -> bytes:
    base, _ = window_columns(3, seed=3)
    text = columns_to_csv_bytes(base).decode()
    header, first, *rest = text.splitlines()
    return "\n".join([header, "w" + "x" * (2 << 20) + first[first.index(","):], *rest]).encode() + b"\n"


def _jsonl_windows(ids_of) -> bytes:  # type: ignore[no-untyped-def]
    """Five windows as JSON Lines, their ids (as JSON text, escapes allowed) from ``ids_of(ids)``."""
    base, _ = window_columns(5, seed=3)
    ids = ids_of([json.dumps(i)[1:-1] for i in base["window_id"]])
    return "".join(f'{{"window_id": "{i}", "tokens": {t}, "mean_nll": {m}}}\n'
                   for i, t, m in zip(ids, base["tokens"], base["mean_nll"])).encode()


def _csv_with(mutate) -> bytes:  # type: ignore[no-untyped-def]
    base, _ = window_columns(5, seed=3)
    return mutate(columns_to_csv_bytes(base))


HOSTILE_INPUTS = {  # name: (file name, how to make it in a folder)
    "dev-zero": ("zero.csv", lambda folder: Path("/dev/zero")),
    "dev-null": ("null.csv", lambda folder: Path("/dev/null")),
    "fifo": ("pipe.csv", lambda folder: _fifo(folder / "pipe.csv")),
    "folder": ("dir.csv", lambda folder: _mkdir(folder / "dir.csv")),
    "missing": ("missing.csv", lambda folder: folder / "missing.csv"),
    "empty": ("empty.csv", None),
    "non-utf8": ("latin.csv", lambda folder: _write(folder / "latin.csv", _csv_with(
        lambda b: b.replace(b"w0", b"\xff\xfe", 1)))),
    "nul-in-number": ("nul.csv", lambda folder: _write(folder / "nul.csv", _csv_with(
        lambda b: b.replace(b",427,", b",4\x0027,", 1)))),
    "nul-ends-number": ("nul2.csv", lambda folder: _write(folder / "nul2.csv", _csv_with(
        lambda b: b[:-1] + b"\x00\n"))),
    "nul-in-id": ("nul3.csv", lambda folder: _write(folder / "nul3.csv", _csv_with(
        lambda b: b.replace(b"w00000", b"w\x0000000", 1)))),
    "only-nul": ("nuls.csv", lambda folder: _write(folder / "nuls.csv", b"\x00" * 4096)),
    "huge-cell": ("huge.csv", lambda folder: _write(folder / "huge.csv", _huge_cell_csv())),
    "header-only": ("header.csv", lambda folder: _write(folder / "header.csv", b"window_id,tokens,mean_nll\n")),
    "ragged-row": ("ragged.csv", lambda folder: _write(folder / "ragged.csv", _csv_with(
        lambda b: b + b"w9,1,2,3,4\n"))),
    "bom-only": ("bom.csv", lambda folder: _write(folder / "bom.csv", b"\xef\xbb\xbf")),
    "jsonl-5000-digits": ("big.jsonl", lambda folder: _write(folder / "big.jsonl", (
        '{"window_id": "w0", "tokens": ' + "9" * 5000 + ', "mean_nll": 2.5}\n').encode())),
    "jsonl-deep": ("deep.jsonl", lambda folder: _write(folder / "deep.jsonl", (
        '{"window_id": ' + "[" * 5000 + "]" * 5000 + ', "tokens": 1, "mean_nll": 2.5}\n').encode())),
    "jsonl-not-object": ("list.jsonl", lambda folder: _write(folder / "list.jsonl", b"[1, 2, 3]\n")),
    "jsonl-nan": ("nan.jsonl", lambda folder: _write(folder / "nan.jsonl",
                                                     b'{"window_id": "w0", "tokens": NaN, "mean_nll": Infinity}\n')),
    "jsonl-truncated": ("cut.jsonl", lambda folder: _write(folder / "cut.jsonl", b'{"window_id": "w0", "tok')),
    "jsonl-lone-surrogate-id": ("surrogate.jsonl", lambda folder: _write(folder / "surrogate.jsonl", _jsonl_windows(
        lambda ids: ["w00001\\ud800", *ids[1:]]))),
    "jsonl-dup-keys": ("dup.jsonl", lambda folder: _write(
        folder / "dup.jsonl", b'{"window_id": "w0", "window_id": 1, "tokens": 1, "mean_nll": 2}\n')),
    "parquet-garbage": ("junk.parquet", lambda folder: _write(
        folder / "junk.parquet", b"PAR1" + b"\x00" * 64 + b"PAR1")),
    "parquet-truncated": ("cut.parquet", lambda folder: _write(folder / "cut.parquet", b"PAR1\x15\x00")),
    "unknown-suffix": ("table.xlsx", lambda folder: _write(folder / "table.xlsx", b"PK\x03\x04")),
}
HOSTILE_DATA = {"nul-in-id"}
"""Cases certa reads as data (a NUL byte inside a text cell is a character of a window id, tables.py): the run
goes ahead (exit 0 or 1, recorded in its own new ledger) or is refused (2); the invariants still hold."""
HOSTILE_CASES = [(kind, which) for kind in HOSTILE_INPUTS for which in ("baseline", "subject")]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


def _fifo(path: Path) -> Path:
    """A FIFO, with a guard: should certa open it for reading, a writer opens it within 5 s and closes it, so a
    blocked read ends (the case then fails on its result rather than hanging the sweep)."""
    os.mkfifo(path)

    def unblock() -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and path.exists():
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                return
            except OSError:
                time.sleep(0.05)

    threading.Thread(target=unblock, daemon=True).start()
    return path


@pytest.mark.parametrize(("kind", "which"), HOSTILE_CASES, ids=[f"{k}-{w}" for k, w in HOSTILE_CASES])
def test_hostile_input(kind: str, which: str, world: World, tmp_path: Path) -> None:
    name, make = HOSTILE_INPUTS[kind]
    source = make(tmp_path) if make else _write(tmp_path / name, b"")
    db, cert = tmp_path / "new-ledger.db", tmp_path / "cert.json"
    started = time.monotonic()
    result = invoke("run", world.spec, "--input", f"{which}={source}", "--ledger", db, "-o", cert,
                     env={"CERTA_INPUT_LIMITS": "cell_bytes=1MiB"})
    assert time.monotonic() - started < 4, f"{kind}: certa blocked on the input"
    if kind in HOSTILE_DATA:
        check(f"run --input {which}={kind}", result, allowed={0, 1, 2}, folders=(tmp_path,), verdict_command=True,
              no_files=() if result.exit_code in (0, 1) else (db, cert))
        return
    check(f"run --input {which}={kind}", result, allowed={2}, folders=(tmp_path,),
          no_files=(db, Path(f"{db}-wal"), Path(f"{db}-journal"), cert))


# ------------------------------------------------------------------------------------ 5: bad environments


BAD_LEDGERS = {
    "pg-colons": "postgresql+psycopg://:::",
    "pg-port-x": "postgresql+psycopg://user@localhost:x/db",
    "pg-no-driver": "postgresql+nodriver://localhost/db",
    "unknown-scheme": "mongodb://localhost/db",
    "sqlite-missing-folder": "sqlite:////nonexistent/x.db",
    "missing-parent": "{tmp}/no/such/folder/ledger.db",
    "folder": "{tmp}",
    "dev-null": "/dev/null",
    "not-a-database": "{tmp}/garbage.db",
    "empty-string": "",
    "nul-in-path": "{tmp}/a\x00b.db",
}
LEDGER_COMMANDS = {  # command: extra arguments (ids resolved against the world)
    "list": (), "head": (), "verify": (), "show": ("latest",), "run": ("{spec}",), "migrate": (),
}
BAD_LEDGER_CASES = [pytest.param(b, c, id=f"{b}-{c}") for b in BAD_LEDGERS for c in LEDGER_COMMANDS]


@pytest.mark.parametrize(("bad", "command"), BAD_LEDGER_CASES)
def test_bad_ledger(bad: str, command: str, world: World, tmp_path: Path) -> None:
    (tmp_path / "garbage.db").write_bytes(b"this is not SQLite\n" * 100)
    garbage = (tmp_path / "garbage.db").read_bytes()
    location = BAD_LEDGERS[bad].format(tmp=tmp_path)
    args = [a.format(spec=world.spec) for a in LEDGER_COMMANDS[command]]
    before = sorted(p.name for p in tmp_path.iterdir())
    result = invoke(command, *args, "--ledger", location)
    check(f"{command} --ledger {location!r}", result, allowed={2}, folders=(tmp_path,),
          verify_command=command == "verify")
    assert sorted(p.name for p in tmp_path.iterdir()) == before, f"{command} --ledger {location!r} created files"
    assert (tmp_path / "garbage.db").read_bytes() == garbage
    assert not Path("/nonexistent").exists()


OUTPUT_COMMANDS = {  # command: arguments before the output option
    "prove": ("prove", "latest", "--checkpoint", "{cp}", "-o"),
    "attest": ("attest", "latest", "--key", "{key}", "-o"),
    "checkpoint": ("checkpoint", "--key", "{key}", "--out"),
    "export": ("export", "latest", "-o"),
    "report": ("report", "latest", "-o"),
    "keygen": ("keygen", "--out-dir"),
}
BAD_TARGETS = {
    "missing-folder": "{tmp}/no/such/folder/out.json",
    "a-folder": "{tmp}/folder",
    "under-a-file": "{tmp}/plain-file/out.json",
    "full-device": "{tmp}/full",  # a private copy of /dev/full (character device 1,7): never the real one
}
OUTPUT_CASES = [pytest.param(c, t, id=f"{c}-{t}") for c in OUTPUT_COMMANDS for t in BAD_TARGETS
                if not (c == "keygen" and t in ("a-folder", "missing-folder"))]  # keygen creates its --out-dir


@pytest.mark.parametrize(("command", "target"), OUTPUT_CASES)
def test_unwritable_output(command: str, target: str, world: World, tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "plain-file").write_bytes(b"x")
    if target == "full-device":
        try:
            os.mknod(tmp_path / "full", stat.S_IFCHR | 0o666, os.makedev(1, 7))
        except OSError as exc:
            pytest.skip(f"cannot make a character device here: {exc}")
    out = BAD_TARGETS[target].format(tmp=tmp_path)
    args = [a.format(cp=world.checkpoint, key=world.key) for a in OUTPUT_COMMANDS[command]]
    ledger_args = () if command == "keygen" else ("--ledger", world.ledger)
    result = invoke(*args, out, *ledger_args)
    check(f"{command} -> {target}", result, allowed={2}, folders=(tmp_path, world.folder),
          ledger=world.ledger, runs=world.runs)
    assert sorted(p.name for p in (tmp_path / "folder").iterdir()) == []
    assert (tmp_path / "plain-file").read_bytes() == b"x"
    if target == "full-device":
        assert stat.S_ISCHR(os.lstat(tmp_path / "full").st_mode), f"{command} replaced the device with a file"


def test_run_unwritable_output(world: World, tmp_path: Path) -> None:
    """``certa run -o MISSING/cert.json``: refused before the run (2, nothing recorded) or recorded and exit 4
    (one more run); one line either way, and nothing lost."""
    db = tmp_path / "ledger.db"
    shutil.copyfile(world.ledger, db)
    for out_option in ("-o", "--junit"):
        before = run_count(db)
        result = invoke("run", world.spec, out_option, tmp_path / "no" / "folder" / "out", "--ledger", db)
        check(f"run {out_option} into a missing folder", result, allowed={2, 4}, folders=(tmp_path,))
        assert run_count(db) == before + (1 if result.exit_code == 4 else 0)
        assert invoke("verify", "--ledger", db).exit_code == 0


READ_ONLY_WRITES = {
    "run": ("run", "{spec}"),
    "review": ("review", "latest", "--by", "mallory", "--decision", "approved"),
    "review-signed": ("review", "latest", "--by", "mallory", "--decision", "comment", "--key", "{key}"),
    "replay": ("replay", "latest"),
    "migrate": ("migrate",),
}


@pytest.mark.parametrize("command", list(READ_ONLY_WRITES))
def test_read_only_ledger(command: str, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    media = tmp_path / "media"
    media.mkdir()
    shutil.copyfile(world.ledger, media / "ledger.db")
    before = (media / "ledger.db").read_bytes()
    args = [a.format(spec=world.spec, key=world.key) for a in READ_ONLY_WRITES[command]]
    with read_only_folder(media, monkeypatch):
        result = invoke(*args, "--ledger", media / "ledger.db")
    monkeypatch.undo()
    allowed = {0, 2} if command == "migrate" else {2}  # migrate on a current ledger has nothing to write
    check(f"{command} on a read-only ledger", result, allowed=allowed, folders=(tmp_path,))
    assert (media / "ledger.db").read_bytes() == before
    assert sorted(p.name for p in media.iterdir()) == ["ledger.db"]
    assert run_count(media / "ledger.db") == world.runs
