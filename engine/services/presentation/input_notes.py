"""What a certificate says about its inputs beyond their digests, in the words ``certa show`` and the HTML report
both print: the inputs given instead of the spec's paths, the columns no stage read, a model folder's files, a
served model's declaration."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["override_note", "unread_note", "model_files", "endpoint_note"]


def override_note(inputs: Sequence[Mapping[str, Any]]) -> str | None:
    """The sentence that goes beside the spec's description when an input was read from a path given instead of
    the spec's (``inputs[].overridden``), else None: the description was written for the spec's own inputs."""
    names = [str(i["name"]) for i in inputs if i.get("overridden") is True]
    if not names:
        return None
    listed = ", ".join(f"'{name}'" for name in names)
    return (f"Input(s) {listed} were given on the command line (--input NAME=PATH, or NAME=URL for a served model) "
            "instead of the spec's: "
            "the description above was written for the spec's own inputs and may not describe these; their "
            "digests below are what was evaluated.")


def unread_note(item: Mapping[str, Any]) -> str | None:
    """``Input NAME: column(s) no stage read, ...: A, B.`` for an input with ``unread_columns``, else None."""
    columns = item.get("unread_columns")
    if not columns:
        return None
    return (f"Input {item['name']}: column(s) no stage read, which enter no number of this certificate: "
            f"{', '.join(str(c) for c in columns)}.")


def model_files(item: Mapping[str, Any]) -> list[tuple[str, int, str, str]]:
    """A model input's files as (path, size, SHA-256, role) rows, role ``weights`` for the files loaded as its
    weights; empty for any other input (or a certificate before content format 3)."""
    weights = set(item.get("weights") or ())
    return [(str(f["path"]), int(f["size"]), str(f["sha256"]), "weights" if f["path"] in weights else "")
            for f in item.get("files") or ()]


def endpoint_note(item: Mapping[str, Any]) -> str | None:
    """What an endpoint input (``inputs[].endpoint``) names, and what it does not prove, else None."""
    declared = item.get("endpoint")
    if not isinstance(declared, Mapping):
        return None
    client = declared.get("client") or {}
    budget = client.get("max_requests")
    return (f"Input {item['name']} is a served model: the model served as '{declared.get('model')}' at "
            f"{declared.get('url')} (client: timeout {client.get('timeout')} s, {client.get('retries')} retries, "
            f"{client.get('concurrency')} requests at once, "
            f"{'no request budget' if budget is None else f'at most {budget} requests'}). This is what certa asked, "
            "not proof of what answered: a served model's weights cannot be hashed from outside, and what the server "
            "says about itself (its name, version, fingerprint) is a claim; the transcripts of every request and "
            "response are the evidence.")
