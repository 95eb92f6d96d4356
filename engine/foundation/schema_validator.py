"""``jsonschema``'s Draft 2020-12 validator, imported without the string-format libraries certa never uses.

``import jsonschema`` runs ``jsonschema._format``, which imports, when they are installed, one library per string
format it can check (``fqdn``, ``idna``, ``rfc3987``, ``rfc3986_validator``, ``rfc3987_syntax``,
``rfc3339_validator``, ``webcolors``, ``jsonpointer``, ``uri_template``, ``isoduration``, which imports ``arrow``):
the extras ``jsonschema[format]`` and ``jsonschema[format-nongpl]`` (that Jupyter installs) bring them.
``rfc3987_syntax`` builds a Lark grammar as it is imported: 0.8 s of CPU, most of what ``certa show``, ``validate``
and ``verify`` took to start where it is installed. certa never checks formats: its validators are built without
a ``format_checker``, so that ``format`` is an annotation, as Draft 2020-12 specifies by default (JSON Schema
Validation 2020-12, section 7.2.1), and no validation result depends on these libraries.

So, while ``jsonschema`` is imported here, each of those libraries not imported yet is entered in ``sys.modules``
as ``None`` (Python's import system then raises ``ImportError``, which ``jsonschema._format`` expects of a library
not installed: its format checks simply lack that format); the entries are removed afterwards, so that anything
else that imports one of those libraries later gets it. When ``jsonschema`` was imported before (by another
program that embeds certa), it is used as it is.
"""

from __future__ import annotations

import sys

_FORMAT_LIBRARIES = ("fqdn", "idna", "rfc3987", "rfc3986_validator", "rfc3987_syntax", "rfc3339_validator",
                     "webcolors", "jsonpointer", "uri_template", "isoduration")
"""The libraries ``jsonschema._format`` (jsonschema 4.18 to 4.26) imports if it can."""

_held_back = [name for name in _FORMAT_LIBRARIES if name not in sys.modules]
for _name in _held_back:
    sys.modules[_name] = None  # type: ignore[assignment]  # Python's own "not importable" marker
try:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError
finally:
    for _name in _held_back:
        if sys.modules.get(_name, False) is None:
            del sys.modules[_name]

__all__ = ["Draft202012Validator", "ValidationError"]
