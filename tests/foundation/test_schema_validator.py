"""certa's jsonschema validator is imported without the string-format libraries jsonschema would load, and those
libraries stay importable afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a fresh interpreter: 0.4 s
def test_the_format_libraries_are_not_imported_and_stay_importable(tmp_path: Path) -> None:
    """A stand-in ``rfc3987_syntax`` (the one that costs 0.8 s) and ``webcolors`` on the path: importing the
    validator does not import them, a later ``import`` of each does; and a Draft 2020-12 "format" is not checked
    (an annotation), so no validation result depends on them."""
    for name in ("rfc3987_syntax", "webcolors"):
        (tmp_path / f"{name}.py").write_text("IMPORTED = True\n")
    check = ("import sys\n"
             "from certa.engine.foundation.schema_validator import Draft202012Validator\n"
             "print(sorted(m for m in ('rfc3987_syntax', 'webcolors') if m in sys.modules))\n"
             "import rfc3987_syntax, webcolors\n"
             "print(rfc3987_syntax.IMPORTED and webcolors.IMPORTED)\n"
             "print(Draft202012Validator({'type': 'string', 'format': 'iri'}).is_valid('not an iri'))\n")
    done = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"})
    assert done.stdout.split("\n")[:3] == ["[]", "True", "True"], done.stderr[-2000:]
