"""The Markdown and terminal reports: golden output, hostile text, the comment-size limit.

Golden file: tests/golden/every_state.md is the reviewed rendering of `every_state()`. After an
intended change to the report, regenerate it with

    UPDATE_GOLDEN=1 python -m pytest tests/test_report_markdown.py

then read the diff of tests/golden/every_state.md before committing it.
"""

from __future__ import annotations

import io
import os
import re
from datetime import date
from pathlib import Path

import pytest
from rich.console import Console

from runner.plan.quarantine import QuarantineEntry
from runner.report import html, markdown, rollup, terminal
from runner.results.build import CaseResult, Results
from tests.report_fixtures import HOSTILE, assemble, every_state, large

GOLDEN = Path(__file__).parent / "golden" / "every_state.md"
STATES = ("PASS", "FAIL", "ERROR", "JUDGE-ERROR", "QUARANTINED", "UNRUN")
UNRUN_REASONS = ("not-judged", "budget-cap", "kill-switch", "cancelled", "no-credentials", "manual-only-target",
                 "unknown-case-type", "not-selected")


@pytest.fixture(scope="module")
def every() -> Results:
    return every_state()


@pytest.fixture(scope="module")
def every_md(every: Results) -> str:
    return markdown.render(every)


@pytest.fixture(scope="module")
def big() -> Results:
    return large(2000)


def tables(md: str) -> list[list[str]]:
    """Blocks of consecutive lines that start with a pipe."""
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in md.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def cells(row: str) -> int:
    """Cell count as GFM sees it: split on pipes that are not backslash-escaped."""
    return len(re.findall(r"(?<!\\)\|", row)) - 1


def details_balanced(md: str) -> bool:
    depth = 0
    for tag in re.findall(r"</?details\b", md):
        depth += -1 if tag.startswith("</") else 1
        if depth < 0:
            return False
    return depth == 0


def with_text(results: Results, text: str) -> Results:
    """`results` with `text` in every place user text can reach the report."""
    cases = []
    for case in results.cases:
        update: dict = {"uid": case.uid + text, "reason": f"{case.reason} {text}" if case.reason else None,
                        "warnings": [w + " " + text for w in case.warnings] + [text],
                        "attempts": [a + text for a in case.attempts],
                        "fired_instead": {**case.fired_instead, text: 1},
                        "parts": {k: v + text for k, v in case.parts.items()},
                        "pairs": [p.model_copy(update={"neighbour": p.neighbour + text}) for p in case.pairs],
                        "assertions": [a.model_copy(update={"text": a.text + " " + text,
                                                            "evidence": [e + " " + text for e in a.evidence] + [text]})
                                       for a in case.assertions]}
        if case.quarantine:
            update["quarantine"] = case.quarantine.model_copy(update={"reason": text})
        cases.append(case.model_copy(update=update))
    plan = results.plan.model_copy(update={"approximation": text, "model": text})
    return results.model_copy(update={"cases": cases, "plan": plan,
                                      "unrun_by_reason": {**results.unrun_by_reason, text: 1}})


# ---- golden -----------------------------------------------------------------------------------------

def test_every_state_matches_the_golden_file(every_md: str) -> None:
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(every_md, encoding="utf-8")
    assert every_md == GOLDEN.read_text(encoding="utf-8"), \
        "the report changed: if intended, regenerate with UPDATE_GOLDEN=1 and review the diff"


# ---- content --------------------------------------------------------------------------------------------

def test_marker_first_then_header(every_md: str) -> None:
    lines = every_md.splitlines()
    assert lines[0] == "<!-- skill-evals-report -->"
    head = lines[1]
    for part in ("tier pr", "claude-code 2.1.332", "model claude-sonnet-4-6", "judge claude-sonnet-4-6", "N=3, k=2",
                 "spend 1.23 USD of 10.00 USD cap", "coverage 6 run / 8 UNRUN"):
        assert part in head


def test_approximation_is_said_right_under_the_header(every: Results) -> None:
    plan = every.plan.model_copy(update={"host": "api", "approximation": "direct API, not Claude Code's surface"})
    md = markdown.render(every.model_copy(update={"plan": plan}))
    lines = md.splitlines()
    assert lines[3] == "> **Approximation:** direct API, not Claude Code's surface"
    assert "Approximation" not in markdown.render(every)


def test_state_counts_include_every_state_and_zeros(every_md: str) -> None:
    assert "| PASS | FAIL | ERROR | JUDGE-ERROR | QUARANTINED | UNRUN | Total |" in every_md
    assert "| 1 | 2 | 1 | 1 | 1 | 8 | 14 |" in every_md
    md = markdown.render(large(50))
    assert "| 10 | 10 | 10 | 10 | 0 | 10 | 50 |" in md  # QUARANTINED 0 is shown


def test_per_skill_table_has_wilson_pairs_and_refusal(every_md: str) -> None:
    assert "| alpha | 1 | 2 | 0 | 0 | 0 | 0 | 2/2 (34–100%) | 1/1 | 0/1 |" in every_md
    assert "| gamma | 0 | 0 | 0 | 0 | 0 | 7 | — | — | — |" in every_md
    assert "| **All 3 skills** | 1 | 2 | 1 | 1 | 1 | 8 | 4/4 (51–100%) | 1/1 | 0/1 |" in every_md


def test_failing_case_details(every_md: str) -> None:
    assert "<details><summary>FAIL · alpha/trigger/alpha-wins · discrimination</summary>" in every_md
    assert "- fired instead: beta ×2" in every_md
    assert ("- pairs: vs beta FAIL (won 0 / lost 2) · vs gamma PASS (won 2 / lost 0) · "
            "vs manual-one UNRUN (won 0 / lost 0; manual-only-target)") in every_md
    assert "- repeats: 0 wins / 2 losses / 0 errors; 2 run of 3 (quorum 2)" in every_md
    assert "alpha/trigger/alpha-wins#main#&#8203;1" in every_md  # attempt ids, #<digit> defused
    assert "- state: **ERROR** — api-error: HTTP 500 (server_error)" in every_md
    assert ("  - assertion 1 (semantic): **JUDGE-ERROR** (HTTP 500 after the SDK's retries), 0 pass / 0 fail — "
            "States the verdict first.") in every_md
    assert not re.search(r"(?<![\w&])#\d", every_md), "the report's own text links no issue"


def test_refusal_case_shows_both_parts(every_md: str) -> None:
    block = every_md.split("<details><summary>FAIL · alpha/evals/should-not-merge · refusal</summary>")[1]
    block = block.split("</details>")[0]
    assert "- parts: activation PASS · refusal FAIL" in block
    assert "- evidence: “Merged. @&#8203;someone" in block


def test_refusal_parts_survive_the_one_line_form(every: Results) -> None:
    roll = rollup.build(every)
    md = markdown.compose(every, roll, markdown.Shape(level=2), 65_000)
    assert "- alpha/evals/should-not-merge · refusal · FAIL · 0/2/2 of 3 · activation PASS, refusal FAIL" in md


def test_quarantined_case_shows_underlying_state(every_md: str) -> None:
    row = next(line for line in every_md.splitlines() if line.startswith("| beta/evals/positive-flaky"))
    assert "QUARANTINED (FAIL)" in row and "2026-11-01" in row and "2027-01-31" in row


def quarantined_without_key(uid: str) -> CaseResult:
    """A quarantined case of a run that had no key: never executed, so QUARANTINED over UNRUN (no-credentials)."""
    return CaseResult(uid=uid, skill="beta", kind="trigger", target="beta", state="QUARANTINED",
                      underlying_state="UNRUN", reason="no-credentials", repeats_planned=3, quorum=2,
                      quarantine=QuarantineEntry(uid=uid, reason="flips weekly", date=date(2026, 11, 1)))


def test_a_quarantined_case_that_never_ran_is_not_said_to_have_run() -> None:
    unrun = [CaseResult(uid="gamma/evals/plain", skill="gamma", kind="trigger", target="gamma", state="UNRUN",
                        reason="no-credentials", repeats_planned=3, quorum=2)]
    md = markdown.render(assemble([*unrun, quarantined_without_key("beta/evals/flaky")]))
    section = md.split("### Quarantine (1)")[1].split("###")[0]
    assert "still ran" not in section
    assert "1 was not executed: UNRUN with its reason" in section
    row = next(line for line in section.splitlines() if line.startswith("| beta/evals/flaky"))
    assert "QUARANTINED (UNRUN no-credentials)" in row
    assert "| no-credentials | 2 |" in md.split("### UNRUN by reason")[1]  # counted as UNRUN with its reason
    assert "coverage 0 run / 2 UNRUN" in md.splitlines()[1]
    # The terminal and the HTML page say the same: not executed, UNRUN with its reason.
    results = assemble([*unrun, quarantined_without_key("beta/evals/flaky")])
    text = terminal_text(results)
    assert "still run" not in text and "Quarantine (not executed: UNRUN with its reason" in text
    assert re.search(r"QUARANTINED \(UNRUN no-credentials\)", text), text
    page = html.render(results)
    item = page.split('<ul id="quarantine">')[1].split("</ul>")[0]
    assert "not executed:" in item and "no-credentials" in item and "underlying" not in item


def test_quarantined_cases_that_ran_and_did_not_are_told_apart(every: Results) -> None:
    cases = [*every.cases, quarantined_without_key("beta/evals/never")]
    section = markdown.render(assemble(cases)).split("### Quarantine (2)")[1].split("###")[0]
    assert "1 still ran; their state is shown with the underlying state" in section
    assert "1 was not executed" in section
    rows = [line for line in section.splitlines() if line.startswith("| beta/")]
    assert "QUARANTINED (FAIL)" in rows[0] and "QUARANTINED (UNRUN no-credentials)" in rows[1]
    text = terminal_text(assemble(cases))
    assert "Quarantine (left out of health metrics; 1 still run, 1 not executed: UNRUN with its reason)" in text


def test_unrun_reasons_all_appear_and_the_sentence_is_last(every: Results, every_md: str) -> None:
    unrun = every_md.split("### UNRUN by reason")[1]
    for reason in UNRUN_REASONS:
        assert f"| {reason} | 1 |" in unrun
    assert "| **Total** | 8 |" in unrun
    assert every_md.rstrip("\n").splitlines()[-1] == every.not_executed
    assert every.not_executed == "8 case(s) were not executed (UNRUN); no result is claimed for them."


def test_unjudgeable_and_surface_warnings(every_md: str) -> None:
    assert "- beta/evals/edge-vague#&#8203;1: Handles it well." in every_md
    assert "- beta/evals/edge-vague: target beta was listed without its description" in every_md


# ---- safety -----------------------------------------------------------------------------------------------

def assert_inert(md: str) -> None:
    assert "<script" not in md.lower()
    assert not re.search(r"@[A-Za-z0-9]", md), "an @mention would ping someone"
    assert md.count("<!--") == 1 and md.startswith(markdown.MARKER + "\n")
    assert md.count("-->") == 1
    assert "`" not in md, "no code span can open or close"
    assert md.count("<details>") == md.count("</details>")
    assert details_balanced(md)
    # Every HTML tag in the report is one of the report's own.
    tags = set(re.findall(r"</?[A-Za-z][^>]*>", md))
    assert tags <= {"<details>", "</details>", "<summary>", "</summary>"}, tags
    for line in md.splitlines():
        if "<summary>" in line:
            assert re.fullmatch(r"<details><summary>[^<>]*</summary>", line), line
    for block in tables(md):
        widths = {cells(row) for row in block}
        assert len(widths) == 1, block


def test_hostile_text_is_inert(every_md: str) -> None:
    assert_inert(every_md)
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &lt;/details&gt; &#96;tick&#96; &#124; pipe &#124; " \
           "&#42;&#42;bold&#42;&#42; &lt;!-- x --&gt; &amp;amp;" in every_md


@pytest.mark.parametrize("text", [
    HOSTILE,
    "line one\n\n</details>\n\n# heading\n| a | b |\n<!--",
    "\\| \\` ``` `` [link](https://example.com) ![img](x) $x^2$ ~~strike~~ _under_ @org/team #12 GH-3",
    "</summary></details><details open><summary>x",
    "\u202eevil\u0000\x1b[31m",
])
def test_any_user_text_is_inert(every: Results, text: str) -> None:
    md = markdown.render(with_text(every, text))
    assert_inert(md)
    for level_limit in (5000, 4000):  # the shortened renderings too
        assert_inert(markdown.render(with_text(every, text), limit=level_limit))


def test_rendered_html_shows_the_text_as_text(every_md: str) -> None:
    """Parse with a CommonMark + tables parser: the hostile text comes out as literal text."""
    markdown_it = pytest.importorskip("markdown_it")
    parser = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])
    html = parser.render(every_md)
    assert "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &lt;/details&gt; `tick` | pipe | **bold** &lt;!-- x --&gt; " \
           "&amp;amp;" in html
    assert "@\u200bsomeone" in html
    assert html.count("<code>") == 0 and html.count("<em>") == 0
    tokens = parser.parse(every_md)
    blocks = [t.content.strip() for t in tokens if t.type == "html_block"]
    for block in blocks:
        assert block == markdown.MARKER or block == "</details>" or re.fullmatch(
            r"<details><summary>[^<>]*</summary>", block), block
    assert not [t for t in tokens if t.type == "inline" and any(c.type == "html_inline" for c in t.children or [])]
    # Table rows as the parser sees them: the same number of cells everywhere in a table.
    rows, widths = 0, []
    for token in tokens:
        if token.type == "tr_open":
            rows = 0
        elif token.type in ("td_open", "th_open"):
            rows += 1
        elif token.type == "tr_close":
            widths.append(rows)
    assert 5 in widths  # the quarantine table, whose reason is the hostile text


def test_escape() -> None:
    e = markdown.escape
    assert e("a\n\n b\tc") == "a b c"
    assert e("snake_case_name") == "snake_case_name"
    assert e("_under_ __x__") == "&#95;under&#95; &#95;&#95;x&#95;&#95;"
    assert e("@someone and a@b.c") == "@&#8203;someone and a@&#8203;b.c"
    assert e("issue #12, #x") == "issue #&#8203;12, #x"
    assert e("<!-- -->") == "&lt;!-- --&gt;"
    assert e("&amp;") == "&amp;amp;"
    assert e("a|b`c*d~e[f]g\\h$i") == "a&#124;b&#96;c&#42;d&#126;e&#91;f&#93;g&#92;h&#36;i"
    assert e("\u202egnp.exe\u0007") == "gnp.exe"
    assert e(None) == ""


# ---- size -------------------------------------------------------------------------------------------------

def test_large_run_fits_a_comment_and_keeps_every_count(big: Results) -> None:
    md = markdown.render(big)
    assert len(md) <= 65_000
    assert "| 400 | 400 | 400 | 400 | 0 | 400 | 2000 |" in md
    assert "| **All 200 skills** | 400 | 400 | 400 | 400 | 0 | 400 | 1600/1600 (99–100%) | — | — |" in md
    assert "| budget-cap | 400 |" in md
    assert md.rstrip("\n").splitlines()[-1] == big.not_executed
    # Detail was given up, and the report says so plainly. At 65,000 characters every failing,
    # erroring and judge-erroring case still fits by uid; a tighter limit drops uids (next test).
    assert "**This report was shortened to fit 65,000 characters:**" in md
    assert "cases are listed by uid only" in md
    assert "quoted evidence" not in md
    assert_inert(md)


def test_tighter_limit_lists_some_cases_and_says_how_many_are_not(big: Results) -> None:
    md = markdown.render(big, limit=25_000)
    assert len(md) <= 25_000
    assert re.search(r"- \d+ more cases not listed: see results\.json", md)
    assert "- 400 more cases not listed: see results.json" not in md.split("### Erroring")[0]
    assert re.search(r"and \d+ of the cases and notes below are not listed at all", md)
    assert "| 400 | 400 | 400 | 400 | 0 | 400 | 2000 |" in md
    assert "| **All 200 skills** |" in md
    assert md.rstrip("\n").splitlines()[-1] == big.not_executed


def test_very_tight_limit_keeps_the_worst_skills_and_totals_the_rest(big: Results) -> None:
    md = markdown.render(big, limit=4_000)
    assert len(md) <= 4_000
    assert re.search(r"\| \*\d+ other skills \(totals\)\* \|", md)
    assert "| **All 200 skills** | 400 | 400 | 400 | 400 | 0 | 400 |" in md
    assert "| budget-cap | 400 |" in md
    assert "| 400 | 400 | 400 | 400 | 0 | 400 | 2000 |" in md
    assert md.rstrip("\n").splitlines()[-1] == big.not_executed
    rows = [line for line in md.splitlines() if line.startswith("| skill-")]
    assert rows and all("| 0 | 10 |" in row or "| 10 |" in row for row in rows)  # skills with problems kept


def test_every_limit_is_respected(every: Results) -> None:
    full = len(markdown.render(every))
    for limit in (full, full - 1, 4_000, 3_000, 2_600):
        md = markdown.render(every, limit=limit)
        assert len(md) <= limit
        assert "| 1 | 2 | 1 | 1 | 1 | 8 | 14 |" in md and md.rstrip().endswith(every.not_executed)


def test_a_limit_that_cannot_hold_the_counts_is_an_error(big: Results) -> None:
    with pytest.raises(ValueError):
        markdown.render(big, limit=1_000)


# ---- terminal ---------------------------------------------------------------------------------------------

def terminal_text(results: Results, width: int = 160) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    terminal.render(results, console)
    return console.export_text()


def test_terminal_has_counts_skills_and_the_sentence(every: Results) -> None:
    text = terminal_text(every)
    assert re.search(r"│\s+1 │\s+2 │\s+1 │\s+1 │\s+1 │\s+8 │\s+14 │", text)
    for skill in ("alpha", "beta", "gamma", "All 3 skills"):
        assert skill in text
    assert "2/2 (34–100%)" in text
    assert "alpha/trigger/alpha-wins" in text and "beta ×2" in text
    assert "api-error: HTTP 500 (server_error)" in text
    assert "QUARANTINED (FAIL)" in text
    for reason in UNRUN_REASONS:
        assert reason in text
    assert every.not_executed in text


@pytest.mark.parametrize("hostile", [HOSTILE, "[/bold] [red]x[/red] [link=https://example.com]y[/link] [/] end\\"])
def test_terminal_shows_user_text_literally(every: Results, hostile: str) -> None:
    text = terminal_text(with_text(every, hostile), width=1000)  # wide: no cell wraps the text
    assert hostile in text  # no MarkupError, nothing interpreted as markup
    assert every.not_executed.replace("8 case(s)", "9 case(s)") not in text  # the sentence is results.not_executed
    assert every.not_executed in text
