"""A certificate as a CycloneDX 1.6 ML-BOM with a model card (``certa export RUN --format cyclonedx``).

CycloneDX (ECMA-424; cyclonedx.org/docs/1.6/json) describes a machine-learning model as a component of type
``machine-learning-model`` whose ``modelCard.quantitativeAnalysis.performanceMetrics`` lists metrics, each a
``type``, a ``value``, a ``slice`` and a ``confidenceInterval`` (``lowerBound``, ``upperBound``); the schema
types all four as strings. certa writes:

- one ``machine-learning-model`` component, named after the spec (the model the run evaluated), with a model
  card holding every estimate its stages recorded (``certa.engine.services.presentation.stages.run_estimates``):
  ``type`` the estimate's name and confidence level, ``value`` and bounds as Python writes the recorded floats
  (``repr``: every digit kept), ``slice`` the stage id (and the class or ``bucket/vendor`` it was computed on);
  its ``properties`` name the run, the verdict, each gate's outcome and the certificate's digests
  (``certa:``-prefixed names, as CycloneDX's property taxonomy asks of a tool's own names);
- one component per input, type ``data`` (a model input: ``machine-learning-model``), with its SHA-256.

The document is a function of the certificate: ``serialNumber`` is a UUID derived from its ``content_sha256``
(uuid5), ``metadata.timestamp`` its issue time. Tests validate it against CycloneDX's JSON schema
(``cyclonedx-python-lib``'s strict validator).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from certa.engine.core.gates import gate_outcome
from certa.engine.core.value_text import format_value
from certa.engine.services.presentation.input_notes import model_files
from certa.engine.services.presentation.stages import Estimate, run_estimates

__all__ = ["cyclonedx_bom", "SPEC_VERSION"]

SPEC_VERSION = "1.6"


def _metric(stage_id: str, estimate: Estimate) -> dict[str, Any]:
    level = "" if estimate.level is None else f" ({format_value(100 * estimate.level)}% confidence interval)"
    metric: dict[str, Any] = {"type": f"{estimate.name}{level}", "value": repr(estimate.value),
                              "slice": stage_id + (f"/{estimate.slice}" if estimate.slice else "")}
    if estimate.lower is not None:
        metric["confidenceInterval"] = {"lowerBound": repr(estimate.lower), "upperBound": repr(estimate.upper)}
    return metric


def _input(item: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "machine-learning-model" if model_files(item) else "data", "bom-ref": f"input:{item['name']}",
            "name": str(item["name"]), "hashes": [{"alg": "SHA-256", "content": str(item["sha256"])}]}


def cyclonedx_bom(certificate: Mapping[str, Any]) -> dict[str, Any]:
    """The CycloneDX 1.6 JSON document (as a dict) of ``certificate`` (see the module docstring)."""
    content, issued = certificate["content"], certificate["issued"]
    spec = content["spec"]
    properties = [{"name": "certa:run_id", "value": str(issued["run_id"])},
                  {"name": "certa:verdict", "value": str(content["verdict"])},
                  {"name": "certa:content_sha256", "value": str(certificate["content_sha256"])},
                  {"name": "certa:results_sha256", "value": str(certificate["results_sha256"])},
                  {"name": "certa:knobs_hash", "value": str(content["knobs_hash"])},
                  {"name": "certa:spec_sha256", "value": str(spec["sha256"])},
                  {"name": "certa:profile", "value": str(spec["profile"])},
                  *({"name": f"certa:gate:{gate['id']}", "value": f"{gate_outcome(gate)}: {gate.get('reason', '')}"}
                    for gate in content["gates"])]
    model = {"type": "machine-learning-model", "bom-ref": f"certa-run:{issued['run_id']}", "name": str(spec["name"]),
             **({"description": str(spec["description"]).strip()} if spec.get("description") else {}),
             "modelCard": {"quantitativeAnalysis": {"performanceMetrics": [
                 _metric(stage_id, estimate) for stage_id, estimate in run_estimates(content)]}},
             "properties": properties}
    return {"bomFormat": "CycloneDX", "specVersion": SPEC_VERSION,
            "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, 'certa:' + str(certificate['content_sha256']))}",
            "version": 1,
            "metadata": {"timestamp": str(issued["time_utc"]),
                         "tools": {"components": [{"type": "application", "name": "certa",
                                                   "version": str(content["versions"].get("certa", ""))}]}},
            "components": [model, *(_input(item) for item in content["inputs"])]}
