"""The report, merge and shard commands end to end on real run folders (api host, fake API)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

from runner.core.states import AGAINST, BROKEN
from runner.testing.fake_anthropic import FakeAnthropic, error, skill, text
from runner.testing.fake_judge import JUDGE_MATCH, verdicts
from tests.conftest import EXAMPLE
from tests.helpers import PROMPTS, TRIAGE, key_of, results_of, skill_evals_run


def scripted(fake: FakeAnthropic) -> None:
    fake.script(JUDGE_MATCH, verdicts("PASS"))
    for uid in PROMPTS:
        if uid.startswith(f"{TRIAGE}/evals/positive") or uid.startswith(f"{TRIAGE}/trigger/triage"):
            fake.script(key_of(uid), skill(TRIAGE), text("TEST REPORT TRIAGE — run\n[NOT PROVEN] suite x ran 0 tests"))
    fake.default(text("A plain answer."))


def comparable(results: dict) -> dict:
    cases = {c["uid"]: (c["state"], c["reason"], c["wins"], c["losses"], c["errors"]) for c in results["cases"]}
    return {"cases": cases, "counts": results["counts"], "unrun": results["unrun_by_reason"],
            "assertions": results["assertion_counts"]}


def test_three_shards_merge_into_the_unsharded_rollup(tmp_path: Path) -> None:
    args = ("--host", "api", "--skill", TRIAGE, "--repeats", "3")
    with FakeAnthropic() as fake:
        scripted(fake)
        whole = skill_evals_run(fake, tmp_path / "whole", *args)
        assert whole.returncode == 0, whole.stderr
        for index in (1, 2, 3):
            done = skill_evals_run(fake, tmp_path / f"shard{index}", *args, "--shard", f"{index}/3")
            assert done.returncode == 0, done.stderr
    plans = {json.loads((tmp_path / f"shard{i}" / "results.json").read_text())["plan"]["hash"] for i in (1, 2, 3)}
    assert len(plans) == 1, "every shard plans the same cases"
    merged = subprocess.run([sys.executable, "-m", "runner", "merge", *(str(tmp_path / f"shard{i}") for i in (1, 2, 3)),
                             "--out", str(tmp_path / "merged")], capture_output=True, text=True, timeout=120,
                            check=False)
    assert merged.returncode == 0, merged.stderr
    assert comparable(results_of(tmp_path / "merged")) == comparable(results_of(tmp_path / "whole"))


STATES = ("PASS", "FAIL", "ERROR", "JUDGE-ERROR", "QUARANTINED", "UNRUN")
# What each state is in JUnit XML (runner/report/junit.py): the child element of its <testcase>, if any.
JUNIT_CHILD = {"PASS": None, "FAIL": "failure", "ERROR": "error", "JUDGE-ERROR": "error", "UNRUN": "skipped",
               "QUARANTINED": "skipped"}


def check_junit(document: str, results: dict) -> None:
    root = ET.fromstring(document)
    assert root.tag == "testsuites"
    testcases = root.findall("./testsuite/testcase")
    by_name = {tc.get("name"): tc for tc in testcases}
    cases = results["cases"]
    assert len(testcases) == len(by_name) == len(cases), (len(testcases), len(cases))
    assert set(by_name) == {c["uid"] for c in cases}
    for c in cases:
        testcase = by_name[c["uid"]]
        assert testcase.get("classname") == c["skill"]
        children = [child.tag for child in testcase if child.tag in ("failure", "error", "skipped")]
        want = JUNIT_CHILD[c["state"]]
        assert children == ([want] if want else []), (c["uid"], c["state"], children)
        if c["state"] == "FAIL":
            assert testcase.find("failure").get("type") == "FAIL"
        elif c["state"] in BROKEN:
            assert testcase.find("error").get("type") == c["state"]
        elif c["state"] == "UNRUN":
            assert testcase.find("skipped").get("message") == f"UNRUN: {c['reason']}"
        elif c["state"] == "QUARANTINED":
            message = testcase.find("skipped").get("message")
            assert message.startswith(f"QUARANTINED (underlying {c['underlying_state']})"), message
    counts = results["counts"]
    suites = root.findall("./testsuite")
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == (
        str(len(cases)), str(counts["FAIL"]), str(counts["ERROR"] + counts["JUDGE-ERROR"]))
    assert sum(int(s.get("skipped")) for s in suites) == counts["UNRUN"] + counts["QUARANTINED"]
    assert sum(int(s.get("tests")) for s in suites) == len(cases)


def markdown_table(text: str, after: str) -> list[list[str]]:
    """The rows (header first, the --- line left out) of the first Markdown table after the text `after`."""
    assert after in text, after
    lines = text.split(after, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    assert set(rows[1]) <= {"---", "---:"}, rows[1]
    return [rows[0], *rows[2:]]


def shown_counts(results: dict) -> dict[str, int]:
    """results.json's counts as the reports show them: UNDECIDED (the sequential verdict's) only when a case is."""
    return {state: n for state, n in results["counts"].items() if state != "UNDECIDED" or n}


def check_markdown(text: str, results: dict) -> None:
    header, *values = markdown_table(text, "\n### State counts\n")
    assert header == [*STATES, "Total"] and len(values) == 1
    assert dict(zip(header, map(int, values[0]))) == {**shown_counts(results), "Total": len(results["cases"])}
    for c in results["cases"]:
        summary = f"<summary>{c['state']} · {c['uid']} · {c['kind']}</summary>"
        if c["state"] in AGAINST:
            assert text.count(summary) == 1, summary
        elif c["state"] == "QUARANTINED":
            assert f"| {c['uid']} | QUARANTINED ({c['underlying_state']}) |" in text
        else:  # PASS and UNRUN cases are not listed among the failing, erroring or quarantined ones
            assert f" · {c['uid']} · " not in text and f"| {c['uid']} |" not in text, (c["uid"], c["state"])
    _, *unrun = markdown_table(text, "\n### UNRUN by reason\n")
    assert {reason: int(n) for reason, n in unrun} == {**results["unrun_by_reason"],
                                                     "**Total**": results["counts"]["UNRUN"]}


class CasesInHtml(HTMLParser):
    """The case rows (`tr.case`: data-uid → data-state) and the state counts (`button.count`) of the HTML report."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self._count: str | None = None
        self._number = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "tr" and "case" in classes:
            assert a["data-uid"] not in self.rows, a["data-uid"]
            self.rows[a["data-uid"]] = a["data-state"]
        elif tag == "button" and "count" in classes:
            self._count = a["data-state"]
        elif tag == "b" and self._count:
            self._number = True

    def handle_data(self, data: str) -> None:
        if self._number and self._count:
            self.counts[self._count] = int(data)
            self._number, self._count = False, None


def check_html(document: str, results: dict) -> None:
    parsed = CasesInHtml()
    parsed.feed(document)
    assert parsed.rows == {c["uid"]: c["state"] for c in results["cases"]}
    assert parsed.counts == shown_counts(results)


def check_json(text: str, results: dict) -> None:
    assert json.loads(text) == results


def terminal_rows(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip().strip("│┃").split("│" if "│" in line else "┃")]
            for line in text.splitlines() if line.startswith(("│", "┃"))]


def check_terminal(text: str, results: dict) -> None:
    rows = terminal_rows(text)
    header = [*STATES, "Total"]
    at = rows.index(header)
    assert dict(zip(header, map(int, rows[at + 1]))) == {**shown_counts(results), "Total": len(results["cases"])}
    # Every case that is neither PASS nor UNRUN has a row of its own, with its state (a quarantined one with the
    # state underneath); no other case has one.
    listed = {row[0]: row for row in rows if row and row[0] in {c["uid"] for c in results["cases"]}}
    shown = {c["uid"]: c["state"] if c["state"] != "QUARANTINED" else f"QUARANTINED ({c['underlying_state']})"
             for c in results["cases"] if c["state"] not in ("PASS", "UNRUN")}
    assert set(listed) == set(shown), (sorted(listed), sorted(shown))
    for uid, state in shown.items():
        assert state in listed[uid][1:], (uid, state, listed[uid])
    unrun = {row[0]: int(row[1]) for row in rows if row and row[0] in results["unrun_by_reason"]}
    assert unrun == results["unrun_by_reason"]
    assert ["Total", str(results["counts"]["UNRUN"])] in rows


def test_report_formats_render_from_results_json(tmp_path: Path) -> None:
    import shutil
    library = tmp_path / "library"
    shutil.copytree(EXAMPLE, library)
    (library / ".skill-evals.toml").write_text("[run]\nhost_max_retries = 0\n")
    quarantined = f"{TRIAGE}/trigger/quarantine-incident-goes-to-postmortem"
    (library / ".skill-evals").mkdir()
    (library / ".skill-evals" / "quarantine.json").write_text(json.dumps([
        {"uid": quarantined, "reason": "flaky neighbour", "date": "2026-11-01", "expires": "2099-01-01"}]))
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        # Registered before the others (the first match wins): every state occurs once at least.
        fake.script(key_of(f"{TRIAGE}/evals/negative-dependency-bump-review"), error(500, "api_error", "boom"))
        fake.script("Reports every testsuite with its executed count", text("not a verdict"))  # its judge call
        scripted(fake)
        done = skill_evals_run(fake, out, "--host", "api", "--skill", TRIAGE, "--repeats", "1", library=library)
        assert done.returncode == 0, done.stderr
    results = results_of(out)
    assert {state for state, n in results["counts"].items() if n} == set(STATES), results["counts"]
    checks = {"markdown": check_markdown, "junit": check_junit, "html": check_html, "json": check_json,
              "terminal": check_terminal}
    for fmt, needle in (("markdown", "<!-- skill-evals-report -->"), ("junit", "<testsuites"),
                        ("html", "<!DOCTYPE html"), ("json", '"schema_version"'), ("terminal", "UNRUN")):
        done = subprocess.run([sys.executable, "-m", "runner", "report", str(out), "--format", fmt],
                              capture_output=True, text=True, timeout=120, check=False,
                              env={**os.environ, "COLUMNS": "400"})  # the terminal's tables unwrapped
        assert done.returncode == 0, (fmt, done.stderr)
        assert needle.lower() in done.stdout.lower(), fmt
        assert "no result is claimed" in done.stdout or fmt in ("junit", "json")
        checks[fmt](done.stdout, results)


def test_quarantine_file_and_previous_runs(tmp_path: Path) -> None:
    import shutil
    library = tmp_path / "library"
    shutil.copytree(EXAMPLE, library)
    flaky = f"{TRIAGE}/evals/positive-junit-in-workspace"
    (library / ".skill-evals").mkdir()
    (library / ".skill-evals" / "quarantine.json").write_text(json.dumps([
        {"uid": flaky, "reason": "flips with the runner image", "date": "2026-11-01", "expires": "2099-01-01"}]))
    runs = []
    for attempt in range(2):
        with FakeAnthropic() as fake:
            fake.script(JUDGE_MATCH, verdicts("PASS"))
            nightly = f"{TRIAGE}/evals/positive-nightly-summary-with-skip"
            # The nightly case passes in the first run and fails (no skill) in the second.
            if attempt == 0:
                fake.script(key_of(nightly), skill(TRIAGE), text("TEST REPORT TRIAGE — x\n[NOT PROVEN]"))
            fake.default(text("A plain answer."))
            out = tmp_path / f"run{attempt}"
            done = skill_evals_run(fake, out, "--host", "api", "--case", nightly, "--case", flaky, "--repeats", "1",
                                   library=library)
            assert done.returncode == 0, done.stderr
            runs.append(out)
    last = results_of(runs[1])
    quarantined = next(c for c in last["cases"] if c["uid"] == flaky)
    assert quarantined["state"] == "QUARANTINED" and quarantined["underlying_state"] == "FAIL"
    assert quarantined["quarantine"]["reason"] == "flips with the runner image"
    first = results_of(runs[0])
    assert [(c["uid"], c["state"]) for c in first["cases"]] == [(nightly, "PASS"), (flaky, "QUARANTINED")]
    assert [(c["uid"], c["state"]) for c in last["cases"]] == [(nightly, "FAIL"), (flaky, "QUARANTINED")]

    def report(fmt: str, *previous: Path) -> str:
        done = subprocess.run([sys.executable, "-m", "runner", "report", str(runs[1]), "--format", fmt,
                               *(arg for p in previous for arg in ("--previous", str(p)))],
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    markdown = report("markdown", runs[0])
    assert "flips with the runner image" in markdown and "QUARANTINED" in markdown
    assert "PASS" in markdown and "FAIL" in markdown and "positive-nightly-summary-with-skip" in markdown
    # The history section (runner/report/history.py render_markdown), after the report itself.
    assert markdown.count("### History: 2 run(s)") == 1
    history = markdown.split("### History: 2 run(s)", 1)[1]
    assert "no result is claimed" in markdown.split("### History", 1)[0]
    # The previous run is named by its folder (history.compare's docstring) or by its finish time (what
    # `report` passes today: no labels).
    assert any(f"#### Changes since {label}\n" in history for label in (str(runs[0]), first["finished_at"])), history
    # One change: the nightly case went PASS -> FAIL; the quarantined case was QUARANTINED (FAIL) both times.
    header, *changes = markdown_table(history, "#### Changes since")
    assert header == ["Case", "Before", "Now"]
    assert changes == [[nightly, "PASS", "FAIL"]]
    candidates = history.split("#### Quarantine candidates (≥ 2 PASS↔FAIL flips)\n", 1)[1]
    assert candidates.lstrip("\n").startswith("None.\n")  # one flip is under the threshold of 2
    assert "- Runs in window: 2\n- Flips: 1 in 1 case(s)\n" in history
    header, *records = markdown_table(history, "#### Stability record")
    assert header == ["Run", "Finished", "Judge errors", "Spend / cap", "Stopped", "Plan / library"]
    assert [(row[1], row[-1]) for row in records] == [(first["finished_at"], "same"), (last["finished_at"], "same")]
    assert records[-1][0] in ("current", f"{runs[1]} (current)")

    # Without --previous there is no history: the section and its PASS -> FAIL row are what --previous adds.
    plain = report("markdown")
    row = f"| {nightly} | PASS | FAIL |"
    assert row in markdown and row not in plain
    assert "### History" not in plain and "#### Changes since" not in plain and "Flips:" not in plain
    # The terminal report shows the same section under the tables, rendered for a terminal: no Markdown marks.
    terminal = report("terminal", runs[0])
    assert terminal.count("History: 2 run(s)") == 1 and "###" not in terminal and "| --- |" not in terminal
    history_part = terminal.split("History: 2 run(s)", 1)[1]
    assert "Stability record" in history_part and "• Runs in window: 2" in history_part
    assert re.search(rf"{re.escape(nightly)}\s+PASS\s+FAIL", history_part), history_part


def test_every_state_fixture_is_a_valid_results_file() -> None:
    from jsonschema import Draft202012Validator

    from tests.report_fixtures import every_state
    schema = json.loads((Path(__file__).parent.parent / "runner" / "schemas" / "results.schema.json").read_text())
    data = json.loads(every_state().model_dump_json())
    assert not list(Draft202012Validator(schema).iter_errors(data))
    # Every state results.json counts (as the runner writes it), each with a case but UNDECIDED: a quorum run
    # never has one (only the sequential verdict leaves a case open).
    assert set(data["counts"]) == {"PASS", "FAIL", "UNDECIDED", "ERROR", "JUDGE-ERROR", "QUARANTINED", "UNRUN"}
    assert all(v >= 1 for state, v in data["counts"].items() if state != "UNDECIDED")
    assert data["counts"]["UNDECIDED"] == 0
