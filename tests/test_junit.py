"""JUnit XML: the pipeline's cases map to testcase/failure/error, and the document validates
against tests/data/junit.xsd (the Jenkins/Ant JUnit schema CI systems read).

Validation uses lxml or xmlschema when installed; neither is a dependency today, so the same
XSD is also checked by a small stdlib interpreter of the XSD subset that file uses (sequences
of element refs with min/maxOccurs, attributes with use="required", pattern-restricted types,
mixed content), which is itself tested against documents that must fail.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pytest

from orchestrator.pipelines.junit import JUnitCase, JUnitSuite, to_junit_xml
from orchestrator.pipelines.pipeline import PipelineSummary, ScaleCase
from orchestrator.pipelines.results import junit_suites

XSD = Path(__file__).parent / "data" / "junit.xsd"
XS = "{http://www.w3.org/2001/XMLSchema}"
WHEN = datetime(2026, 11, 22, 4, 51, 40, 123456, tzinfo=timezone.utc)


def validate_with_library(xml_text: str) -> str:
    """Validate with lxml or xmlschema; returns which one, or skips when neither is installed."""
    try:
        from lxml import etree
    except ImportError:
        try:
            import xmlschema
        except ImportError:
            pytest.skip("neither lxml nor xmlschema is installed: add one to the test extra "
                        "(the stdlib XSD check below still runs)")
        xmlschema.XMLSchema(str(XSD)).validate(xml_text)
        return "xmlschema"
    schema = etree.XMLSchema(etree.parse(str(XSD)))
    schema.assertValid(etree.fromstring(xml_text.encode()))
    return "lxml"


def validate_stdlib(xml_text: str) -> None:
    """AssertionError naming the first way `xml_text` breaks tests/data/junit.xsd."""
    xsd = ET.parse(XSD).getroot()
    elements = {e.get("name"): e for e in xsd.findall(f"{XS}element")}
    types = {t.get("name"): t for t in xsd.findall(f"{XS}complexType")}
    patterns = {t.get("name"): t.find(f"{XS}restriction/{XS}pattern").get("value")
                for t in xsd.findall(f"{XS}simpleType")}
    root = ET.fromstring(xml_text)
    assert root.tag in elements, f"unknown root <{root.tag}>"
    _check(root, elements[root.tag], elements, types, patterns)


def _check(el, decl, elements, types, patterns) -> None:
    ctype = decl.find(f"{XS}complexType")
    ctype = ctype if ctype is not None else types.get(decl.get("type"))
    if ctype is None:  # a simple xs:string element
        assert len(el) == 0 and not el.attrib, f"<{el.tag}> must hold text only"
        return
    attrs = {a.get("name"): a for a in ctype.findall(f"{XS}attribute")}
    for name, value in el.attrib.items():
        assert name in attrs, f"attribute {name!r} is not allowed on <{el.tag}>"
        pattern = patterns.get(attrs[name].get("type"))
        assert pattern is None or re.fullmatch(pattern, value), f"{el.tag}@{name}={value!r}"
    missing = [n for n, a in attrs.items() if a.get("use") == "required" and n not in el.attrib]
    assert not missing, f"<{el.tag}> lacks required {missing}"
    if ctype.get("mixed") != "true":
        assert not (el.text or "").strip(), f"<{el.tag}> may not hold text"
    seq = ctype.find(f"{XS}sequence")
    children, i = list(el), 0
    for particle in list(seq) if seq is not None else []:
        name = particle.get("ref") or particle.get("name")
        low = int(particle.get("minOccurs", "1"))
        high = math.inf if particle.get("maxOccurs") == "unbounded" else int(particle.get("maxOccurs", "1"))
        count = 0
        while i < len(children) and children[i].tag == name and count < high:
            _check(children[i], elements[name] if particle.get("ref") else particle, elements, types, patterns)
            i, count = i + 1, count + 1
        assert count >= low, f"<{el.tag}> needs at least {low} <{name}>"
    assert i == len(children), f"<{children[i].tag}> is not allowed there in <{el.tag}>"


def _summary() -> PipelineSummary:
    base = dict(benchmark="smoke", recipe="smoke", sku="Local_CPU", cluster="nightly")
    cases = [
        ScaleCase(**base, nodes=1, run_ids=["r1", "r2"], seconds=61.5,
                  metrics={"time_to_train": 0.13, "step_time": 0.08}),
        ScaleCase(**base, nodes=2, run_ids=["r3", "r4"], seconds=1234.5678,
                  metrics={"step_time": 0.3, "weak_scaling_efficiency": 0.5},
                  regressions=["smoke 2xLocal_CPU median step time (s): 0.16 -> 0.3 (+87%)"]),
        ScaleCase(**base, nodes=4, run_ids=["r5"], failed=["r5: failed: NODE_FAIL \x07 on node3"]),
        ScaleCase(**base, nodes=8),
    ]
    return PipelineSummary(pipeline="nightly", status="failed", exit_code=5, message="1 of 5 runs failed",
                           started_at=WHEN, ended_at=WHEN, cases=cases, baseline="nightly",
                           sweeps=["s1"])


def test_pipeline_cases_map_to_testcases():
    xml_text = to_junit_xml(junit_suites(_summary()))
    root = ET.fromstring(xml_text)
    assert root.tag == "testsuites" and root.get("tests") == "4"
    assert (root.get("failures"), root.get("errors")) == ("1", "2")
    suite = root.find("testsuite")
    assert suite.get("name") == "azbench.nightly.nightly" and suite.get("timestamp") == "2026-11-22T04:51:40"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == ["smoke[1xLocal_CPU]", "smoke[2xLocal_CPU]", "smoke[4xLocal_CPU]",
                           "smoke[8xLocal_CPU]"]
    ok, slow, broken, never = cases.values()
    assert ok.find("failure") is None and ok.find("error") is None and ok.get("time") == "61.500"
    assert "median step time (s): 0.08" in ok.find("system-out").text
    assert slow.find("failure").get("type") == "Regression" and "+87%" in slow.find("failure").get("message")
    assert slow.get("time") == "1234.568"
    assert broken.find("error").get("message") == "1 of 1 run(s) failed"
    assert "\x07" not in broken.find("error").text and "NODE_FAIL" in broken.find("error").text
    assert never.find("error").get("message") == "not run: 1 of 5 runs failed"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props == {"status": "failed", "baseline": "nightly", "sweeps": "s1"}


def test_output_validates_against_the_xsd_with_a_library():
    assert validate_with_library(to_junit_xml(junit_suites(_summary()))) in ("lxml", "xmlschema")


def test_output_validates_against_the_xsd_stdlib():
    validate_stdlib(to_junit_xml(junit_suites(_summary())))
    cases = [JUnitCase("a", "k", 1.0, skipped="no result"), JUnitCase("b", "k", 2.0)]
    validate_stdlib(to_junit_xml([JUnitSuite("s", cases, WHEN), JUnitSuite("t", [], WHEN)]))


@pytest.mark.parametrize("broken,why", [
    ('<testsuites><testsuite tests="1"/></testsuites>', "lacks required ['name']"),
    ('<testsuites><testsuite name="s" tests="1"><testcase/></testsuite></testsuites>', "lacks required"),
    ('<testsuites><testsuite name="s" tests="1"><testcase name="a" time="1.2345"/></testsuite></testsuites>',
     "time"),
    ('<testsuites><testsuite name="s" tests="1"><testcase name="a"><failure/><skipped/></testcase>'
     '</testsuite></testsuites>', "<skipped> is not allowed"),
    ('<testsuites skipped="1"/>', "'skipped' is not allowed"),
    ('<testsuites><testsuite name="s" tests="1"><system-out/><testcase name="a"/></testsuite></testsuites>',
     "<testcase> is not allowed"),
])
def test_stdlib_check_rejects_what_the_schema_rejects(broken, why):
    with pytest.raises(AssertionError, match=re.escape(why)):
        validate_stdlib(broken)
