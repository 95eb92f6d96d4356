"""Canonical JSON (RFC 8785, via the ``rfc8785`` package) and the SHA-256 digests built on it.

Every hash certa records (``knobs_hash``, ``content_sha256``, ledger entry hashes) is the SHA-256 of
the RFC 8785 canonical bytes of a JSON value, so that any conforming implementation in any language
reproduces it. RFC 8785 rejects NaN/Infinity and integers beyond ±(2**53 − 1); ``to_jsonable`` maps
numpy scalars and arrays to plain JSON values and encodes non-finite floats as the strings
``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` so that a certificate never fails to serialise.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import rfc8785

__all__ = ["to_jsonable", "canonical_bytes", "canonical_sha256", "sha256_hex"]

_MAX_SAFE_INT = 2**53 - 1


def to_jsonable(value: Any) -> Any:
    """Return ``value`` as plain JSON types (dict, list, str, int, float, bool, None).

    Tuples and numpy arrays become lists, numpy scalars become Python scalars, non-finite floats become
    the strings ``"NaN"``/``"Infinity"``/``"-Infinity"``, integers outside ±(2**53 − 1) become decimal
    strings, and mapping keys must be strings.
    """
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings (got {key!r})")
            out[key] = to_jsonable(item)
        return out
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item) for item in value]
    if isinstance(value, np.ndarray):
        return [to_jsonable(item) for item in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        as_int = int(value)
        return as_int if abs(as_int) <= _MAX_SAFE_INT else str(as_int)
    if isinstance(value, (float, np.floating)):
        as_float = float(value)
        if math.isnan(as_float):
            return "NaN"
        if math.isinf(as_float):
            return "Infinity" if as_float > 0 else "-Infinity"
        return as_float
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"cannot represent {type(value).__name__} in a certificate: {value!r}")


def canonical_bytes(value: Any) -> bytes:
    """RFC 8785 canonical UTF-8 bytes of ``value`` (after ``to_jsonable``)."""
    return rfc8785.dumps(to_jsonable(value))


def sha256_hex(data: bytes) -> str:
    """Lower-case hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def canonical_sha256(value: Any) -> str:
    """SHA-256 (hex) of the RFC 8785 canonical JSON of ``value``."""
    return sha256_hex(canonical_bytes(value))
