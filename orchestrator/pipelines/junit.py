"""JUnit XML for CI systems: one <testcase> per benchmark x scale of a pipeline.

The output follows the Jenkins/Ant JUnit format that GitHub Actions reporters, Azure DevOps
(PublishTestResults, format JUnit), GitLab and Jenkins read: <testsuites> holding one
<testsuite> per pipeline cluster, each <testcase> with at most one <failure> (a performance
regression), <error> (a run that failed) or <skipped> (no result), plus <system-out> with the
metrics. Pure: cases in, an XML string out (stdlib ElementTree, so no extra dependency).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class JUnitCase:
    name: str
    classname: str
    seconds: float = 0.0
    failure: str | None = None  # message: the test ran and the numbers are wrong
    failure_text: str = ""
    error: str | None = None  # message: the test could not produce numbers
    error_text: str = ""
    skipped: str | None = None
    stdout: str = ""


@dataclass(frozen=True)
class JUnitSuite:
    name: str
    cases: Sequence[JUnitCase]
    timestamp: datetime
    hostname: str = "azbench"
    properties: dict[str, str] = field(default_factory=dict)


def to_junit_xml(suites: Sequence[JUnitSuite], *, name: str = "azbench") -> str:
    """The XML document (UTF-8 declaration included) for these suites."""
    totals = _counts([c for s in suites for c in s.cases])
    totals.pop("skipped")  # the Jenkins schema has no skipped count on <testsuites>
    root = ET.Element("testsuites", {"name": name, **totals})
    for index, suite in enumerate(suites):
        root.append(_suite(suite, index))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _suite(suite: JUnitSuite, index: int) -> ET.Element:
    # Attribute order follows the Jenkins schema; timestamp is ISO 8601 without a zone.
    attrs = {"name": suite.name, "tests": str(len(suite.cases)), **_counts(suite.cases),
             "hostname": suite.hostname, "id": str(index), "package": "azbench",
             "timestamp": suite.timestamp.replace(tzinfo=None, microsecond=0).isoformat()}
    el = ET.Element("testsuite", attrs)
    if suite.properties:
        props = ET.SubElement(el, "properties")
        for key, value in suite.properties.items():
            ET.SubElement(props, "property", {"name": key, "value": _clean(value)})
    for case in suite.cases:
        el.append(_case(case))
    ET.SubElement(el, "system-out")
    ET.SubElement(el, "system-err")
    return el


def _case(case: JUnitCase) -> ET.Element:
    el = ET.Element("testcase", {"name": case.name, "classname": case.classname,
                                 "time": f"{max(case.seconds, 0.0):.3f}"})
    if case.error is not None:
        sub = ET.SubElement(el, "error", {"message": _clean(case.error), "type": "RunFailed"})
        sub.text = _clean(case.error_text) or None
    elif case.failure is not None:
        sub = ET.SubElement(el, "failure", {"message": _clean(case.failure), "type": "Regression"})
        sub.text = _clean(case.failure_text) or None
    elif case.skipped is not None:
        ET.SubElement(el, "skipped", {"message": _clean(case.skipped)})
    if case.stdout:
        ET.SubElement(el, "system-out").text = _clean(case.stdout)
    return el


def _counts(cases: Sequence[JUnitCase]) -> dict[str, str]:
    return {"tests": str(len(cases)),
            "failures": str(sum(c.error is None and c.failure is not None for c in cases)),
            "errors": str(sum(c.error is not None for c in cases)),
            "skipped": str(sum(c.error is None and c.failure is None and c.skipped is not None
                               for c in cases)),
            "time": f"{sum(max(c.seconds, 0.0) for c in cases):.3f}"}


def _clean(text: str) -> str:
    """XML 1.0 forbids most control characters (a raw log line may hold them)."""
    return "".join(ch for ch in str(text) if ch in "\t\n\r" or ord(ch) >= 0x20)
