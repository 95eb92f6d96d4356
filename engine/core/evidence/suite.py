"""A suite: the evaluator exports of a folder, matched by a glob, as one input with one identity.

lm-evaluation-harness 0.4 writes one ``samples_<task>_<time>.jsonl`` per leaf task beside one
``results_<time>.json`` per run (``EvaluationTracker.save_results_samples``): MMLU arrives as 57 samples files
per model. An input declared ``format: lm-eval-suite`` with ``path:`` a folder reads every file under it that
``read.glob`` matches (default ``samples_*.jsonl``), each with the ``results_<time>.json`` of the same time in
the same folder when there is one, as one table (``certa.engine.core.evidence.formats``).

**Identity.** The input's bytes are a *bundle*: one line of RFC 8785 canonical JSON, the manifest::

    {"files": [{"path": "run/samples_arc_2026-...jsonl", "sha256": "<hex>", "size": 1234}, ...],
     "format": "certa-suite/1", "glob": "**/samples_*.jsonl"}

(``files`` sorted by POSIX path relative to the folder: the matched files and their results files), then
``\\n``, then the files' bytes in that order. The input's SHA-256 is the SHA-256 of the bundle, so a pin
(``sha256:``) pins every file, their names and the glob; the ledger stores the bundle as the input's bytes
(one blob, as any input) and a replay reads the files from it without the folder. Reading a bundle checks
every file's size and SHA-256 against its manifest entry.

**Confinement.** A spec never reads outside the folder it names: a glob that is absolute or has a ``..``
component is refused, as is any matched file (or results file) that is a symbolic link, or lies under one,
resolving outside the folder; only regular files are read, within ``InputLimits`` (each file's size, and the
bundle's).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from certa.engine.core.input_limits import InputLimits, read_input_file
from certa.engine.foundation.canonical import canonical_bytes, sha256_hex
from certa.engine.foundation.errors import InputError

from .lm_eval import SAMPLES_NAME
from .records import EvidenceRecords, Provenance
from .sources import EXPORT, JsonObject

__all__ = ["SUITE_GLOBS", "BUNDLE_FORMAT", "SuiteFile", "folder_bundle", "bundle_files",
           "results_sibling", "suite_records", "stated_groups"]


BUNDLE_FORMAT = "certa-suite/1"
"""The ``format`` of a suite's manifest."""

SUITE_GLOBS = {"lm-eval-suite": "samples_*.jsonl", "inspect-suite": "*.eval"}
"""The suite formats, each with the files it reads when its input names no ``read.glob``: lm-eval's samples files,
Inspect's ``.eval`` logs, at the folder's top."""


@dataclass(frozen=True)
class SuiteFile:
    """A file of a suite: its POSIX path relative to the folder and its bytes."""

    path: str
    raw: bytes


def _checked_glob(name: str, pattern: str) -> str:
    """``pattern``, refused when it could leave the folder (absolute, a ``..`` component) or is empty."""
    parts = PurePosixPath(pattern).parts
    if not pattern or pattern.startswith(("/", "\\")) or ".." in parts or "\\" in pattern:
        raise InputError(f"input '{name}': read.glob {pattern!r} must be a relative pattern inside the folder "
                         "(no leading /, no '..', / as the separator)")
    return pattern


def _inside(name: str, folder: Path, path: Path) -> str:
    """``path``'s POSIX path relative to ``folder``, refused when it (or a link on its way) resolves outside."""
    try:
        path.resolve(strict=True).relative_to(folder)
    except (OSError, RuntimeError):
        raise InputError(f"input '{name}': cannot follow {path} (a link loop or a missing target)") from None
    except ValueError:
        raise InputError(f"input '{name}': {path} resolves outside the folder {folder} (a symbolic link leaving "
                         "it); a suite reads only the files its folder holds") from None
    return path.relative_to(folder).as_posix()


def results_sibling(path: str) -> str | None:
    """The path of the ``results_<time>.json`` beside the samples file ``path`` (the same folder, the same
    time), or ``None`` when ``path`` is not named ``samples_<task>_<time>.jsonl``."""
    posix = PurePosixPath(path)
    match = SAMPLES_NAME.fullmatch(posix.name)
    return None if match is None else str(posix.with_name(f"results_{match['time']}.json"))


def folder_bundle(name: str, folder: Path, pattern: str, limits: InputLimits) -> bytes:
    """The bundle of input ``name``: the files under ``folder`` that ``pattern`` matches, with each samples
    file's results file when the folder holds it (module docstring). No match is an ``InputError``."""
    pattern = _checked_glob(name, pattern)
    if not folder.is_dir():
        raise InputError(f"input '{name}': {folder} is not a folder (a suite's path names the folder of its files)")
    root = folder.resolve()
    matched = {_inside(name, root, root / path.relative_to(folder)) for path in folder.glob(pattern)
               if not path.is_dir()}
    if not matched:
        raise InputError(f"input '{name}': no file under {folder} matches read.glob {pattern!r}")
    beside = {sibling for path in matched if (sibling := results_sibling(path)) is not None}
    paths = sorted(matched | {path for path in beside if (root / path).exists() or (root / path).is_symlink()})
    located = [root / _inside(name, root, root / path) for path in paths]
    # the files' sizes before any is read (a file that grows meanwhile is refused by read_input_file)
    limits.check_size(name, EXPORT, sum(os.stat(path).st_size for path in located if os.path.isfile(path)))
    files = [SuiteFile(path, read_input_file(name, file, EXPORT, limits)) for path, file in zip(paths, located)]
    limits.check_size(name, EXPORT, sum(len(file.raw) for file in files))
    manifest = {"format": BUNDLE_FORMAT, "glob": pattern,
                "files": [{"path": f.path, "size": len(f.raw), "sha256": sha256_hex(f.raw)} for f in files]}
    return b"".join([canonical_bytes(manifest), b"\n", *(file.raw for file in files)])


def bundle_files(name: str, raw: bytes) -> list[SuiteFile]:
    """The files of the bundle ``raw``, each checked against its manifest entry (size and SHA-256); a bundle
    that is not one (no manifest line, another format, bytes missing or left over) is an ``InputError``."""
    head, newline, body = raw.partition(b"\n")
    try:
        manifest = json.loads(head)
    except (ValueError, RecursionError):
        manifest = None
    if not newline or type(manifest) is not dict or manifest.get("format") != BUNDLE_FORMAT \
            or type(manifest.get("files")) is not list:
        raise InputError(f"input '{name}': not a {BUNDLE_FORMAT} bundle (a manifest line, then the files' bytes); "
                         "a suite's path names a folder")
    files, start = [], 0
    for entry in manifest["files"]:
        if type(entry) is not dict or type(entry.get("path")) is not str or type(entry.get("size")) is not int \
                or entry["size"] < 0:
            raise InputError(f"input '{name}': manifest entry {entry!r:.80} is not a path, size and sha256")
        data = body[start:start + entry["size"]]
        start += entry["size"]
        if len(data) != entry["size"] or sha256_hex(data) != entry.get("sha256"):
            raise InputError(f"input '{name}': file {entry['path']} does not match its manifest entry (size "
                             f"{entry['size']}, SHA-256 {entry.get('sha256')}): the bundle is damaged")
        files.append(SuiteFile(entry["path"], data))
    if start != len(body):
        raise InputError(f"input '{name}': {len(body) - start} bytes after the manifest's files: the bundle is "
                         "damaged")
    if len({file.path for file in files}) != len(files) or any(".." in PurePosixPath(f.path).parts
                                                               or os.path.isabs(f.path) for f in files):
        raise InputError(f"input '{name}': the manifest names a path twice or outside its folder")
    return files


def suite_records(name: str, parts: Sequence[tuple[str, EvidenceRecords]],
                  groups: Mapping[str, str]) -> EvidenceRecords:
    """The records of a suite's tasks as one table: ``parts`` is each task with its samples' records, in the
    bundle's order; ``groups`` each task's group as the results files state it (``group_subtasks``).

    The item key is ``task`` then the tool's key (lm-eval: ``doc_id``; Inspect: ``id``, ``epoch``, the epoch
    still the repeat field): lm-eval numbers each task's documents from 0, so ``doc_id`` alone would pair two
    tasks' documents. The slice is the task. The metrics (and counts) are those every task logs: a metric some
    task lacks has no value for its items. The provenance is the tool's, with each task's version,
    configuration digest, details and group (``<task>.<field>``) and every file read."""
    tasks = [task for task, _ in parts]
    twice = sorted({task for task in tasks if tasks.count(task) > 1})
    if twice:
        raise InputError(f"input '{name}': task(s) {', '.join(twice)} read from several files (several runs in "
                         "one folder?); narrow read.glob to one run's files")
    records = [part for _, part in parts]
    metrics = [metric for metric in records[0].metrics if all(metric in part.metrics for part in records)]
    if not metrics:
        logged = "; ".join(f"{task}: {', '.join(part.metrics)}" for task, part in parts)
        raise InputError(f"input '{name}': its tasks log no metric in common ({logged}); a suite's table holds "
                         "the metrics every task logs, so read tasks of different metrics as separate suites")

    def joined(of: Callable[[EvidenceRecords], Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
        return {field: np.concatenate([of(part)[field] for part in records]) for field in of(records[0])
                if all(field in of(part) for part in records)}

    key_fields = records[0].key_fields
    if any(part.key_fields != key_fields or part.provenance.tool != records[0].provenance.tool for part in records):
        raise InputError(f"input '{name}': its files are not all of one tool and item key")
    sizes = [part.n_items for part in records]
    task_column = np.repeat(np.array(tasks, dtype=object), sizes)
    weights = (np.concatenate([part.weights for part in records])
               if all(part.weights is not None for part in records) else None)
    return EvidenceRecords(
        source=f"input '{name}'", key_fields=("task", *key_fields),
        keys={"task": task_column, **joined(lambda part: part.keys)}, repeat_field=records[0].repeat_field,
        metrics={metric: np.concatenate([part.metrics[metric] for part in records]) for metric in metrics},
        provenance=_suite_provenance(parts, groups), identity=joined(lambda part: part.identity),
        counts=joined(lambda part: part.counts), weights=weights, slices=task_column)


def _suite_provenance(parts: Sequence[tuple[str, EvidenceRecords]], groups: Mapping[str, str]) -> Provenance:
    """The harness's provenance of a suite: its version(s) and model(s) as the tasks' results files state them,
    each task's own facts prefixed by the task, each task's group, and every file read."""
    stated = [part.provenance for _, part in parts]
    versions = sorted({p.tool_version for p in stated if p.tool_version is not None})
    models = list(dict.fromkeys(pair for p in stated for pair in p.models))
    details: list[tuple[str, str]] = [("tasks", str(len(parts)))]
    for task, part in parts:
        own = part.provenance
        details += [(f"{task}.{field}", value) for field, value in (("task_version", own.task_version),
                                                                    ("task_config_sha256", own.task_config_sha256),
                                                                    ("group", groups.get(task)), *own.details)
                    if value is not None]
    details += [(f"{group}.group", parent) for group, parent in groups.items() if group not in dict(parts)]
    sources = list(dict.fromkeys(pair for p in stated for pair in p.sources))
    return Provenance(tool=stated[0].tool, tool_version=", ".join(versions) or None, models=tuple(models),
                      details=tuple(details), sources=tuple(sources))


def stated_groups(results: JsonObject) -> dict[str, str]:
    """Each task's (or group's) parent group, as a results file's ``group_subtasks`` states it (lm-eval 0.4:
    ``{"mmlu": ["mmlu_humanities", ...], "mmlu_humanities": ["mmlu_formal_logic", ...]}``); empty when it
    states none."""
    tree = results.value("group_subtasks") if "group_subtasks" in results else None
    if type(tree) is not dict:
        return {}
    return {child: parent for parent, children in tree.items() if type(children) is list
            for child in children if type(child) is str}
