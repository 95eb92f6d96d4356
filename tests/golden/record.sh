#!/usr/bin/env bash
# Record the golden ledger of one released certa version, from git history:
#
#     tests/golden/record.sh VERSION COMMIT        e.g.  tests/golden/record.sh 0.1.0 96dfb1b
#
# 1. exports COMMIT's tree (git archive) to /tmp/certa-VERSION;
# 2. makes a venv with the system site packages (/tmp/venv-VERSION), so numpy, scipy, numba, SQLAlchemy, ...
#    are exactly the versions installed on this machine, and installs that tree into it
#    (pip install --no-deps -e); checks that importlib.metadata.version("certa") is VERSION and that
#    certa.cli/engine/ledger are imported from the exported tree (releases before 0.10.0 installed them as
#    top-level cli, engine, ledger: record those with the record.sh of their own commit);
# 3. from inside /tmp/certa-VERSION, with that venv's `certa`, records into the fresh ledger
#    tests/golden/VERSION/ledger.db: `certa run` of each example spec at that commit (paired-ratio,
#    sequential-diff, vendor-bakeoff, conformal-pac, in that order, then any other specs/*/spec.yaml but those
#    of a served model, which need its server: .ci/served_specs.py);
#    exit 0 PASS and 1 FAIL are both fine), `certa verify`, one `certa review latest`, one
#    `certa replay` of the first run (must say REPRODUCED), `certa verify` again;
# 4. makes the ledger one self-contained file: PRAGMA wal_checkpoint(TRUNCATE), journal_mode=DELETE
#    (no ledger.db-wal / -shm left);
# 5. writes tests/golden/VERSION/MANIFEST.json: certa version, commit, sha256 of ledger.db, head
#    (SEQ:HASH from `certa head`), each run (run id, name, verdict, content_sha256, stages) and the machine;
# 6. removes /tmp/certa-VERSION and /tmp/venv-VERSION (also on failure, when a partial ledger is removed
#    too).
#
# It refuses to overwrite an existing tests/golden/VERSION/ledger.db: a golden ledger is never re-recorded.
# Never open a golden ledger.db in place with certa: certa switches a SQLite ledger to WAL mode on open,
# which rewrites the file header. Copy it first.
set -euo pipefail

if [[ $# -ne 2 ]]; then
    echo "usage: $0 VERSION COMMIT   (e.g. $0 0.1.0 96dfb1b)" >&2
    exit 2
fi
VERSION=$1
COMMIT=$2
if [[ ! $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+[A-Za-z0-9.+-]*$ ]]; then
    echo "record.sh: '$VERSION' does not look like a version (e.g. 0.2.0)" >&2
    exit 2
fi

PYTHON=${PYTHON:-python3}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
GOLDEN=$REPO/tests/golden
OUT=$GOLDEN/$VERSION
LEDGER=$OUT/ledger.db
MANIFEST=$OUT/MANIFEST.json
SRC=/tmp/certa-$VERSION
VENV=/tmp/venv-$VERSION
EXAMPLES=(paired-ratio sequential-diff vendor-bakeoff conformal-pac)

log() { printf '\n== %s\n' "$*" >&2; }
die() { echo "record.sh: $*" >&2; exit 1; }

for f in "$LEDGER" "$LEDGER-wal" "$LEDGER-shm" "$LEDGER-journal" "$MANIFEST"; do
    [[ ! -e $f ]] || die "refusing to overwrite $f: golden ledgers are recorded once and never edited"
done
for d in "$SRC" "$VENV"; do
    [[ ! -e $d ]] || die "$d already exists (left by another run?); remove it first"
done
FULL_COMMIT=$(git -C "$REPO" rev-parse --verify --quiet "$COMMIT^{commit}") || die "no commit '$COMMIT' in $REPO"

made_src=0 made_venv=0 made_ledger=0 WORK=""
cleanup() {
    local rc=$?
    cd /
    if [[ $made_src -eq 1 ]]; then rm -rf "$SRC"; fi
    if [[ $made_venv -eq 1 ]]; then rm -rf "$VENV"; fi
    if [[ -n $WORK ]]; then rm -rf "$WORK"; fi
    if [[ $rc -ne 0 && $made_ledger -eq 1 ]]; then
        rm -f "$LEDGER" "$LEDGER-wal" "$LEDGER-shm" "$LEDGER-journal" "$MANIFEST"
        rmdir "$OUT" 2>/dev/null || true
        echo "record.sh: failed (exit $rc); removed the partial $LEDGER" >&2
    fi
    exit $rc
}
trap cleanup EXIT

log "certa $VERSION = commit $FULL_COMMIT: exporting the tree to $SRC"
mkdir "$SRC"
made_src=1
git -C "$REPO" archive --format=tar "$FULL_COMMIT" | tar -x -C "$SRC"

log "venv with system site packages: $VENV"
"$PYTHON" -m venv --system-site-packages "$VENV"
made_venv=1
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps -e "$SRC"
CERTA=$VENV/bin/certa

# The installed version, and the modules the command imports, must be the exported tree's (not another
# editable certa in the system site packages). Checked from / so the current directory cannot mask it.
(cd / && "$VENV/bin/python" - "$VERSION" "$SRC" <<'EOF'
import importlib.metadata as md
import os
import sys

version, src = sys.argv[1], os.path.realpath(sys.argv[2])
installed = md.version("certa")
if installed != version:
    sys.exit(f"record.sh: importlib.metadata.version('certa') is {installed}, expected {version}")
from certa import cli, engine, ledger  # noqa: E402
for module in (cli, engine, ledger):
    path = os.path.realpath(module.__file__)
    if not path.startswith(src + os.sep):
        sys.exit(f"record.sh: {module.__name__} is imported from {path}, not from {src}")
print(f"certa {installed} from {src}")
EOF
)
"$CERTA" --version | grep -qF "version $VERSION" || die "'$CERTA --version' does not say $VERSION"

log "machine"
"$PYTHON" --version
uname -m
MACHINE_JSON=$("$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
import json
import platform
import sys

import numpy as np

simd = np.show_config(mode="dicts").get("SIMD Extensions", {})
print(json.dumps({
    "python": platform.python_version(),
    "numpy": md.version("numpy"),
    "scipy": md.version("scipy"),
    "numba": md.version("numba"),
    "sqlalchemy": md.version("sqlalchemy"),
    "uname_m": platform.machine(),
    "system": platform.system(),
    "numpy_simd": {k: [str(x) for x in v] for k, v in simd.items()},
}, sort_keys=True))
EOF
)
echo "$MACHINE_JSON"

WORK=$(mktemp -d "/tmp/certa-golden-$VERSION.XXXXXX")
cd "$SRC"
unset CERTA_LEDGER
mkdir -p "$OUT"
made_ledger=1

specs=()
for name in "${EXAMPLES[@]}"; do
    if [[ -f specs/$name/spec.yaml ]]; then
        specs+=("specs/$name/spec.yaml")
    else
        echo "note: specs/$name/spec.yaml does not exist at $COMMIT; skipped" >&2
    fi
done
shopt -s nullglob
served=$("$VENV/bin/python" "$REPO/.ci/served_specs.py" specs/*/spec.yaml)
for spec in specs/*/spec.yaml; do
    name=$(basename "$(dirname "$spec")")
    if grep -qxF "$spec" <<<"$served"; then
        echo "note: $spec scores a served model, which needs its server; skipped" >&2
    elif [[ ! " ${EXAMPLES[*]} " =~ " $name " ]]; then specs+=("$spec"); fi
done
shopt -u nullglob
[[ ${#specs[@]} -gt 0 ]] || die "no specs/*/spec.yaml at $COMMIT"

first_run=""
for spec in "${specs[@]}"; do
    log "certa run $spec"
    rc=0
    "$CERTA" run "$spec" --ledger "$LEDGER" || rc=$?
    echo "exit code $rc ($spec)"
    [[ $rc -eq 0 || $rc -eq 1 ]] || die "certa run $spec exited $rc (0 PASS and 1 FAIL are recorded certificates; anything else is not)"
    if [[ -z $first_run ]]; then
        first_run=$("$CERTA" list --json --limit 1 --ledger "$LEDGER" \
                    | "$VENV/bin/python" -c 'import json, sys; print(json.load(sys.stdin)[0]["run_id"])')
    fi
done

log "certa verify"
"$CERTA" verify --ledger "$LEDGER"
log "certa review latest"
"$CERTA" review latest --by golden-corpus --decision comment --note "golden corpus" --ledger "$LEDGER"
log "certa replay $first_run (the first run)"
"$CERTA" replay "$first_run" --ledger "$LEDGER"
log "certa verify"
"$CERTA" verify --ledger "$LEDGER"

# Everything the manifest needs, read by this version's own certa before the file is finalised (any
# later open by certa would switch the file back to WAL mode).
"$CERTA" head --json --ledger "$LEDGER" > "$WORK/head.json"
"$CERTA" list --json --limit 1000000 --ledger "$LEDGER" > "$WORK/runs.json"
mkdir "$WORK/certs"
for run_id in $("$VENV/bin/python" -c 'import json, sys; [print(r["run_id"]) for r in json.load(open(sys.argv[1]))]' "$WORK/runs.json"); do
    "$CERTA" show "$run_id" --json --ledger "$LEDGER" > "$WORK/certs/$run_id.json"
done

log "one self-contained file: wal_checkpoint(TRUNCATE), journal_mode=DELETE"
"$VENV/bin/python" - "$LEDGER" <<'EOF'
import sqlite3
import sys

con = sqlite3.connect(sys.argv[1], isolation_level=None)
busy, wal_frames, checkpointed = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
if busy:
    sys.exit("record.sh: wal_checkpoint(TRUNCATE) was blocked")
mode = con.execute("PRAGMA journal_mode=DELETE").fetchone()[0]
if mode != "delete":
    sys.exit(f"record.sh: journal_mode is {mode}, not delete")
check = con.execute("PRAGMA integrity_check").fetchone()[0]
if check != "ok":
    sys.exit(f"record.sh: integrity_check: {check}")
con.close()
print(f"checkpointed {checkpointed}/{wal_frames} WAL frames; journal_mode={mode}; integrity_check ok")
EOF
leftovers=$(find "$GOLDEN" \( -name '*.db-wal' -o -name '*.db-shm' -o -name '*.db-journal' \) -print)
[[ -z $leftovers ]] || die "left in tests/golden: $leftovers"

log "MANIFEST.json"
"$VENV/bin/python" - "$VERSION" "$FULL_COMMIT" "$LEDGER" "$WORK" "$MANIFEST" "$MACHINE_JSON" <<'EOF'
import hashlib
import json
import sys
from pathlib import Path

version, commit, ledger, work, manifest, machine = sys.argv[1:]
work = Path(work)
digest = hashlib.sha256(Path(ledger).read_bytes()).hexdigest()
head = json.loads((work / "head.json").read_text())["head"]
runs = []
for row in reversed(json.loads((work / "runs.json").read_text())):  # `certa list` is newest first
    cert = json.loads((work / "certs" / f"{row['run_id']}.json").read_text())
    content = cert["content"]
    runs.append({
        "run_id": row["run_id"],
        "name": content["spec"]["name"],
        "verdict": content["verdict"],
        "content_sha256": cert["content_sha256"],
        "stages": [{"id": s["id"], "use": s["use"], "version": s["version"]} for s in content["knobs"]["stages"]],
    })
data = {"certa_version": version, "commit": commit, "ledger_sha256": digest, "head": head, "runs": runs,
        "machine": json.loads(machine)}
Path(manifest).write_text(json.dumps(data, indent=2) + "\n")
print(json.dumps(data, indent=2))
EOF

log "done: $LEDGER ($(stat -c %s "$LEDGER") bytes), $MANIFEST"
