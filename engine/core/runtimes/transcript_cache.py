"""The answers of an interrupted served run, kept so that the next run of the same endpoint reuses them (resume).

A served run sends many requests; a server killed or a network lost after most of them would otherwise cost them
all again. So every answer a scoring request gets is kept, as it arrives, in a folder of the user's cache named by
the endpoint input's SHA-256 (its declaration: URL, served name, client settings), one file per request, named by
the request's key (the SHA-256 of ``[method, path, body]``) and written atomically. The next run of an input with
the same declaration gives them to its client (``EndpointClient(reuse=...)``), which answers those requests from
them and sends only the others; the run's transcript holds every answer as the server gave it, and its usage counts
``reused``. A run that completes removes the folder (its answers are in the ledger now); so does nothing else.

Only what a scoring request returned is kept (completions, ``/tokenize``, and TGI's ``/generate``), never the
server's identity queries (``/models``, ``/version``, TGI's ``/info``): those are asked again, so the claims are the
current server's. A kept answer is checked on reuse like any other (its key must be its request's, and the readers
check the ids, the model name and each log-prob), but it was given by the server at the time of the interrupted
run: the stage's outputs count the answers reused (``usage.reused``), and a run that must only hold answers of one
sitting removes the folder first.
Keeping is best effort: a cache that cannot be written (a read-only home) keeps nothing and the run goes on.

The folder: ``$CERTA_CACHE_DIR/transcripts/<sha256>`` when ``CERTA_CACHE_DIR`` is set, else ``certa/transcripts``
under ``XDG_CACHE_HOME`` or ``~/.cache`` (the XDG Base Directory Specification's default). A file that cannot be
read as a kept answer is ignored (its request is sent again).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

from certa.engine.core.runtimes.http_client import Exchange, request_key
from certa.engine.foundation.atomic_files import make_folders, write_atomically
from certa.engine.foundation.errors import OutputError

__all__ = ["KEPT_PATHS", "TranscriptCache", "cache_folder"]

KEPT_PATHS = frozenset({"/completions", "/../tokenize", "/generate"})
"""The request paths whose answers are kept (module docstring)."""


def cache_folder() -> Path:
    """The root of certa's transcript cache (module docstring)."""
    root = os.environ.get("CERTA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "certa")
    return Path(root) / "transcripts"


class TranscriptCache:
    """The kept answers of one endpoint input, by its SHA-256 (module docstring)."""

    def __init__(self, sha256: str, root: Path | None = None) -> None:
        self.folder = (root or cache_folder()) / sha256
        self.writable = True

    def load(self) -> list[Exchange]:
        """Every kept answer whose file reads as one and whose key is its request's (others are ignored)."""
        kept = []
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else ():
            try:
                exchange = Exchange(**json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError):
                continue
            if (path.stem == exchange.key and exchange.path in KEPT_PATHS
                    and request_key(exchange.method, exchange.path, exchange.request.encode("utf-8")) == exchange.key):
                kept.append(exchange)
        return kept

    def keep(self, exchange: Exchange) -> None:
        """Keep one answer of a scoring request (another path's is not kept)."""
        if exchange.path not in KEPT_PATHS or not self.writable:
            return
        try:
            make_folders(self.folder)
            write_atomically(self.folder / f"{exchange.key}.json",
                             json.dumps(asdict(exchange), sort_keys=True).encode("utf-8"), private=True,
                             what="a kept answer of a served run")
        except OutputError:  # best effort (module docstring)
            self.writable = False

    def clear(self) -> None:
        """Remove the kept answers (a run that completed has them in its ledger)."""
        shutil.rmtree(self.folder, ignore_errors=True)
