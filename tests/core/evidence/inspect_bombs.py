"""Inspect ``.eval`` logs that are small on disk and large decompressed, built from the real fixture logs
(``tests/data/evaluators/inspect``) for the memory tests (``tests/adversarial/test_export_memory.py``) and
``bench/hostile_inputs.py``.

``grown_log`` keeps every member of a fixture log but one sample, ``samples/sum-01_epoch_1.json``, which it grows
to ``size`` bytes of JSON with a run of empty objects (``{},{},...``: about 24 bytes of Python objects per byte
once parsed by ``json``, and a few hundred KB once zstd-compressed). ``many_samples_log`` is a genuine log of
``n`` samples, each the fixture's sample (with its event transcript) under a new id.
"""

from __future__ import annotations

import json
from typing import Literal

from tests.core.evidence.inspect_epochs import fixture_members
from tests.core.evidence.zstd_zip import zstd_zip

GROWN = "samples/sum-01_epoch_1.json"
"""The member ``grown_log`` grows."""

Where = Literal["events", "input", "padding", "lie"]


def _grown_sample(sample: dict, size: int, where: Where) -> bytes:
    """The JSON of ``sample`` grown to ``size`` bytes: its ``events`` (or its ``input``) a list of empty objects,
    or (``padding``) an object whose only field is such a list."""
    field = "input" if where == "input" else "events"
    shell = json.dumps({"pad": "@"} if where in ("padding", "lie") else {**sample, field: "@"},
                       separators=(",", ":")).encode()
    head, tail = shell.split(b'"@"')
    room = size - len(head) - len(tail) - 2  # the brackets
    if room < 2:
        raise ValueError(f"size {size} is smaller than the sample")
    count = (room + 1) // 3  # "{}," * (count - 1) + "{}" is 3 * count - 1 bytes; spaces fill the rest
    return head + b"[" + b"{}," * (count - 1) + b"{}" + b" " * (room - 3 * count + 1) + b"]" + tail


def grown_log(side: str, size: int, where: Where = "events") -> bytes:
    """The fixture log of ``side`` with member ``GROWN`` made ``size`` bytes of JSON (module docstring):

    - ``events``: the genuine sample with an event transcript of empty objects (a sample certa reads);
    - ``input``: the sample's ``input`` such a list (a value certa parses and hashes);
    - ``padding``: no sample at all, an object ``{"pad": [{},...]}`` (refused: no ``epoch``);
    - ``lie``: ``padding`` of ``size`` + 1 MiB bytes in a member whose directory entry declares ``size``."""
    members = fixture_members(side)
    grown = _grown_sample(members[GROWN], size + (1 << 20 if where == "lie" else 0), where)  # type: ignore[arg-type]
    assert where == "lie" or len(grown) == size, (len(grown), size)
    encoded = {name: json.dumps(value).encode() for name, value in members.items()}
    return zstd_zip({**encoded, GROWN: grown}, declared_sizes={GROWN: size} if where == "lie" else None)


def grown_json_log(side: str, size: int) -> bytes:
    """The fixture log of ``side`` in Inspect's JSON form (its header's fields and a ``samples`` list), sample
    ``GROWN`` with an event transcript of ``size`` bytes as ``grown_log`` grows it."""
    members = fixture_members(side)
    samples = [json.dumps(value).encode() if name != GROWN else _grown_sample(value, size, "events")  # type: ignore[arg-type]
               for name, value in members.items() if name.startswith("samples/")]
    return json.dumps(members["header.json"])[:-1].encode() + b', "samples": [' + b", ".join(samples) + b"]}"


def many_samples_log(side: str, n: int, *, json_form: bool = False) -> tuple[bytes, int]:
    """A genuine log of ``n`` samples: the fixture's own, then copies of them (each with its event transcript, about
    8 KB) under the ids ``<id>-<k>``, and ``results.completed_samples`` = ``n``, as a ``.eval`` archive (or in JSON
    form); with the sum of its sample members' and header's sizes."""
    members = fixture_members(side)
    samples = [value for name, value in members.items() if name.startswith("samples/")]
    built: dict[str, bytes] = {}
    for k in range(n):
        sample = dict(samples[k % len(samples)])
        if k >= len(samples):  # the fixture's own samples first: they pair with the other side's fixture log
            sample["id"] = f"{sample['id']}-{k}"
        built[f"samples/{sample['id']}_epoch_{sample['epoch']}.json"] = json.dumps(sample).encode()
    header = json.loads(json.dumps(members["header.json"]))
    header["results"]["total_samples"] = header["results"]["completed_samples"] = n
    encoded = json.dumps(header).encode()
    size = sum(map(len, built.values())) + len(encoded)
    if json_form:
        return encoded[:-1] + b', "samples": [' + b", ".join(built.values()) + b"]}", size
    return zstd_zip({**built, "header.json": encoded}), size
