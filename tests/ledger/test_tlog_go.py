"""certa's tlog checkpoints and RFC 6962 proofs checked by an independent implementation: Go's
golang.org/x/mod/sumdb/note (the signed note, with certa's verifier keys) and sumdb/tlog (tree hashes, consistency
and inclusion proofs), from Debian's golang-go and golang-golang-x-mod-dev packages. tlog_go/main.go is built
offline (GOPATH mode, nothing fetched) into a temporary folder; skipped without the Go toolchain or those sources."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine.foundation.signing import generate_key_pair, load_public_key
from certa.ledger import Ledger
from certa.ledger.merkle import entry_leaves, inclusion_path, perfect_levels, root_hash
from certa.ledger.merkle_consistency import consistency_proof
from certa.ledger.signed_note import verifier_key

from tests.conftest import key_pair_files

pytestmark = pytest.mark.golang

GOCODE = Path("/usr/share/gocode")  # Debian's GOPATH of Go sources
X_MOD = GOCODE / "src" / "golang.org" / "x" / "mod" / "sumdb"
ORIGIN = "example.org/certa/go-check"
SIZE = 37


@pytest.fixture(scope="module")
def certacheck(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go program, built against Debian's x/mod sources without the network."""
    go = shutil.which("go")
    if go is None or not (X_MOD / "note").is_dir() or not (X_MOD / "tlog").is_dir():
        pytest.skip("needs the Go toolchain and Debian's x/mod sources (apt-get install golang-go "
                    "golang-golang-x-mod-dev)")
    gopath = tmp_path_factory.mktemp("gopath")
    source = gopath / "src" / "certacheck"
    source.mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "tlog_go" / "main.go", source / "main.go")
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": f"{gopath}{os.pathsep}{GOCODE}",
           "GOCACHE": str(gopath / "cache"), "GOPROXY": "off", "GOFLAGS": "", "CGO_ENABLED": "0"}
    built = subprocess.run([go, "build", "-o", str(gopath / "certacheck"), "certacheck"], cwd=gopath, env=env,
                           timeout=300, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return gopath / "certacheck"


def _go(program: Path, request: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run([str(program)], input=json.dumps(request).encode(), capture_output=True, timeout=60,
                          check=True)
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A ledger of SIZE entries; ``old.note``, a tlog checkpoint of its first 9 entries, and ``witnessed.note``, one
    of all of them co-signed by a witness ('certa checkpoint --format tlog', 'certa cosign'); the public keys."""
    folder = tmp_path_factory.mktemp("tlog")
    db = folder / "ledger.db"
    keys = {name: load_public_key(key_pair_files(folder, name)[1].read_bytes()) for name in ("log", "witness")}
    checkpoint = ["checkpoint", "--key", str(folder / "log.key"), "--format", "tlog", "--origin", ORIGIN,
                  "--ledger", str(db)]
    runner = CliRunner()
    with Ledger.open(db) as ledger:
        for number in range(SIZE):
            ledger.record_registration(f"reg-{number}", {"number": number})
            if number == 8:
                assert runner.invoke(main, [*checkpoint, "--out", str(folder / "old.note")]).exit_code == 0
        leaves = ledger.entry_hashes(SIZE)
    assert runner.invoke(main, [*checkpoint, "--out", str(folder / "new.note")]).exit_code == 0
    cosigned = runner.invoke(main, ["cosign", str(folder / "new.note"), "--key", str(folder / "witness.key"),
                                    "--key-name", "witness.example", "--public-key", str(folder / "log.pub"),
                                    "--out", str(folder / "witnessed.note"), "--ledger", str(db)])
    assert cosigned.exit_code == 0, cosigned.output
    return {"db": db, "folder": folder, "keys": keys, "leaves": leaves}


def test_go_verifies_the_note_with_certas_verifier_keys(certacheck, log):
    note = (log["folder"] / "witnessed.note").read_text()
    log_key = verifier_key(ORIGIN, log["keys"]["log"])
    witness_key = verifier_key("witness.example", log["keys"]["witness"])
    both = _go(certacheck, {"note": note, "verifier_keys": [log_key, witness_key]})
    assert both["note_error"] == ""
    assert both["signers"] == ["+".join(key.split("+")[:2]) for key in (log_key, witness_key)]
    root = root_hash(entry_leaves(log["leaves"])).hex()
    assert (both["origin"], both["tree_size"], both["root_hash"]) == (ORIGIN, SIZE, root)
    only_log = _go(certacheck, {"note": note, "verifier_keys": [log_key]})
    assert only_log["signers"] == ["+".join(log_key.split("+")[:2])] and only_log["unverified"] == ["witness.example"]
    stranger = verifier_key("witness.example", load_public_key(generate_key_pair()[1]))
    assert "no verifiable signatures" in _go(certacheck, {"note": note, "verifier_keys": [stranger]})["note_error"]
    changed = note.replace(f"\n{SIZE}\n", f"\n{SIZE + 1}\n", 1)
    assert "invalid signature" in _go(certacheck, {"note": changed, "verifier_keys": [log_key]})["note_error"]


def test_go_computes_certas_roots_and_accepts_its_proofs(certacheck, log):
    leaves = entry_leaves(log["leaves"])
    levels = perfect_levels(leaves)
    read = lambda key: levels[key[0]][key[1]]  # noqa: E731
    roots = [root_hash(leaves[:n]).hex() for n in range(1, SIZE + 1)]
    pairs = [(old, new) for new in range(1, SIZE + 1) for old in range(1, new + 1)]
    proofs = [[node.hex() for node in consistency_proof(old, new, read)] for old, new in pairs]
    tampered = [*proofs[-2][:-1], "00" * 32]
    inclusions = [(index, size) for size in (1, 2, 9, 16, 17, SIZE) for index in range(size)]
    answer = _go(certacheck, {
        "leaves": log["leaves"],
        "consistency": [{"old": old, "new": new, "old_root": roots[old - 1], "new_root": roots[new - 1],
                         "proof": proof} for (old, new), proof in zip(pairs, proofs)]
        + [{"old": pairs[-2][0], "new": SIZE, "old_root": roots[pairs[-2][0] - 1], "new_root": roots[-1],
            "proof": tampered}],
        "inclusion": [{"index": index, "size": size, "root": roots[size - 1],
                       "proof": [node.hex() for node in inclusion_path(index, leaves[:size])]}
                      for index, size in inclusions]})
    assert answer["tree_hashes"] == roots
    assert answer["consistency"][:-1] == ["ok"] * len(pairs)
    assert answer["consistency"][-1] != "ok"  # one hash changed
    assert answer["go_proofs"][:-1] == proofs  # the same hashes in the same order as Go's own ProveTree
    assert answer["inclusion"] == ["ok"] * len(inclusions)


def test_go_accepts_the_proof_certa_prove_gives_between_two_notes(certacheck, log):
    folder = log["folder"]
    proved = CliRunner().invoke(main, ["prove", "--consistency", str(folder / "old.note"),
                                       str(folder / "witnessed.note"), "--json", "--ledger", str(log["db"])])
    assert proved.exit_code == 0, proved.output
    proof = json.loads(proved.stdout)
    answer = _go(certacheck, {"leaves": log["leaves"], "consistency": [
        {"old": proof["old"]["tree_size"], "new": proof["new"]["tree_size"], "old_root": proof["old"]["root_hash"],
         "new_root": proof["new"]["root_hash"], "proof": proof["proof"]}]})
    assert (proof["old"]["tree_size"], proof["new"]["tree_size"]) == (9, SIZE)
    assert answer["consistency"] == ["ok"] and answer["go_proofs"] == [proof["proof"]]
