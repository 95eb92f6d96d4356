"""The foundation: leaf modules every other layer may use, and the only engine code ``ledger`` imports.

``errors`` (the error tree and exit codes), ``canonical`` (RFC 8785 JSON and digests), ``json_read`` (bounded,
exactly typed JSON reading), ``jsondiff`` (field-level differences of two JSON documents), ``signing`` (Ed25519
keys and DSSE envelopes), ``atomic_files`` (every file certa writes). They import nothing of certa but each other.
"""
