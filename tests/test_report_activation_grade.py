"""A verdict read from a file-read host's attempts (a SKILL.md read: no skill event) is labelled as such in every
rendering, and a tool-event run's reports carry no such label (tests/report_fixtures.py builds the results)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from rich.console import Console

from runner.report import html as html_report
from runner.report import junit, markdown, terminal
from runner.results.build import Results
from tests.report_fixtures import activation, assemble, every_state
from tests.test_report_junit_html import XSD, _lxml

PASSED = "alpha/evals/positive-ok"
FAILED = "alpha/trigger/alpha-wins"


def file_read() -> Results:
    """every_state() as a file-read host (codex) would have it: each case that ran carries the grade."""
    base = every_state()
    cases = [case.model_copy(update={"activation_grade": "file-read" if case.attempts else None})
             for case in base.cases]
    results = assemble(cases)
    plan = results.plan.model_copy(update={"host": "codex", "versions": {"codex-cli": "0.171.0"},
                                           "activation_grade": "file-read"})
    return results.model_copy(update={"plan": plan})


def tool_event() -> Results:
    results = every_state()
    cases = [case.model_copy(update={"activation_grade": "tool-event" if case.attempts else None})
             for case in results.cases]
    return results.model_copy(update={"cases": cases, "plan": results.plan.model_copy(
        update={"activation_grade": "tool-event"})})


def _terminal(results: Results) -> str:
    console = Console(record=True, width=250, color_system=None)
    terminal.render(results, console)
    return console.export_text()


def test_markdown_labels_each_file_read_verdict_and_says_why_once() -> None:
    text = markdown.render(file_read())
    assert "**Activation grade:** codex: activation on this host is graded file-read" in text
    # The comment lists the failing cases; the per-skill table's verdict and accuracy columns carry the grade.
    assert f"FAIL (file-read) · {FAILED}" in text
    assert "| Skill | PASS (file-read) | FAIL (file-read) |" in text and "Trigger accuracy (Wilson 95%, file-read)" in text
    # An ERROR or UNRUN case is no verdict: no label.
    assert "ERROR (file-read)" not in text and "UNRUN (file-read)" not in text
    assert "file-read" not in markdown.render(tool_event())


def test_html_labels_each_file_read_verdict() -> None:
    page = html_report.render(file_read())
    assert 'id="activation-grade"' in page and page.count('class="grade"') >= 4  # row and detail of PASS and FAIL
    assert "trigger accuracy (file-read)" in page
    assert "file-read" not in html_report.render(tool_event())


def test_the_terminal_says_the_grade_and_labels_its_columns() -> None:
    text = _terminal(file_read())
    assert "Activation grade: codex: activation on this host is graded file-read" in text
    assert "Trigger accuracy (Wilson 95%, file-read)" in text and "FAIL (file-read)" in text
    assert "file-read" not in _terminal(tool_event())


def test_junit_carries_the_grade_on_the_suite_and_each_file_read_verdict() -> None:
    xml = junit.render(file_read())
    root = ET.fromstring(xml)
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["activation_grade"] == "file-read" and props["host_version"] == "0.171.0"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    passed_out = cases[PASSED].find("system-out")
    assert passed_out is not None and (passed_out.text or "").startswith("PASS (file-read): activation on this host")
    failure = cases[FAILED].find("failure")
    assert failure is not None and "file-read" in (failure.get("message") or "")
    etree = _lxml()
    assert etree.XMLSchema(etree.parse(str(XSD))).validate(etree.fromstring(xml.encode()))
    assert "file-read" not in junit.render(tool_event())


def test_a_case_graded_file_read_but_not_a_verdict_has_no_label() -> None:
    from runner.report import rollup

    case = every_state().cases[0].model_copy(update={"activation_grade": "file-read", "state": "ERROR",
                                                     "activation": activation("ERROR", 0, 0)})
    assert rollup.grade_label(case) is None
