"""The certificate as a Markdown report, for governance reviewers (``certa show``).

Pure formatting of a stored certificate: identity (run, hashes, seed, profile), inputs, each stage's
own Markdown (``StageType.render_markdown``), the gates and the library versions. Nothing is recomputed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .certificate import results_sha256
from .stages import REGISTRY

__all__ = ["certificate_markdown", "format_value"]


def format_value(value: Any) -> str:
    """A compact human form of a JSON value (6 significant digits for floats)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _generic_outputs(outputs: Mapping[str, Any]) -> list[str]:
    rows = ["| output | value |", "|---|---|"]
    rows += [f"| `{key}` | {format_value(value)} |" for key, value in outputs.items()]
    return rows


def certificate_markdown(certificate: Mapping[str, Any]) -> str:
    """The whole certificate as one Markdown document."""
    content = certificate["content"]
    issued = certificate["issued"]
    spec = content["spec"]
    lines = [
        f"# {spec['name']}: {content['verdict']}",
        "",
        spec["description"].strip() if spec["description"] else "",
        "",
        "| | |",
        "|---|---|",
        f"| run | `{issued['run_id']}` |",
        f"| issued | {issued['time_utc']} by {issued['user']} on {issued['host']} |",
        f"| content_sha256 | `{certificate['content_sha256']}` |",
        f"| results_sha256 | `{results_sha256(content)}` |",
        f"| knobs_hash | `{content['knobs_hash']}` |",
        f"| spec sha256 | `{spec['sha256']}` |",
        f"| profile | {spec['profile']} |",
        f"| seed | {content['seed']['root']} |",
        "",
        "## Inputs",
        "",
        "| input | rows | format | sha256 |",
        "|---|---:|---|---|",
    ]
    lines += [f"| {i['name']} | {i['rows']} | {i['format']} | `{i['sha256']}` |" for i in content["inputs"]]
    for item in content.get("captured", []):
        lines.append(f"| {item['name']} (captured by stage {item['stage']}) | {item['rows']} | csv | `{item['sha256']}` |")
    stage_uses = {s["id"]: (s["use"], s["version"]) for s in content["knobs"]["stages"]}
    for stage_id, outputs in content["stages"].items():
        use, version = stage_uses.get(stage_id, ("?", "?"))
        stage_type = REGISTRY.find(use, version)
        lines += ["", f"## Stage `{stage_id}` ({use} v{version})", ""]
        if stage_type is not None and stage_type.render_markdown is not None:
            lines += stage_type.render_markdown(outputs).splitlines()
        else:
            lines += _generic_outputs(outputs)
    lines += ["", "## Gates", ""]
    if content["gates"]:
        lines += ["| gate | metric | value | threshold | result |", "|---|---|---|---|---|"]
        for gate in content["gates"]:
            threshold = ", ".join(f"{k} {format_value(v)}" for k, v in gate["threshold"].items())
            lines.append(f"| {gate['id']} | `{gate['metric']}` | {format_value(gate['value'])} | {threshold} | "
                         f"{'PASS' if gate['passed'] else '**FAIL**'}: {gate['reason']} |")
    else:
        lines.append("No gates: the verdict is PASS by default.")
    versions = ", ".join(f"{k} {v}" for k, v in sorted(content["versions"].items()))
    lines += ["", f"_Library versions: {versions}._", ""]
    return "\n".join(lines)
