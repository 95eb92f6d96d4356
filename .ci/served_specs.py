"""CI: which of the run specs given score a served model, one path a line (an input declared with ``endpoint:``).

    python3 .ci/served_specs.py specs/*/spec.yaml

Those need their server: the scripts that run every example (``.ci/wheel_examples.sh``, ``tests/golden/record.sh``)
skip them, and ``tests/served/test_served_examples.py`` runs them against the test server. Needs PyYAML (a
dependency of certa), so any Python with certa installed runs it.
"""

from __future__ import annotations

import sys

import yaml


def serves(path: str) -> bool:
    """Whether the spec at ``path`` declares an input with ``endpoint:``."""
    with open(path, encoding="utf-8") as spec:
        inputs = (yaml.safe_load(spec) or {}).get("inputs") or {}
    return any(isinstance(entry, dict) and "endpoint" in entry for entry in inputs.values())


if __name__ == "__main__":
    print("\n".join(path for path in sys.argv[1:] if serves(path)))
