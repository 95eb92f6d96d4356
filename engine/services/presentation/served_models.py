"""How every page states a served model: what certa verified (its declaration's digest, the reference tokenizer it
was checked against, its transcript) apart from what its server claims about itself (never shown as verified).

Used by the presentations of ``model.windows`` (1.2.0 on: ``outputs.models.<arm>``) and ``sequential.diff`` (3.1.0
on: ``outputs.source.models.<role>``), whose model descriptions share these keys: ``kind``, ``input``, the input's
digest, ``tokenizer_sha256``, ``tokenizer_of`` and ``tokens_from`` (whose tokens it scored: a local reference's
``tokenizer.json``, or a server's ``/tokenize`` when two served models are compared), ``claims``, and for
``model.windows`` ``transcript`` and ``usage``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from certa.engine.core.value_text import format_value
from certa.engine.services.presentation.html.view import mapping

__all__ = ["claim_rows", "claims_text", "is_served", "tokens_source", "tokens_text"]


def is_served(model: Mapping[str, Any]) -> bool:
    """Whether a model description is a served model's (``kind`` ``endpoint``)."""
    return model.get("kind") == "endpoint"


def claim_rows(model: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A served model's claims as (label, value) rows, each label saying it is the server's claim."""
    return [(f"claimed by the server (not verified): {key.replace('_', ' ')}", value)
            for key, value in sorted(mapping(model.get("claims")).items())]


def claims_text(model: Mapping[str, Any]) -> str:
    """A served model's claims in one sentence, said to be claims."""
    claims = mapping(model.get("claims"))
    stated = "; ".join(f"{key.replace('_', ' ')} {format_value(value)}" for key, value in sorted(claims.items()))
    return (f"Its server claims (not verified: a served model's weights cannot be hashed from outside): "
            f"{stated or 'nothing'}.")


def tokens_source(model: Mapping[str, Any]) -> str:
    """Whose tokens a served model scored, in a few words: ``tokenizer.json of X`` or ``the server of X (its
    /tokenize)``."""
    of = model.get("tokenizer_of")
    return f"the server of {of} (its /tokenize)" if model.get("tokens_from") == "server" else f"tokenizer.json of {of}"


def tokens_text(model: Mapping[str, Any]) -> str:
    """Whose tokens a served model scored and what was checked, in one sentence."""
    if model.get("tokens_from") == "server" and model.get("tokenizer_of") == model.get("input"):
        return ("It scored the tokens of its own server (its /tokenize; no tokenizer file was hashed), which the other "
                "served model's server was checked to reproduce for every text scored.")
    return (f"It scored the tokens of {tokens_source(model)}, which its server was checked to reproduce for every "
            "text scored (POST /tokenize).")
