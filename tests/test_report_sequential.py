"""Undecided is shown, never rounded, and every report says how sure the sequential verdict is (issue 35).

Every rendering of a run by the sequential verdict (tests/report_fixtures.py `sequential`) shows UNDECIDED where a
case is, the per-case attempts, rate, interval and round, and the run's rule, error bounds, sessions and flips; none
claims a PASS or a FAIL for the undecided case. A quorum run (`quorum`) shows no UNDECIDED anywhere.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from rich.console import Console

from runner.publish import github, rules
from runner.report import history as history_mod
from runner.report import html as html_report
from runner.report import junit, markdown, rollup, terminal
from runner.results.build import Results
from runner.results.sureness import Flip
from tests.report_fixtures import UNDECIDED_UID, assemble, large, quorum, sequential
from tests.test_report_junit_html import XSD, _lxml

ROUND_TWO = "PASS at round 2 (4 attempts): rate 0.75 [0.30, 0.96]"
UNDECIDED_TEXT = ("UNDECIDED after 6 attempts: rate 0.50 [0.18, 0.82] — neither PASS nor FAIL is claimed; fixed N = 3 "
                  "would have said PASS")
# The only places a PASS or FAIL may be named beside the undecided case: that none is claimed, and what fixed N = 3
# would have said (a comparison, labelled as such).
ALLOWED = ("neither PASS nor FAIL", "neither a PASS nor a FAIL", "would have said PASS", "no verdict is claimed")


def _unclaimed(text: str) -> bool:
    for phrase in ALLOWED:
        text = text.replace(phrase, "")
    return "PASS" not in text and "FAIL" not in text


def _terminal(results: Results) -> str:
    console = Console(record=True, width=250, color_system=None)
    terminal.render(results, console)
    return console.export_text()


def _with_flips(results: Results, n: int) -> Results:
    assert results.sequential is not None
    flips = [Flip(uid=f"many/evals/flip-{i:03d}", state="PASS", fixed_n3="FAIL") for i in range(n)]
    return results.model_copy(update={"sequential": results.sequential.model_copy(update={"flips": flips})})


# ---- per case ------------------------------------------------------------------------------------------------

def test_each_case_says_how_sure_the_sequential_verdict_is() -> None:
    texts = {c.uid: rollup.sequential_case_text(c) for c in sequential().cases}
    assert texts["seq/evals/positive-one"] == "PASS at round 1 (2 attempts): rate 1.00 [0.34, 1.00]"
    assert texts["seq/evals/positive-round-two"] == ROUND_TWO
    assert texts["seq/evals/positive-late"].endswith("; fixed N = 3 would have said FAIL")
    assert texts["other/evals/negative-fails"] == "FAIL at round 1 (2 attempts): rate 0.00 [0.00, 0.66]"
    assert texts[UNDECIDED_UID] == UNDECIDED_TEXT
    assert texts["other/evals/positive-api-down"].startswith("ERROR after 6 attempts, 0 observed")
    assert texts["other/evals/unrun-cap"] is None
    # The interval is rounded outwards, never narrower than Wilson's (0.1876, 0.8124).
    assert rollup.interval_text((0.1876, 0.8124)) == "[0.18, 0.82]"
    assert all(rollup.sequential_case_text(c) is None for c in quorum().cases)


# ---- Markdown -------------------------------------------------------------------------------------------------

def test_markdown_shows_undecided_and_the_sequential_verdict() -> None:
    text = markdown.render(sequential())
    assert "| PASS | FAIL | UNDECIDED | ERROR | JUDGE-ERROR | QUARANTINED | UNRUN | Total |" in text
    assert "| 4 | 1 | 1 | 1 | 0 | 0 | 1 | 8 |" in text
    assert "sequential verdict, at most 6 attempts in rounds of 2" in text  # the header, instead of N and k
    section = text.split("### Sequential verdict", 1)[1].split("\n### ", 1)[0]
    assert ("- rule: sequential: pass rate above 0.5 (decides ≤ 0.25 against ≥ 0.75, α 0.1, β 0.1), at most 6 "
            "attempts in rounds of 2") in section
    assert "PASS at most 0.0947 for a case whose rate is θ−δ (0.25); FAIL at most 0.0947 for a case at θ+δ (0.75)" \
        in section
    assert "7 case(s): 4 PASS, 1 FAIL, 1 UNDECIDED (neither PASS nor FAIL claimed), 1 ERROR or JUDGE-ERROR" in section
    assert "28 session(s) used; fixed N = 3 would have used 21 (7 more); the bound is 42" in section
    assert "saved" not in section and "-7" not in section  # more sessions: said as more, never a negative saving
    assert "1. seq/evals/positive-late: PASS, fixed N = 3 would have said FAIL" in section
    assert f"1. {UNDECIDED_UID}: UNDECIDED, fixed N = 3 would have said PASS" in section

    assert "### Undecided cases (1)" in text
    block = text.split(f"<details><summary>UNDECIDED · {UNDECIDED_UID} · trigger</summary>", 1)[1]
    block = block.split("</details>", 1)[0]
    assert f"- sequential verdict: {UNDECIDED_TEXT}" in block
    assert "- state: **UNDECIDED** — the rate stayed open after 6 attempt(s)" in block
    assert "6 run of 6 (sequential verdict)" in block
    assert _unclaimed(block), block
    assert "- sequential verdict: FAIL at round 1 (2 attempts): rate 0.00 [0.00, 0.66]" in text
    # The undecided case is listed under no failing, erroring or passing heading.
    for title in ("Failing cases", "Erroring cases"):
        assert UNDECIDED_UID not in text.split(f"### {title}", 1)[1].split("\n### ", 1)[0]


def test_markdown_one_line_per_case_keeps_the_sequential_text() -> None:
    text = markdown.render(sequential(), limit=len(markdown.render(sequential())) - 200)
    line = next(li for li in text.splitlines() if li.startswith(f"- {UNDECIDED_UID}"))
    assert "UNDECIDED" in line and "rate 0.50 [0.18, 0.82]" in line and _unclaimed(line)


def test_markdown_lists_at_most_ten_flips_and_shrinks_within_the_limit() -> None:
    text = markdown.render(_with_flips(sequential(), 42))
    assert len(re.findall(r"^1\. many/evals/flip-\d+: PASS, fixed N = 3 would have said FAIL$", text, re.M)) == 10
    assert "32 more not listed: see results.json `sequential.flips`." in text

    many = large(2000)
    many = many.model_copy(update={"plan": sequential().plan, "sequential": _with_flips(sequential(), 300).sequential})
    for limit in (65_000, 20_000, 6_000):
        shrunk = markdown.render(many, limit=limit)
        assert len(shrunk) <= limit
        assert "### Sequential verdict" in shrunk and "- rule: sequential:" in shrunk
        assert len(re.findall(r"^1\. many/evals/flip-", shrunk, re.M)) <= 10


# ---- HTML -----------------------------------------------------------------------------------------------------

def test_html_shows_undecided_its_badge_and_every_flip() -> None:
    results = _with_flips(sequential(), 15)
    page = html_report.render(results)
    assert ".st-UNDECIDED.badge,.st-UNDECIDED.mini{background:var(--undecided)}" in page
    assert 'data-state="UNDECIDED" title="Show only UNDECIDED cases"><b>1</b> UNDECIDED</button>' in page
    assert '<input type="checkbox" name="state" value="UNDECIDED" checked> UNDECIDED (1)' in page
    assert f'data-uid="{UNDECIDED_UID}"' in page and '<span class="badge st-UNDECIDED">UNDECIDED</span>' in page
    assert f'<span class="sequential">{html_report.e(UNDECIDED_TEXT)}</span>' in page
    assert f'<span class="sequential">{ROUND_TWO}</span>' in page  # a passing case says how sure too
    section = page.split('<section id="sequential">', 1)[1].split("</section>", 1)[0]
    assert "<h2>Sequential verdict</h2>" in section
    assert "PASS at most 0.0947" in section and "28 session(s) used" in section and "(7 more)" in section
    assert section.count("<tr><td><code>many/evals/flip-") == 15  # every flip, not ten
    # The undecided case's row and detail claim neither PASS nor FAIL.
    row = page.split(f'data-uid="{UNDECIDED_UID}">', 1)[1].split('<tr class="case"', 1)[0]
    assert _unclaimed(re.sub(r"<[^>]+>", " ", row)), row
    # The page's data order: FAIL, broken, then UNDECIDED before UNRUN and PASS.
    assert list(html_report._PRIORITY) == ["FAIL", "ERROR", "JUDGE-ERROR", "QUARANTINED", "UNDECIDED", "UNRUN", "PASS"]


# ---- terminal -------------------------------------------------------------------------------------------------

def test_terminal_shows_undecided_and_the_sequential_verdict() -> None:
    text = _terminal(_with_flips(sequential(), 12))
    assert re.search(r"PASS\s*┃\s*FAIL\s*┃\s*UNDECIDED\s*┃\s*ERROR", text), text
    assert "Sequential verdict" in text and "fixed N = 3 would have used 21 (7 more)" in text
    assert "PASS at most 0.0947" in text and "4 PASS, 1 FAIL, 1 UNDECIDED" in text
    assert len(re.findall(r"many/evals/flip-\d+: PASS, fixed N = 3 would have said FAIL", text)) == 10
    assert "…and 2 more in results.json `sequential.flips`" in text
    assert "Failing, erroring, judge-erroring and undecided cases" in text
    row = next(line for line in text.splitlines() if UNDECIDED_UID in line and "│" in line)
    assert "UNDECIDED" in row
    assert "UNDECIDED after 6 attempts: rate 0.50 [0.18, 0.82]" in " ".join(text.split())


# ---- JUnit ----------------------------------------------------------------------------------------------------

def test_junit_skips_an_undecided_case_and_carries_the_run_figures() -> None:
    root = ET.fromstring(junit.render(sequential()))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    undecided = cases[UNDECIDED_UID]
    assert [child.tag for child in undecided] == ["skipped"]  # neither <failure> nor <error>
    skipped = undecided.find("skipped")
    message = skipped.get("message")
    assert message.startswith("UNDECIDED: rate 0.50 [0.18, 0.82] after 6 attempt(s)")
    assert "no verdict is claimed (neither PASS nor FAIL)" in message
    assert _unclaimed(message) and UNDECIDED_TEXT in skipped.text
    assert cases["seq/evals/positive-round-two"].find("system-out").text == ROUND_TWO
    assert "FAIL at round 1 (2 attempts)" in cases["other/evals/negative-fails"].find("failure").text
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert [suites["seq"].get(k) for k in ("tests", "failures", "errors", "skipped")] == ["5", "0", "0", "1"]
    props = {p.get("name"): p.get("value") for p in suites["seq"].iter("property")}
    assert props["sequential_pass_at_p0"] == "0.0947" and props["sequential_fail_at_p1"] == "0.0947"
    assert props["sequential_undecided"] == "1" and props["sequential_passed"] == "4"
    assert props["sequential_sessions"] == "28" and props["sequential_sessions_fixed_n3"] == "21"
    assert props["sequential_sessions_more"] == "7" and "sequential_sessions_saved" not in props
    assert props["sequential_sessions_bound"] == "42" and props["sequential_flips"] == "2"
    assert props["sequential_rule"].startswith("sequential: pass rate above 0.5")


def test_junit_with_sequential_figures_validates_against_the_schema() -> None:
    etree = _lxml()
    schema = etree.XMLSchema(etree.parse(str(XSD)))
    for results in (sequential(), _with_flips(sequential(), 40), quorum()):
        document = etree.fromstring(junit.render(results).encode("utf-8"))
        assert schema.validate(document), schema.error_log


# ---- the check run ----------------------------------------------------------------------------------------------

def _only(states: tuple[str, ...]) -> Results:
    return assemble([c for c in sequential().cases if c.state in states])


def test_undecided_is_never_success() -> None:
    undecided = _only(("PASS", "UNDECIDED", "UNRUN"))
    assert rules.conclusion(undecided) == "neutral"
    assert rules.conclusion(undecided, "required") == "neutral"
    assert rules.title(undecided) == "PASS 4 · FAIL 0 · UNDECIDED 1 · UNRUN 1 · $1.23 of $10.00"
    assert rules.conclusion(_only(("UNDECIDED",)), "required") == "neutral"
    # A FAIL or an ERROR still decides it; without an undecided case all PASS is success.
    assert rules.conclusion(sequential(), "required") == "failure" and rules.conclusion(sequential()) == "neutral"
    assert rules.conclusion(_only(("UNDECIDED", "ERROR")), "required") == "failure"
    assert rules.conclusion(_only(("PASS", "UNRUN")), "required") == "success"
    assert "UNDECIDED" not in rules.title(_only(("PASS", "UNRUN")))
    assert "UNDECIDED" in (rules.conclusion.__doc__ or "")


def test_an_undecided_case_is_a_notice_annotation_that_claims_no_verdict() -> None:
    made, _ = github.case_annotations(sequential())
    notes = {note["title"]: note for note in made}
    note = notes[f"skill-evals UNDECIDED: {UNDECIDED_UID}"]
    assert note["annotation_level"] == "notice"
    assert "rate 0.50 [0.18, 0.82]" in note["message"] and _unclaimed(note["message"])
    assert sorted(n["annotation_level"] for n in made) == ["failure", "notice", "warning"]


# ---- history ----------------------------------------------------------------------------------------------------

def test_an_undecided_case_is_a_quarantine_candidate_without_flips() -> None:
    previous = quorum().model_copy(update={"finished_at": "2026-11-29T12:00:00+00:00"})
    history = history_mod.compare(sequential(), [previous], labels=["yesterday"])
    assert [(c.uid, c.flips, c.undecided_now) for c in history.candidates] == [(UNDECIDED_UID, 0, True)]
    assert "never quarantined automatically" in history.note
    text = history_mod.render_markdown(history)
    assert "#### Quarantine candidates (≥ 2 PASS↔FAIL flips, or UNDECIDED in this run)" in text
    assert f"| {UNDECIDED_UID} (UNDECIDED now: a flake seen within this run) | 0 | FAIL → UNDECIDED | 0 |" in text
    page = html_report.render(sequential(), history=history)
    section = page.split('<section id="quarantine-candidates">', 1)[1].split("</section>", 1)[0]
    assert UNDECIDED_UID in section and "UNDECIDED in this run" in section and "flip" not in section
    assert "a person decides" in section
    # Without an undecided case, the section reads as it always did.
    plain = history_mod.render_markdown(history_mod.compare(quorum(), [previous], labels=["yesterday"]))
    assert "#### Quarantine candidates (≥ 2 PASS↔FAIL flips)\n" in plain and "UNDECIDED" not in plain


# ---- a quorum run ---------------------------------------------------------------------------------------------

def test_a_quorum_run_shows_no_undecided_anywhere() -> None:
    results = quorum()
    assert results.sequential is None and results.counts["UNDECIDED"] == 0
    page = html_report.render(results)
    previous = results.model_copy(update={"finished_at": "2026-11-29T12:00:00+00:00"})
    history = history_mod.compare(results, [previous])
    for name, text in (("markdown", markdown.render(results)), ("terminal", _terminal(results)),
                       ("junit", junit.render(results)), ("html", page.split("</style>", 1)[1]),
                       ("title", rules.title(results)), ("history", history_mod.render_markdown(history))):
        assert "UNDECIDED" not in text, name
        assert "Sequential verdict" not in text and "sequential" not in text.lower(), name
    assert "N=3, k=2" in markdown.render(results)
