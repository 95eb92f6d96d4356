"""The JSON documents certa hands out (certificates, checkpoints, bundles, attestations) as indented text,
written atomically to the file a user names."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from certa.engine.foundation.atomic_files import write_atomically

__all__ = ["document_text", "save_document", "write_certificate"]


def document_text(document: Any) -> str:
    """``document`` as indented JSON with sorted keys (non-ASCII kept), without a final newline."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)


def save_document(document: Any, out_file: Path) -> None:
    """``document_text`` and a newline written to ``out_file``, a new file (never overwritten)."""
    write_atomically(out_file, (document_text(document) + "\n").encode("utf-8"), overwrite=False)


def write_certificate(certificate: Mapping[str, Any], output: Path) -> None:
    """The certificate as indented JSON in ``output``, written atomically (``run -o``, ``export -o``)."""
    write_atomically(output, (json.dumps(certificate, indent=2, sort_keys=True) + "\n").encode("utf-8"),
                     what="the certificate")
