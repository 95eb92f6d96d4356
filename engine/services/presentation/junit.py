"""JUnit XML reports of runs, for the test reporters of CI systems (Jenkins, GitLab, GitHub Actions).

The format is the Ant/Jenkins one those tools read (``junit-10.xsd``; ``tests/data/junit.xsd`` states it)::

    testsuites[name, tests, failures, errors, skipped, time]
      testsuite[name, tests, failures, errors, skipped, time, timestamp, hostname]   one per run (spec)
        properties > property[name, value]    run_id, verdict, spec (the file)
        testcase[name, classname, time]       one per gate; one per profile rule that stopped the run; one
          failure[message, type] | error[message, type]   error case for a spec or input certa refused
          | skipped[message]                              an INCONCLUSIVE gate

A testcase's ``classname`` is the spec's name (the file, when the spec could not be read), its ``name`` the
gate id (``gate <id>``) or rule (``profile rule <rule>``). Built with the standard library's ElementTree and
written atomically (``write_junit``), so a CI job always finds a whole file, also when the run fails or aborts.

An INCONCLUSIVE gate (``certa.engine.core.gates``) is a ``skipped`` case whose ``message`` is its reason (and the
same text in the element, which Jenkins shows when it reads no message): Jenkins' JUnit plugin, GitLab's unit
test reports and the GitHub Actions JUnit reporters (e.g. mikepenz/action-junit-report) each count and list skipped
cases apart from passed and failed ones, so the gate reads as neither; a suite property alone (``verdict``, kept as
well) is shown by none of them as a case's status.
"""

from __future__ import annotations

import os
import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, UTC
from typing import Any

from certa.engine.foundation.atomic_files import write_atomically

from certa.engine.core.gates import INCONCLUSIVE, PASS, gate_display, gate_outcome
from certa.engine.services.presentation.markdown import rule_text

__all__ = ["JUnitCase", "JUnitSuite", "run_suite", "junit_bytes", "write_junit", "utc_timestamp"]

PASSED, FAILURE, ERROR, SKIPPED = "passed", "failure", "error", "skipped"


@dataclass(frozen=True)
class JUnitCase:
    """One test case: ``outcome`` is ``passed``, ``failure`` (a gate or rule said no), ``skipped`` (an
    INCONCLUSIVE gate) or ``error`` (certa refused the spec or an input); ``message`` and ``kind`` (the type attribute) describe a non-pass and
    ``text`` adds detail."""

    name: str
    classname: str
    outcome: str = PASSED
    message: str = ""
    kind: str = ""
    text: str = ""


@dataclass(frozen=True)
class JUnitSuite:
    """One run as a test suite: its cases, when it started (``timestamp``, UTC), how long it took and its
    properties (``run_id``, ``verdict``, ``spec``)."""

    name: str
    cases: tuple[JUnitCase, ...]
    timestamp: str
    seconds: float = 0.0
    properties: Mapping[str, str] = field(default_factory=dict)

    def count(self, outcome: str) -> int:
        return sum(case.outcome == outcome for case in self.cases)


def utc_timestamp(moment: datetime | None = None) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` in UTC, the form JUnit's ``timestamp`` takes (no zone suffix)."""
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _gate_case(classname: str, gate: Mapping[str, Any]) -> JUnitCase:
    shown = gate_display(gate)
    text = f"{gate['metric']} = {shown['value']} ({shown['threshold']}): {shown['reason']}"
    outcome = gate_outcome(gate)
    if outcome == PASS:
        return JUnitCase(f"gate {gate['id']}", classname, text=text)
    if outcome == INCONCLUSIVE:
        return JUnitCase(f"gate {gate['id']}", classname, SKIPPED, message=f"INCONCLUSIVE: {gate['reason']}",
                         text=text)
    return JUnitCase(f"gate {gate['id']}", classname, FAILURE, message=str(gate["reason"]), kind="GateFailed",
                     text=text)


def run_suite(*, name: str, timestamp: str, seconds: float = 0.0, run_id: str | None = None, spec: str = "",
              verdict: str | None = None, gates: Sequence[Mapping[str, Any]] = (),
              failed_rules: Sequence[Mapping[str, Any]] = (), abort_reason: str = "", error_type: str = "",
              error: str = "") -> JUnitSuite:
    """A run as a suite: an ``error`` (with its ``error_type``) gives one error case; an ``abort_reason`` one
    failure case per failed profile rule (``certa.engine.services.presentation.markdown.failed_rules``; one case for the abort itself when
    none is named); otherwise one case per gate (certificate ``content.gates``)."""
    if error:
        cases = (JUnitCase("run", name, ERROR, message=error, kind=error_type or "CertaError"),)
    elif failed_rules:
        cases = tuple(JUnitCase(f"profile rule {rule['rule']}", name, FAILURE, message=rule_text(rule),
                                kind="ProfileAbort", text=abort_reason) for rule in failed_rules)
    elif abort_reason:
        cases = (JUnitCase("profile abort", name, FAILURE, message=abort_reason, kind="ProfileAbort"),)
    else:
        cases = tuple(_gate_case(name, gate) for gate in gates)
    outcome = verdict or ("ABORTED" if abort_reason else "ERROR" if error else "")
    properties = {"run_id": run_id or "", "verdict": outcome, "spec": spec}
    return JUnitSuite(name, cases, timestamp, seconds, {k: v for k, v in properties.items() if v})


def _seconds(value: float) -> str:
    return f"{max(value, 0.0):.3f}"


def _counts(element: ET.Element, suites: Iterable[JUnitSuite]) -> None:
    suites = list(suites)
    element.set("tests", str(sum(len(s.cases) for s in suites)))
    element.set("failures", str(sum(s.count(FAILURE) for s in suites)))
    element.set("errors", str(sum(s.count(ERROR) for s in suites)))
    element.set("skipped", str(sum(s.count(SKIPPED) for s in suites)))
    element.set("time", _seconds(sum(s.seconds for s in suites)))


def junit_bytes(suites: Sequence[JUnitSuite], *, name: str = "certa") -> bytes:
    """The suites as one JUnit XML document (UTF-8, with an XML declaration)."""
    root = ET.Element("testsuites", {"name": name})
    _counts(root, suites)
    host = socket.gethostname()
    for index, suite in enumerate(suites):
        element = ET.SubElement(root, "testsuite", {"name": suite.name, "id": str(index), "hostname": host,
                                                    "timestamp": suite.timestamp})
        _counts(element, [suite])
        if suite.properties:
            properties = ET.SubElement(element, "properties")
            for key, value in suite.properties.items():
                ET.SubElement(properties, "property", {"name": key, "value": value})
        for case in suite.cases:
            testcase = ET.SubElement(element, "testcase", {"name": case.name, "classname": case.classname,
                                                           "time": "0.000"})
            if case.outcome != PASSED:
                detail = ET.SubElement(testcase, case.outcome, {"message": case.message, **(
                    {"type": case.kind} if case.outcome != SKIPPED else {})})
                detail.text = case.text or None
            elif case.text:
                ET.SubElement(testcase, "system-out").text = case.text
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def write_junit(path: str | os.PathLike[str], suites: Sequence[JUnitSuite]) -> None:
    """Write the JUnit XML of ``suites`` to ``path`` atomically (``certa.engine.foundation.atomic_files``); an ``OutputError``
    says why it cannot be written."""
    write_atomically(path, junit_bytes(suites), what="the JUnit report")
