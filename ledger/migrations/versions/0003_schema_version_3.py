"""Schema version 3: ``merkle_nodes``, the hash of every complete perfect subtree of the entries' Merkle tree.

Creates ``merkle_nodes(level, position, hash)`` and fills it, in the same transaction, from the entries
already in the ledger: node (level, position) is RFC 6962's MTH of the 2^level leaves from position·2^level
(level 0: SHA-256(0x00 ‖ entry_hash bytes); above: SHA-256(0x01 ‖ left ‖ right)), one row for every such
subtree whose leaves all exist. Sets ``ledger_meta.schema_version`` to ``'3'``. Read-compatible: no row of
``entries``, ``blobs`` or ``runs`` changes, and the chain head stays as it was. The hashing is written out
here (not imported from ``certa.ledger.merkle``) so that this revision stays as released.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

BATCH = 5000

ledger_meta = sa.table("ledger_meta", sa.column("key", sa.String), sa.column("value", sa.Text))
entries = sa.table("entries", sa.column("seq", sa.Integer), sa.column("entry_hash", sa.String))


def _set_schema_version(value: str) -> None:
    op.execute(ledger_meta.update().where(ledger_meta.c.key == "schema_version").values(value=value))


def _nodes(entry_hashes: Iterable[tuple[str]]) -> Iterator[tuple[int, int, str]]:
    """(level, position, hex hash) of every complete perfect subtree, leaf by leaf in chain order: a stack
    holds the complete nodes not yet paired (the tree's right frontier, largest first)."""
    sha256 = hashlib.sha256
    frontier: list[bytes] = []
    for index, (digest,) in enumerate(entry_hashes):
        node = sha256(b"\x00" + bytes.fromhex(digest)).digest()
        level, count = 0, index + 1
        yield 0, index, node.hex()
        while count % 2 == 0:
            node = sha256(b"\x01" + frontier.pop() + node).digest()
            level, count = level + 1, count // 2
            yield level, count - 1, node.hex()
        frontier.append(node)


def upgrade() -> None:
    merkle_nodes = op.create_table(
        "merkle_nodes",
        sa.Column("level", sa.Integer, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("hash", sa.CHAR(64), nullable=False),
        sa.PrimaryKeyConstraint("level", "position", name="pk_merkle_nodes"),
    )
    rows = op.get_bind().execute(sa.select(entries.c.entry_hash).order_by(entries.c.seq)).fetchall()
    batch = []
    for level, position, digest in _nodes(rows):
        batch.append({"level": level, "position": position, "hash": digest})
        if len(batch) == BATCH:
            op.bulk_insert(merkle_nodes, batch)
            batch = []
    if batch:
        op.bulk_insert(merkle_nodes, batch)
    _set_schema_version("3")


def downgrade() -> None:
    op.drop_table("merkle_nodes")
    _set_schema_version("2")
