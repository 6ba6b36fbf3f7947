"""JUnit XML and the self-contained HTML page, rendered from results.json only.

JUnit: counts per suite, the element each state maps to, and validation against the Jenkins
xUnit plugin's JUnit schema (tests/data/junit.xsd) with lxml. HTML: no network references,
the counts and the not-executed sentence, hostile text only escaped, and a headless Chromium
run that applies a filter from the URL fragment and opens a case with its transcript.
"""

from __future__ import annotations

import html as htmllib
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from runner.core.outcomes import AssertionOutcome, AttemptOutcome
from runner.execute.rundir import AttemptRecord, RunDir
from runner.report import html as html_report
from runner.report import junit
from tests.report_fixtures import HOSTILE, every_state, large

XSD = Path(__file__).parent / "data" / "junit.xsd"
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT_COPY = Path("/tmp/skill-evals-report.png")
FAIL_UID = "alpha/evals/should-not-merge"
FAIL_ATTEMPT = FAIL_UID + "#main#1"
TRANSCRIPT_MARKER = "TRANSCRIPT-MARKER: I will merge the branch now"


def _lxml():
    try:
        from lxml import etree
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI must have lxml (the `test` extra) to validate JUnit XML against tests/data/junit.xsd")
        pytest.skip("lxml is not installed: `pip install lxml` to validate the JUnit XML against its schema")
    return etree


# ---- JUnit ------------------------------------------------------------------------------------------

def _cases(root: ET.Element) -> dict[str, ET.Element]:
    return {case.get("name"): case for case in root.iter("testcase")}


def test_junit_counts_per_suite_and_the_element_each_state_maps_to():
    results = every_state()
    root = ET.fromstring(junit.render(results))
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert list(suites) == ["alpha", "beta", "gamma"]
    got = {name: tuple(int(s.get(k)) for k in ("tests", "failures", "errors", "skipped")) for name, s in suites.items()}
    assert got == {"alpha": (3, 2, 0, 0), "beta": (4, 0, 2, 2), "gamma": (7, 0, 0, 7)}
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("14", "2", "2")

    cases = _cases(root)
    assert len(cases) == len(results.cases)
    for result in results.cases:
        case = cases[result.uid]
        assert case.get("classname") == result.skill
        children = list(case)
        if result.state == "PASS":
            assert children == []
            continue
        assert len(children) == 1, result.uid
        child = children[0]
        expected = {"FAIL": ("failure", "FAIL"), "ERROR": ("error", "ERROR"), "JUDGE-ERROR": ("error", "JUDGE-ERROR"),
                    "UNRUN": ("skipped", None), "QUARANTINED": ("skipped", None)}[result.state]
        assert (child.tag, child.get("type")) == expected, result.uid
        if result.state == "UNRUN":
            assert child.get("message") == f"UNRUN: {result.reason}"

    fail = cases[FAIL_UID].find("failure")
    assert fail.get("message").startswith("assertion [1] FAIL: Refuses to merge")
    assert "Merged. " + HOSTILE in fail.text            # the judge's evidence, as text
    assert "parts: activation PASS, refusal FAIL" in fail.text
    pairs = cases["alpha/trigger/alpha-wins"].find("failure")
    assert "pairs lost: beta" in pairs.get("message")
    assert "- beta: FAIL, won 0, lost 2" in pairs.text and "fired instead: beta ×2" in pairs.text
    error = cases["beta/evals/negative-api-down"].find("error")
    assert error.get("message") == "api-error: HTTP 500 (server_error)"
    judge = cases["beta/evals/positive-judge-down"].find("error")
    assert "HTTP 500 after the SDK's retries" in judge.text
    quarantined = cases["beta/evals/positive-flaky"].find("skipped")
    assert quarantined.get("message") == "QUARANTINED (underlying FAIL): flips weekly " + HOSTILE
    unrun = cases["gamma/evals/unrun-budget-cap"].find("skipped")
    assert results.not_executed in unrun.text

    props = {p.get("name"): p.get("value") for p in suites["alpha"].iter("property")}
    assert props["host"] == "claude-code" and props["model"] == "claude-sonnet-4-6"
    assert props["judge_model"] == "claude-sonnet-4-6" and props["plan_hash"] == "0123456789abcdef"
    assert props["spend_usd"] == "1.2300" and props["cap_usd"] == "10.00"
    assert props["not_executed"] == results.not_executed


def test_junit_validates_against_the_jenkins_junit_schema():
    etree = _lxml()
    schema = etree.XMLSchema(etree.parse(str(XSD)))
    for results in (every_state(), large(2000)):
        document = etree.fromstring(junit.render(results).encode("utf-8"))
        assert schema.validate(document), schema.error_log


def test_junit_strips_characters_xml_forbids():
    results = every_state()
    bad = "bell\x07 nul\x00 esc\x1b lone\ud800 nonchar\ufffe tab\tok"
    results.cases[3] = results.cases[3].model_copy(update={"reason": bad})
    results.cases[0] = results.cases[0].model_copy(update={"uid": "alpha/evals/\x01odd"})
    text = junit.render(results)
    root = ET.fromstring(text)            # would raise on any character XML 1.0 forbids
    error = _cases(root)["beta/evals/negative-api-down"].find("error")
    assert error.get("message") == "bell nul esc lone nonchar tab ok"   # a message is one line
    assert "bell nul esc lone nonchar tab\tok" in error.text
    assert "alpha/evals/odd" in _cases(root)
    try:
        etree = __import__("lxml.etree").etree
    except ImportError:
        return
    assert etree.XMLSchema(etree.parse(str(XSD))).validate(etree.fromstring(text.encode("utf-8")))


# ---- HTML: static checks ------------------------------------------------------------------------

class _Page(HTMLParser):
    """Case rows, script blocks, and the text of <pre> and evidence blockquotes, from a page or a DOM dump."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[dict[str, str | None]] = []
        self.details: dict[str, dict[str, str | None]] = {}
        self.scripts: list[dict[str, str | None]] = []
        self.resources: list[tuple[str, str]] = []
        self.pre: list[str] = []
        self.evidence: list[str] = []
        self._capture: list[str] | None = None
        self._capture_tag: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for name in ("src", "href", "action", "poster", "srcset", "data"):
            if a.get(name):
                self.resources.append((name, a[name] or ""))
        if tag == "tr" and "case" in (a.get("class") or "").split():
            self.rows.append(a)
        if tag == "tr" and "detail" in (a.get("class") or "").split():
            self.details[a.get("id") or ""] = a
        if tag == "script":
            self.scripts.append(a)
        if tag in ("pre", "blockquote") and self._capture is None:
            self._capture, self._capture_tag = [], tag

    def handle_endtag(self, tag):
        if tag == self._capture_tag and self._capture is not None:
            (self.pre if tag == "pre" else self.evidence).append("".join(self._capture))
            self._capture = self._capture_tag = None

    def handle_data(self, data):
        if self._capture is not None:
            self._capture.append(data)


def _parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    return parser


def _embedded_data(page: str) -> tuple[str, dict]:
    match = re.search(r'<script type="application/json" id="skill-evals-data">(.*?)</script>', page, re.S)
    assert match, "the page embeds its data block"
    return match.group(1), json.loads(match.group(1))


def _run_folder(root: Path) -> Path:
    """A run folder with one attempt of a FAIL case: its attempts.jsonl line and its transcript."""
    run = root / "run"
    rundir = RunDir(run)
    rundir.create()
    transcript = [
        {"role": "user", "content": "Please merge PR 7. " + HOSTILE},
        {"role": "assistant", "content": [
            {"type": "text", "text": TRANSCRIPT_MARKER + " </script><script>alert(2)</script>"},
            {"type": "tool_use", "id": "toolu_1", "name": "Skill", "input": {"skill": "alpha"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "loaded"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Merged. " + HOSTILE}]},
    ]
    relative = rundir.write_transcript(FAIL_ATTEMPT, transcript)
    rundir.append_attempt(AttemptRecord(
        attempt_id=FAIL_ATTEMPT, uid=FAIL_UID, arm="main", repeat=1, plan_hash="0123456789abcdef", status="finished",
        outcome=AttemptOutcome(state="FAIL", activation="PASS", fired=["alpha"], target_fired=True, fired_instead=[],
                               assertions=[AssertionOutcome(index=1, state="FAIL", evidence="Merged. " + HOSTILE)]),
        transcript=relative, final_answer="Merged. " + HOSTILE, turns=2, cost_usd=0.1, duration_s=12.5))
    return run


def test_html_is_self_contained_and_shows_counts_and_the_not_executed_sentence(tmp_path):
    results = every_state()
    page = html_report.render(results, _run_folder(tmp_path))
    parsed = _parse(page)
    # No network at view time: no resource attribute at all, no CSS import or url(), a CSP that forbids fetching.
    assert parsed.resources == []
    assert "http://" not in page and "https://" not in page
    assert "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page
    # Exactly two scripts: the data block and the page's own code; neither has a src.
    assert [s.get("type") for s in parsed.scripts] == ["application/json", None]
    # Header, counts, UNRUN by reason, the not-executed sentence.
    for text in ("claude-code 2.1.332", "claude-sonnet-4-6", "3 / 2", "$1.23 of $10.00 cap", "0123456789abcdef"):
        assert text in page, text
    for state, n in results.counts.items():
        if state == "UNDECIDED":  # a quorum run has none, and the page shows no count, filter or badge of it
            assert n == 0 and "UNDECIDED" not in page.split("</style>", 1)[1]  # only the stylesheet knows it
            continue
        assert f'data-state="{state}" title="Show only {state} cases"><b>{n}</b> {state}</button>' in page
    for reason, n in results.unrun_by_reason.items():
        assert f"<tr><td>{reason}</td><td class=num>{n}</td></tr>" in page
    assert results.not_executed in page
    assert len(parsed.rows) == len(results.cases)


def test_html_hostile_text_appears_only_escaped(tmp_path):
    page = html_report.render(every_state(), _run_folder(tmp_path))
    assert "<script>alert" not in page
    assert HOSTILE not in page
    assert htmllib.escape(HOSTILE) in page
    block, data = _embedded_data(page)
    assert not set("<>&") & set(block)          # nothing in the data block can close it
    attempt = data["attempts"]["1"][0]           # case 1 is the FAIL case with the transcript
    assert attempt["id"] == FAIL_ATTEMPT and attempt["final_answer"] == "Merged. " + HOSTILE
    assert attempt["transcript"]["messages"][1]["content"][0]["text"].startswith(TRANSCRIPT_MARKER)


def test_html_caps_transcripts_and_never_reads_outside_the_run_folder(tmp_path):
    run = _run_folder(tmp_path)
    page = html_report.render(every_state(), run, transcript_cap=200)
    transcript = _embedded_data(page)[1]["attempts"]["1"][0]["transcript"]
    assert transcript["truncated"] is True and "transcript cut at 200 bytes" in transcript["note"]
    assert len(transcript["messages"]) < 4

    secret = tmp_path / "secret.json"
    secret.write_text('[{"role": "user", "content": "SECRET-OUTSIDE"}]', encoding="utf-8")
    lines = (run / "attempts.jsonl").read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["transcript"] = "../secret.json"
    (run / "attempts.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    page = html_report.render(every_state(), run)
    assert "SECRET-OUTSIDE" not in page
    assert "not found in the run folder" in _embedded_data(page)[1]["attempts"]["1"][0]["transcript"]["note"]


def test_html_renders_a_large_run_without_a_run_folder():
    results = large(2000)
    page = html_report.render(results, None)
    assert len(_parse(page).rows) == 2000
    assert results.not_executed in page and 'class="attempts"' not in page
    assert _embedded_data(page)[1] == {"attempts": {}}
    assert "Transcripts are not embedded" in html_report.render(every_state(), None)


# ---- HTML in a real browser ------------------------------------------------------------------------

def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    command = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
               f"--user-data-dir={profile}", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_html_in_headless_chromium_filters_from_the_fragment_and_opens_the_case(tmp_path):
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have Chromium at {CHROMIUM} (.ci/run installs Debian's `chromium`)")
        pytest.skip(f"no Chromium at {CHROMIUM}: `apt-get install chromium` to run the browser test")
    page = tmp_path / "report.html"
    page.write_text(html_report.render(every_state(), _run_folder(tmp_path)), encoding="utf-8")
    url = page.as_uri() + "#skill=alpha&state=FAIL"

    screenshot = tmp_path / "report.png"
    _chromium(tmp_path, f"--screenshot={screenshot}", "--window-size=1280,2000", url)
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shutil.copyfile(screenshot, SCREENSHOT_COPY)   # for a person to look at; never inside the repository

    dom = _chromium(tmp_path, "--dump-dom", "--window-size=1280,2000", url).stdout
    assert 'data-ready="1"' in dom, "the page's script ran (the CSP hash matches)"
    parsed = _parse(dom)
    visible = [row for row in parsed.rows if "hidden" not in row]
    assert [(row["data-skill"], row["data-state"]) for row in visible] == [("alpha", "FAIL"), ("alpha", "FAIL")]
    assert len(parsed.rows) == len(every_state().cases)
    opened = visible[0]
    assert opened["data-uid"] == FAIL_UID and opened.get("data-open") == "1"
    assert "hidden" not in parsed.details["d" + opened["data-index"]]
    assert all("hidden" in d for key, d in parsed.details.items() if key != "d" + opened["data-index"])
    # The transcript and the judge's evidence are in the DOM as text (rendered, not only in the data block).
    assert any(text.startswith(TRANSCRIPT_MARKER + " </script><script>alert(2)</script>") for text in parsed.pre)
    assert any(text == "Please merge PR 7. " + HOSTILE for text in parsed.pre)
    assert parsed.evidence.count("Merged. " + HOSTILE) >= 2   # the case's evidence and the attempt's
    assert "<script>alert" not in dom
    assert "2 of 14 case(s) shown" in dom
