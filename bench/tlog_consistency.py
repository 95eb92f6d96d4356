"""Does a consistency proof stay cheap as the ledger grows? ``certa prove --consistency OLD NEW`` against the
ledger's size.

Usage: python bench/tlog_consistency.py [--entries 10000 1000000] [--repeat 20] [--workdir DIR]

Goal (issue 35, item 4): the proof between two tlog checkpoints reads O(log n) Merkle nodes
(``certa.ledger.merkle_consistency.consistency_nodes``, at most about 2·log2(n)), so building it
(``certa.engine.services.tlog.prove_consistency``, in process: both roots read from ``merkle_nodes`` and checked,
the proof read, verified and put in its document) on 10^6 entries takes about as long as on 10^4: the ratio (the
last line) grows with log n, not n (below 2 for 100 times the entries). Each ledger is built as ``bench/verify_scale.py`` builds its own (10^3 ordinary runs of the tiny spec,
then runs of 10^4 decision entries; kept in ``--workdir`` and reused), then signed as a tlog checkpoint at about
half its size and at its head; each proof is timed best of ``--repeat``, the ledgers in turn, round after round.
``verify_consistency`` (the pure RFC 9162 verifier an auditor runs) is timed on the largest proof.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from certa.engine.services.tlog import prove_consistency  # noqa: E402
from certa.ledger import Ledger  # noqa: E402
from certa.ledger.bundle import ledger_root  # noqa: E402
from certa.ledger.merkle_consistency import consistency_nodes, verify_consistency  # noqa: E402
from certa.ledger.tlog_checkpoint import sign_tlog_checkpoint  # noqa: E402
from timing import best_of  # noqa: E402
from verify_scale import ledger_file  # noqa: E402

ORIGIN = "bench.example/certa"


def checkpoints(db: Path) -> tuple[int, int, bytes, bytes]:
    """(old size, new size, old note, new note): tlog checkpoints of the first half of the ledger and of all of it."""
    key = Ed25519PrivateKey.generate()
    with Ledger.open(db, read_only=True) as ledger:
        new = ledger.head()[0]
        old = new // 2 + 1
        notes = [sign_tlog_checkpoint(ORIGIN, size, ledger_root(ledger, size).hex(), [(ORIGIN, key)]).encode()
                 for size in (old, new)]
    return old, new, notes[0], notes[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="certa-bench-tlog-"))
    work.mkdir(parents=True, exist_ok=True)
    cases = [(db, *checkpoints(db)) for db in (ledger_file(work, entries) for entries in args.entries)]
    best = {db: float("inf") for db, *_ in cases}
    proofs = {}
    for _ in range(args.repeat):
        for db, _old, _new, old_note, new_note in cases:
            with Ledger.open(db, read_only=True) as ledger:
                start = time.perf_counter()
                proofs[db] = prove_consistency(ledger, old_note, new_note).document
                best[db] = min(best[db], time.perf_counter() - start)
    for db, old, new, _, _ in cases:
        print(f"  prove --consistency {old:>9} -> {new:>9} entries: {best[db] * 1000:7.2f} ms best of {args.repeat}, "
              f"{len(consistency_nodes(old, new))} nodes read, {len(proofs[db]['proof'])} hashes in the proof")
    db, old, new, _, _ = cases[-1]
    hashes = [bytes.fromhex(node) for node in proofs[db]["proof"]]
    old_root, new_root = (bytes.fromhex(proofs[db][side]["root_hash"]) for side in ("old", "new"))
    seconds, ok = best_of(args.repeat, lambda: verify_consistency(old, new, old_root, new_root, hashes))
    print(f"  verify_consistency on {new} entries: {seconds * 1e6:.0f} µs best of {args.repeat} (ok={ok})")
    ratio = best[cases[-1][0]] / best[cases[0][0]]
    print(f"  ratio largest/smallest ledger: {ratio:.2f} (goal < 2: {'met' if ratio < 2 else 'NOT MET'}; O(log n) rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
