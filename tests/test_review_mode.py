"""The HTML report's review mode: a person marks agree/disagree with the judge on judged assertions in headless
Chromium, downloads labels.json, and `calibrate-judge` reads exactly that file (issue 19 §2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from jsonschema import Draft202012Validator

from runner.judge.agreement import load_labels
from runner.report import html as html_report
from runner.results.build import Results
from runner.testing.fake_anthropic import FakeAnthropic, skill, text
from runner.testing.fake_judge import JUDGE_MATCH, verdicts
from tests.browser import Browser, need_chromium
from tests.conftest import EXAMPLE, run_cli
from tests.helpers import KEY, PROMPTS, TRIAGE, key_of, skill_evals_run

NIGHTLY = f"{TRIAGE}/evals/positive-nightly-summary-with-skip"
SCHEMAS = Path(__file__).resolve().parent.parent / "runner" / "schemas"
ANSWER = "TEST REPORT TRIAGE — nightly\n[NOT PROVEN] api skipped (flaky on runner, see #882)"


def judged_run(tmp_path: Path) -> Path:
    """A real run against the fake: the judge says PASS to every rubric item of two attempts."""
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("PASS"))
        fake.script(key_of(NIGHTLY), skill(TRIAGE), text(ANSWER))
        done = skill_evals_run(fake, out, "--case", NIGHTLY, "--repeats", "3")
    assert done.returncode == 0, done.stderr
    return out


def page(run: Path, tmp_path: Path) -> Path:
    done = run_cli("report", str(run), "--format", "html", "--out", str(tmp_path / "report.html"))
    assert done.returncode == 0, done.stderr
    return tmp_path / "report.html"


def test_the_page_carries_what_a_label_needs(tmp_path: Path) -> None:
    run = judged_run(tmp_path)
    results = Results.model_validate_json((run / "results.json").read_text())
    data = html_report.attempts_data(results, run, html_report.TRANSCRIPT_CAP, html_report.TOTAL_CAP)
    attempts = [a for entries in data.values() for a in entries]
    judged = [x for a in attempts for x in a["assertions"] if x.get("judged")]
    assert len(attempts) == 2 and len(judged) == 4
    for a in attempts:
        assert a["prompt"] == PROMPTS[NIGHTLY], "the prompt is read from the transcript"
        assert a["final_answer"] == ANSWER
        assert a["tool_calls"] and a["tool_calls"][0]["name"] == "Skill"
    # Decided by script (activation; the shape-only "Output starts with the `TEST REPORT TRIAGE` block."), never
    # offered for review; the judge's two are.
    for a in attempts:
        assert [(x["index"], x["judged"]) for x in a["assertions"]] == [(1, False), (2, True), (3, True)]
        assert a["assertions"][0]["class"] == "artifact_shape" and a["assertions"][0]["state"] == "PASS"


def test_review_in_chromium_downloads_labels_that_calibrate_judge_reads(tmp_path: Path) -> None:
    need_chromium()
    run = judged_run(tmp_path)
    report = page(run, tmp_path)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    browser = Browser(tmp_path / "profile", report.as_uri() + f"#review=1&case={NIGHTLY}")
    try:
        browser.wait_for("document.documentElement.getAttribute('data-ready') === '1'")
        browser.browser_call("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(downloads))
        assert browser.js("document.getElementById('review-toggle').checked") is True
        count = browser.wait_for("document.querySelectorAll('.review-controls').length")
        assert count >= 3
        assert browser.js("document.getElementById('download-labels').disabled") is True
        # Mark three: agree, agree, disagree (with a note typed as a person types it).
        for index, button in ((0, "agree"), (1, "agree"), (2, "disagree")):
            browser.js(f"document.querySelectorAll('.review-controls')[{index}]"
                       f".querySelector('button.review-{button}').click()")
        browser.js("document.querySelectorAll('.review-controls')[2].querySelector('.review-note').focus()")
        browser.call("Input.insertText", text="the skip is named but <b>not</b> its reason")
        assert browser.js("document.getElementById('review-count').textContent").startswith(f"3 of {count} ")
        browser.screenshot(tmp_path / "review.png")
        browser.js("document.getElementById('download-labels').click()")
        labels = downloads / "labels.json"
        for _ in range(400):
            if labels.exists() and not list(downloads.glob("*.crdownload")):
                break
            browser.js("1")  # let the browser finish writing
        assert labels.exists(), list(downloads.iterdir())
        status = browser.js("document.getElementById('review-status').textContent")
        assert "3 label(s)" in status
    finally:
        browser.close()

    items = load_labels(labels)  # exactly the format calibrate-judge reads
    schema = json.loads((SCHEMAS / "labels.schema.json").read_text())
    Draft202012Validator(schema).validate(json.loads(labels.read_text()))
    assert len(items) == 3
    assert [i.label for i in items] == ["PASS", "PASS", "FAIL"] and {i.run_verdict for i in items} == {"PASS"}
    assert items[2].note == "the skip is named but <b>not</b> its reason"
    assert all(i.prompt == PROMPTS[NIGHTLY] and i.answer == ANSWER and i.case == NIGHTLY for i in items)

    library = tmp_path / "library"
    shutil.copytree(EXAMPLE, library)
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("PASS"))  # the judge says again what it said in the run
        done = run_cli("calibrate-judge", str(labels), "--library", str(library), fake=fake, key=KEY)
    # 2 of 3 agree; the one label-FAIL the judge called PASS: false PASS 1.0; no label-PASS it failed.
    assert "agreement 66.7%, false PASS 100.0%, false FAIL 0.0%" in done.stdout, done.stdout + done.stderr
    assert done.returncode == 1, "below the default thresholds: the record does not pass"
    record = json.loads((library / ".skill-evals" / "judge-calibration.json").read_text())[-1]
    classes = {i.assertion_class for i in items}
    assert set(record["by_class"]) == classes
    assert sum(c["items"] for c in record["by_class"].values()) == 3
    for name in classes:
        assert f"class {name}:" in done.stdout
