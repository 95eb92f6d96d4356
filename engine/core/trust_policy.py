"""A trust policy: who may approve which runs (``--policy FILE`` on ``certa verify``, ``show``, ``report``, ``site``).

A signed review proves only that *some* key signed it; the name it carries is whatever its signer typed. A
policy says which keys belong to which people, in which roles, and which roles must approve which runs::

    certa_policy: 1
    people:
      - name: Alice Example
        email: alice@example.org
        roles: [model-risk]
        keys:
          - public_key: keys/alice.pub      # a PEM file, relative to the policy file
      - name: Bob Example
        email: bob@example.org
        roles: [compliance, model-risk]
        keys:
          - key_id: 9f86d081884c7d65...    # or the key id (SHA-256 of the raw key)
            not_after: 2026-12-31T23:59:59Z    # optional validity period (RFC 3339), also not_before
    rules:
      - specs: "vendor-*"                  # spec names (shell pattern; default "*")
        profiles: [release]                # default: every profile
        require: {model-risk: 1, compliance: 1}

The file is read as a spec is (``certa.engine.core.spec.read_yaml_document``: ``yaml.safe_load`` semantics, no
aliases, no duplicate keys) and validated against ``schemas/trust-policy.schema.json``; an error names the
file, line, column and key path. A key id may belong to one person only, with one validity period
(``KeyPeriod``: a review counts for a key only if the ledger recorded its entry, at a time the hash chain fixes,
inside the period; not the signing time a reviewer states). ``TrustPolicy.sha256`` is the
SHA-256 of the file's bytes, shown beside every approval decision made with it. The evaluation is
``certa.engine.core.approvals.evaluate_approval``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from certa.schemas import read_schema

from certa.engine.foundation.canonical import sha256_hex
from certa.engine.foundation.errors import SigningError, SpecError

__all__ = ["POLICY_SCHEMA", "KeyPeriod", "Person", "Rule", "TrustPolicy", "load_policy", "parse_policy",
           "rfc3339_time"]

POLICY_SCHEMA = "trust-policy.schema.json"


@dataclass(frozen=True)
class Person:
    """Someone the policy trusts to approve: a name and e-mail (from the policy, never from a review), roles."""

    name: str
    email: str
    roles: tuple[str, ...]

    def label(self) -> str:
        """``Name <e-mail>``."""
        return f"{self.name} <{self.email}>"


def rfc3339_time(text: str) -> datetime:
    """An RFC 3339 date-time (``2026-01-01T00:00:00Z``, ``...+02:00``; ``T``/``Z`` in either case) as an aware
    ``datetime``; ``ValueError`` when it is not one or has no offset."""
    when = datetime.fromisoformat(text.upper())
    if when.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset")
    return when


@dataclass(frozen=True)
class KeyPeriod:
    """When a key of the policy may approve: from ``not_before`` to ``not_after`` (RFC 3339 text as the policy
    writes it; None: open), both ends included."""

    not_before: str | None = None
    not_after: str | None = None

    def problem(self, recorded_at: str) -> str | None:
        """Why a review the ledger recorded at ``recorded_at`` does not count for the key (``key expired on
        NOT_AFTER``, ``key not valid before NOT_BEFORE``), None when it is inside the period."""
        at = rfc3339_time(recorded_at)
        if self.not_after is not None and at > rfc3339_time(self.not_after):
            return f"key expired on {self.not_after}"
        if self.not_before is not None and at < rfc3339_time(self.not_before):
            return f"key not valid before {self.not_before}"
        return None

    def text(self) -> str:
        """``valid from X until Y`` ("" when open at both ends)."""
        return " ".join(part for part in (f"from {self.not_before}" if self.not_before else "",
                                          f"until {self.not_after}" if self.not_after else "") if part)

    def as_json(self) -> dict[str, str | None]:
        return {"not_before": self.not_before, "not_after": self.not_after}


@dataclass(frozen=True)
class Rule:
    """Runs of specs matching ``specs`` (fnmatch, case-sensitive) in ``profiles`` (None: any) need, for each
    role, approvals by that many distinct people holding it (``require``)."""

    specs: str
    profiles: tuple[str, ...] | None
    require: tuple[tuple[str, int], ...]

    def covers(self, name: str, profile: str) -> bool:
        """Whether a run of spec ``name`` under ``profile`` falls under this rule."""
        return fnmatch.fnmatchcase(name, self.specs) and (self.profiles is None or profile in self.profiles)

    def text(self) -> str:
        """The rule's scope in words: ``specs 'vendor-*', profile release``."""
        profiles = f", profile {' or '.join(self.profiles)}" if self.profiles else ""
        return f"specs '{self.specs}'{profiles}"


@dataclass(frozen=True)
class TrustPolicy:
    """A loaded trust policy: key id -> person, the rules, the file it came from and its bytes' SHA-256."""

    source: str
    sha256: str
    people: Mapping[str, Person]
    rules: tuple[Rule, ...]
    text: str = ""
    """The file's text, as read (what a ledger's ``policy`` entry records beside the key ids it resolved to)."""
    periods: Mapping[str, KeyPeriod] = field(default_factory=dict)
    """Key id -> its validity period, for the keys the policy gives one."""
    key_files: Mapping[str, str] = field(default_factory=dict)
    """Each ``public_key`` file as the policy writes it -> the key id it resolved to (its digest does not cover the
    key files, so a ledger's ``policy`` entry records these beside its text)."""

    def key_problem(self, kid: str, recorded_at: str) -> str | None:
        """Why a review recorded at ``recorded_at`` does not count for key ``kid`` (``KeyPeriod.problem``), None
        when it does (no period, or inside it)."""
        period = self.periods.get(kid)
        return None if period is None else period.problem(recorded_at)

    def rules_for(self, name: str, profile: str) -> tuple[Rule, ...]:
        """The rules that apply to a run of spec ``name`` under ``profile``."""
        return tuple(rule for rule in self.rules if rule.covers(name, profile))


def _period(entry: Mapping[str, str], source: str, where: str) -> KeyPeriod:
    period = KeyPeriod(entry.get("not_before"), entry.get("not_after"))
    try:
        ends = [rfc3339_time(text) for text in (period.not_before, period.not_after) if text is not None]
    except ValueError as error:
        raise SpecError(f"not an RFC 3339 date-time: {error}", file=source, path=where) from None
    if len(ends) == 2 and ends[0] > ends[1]:
        raise SpecError(f"not_before {period.not_before} is after not_after {period.not_after}", file=source,
                        path=where)
    return period


def _key_ids(keys: list[Mapping[str, str]], base: Path | None, source: str, where: str,
             key_files: Mapping[str, str] | None) -> list[str]:
    from certa.engine.foundation.signing import key_id, load_public_key  # cryptography: only to read a key file
    found = []
    for j, entry in enumerate(keys):
        if "key_id" in entry:
            found.append(entry["key_id"])
            continue
        if key_files is not None:
            if entry["public_key"] not in key_files:
                raise SpecError(f"the key file {entry['public_key']} was not recorded with the policy",
                                file=source, path=f"{where}.keys[{j}].public_key")
            found.append(key_files[entry["public_key"]])
            continue
        path = Path(entry["public_key"])
        path = path if path.is_absolute() or base is None else base / path
        try:
            found.append(key_id(load_public_key(path.read_bytes())))
        except OSError as error:
            raise SpecError(f"cannot read the public key file {path}: {error.strerror}", file=source,
                            path=f"{where}.keys[{j}].public_key") from None
        except SigningError as error:
            raise SpecError(f"{path}: {error}", file=source, path=f"{where}.keys[{j}].public_key") from None
    return found


def parse_policy(raw: bytes, source: str, *, base_dir: Path | None = None,
                 key_files: Mapping[str, str] | None = None) -> TrustPolicy:
    """The trust policy in ``raw`` (the bytes of a policy file named ``source``; ``public_key`` files relative to
    ``base_dir``, or, for a policy recorded in a ledger, resolved through ``key_files``, file as written -> key
    id, reading no file). ``SpecError`` (file, line, key path) when it is not a valid policy, when a key file
    cannot be read or is not an Ed25519 public key, or when one key is listed for two people."""
    from certa.engine.core.spec import read_yaml_document  # YAML and the spec's reader: when a policy is read

    data: Any = read_yaml_document(raw, source, read_schema(POLICY_SCHEMA))
    people: dict[str, Person] = {}
    periods: dict[str, KeyPeriod] = {}
    files: dict[str, str] = {}
    for i, entry in enumerate(data["people"]):
        person = Person(name=entry["name"], email=entry["email"], roles=tuple(entry["roles"]))
        kids = _key_ids(entry["keys"], base_dir, source, f"people[{i}]", key_files)
        for j, (kid, key) in enumerate(zip(kids, entry["keys"], strict=True)):
            if "public_key" in key:
                files[key["public_key"]] = kid
            other = people.get(kid)
            if other is not None and other != person:
                raise SpecError(f"key {kid[:16]}… is listed for {other.label()} too: a key belongs to one person",
                                file=source, path=f"people[{i}].keys")
            period = _period(key, source, f"people[{i}].keys[{j}]")
            if other is not None and periods.get(kid, KeyPeriod()) != period:
                raise SpecError(f"key {kid[:16]}… is listed twice with different validity periods",
                                file=source, path=f"people[{i}].keys[{j}]")
            people[kid] = person
            if period != KeyPeriod():
                periods[kid] = period
    rules = tuple(Rule(specs=rule.get("specs", "*"),
                       profiles=tuple(rule["profiles"]) if "profiles" in rule else None,
                       require=tuple(sorted(rule["require"].items())))
                  for rule in data["rules"])
    return TrustPolicy(source=source, sha256=sha256_hex(raw), people=people, rules=rules,
                       text=raw.decode("utf-8", "replace"), periods=periods, key_files=files)


def load_policy(path: Path) -> TrustPolicy:
    """The trust policy in the file ``path`` (see ``parse_policy``); ``SpecError`` if it cannot be read."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise SpecError(f"cannot read the trust policy: {error.strerror}", file=str(path)) from None
    return parse_policy(raw, str(path), base_dir=path.resolve().parent)
