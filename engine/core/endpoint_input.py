"""An endpoint input: a served model named by its server's URL and the name it serves it under.

A spec declares it beside files (``path:``) and model folders (``model:``)::

    inputs:
      served:
        endpoint:
          url: http://127.0.0.1:8000/v1      # the API's base URL
          model: tiny-llama                   # the served model name, sent with every request
          api: openai                         # optional: openai (the default: vLLM's OpenAI-compatible API) or
                                              # tgi (Hugging Face Text Generation Inference's own API)
          api_key_env: SERVED_API_KEY         # optional: the environment variable holding the key
          client: {timeout: 60, retries: 4, concurrency: 4, max_requests: 20000}

Its bytes (what the ledger stores and its SHA-256 identifies) are the RFC 8785 canonical JSON of the declaration
with the schema's defaults filled in: ``{"url", "model", "api_key_env", "client"}``, and ``api`` when it is not
the default ``openai`` (so a declaration written before ``api`` existed keeps its bytes and digest). With ``api:
tgi`` the ``model`` is the model TGI serves (its ``GET /info`` ``model_id``, checked when the runtime opens) and the
URL TGI's root (``certa.engine.core.runtimes.tgi``). The key itself is read from
the environment when a request is sent (``EndpointDeclaration.api_key``) and is never part of the declaration, the
certificate, a transcript, a message or a log: only the variable's name is recorded. A URL holding credentials
(``https://user:secret@host``), a query or a fragment is refused, so nothing secret can enter the record through it.

The declaration binds what certa asked, not what answered: a served model's weights cannot be hashed from
outside, and what the server says about itself (its served name, its ``/v1/models`` entry, its version, a
``system_fingerprint``) is recorded by the stage that queried it as *claims*, kept apart from what certa verified
(the transcripts of every request and response, and the digests of any local reference model).

``certa run --input NAME=URL`` replaces the declared URL (the port of a server started for one run, say): the
certificate then says the input was overridden, as for a file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from certa.engine.core.input_limits import InputLimits
from certa.engine.core.tables import Columns, Table, column_of_cells
from certa.engine.foundation.canonical import canonical_bytes, sha256_hex
from certa.engine.foundation.errors import InputError

__all__ = ["ENDPOINT_FORMAT", "API_OPENAI", "API_TGI", "ENDPOINT_APIS", "EndpointDeclaration", "EndpointFormat", "ClientLimits", "check_url",
           "declaration_bytes", "is_url", "read_declaration"]

ENDPOINT_FORMAT = "endpoint"
"""The format of an endpoint input (its ``Table.fmt``, the certificate's ``inputs[].format``)."""

API_OPENAI = "openai"
"""An OpenAI-compatible server (vLLM's): ``certa.engine.core.runtimes.endpoint``; the default."""
API_TGI = "tgi"
"""Hugging Face Text Generation Inference's own API (``POST /generate``): ``certa.engine.core.runtimes.tgi``."""
ENDPOINT_APIS = (API_OPENAI, API_TGI)
"""The APIs an endpoint declaration may name (``api``)."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def is_url(value: str) -> bool:
    """Whether ``value`` (a command line's ``--input NAME=VALUE``) is a URL rather than a path."""
    return re.match(r"(?i)https?://", value) is not None


def check_url(name: str, url: str) -> str:
    """``url`` when it is an http(s) URL with a host and without credentials, query or fragment; an ``InputError``
    naming input ``name`` otherwise (the URL is not echoed when it holds credentials)."""
    try:
        parts = urlsplit(url)
        port = parts.port  # a port that is not a number raises here
    except ValueError:
        raise InputError(f"input '{name}': the endpoint URL is not a valid URL") from None
    if parts.username is not None or parts.password is not None:
        raise InputError(f"input '{name}': the endpoint URL holds credentials; certa records the URL, so give the "
                         "key in an environment variable named by api_key_env instead")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"input '{name}': the endpoint URL {url!r} is not http:// or https:// with a host")
    if parts.query or parts.fragment:
        raise InputError(f"input '{name}': the endpoint URL {url!r} has a query or fragment; give the API's base "
                         "URL (e.g. http://127.0.0.1:8000/v1)")
    del port
    return url.rstrip("/")


@dataclass(frozen=True)
class ClientLimits:
    """How the client talks to the endpoint: seconds a connection or read may take, retries of a failed request
    (network errors, 429 and 5xx), requests in flight, and the most requests a run may send (None: no budget)."""

    timeout: float = 60.0
    retries: int = 4
    concurrency: int = 4
    max_requests: int | None = None


@dataclass(frozen=True)
class EndpointDeclaration:
    """A served model as an input declares it (module docstring)."""

    name: str
    url: str
    model: str
    api_key_env: str | None = None
    client: ClientLimits = field(default_factory=ClientLimits)
    api: str = API_OPENAI

    def record(self) -> dict[str, Any]:
        """The declaration as its bytes and the certificate state it (never the key; ``api`` only when not the
        default)."""
        return {"url": self.url, "model": self.model, "api_key_env": self.api_key_env,
                "client": {"timeout": self.client.timeout, "retries": self.client.retries,
                           "concurrency": self.client.concurrency, "max_requests": self.client.max_requests},
                **({"api": self.api} if self.api != API_OPENAI else {})}

    def api_key(self) -> str | None:
        """The key from the environment variable ``api_key_env`` names (None when it names none); an ``InputError``
        naming the variable, never its value, when it is unset or empty."""
        if self.api_key_env is None:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise InputError(f"input '{self.name}': api_key_env names the environment variable {self.api_key_env}, "
                             "which is not set (or empty) here")
        return value


def declaration_bytes(name: str, entry: Mapping[str, Any], *, url: str | None = None) -> bytes:
    """The input's bytes: the canonical JSON of its ``endpoint:`` declaration (the schema's defaults filled), with
    ``url`` in place of the declared one when given (``--input NAME=URL``); checked as ``read_declaration``."""
    declared = dict(entry)
    if url is not None:
        declared["url"] = url
    declaration = _declaration(name, declared)
    return canonical_bytes(declaration.record())


def _declaration(name: str, value: Any) -> EndpointDeclaration:
    if not isinstance(value, Mapping) or not isinstance(value.get("url"), str) or not isinstance(value.get("model"), str):
        raise InputError(f"input '{name}': an endpoint declaration needs url and model (texts)")
    env = value.get("api_key_env")
    if env is not None and not (isinstance(env, str) and _ENV_NAME.fullmatch(env)):
        raise InputError(f"input '{name}': api_key_env must be an environment variable's name")
    client = value.get("client") or {}
    if not isinstance(client, Mapping):
        raise InputError(f"input '{name}': the endpoint's client settings must be a mapping")
    defaults = ClientLimits()
    try:
        limits = ClientLimits(timeout=float(client.get("timeout", defaults.timeout)),
                              retries=int(client.get("retries", defaults.retries)),
                              concurrency=int(client.get("concurrency", defaults.concurrency)),
                              max_requests=(None if client.get("max_requests") is None
                                            else int(client["max_requests"])))
    except (TypeError, ValueError):
        raise InputError(f"input '{name}': the endpoint's client settings must be numbers") from None
    if not (0 < limits.timeout <= 3600 and 0 <= limits.retries <= 20 and 1 <= limits.concurrency <= 256
            and (limits.max_requests is None or limits.max_requests >= 1)):
        raise InputError(f"input '{name}': the endpoint's client settings are out of range (timeout 0-3600 s, "
                         "retries 0-20, concurrency 1-256, max_requests >= 1)")
    if not value["model"]:
        raise InputError(f"input '{name}': the endpoint's model name is empty")
    api = value.get("api", API_OPENAI)
    if api not in ENDPOINT_APIS:
        raise InputError(f"input '{name}': the endpoint's api must be one of {', '.join(ENDPOINT_APIS)} (got {api!r})")
    return EndpointDeclaration(name=name, url=check_url(name, value["url"]), model=value["model"], api_key_env=env,
                               client=limits, api=api)


def read_declaration(name: str, raw: bytes) -> EndpointDeclaration:
    """The declaration of endpoint input ``name`` from its bytes (``declaration_bytes``); an ``InputError`` when they
    are not one certa wrote."""
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InputError(f"input '{name}': an endpoint input's bytes must be its declaration as JSON") from None
    declaration = _declaration(name, value)
    if canonical_bytes(declaration.record()) != raw:
        raise InputError(f"input '{name}': the endpoint declaration is not in the canonical form certa records")
    return declaration


@dataclass(frozen=True)
class EndpointFormat:
    """An endpoint input: its bytes are its declaration, its table one row (``url``, ``model``)."""

    name: str = ENDPOINT_FORMAT
    read_options: frozenset[str] = frozenset()
    companions: Mapping[str, str] = field(default_factory=dict)

    def read(self, name: str, raw: bytes, *, options: Mapping[str, Any], companions: Mapping[str, bytes],
             limits: InputLimits) -> Table:
        """The declaration ``raw`` (checked) as a one-row table."""
        declaration = read_declaration(name, raw)
        columns = {key: column_of_cells(np.array([value], dtype=object))
                   for key, value in (("url", declaration.url), ("model", declaration.model))}
        return Table(name=name, columns=Columns(columns), sha256=sha256_hex(raw), fmt=self.name, raw=raw)
