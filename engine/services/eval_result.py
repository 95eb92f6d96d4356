"""The proposed in-toto ``eval-result`` predicate of a certificate (``certa attest --predicate eval-result``).

The predicate is a **proposal, not merged**: in-toto/attestation issue #565 and pull request #575 (author Konrad
Gruszka), ``spec/predicates/eval-result.md`` at version v0.1, predicate type
``https://in-toto.io/attestation/eval-result/v0.1``. Its claims are threshold verdicts
``{metric, comparator, threshold, passed}`` over ``sampleSize`` samples, which is what certa's gates are. certa
fills it from a certificate (and the run's newest replay in the ledger)::

    {"evaluator": {"id": "urn:certa:evaluator:<user>@<host>"},    # issued.user, issued.host (percent-encoded)
     "evaluatedAt": <issued.time_utc>,
     "suite": {"name": <spec name>, "version": "sha256:<spec SHA-256>"},
     "claims": [{"metric": <gate metric>, "comparator": ">=" | "<=", "threshold": <decimal string>,
                 "passed": <the gate's outcome is PASS>, "gate": <gate id>, "outcome": PASS|FAIL|INCONCLUSIVE}, ...],
     "sampleSize": <rows of the dataset input>,
     "model": {"name": "input:<model input>", "digest": {"sha256": <its SHA-256>}},
     "dataset": {"name": "input:<dataset input>", "digest": {"sha256": <its SHA-256>}},
     "assuranceLevel": "reproduced" | "self_attested",
     "subjectProfile": "public-model",
     "evidence": [{"name": "certificate:<run id>", "uri": "urn:certa:run:<run id>",
                   "digest": {"sha256": <content_sha256>}, "mediaType": "application/json"},
                  {"name": "replay:<entry seq>", "uri": "urn:certa:ledger-entry:<seq>",
                   "digest": {"sha256": <the entry's hash>}, "annotations": {"outcome", "recordedAt"}}],  # if any
     "harness": {"name": "certa", "version": <certa version that issued it>},
     "verdict": PASS|FAIL|INCONCLUSIVE, "gates": {<gate id>: <outcome>, ...},
     "inputRows": {<input name>: <rows>, ...}}

Choices (the proposal leaves them to the producer):

- **claims**: one per numeric bound of a gate: ``min`` is ``>=``, ``max`` ``<=``, ``between [a, b]`` both,
  ``interval {min, max}`` the same on the interval (the whole interval must lie within: module
  ``certa.engine.core.gates``). ``passed`` is true only when the gate's outcome is PASS, so a two-bound gate's
  claims share its verdict and an INCONCLUSIVE gate never reads as passed; ``gate`` and ``outcome`` (fields the
  proposal does not define, which its parsing rules tell consumers to ignore) keep which gate and FAIL apart from
  INCONCLUSIVE. A gate with no numeric bound (``equals``, ``decided``, a family's ``differs``) has no claim form;
  its outcome is in ``gates``. A certificate with no bounded gate is refused (the proposal asks one claim or more).
- **threshold**: the bound as a decimal string (the proposal forbids a JSON float): its shortest round-trip form
  written without an exponent (``1.05``, ``0.00001``).
- **model** and **dataset**: descriptors of two of the certificate's inputs by their SHA-256 (for a model folder,
  certa's manifest digest; each file is a subject of the statement), chosen by name: the model is the input named
  ``subject`` unless another is named; the dataset, unless named, is the one input that is neither a model folder,
  nor a served endpoint, nor the model, when the model is a model folder, and else the model input itself (a
  data-only run knows a model by its per-sample outputs, which are also the samples evaluated).
- **sampleSize**: the dataset input's recorded ``rows``; ``inputRows`` keeps every input's.
- **assuranceLevel**: ``reproduced`` when the run's newest replay (``certa replay``) REPRODUCED its results, which
  ``evidence`` names by its ledger entry hash; else ``self_attested``. It is the issuer's own declaration, as the
  proposal says.
- **subjectProfile**: ``public-model``: the statement's subjects are the real digests of the evaluated files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from certa.engine.core.gates import OUTCOMES, PASS, gate_outcome
from certa.engine.foundation.errors import AttestationError
from certa.engine.services.audit import REPRODUCED

if TYPE_CHECKING:
    from certa.ledger import EntryRow

__all__ = ["EVAL_RESULT_TYPE", "COMPARATORS", "REPRODUCED_LEVEL", "SELF_ATTESTED_LEVEL", "gate_claims",
           "certificate_eval_result", "eval_result_fields", "certificate_reference", "named_certificate"]

EVAL_RESULT_TYPE = "https://in-toto.io/attestation/eval-result/v0.1"
COMPARATORS = (">=", ">", "<=", "<")
"""The comparators the proposal allows; certa's bounds are inclusive, so it writes ``>=`` and ``<=`` only."""
REPRODUCED_LEVEL, SELF_ATTESTED_LEVEL = "reproduced", "self_attested"
_BOUNDS = {"min": ">=", "max": "<="}


def certificate_reference(certificate: Mapping[str, Any]) -> dict[str, Any]:
    """The certificate as an in-toto ResourceDescriptor: ``certificate:<run id>``, ``urn:certa:run:<run id>`` and
    its ``content_sha256`` (SHA-256 of the RFC 8785 form of its content), as Test Result's ``configuration`` and
    eval-result's ``evidence`` name it."""
    run_id = certificate["issued"]["run_id"]
    return {"name": f"certificate:{run_id}", "uri": f"urn:certa:run:{run_id}",
            "digest": {"sha256": certificate["content_sha256"]}}


_CERTIFICATE_NAME = re.compile(r"certificate:(?P<run_id>\S+)")


def named_certificate(descriptors: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """(run id, content_sha256) of the one ``certificate:<run id>`` among (name, sha256) descriptors, else None."""
    named = [(match["run_id"], sha) for name, sha in descriptors if (match := _CERTIFICATE_NAME.fullmatch(name))]
    return named[0] if len(named) == 1 else None


def _decimal(bound: Any) -> str:
    """A numeric bound as a decimal string without exponent: ``1.05`` -> "1.05", ``1e-05`` -> "0.00001"."""
    return f"{Decimal(repr(bound)):f}"


def gate_claims(gate: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The eval-result claims of a recorded gate (module docstring): one per numeric bound, none for a gate
    without one."""
    threshold = gate.get("threshold") or {}
    bounds = threshold.get("interval") if isinstance(threshold.get("interval"), Mapping) else threshold
    pairs = list(zip(("min", "max"), bounds["between"])) if "between" in bounds else \
        [(key, bounds[key]) for key in _BOUNDS if key in bounds]
    outcome = gate_outcome(gate)
    return [{"metric": str(gate["metric"]), "comparator": _BOUNDS[key], "threshold": _decimal(bound),
             "passed": outcome == PASS, "gate": str(gate["id"]), "outcome": outcome}
            for key, bound in pairs if isinstance(bound, (int, float)) and not isinstance(bound, bool)]


def _descriptor(item: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": f"input:{item['name']}", "digest": {"sha256": str(item["sha256"])}}


def _model_and_dataset(inputs: Sequence[Mapping[str, Any]], model: str | None,
                       dataset: str | None) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The model and dataset inputs (module docstring); ``AttestationError`` naming the inputs when either
    cannot be found or chosen."""
    by_name = {str(item["name"]): item for item in inputs}
    names = ", ".join(by_name) or "none"
    model_name = model or "subject"
    if model_name not in by_name or not by_name[model_name].get("sha256"):
        raise AttestationError(f"the eval-result predicate names the evaluated model by an input's SHA-256: no "
                               f"input '{model_name}' with a digest (inputs: {names}); name it with --model")
    model_item = by_name[model_name]
    if dataset is None and model_item.get("files"):
        data = [n for n, item in by_name.items()
                if n != model_name and not item.get("files") and not item.get("endpoint") and item.get("sha256")]
        if len(data) != 1:
            raise AttestationError(f"the eval-result predicate names one dataset: name it with --dataset "
                                   f"(inputs: {names})")
        dataset = data[0]
    dataset_name = dataset or model_name
    if dataset_name not in by_name or not isinstance(by_name[dataset_name].get("rows"), int):
        raise AttestationError(f"the eval-result predicate needs the dataset's sample size: no input "
                               f"'{dataset_name}' with recorded rows (inputs: {names}); name it with --dataset")
    return model_item, by_name[dataset_name]


def _replay_evidence(replay: EntryRow) -> dict[str, Any]:
    outcome = replay.data().get("outcome")
    return {"name": f"replay:{replay.seq}", "uri": f"urn:certa:ledger-entry:{replay.seq}",
            "digest": {"sha256": replay.entry_hash},
            "annotations": {"outcome": str(outcome), "recordedAt": replay.recorded_at}}


def certificate_eval_result(certificate: Mapping[str, Any], replay: EntryRow | None = None, *,
                            model: str | None = None, dataset: str | None = None) -> dict[str, Any]:
    """The eval-result predicate of ``certificate`` (module docstring), ``replay`` the run's newest ``replay``
    ledger entry (None: never replayed), ``model`` and ``dataset`` input names (None: the defaults).
    ``AttestationError`` when it has no claim, or no model or dataset input can be named."""
    content, issued = certificate["content"], certificate["issued"]
    claims = [claim for gate in content["gates"] for claim in gate_claims(gate)]
    if not claims:
        raise AttestationError("the eval-result predicate needs one claim or more, and no gate of this certificate "
                               "has a numeric bound (min, max, between, interval); attest it with --predicate "
                               "test-result")
    model_item, dataset_item = _model_and_dataset(content["inputs"], model, dataset)
    reproduced = replay is not None and replay.data().get("outcome") == REPRODUCED
    evidence = [{**certificate_reference(certificate), "mediaType": "application/json"},
                *([] if replay is None else [_replay_evidence(replay)])]
    evaluator = f"urn:certa:evaluator:{quote(str(issued['user']), safe='')}@{quote(str(issued['host']), safe='')}"
    return {"evaluator": {"id": evaluator},
            "evaluatedAt": str(issued["time_utc"]),
            "suite": {"name": str(content["spec"]["name"]), "version": f"sha256:{content['spec']['sha256']}"},
            "claims": claims, "sampleSize": int(dataset_item["rows"]),
            "model": _descriptor(model_item), "dataset": _descriptor(dataset_item),
            "assuranceLevel": REPRODUCED_LEVEL if reproduced else SELF_ATTESTED_LEVEL,
            "subjectProfile": "public-model", "evidence": evidence,
            "harness": {"name": "certa", "version": str(content["versions"].get("certa", ""))},
            "verdict": str(content["verdict"]), "gates": {str(g["id"]): gate_outcome(g) for g in content["gates"]},
            "inputRows": {str(item["name"]): item["rows"] for item in content["inputs"]
                          if isinstance(item.get("rows"), int)}}


_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")


def _claims_well_formed(claims: Any) -> bool:
    return type(claims) is list and bool(claims) and all(
        type(c) is dict and type(c.get("metric")) is str and c.get("comparator") in COMPARATORS
        and type(c.get("threshold")) is str and bool(_DECIMAL.fullmatch(c["threshold"]))
        and type(c.get("passed")) is bool for c in claims)


def eval_result_fields(predicate: Mapping[str, Any],
                       descriptors: Sequence[tuple[str, str]]) -> tuple[str, str, str]:
    """(run id, content_sha256, verdict) of an eval-result predicate certa wrote; ``descriptors`` are its
    ``evidence`` as (name, sha256). Another shape (claims not ``{metric, comparator, threshold, passed}`` with a
    decimal-string threshold, no integer ``sampleSize``, no ``model`` or ``dataset`` with a digest, no
    ``certificate:<run id>`` evidence, a verdict not PASS, FAIL or INCONCLUSIVE) raises ``AttestationError``."""
    named = named_certificate(descriptors)
    sample_size = predicate.get("sampleSize")
    described = all(type(predicate.get(key)) is dict and type(predicate[key].get("digest")) is dict
                    and predicate[key]["digest"] for key in ("model", "dataset"))
    if named is None or not _claims_well_formed(predicate.get("claims")) or type(sample_size) is not int \
            or sample_size < 0 or not described or predicate.get("verdict") not in OUTCOMES:
        raise AttestationError(f"the statement's predicate is not an eval-result ({EVAL_RESULT_TYPE}) of a certa "
                               "certificate: claims {metric, comparator, threshold, passed} with a decimal-string "
                               "threshold, an integer sampleSize, model and dataset with digests, one evidence "
                               "entry certificate:<run id> with a sha256 digest, and a verdict")
    return named[0], named[1], str(predicate["verdict"])
