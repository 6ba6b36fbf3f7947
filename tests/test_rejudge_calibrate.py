"""Re-judging a finished run from its records, and calibrating the judge on labelled answers."""

from __future__ import annotations

import json
from pathlib import Path

from runner.testing.fake_anthropic import FakeAnthropic, error, skill, text
from runner.testing.fake_judge import JUDGE_MATCH, verdicts
from tests.conftest import EXAMPLE, run_cli
from tests.helpers import KEY, TRIAGE, attempts, case, key_of, results_of, skill_evals_run

NIGHTLY = f"{TRIAGE}/evals/positive-nightly-summary-with-skip"


def test_judge_dir_rejudges_without_sessions_and_records_changes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("PASS"))
        fake.script(key_of(NIGHTLY), skill(TRIAGE), text("TEST REPORT TRIAGE — nightly\n[NOT PROVEN] api skipped"))
        done = skill_evals_run(fake, out, "--case", NIGHTLY, "--repeats", "3")
        assert done.returncode == 0, done.stderr
        assert case(results_of(out), NIGHTLY)["state"] == "PASS"
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("FAIL"))
        done = run_cli("judge", str(out), "--library", str(EXAMPLE), "--judge-model", "claude-haiku-4-5",
                       fake=fake, key=KEY)
        assert done.returncode == 0, done.stdout + done.stderr
        sessions = [r for r in fake.message_requests if JUDGE_MATCH not in json.dumps(r.body)]
        assert sessions == [], "re-judging must not start any session"
        judged = [r for r in fake.message_requests if r.body.get("model") == "claude-haiku-4-5"]
        assert len(judged) == 2  # one call per finished attempt
    target = next(out.glob("rejudged-*"))
    rejudged = json.loads((target / "results.json").read_text())
    assert case(rejudged, NIGHTLY)["state"] == "FAIL"
    assert rejudged["plan"]["judge_model"] == "claude-haiku-4-5"
    changes = json.loads((target / "changes.json").read_text())
    assert {"uid": NIGHTLY, "what": "case", "before": "PASS", "after": "FAIL"} in changes["changes"]
    assert len(attempts(out)) == 2, "the original run is never modified"


def test_judge_dir_needs_a_key(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        done = run_cli("judge", str(tmp_path), "--library", str(EXAMPLE), fake=fake, key=None)
    assert done.returncode == 2 and "ANTHROPIC_API_KEY" in done.stderr


def labels(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_calibrate_judge_reports_rates_and_gates_a_run(tmp_path: Path) -> None:
    library = tmp_path / "library"
    import shutil
    shutil.copytree(EXAMPLE, library)
    rows = [{"id": f"p{i}", "prompt": "Is the run green?", "answer": f"Verdict {i}: NOT PROVEN, one suite ran 0 tests.",
             "assertion": "Calls the run NOT PROVEN.", "label": "PASS"} for i in range(3)]
    rows += [{"id": f"f{i}", "prompt": "Is the run green?", "answer": f"Answer {i}: all green, ship it.",
              "assertion": "Calls the run NOT PROVEN.", "label": "FAIL"} for i in range(2)]
    path = labels(tmp_path / "labels.jsonl", rows)
    with FakeAnthropic() as fake:
        # A judge that says PASS to everything: agreement 3/5, false PASS 2/2 -> fails the thresholds.
        fake.script(JUDGE_MATCH, verdicts("PASS"))
        done = run_cli("calibrate-judge", str(path), "--library", str(library), fake=fake, key=KEY)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "agreement 60.0%" in done.stdout and "false PASS 100.0%" in done.stdout
    record = json.loads((library / ".skill-evals" / "judge-calibration.json").read_text())[-1]
    assert record["passed"] is False and record["items"] == 5

    (library / ".skill-evals.toml").write_text("[judge]\nrequire_calibration = true\n")
    out = tmp_path / "gated"
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("PASS"))
        fake.script(key_of(NIGHTLY), skill(TRIAGE), text("TEST REPORT TRIAGE — x\nfine"))
        done = skill_evals_run(fake, out, "--case", NIGHTLY, "--repeats", "1", library=library)
        assert done.returncode == 0, done.stderr
        assert not [r for r in fake.message_requests if JUDGE_MATCH in json.dumps(r.body)], "no uncalibrated judging"
    result = case(results_of(out), NIGHTLY)
    assert result["state"] == "UNRUN"
    assert {a["reason"] for a in result["assertions"] if a["assertion_class"] == "semantic"} == {"judge-not-calibrated"}

    # A judge that agrees with every label passes and unlocks judging.
    with FakeAnthropic() as fake:
        from runner.testing.fake_anthropic import dynamic
        from runner.testing.fake_judge import final_answer, rubric_ids

        def agree(body: dict):
            answer = final_answer(body)
            verdict = "PASS" if "NOT PROVEN" in answer else "FAIL"
            quote = "NOT PROVEN" if verdict == "PASS" else ""
            return text(json.dumps({"verdicts": [{"id": i, "verdict": verdict, "evidence": quote, "reason": "r"}
                                                 for i in rubric_ids(body)]}))
        fake.script(JUDGE_MATCH, dynamic(agree))
        done = run_cli("calibrate-judge", str(path), "--library", str(library), fake=fake, key=KEY)
        assert done.returncode == 0, done.stdout + done.stderr
        fake.script(key_of(NIGHTLY), skill(TRIAGE), text("TEST REPORT TRIAGE — x\nNOT PROVEN"))
        done = skill_evals_run(fake, tmp_path / "ungated", "--case", NIGHTLY, "--repeats", "1", library=library)
        assert done.returncode == 0
    assert case(results_of(tmp_path / "ungated"), NIGHTLY)["state"] == "PASS"


def test_bad_labels_are_a_usage_error_with_a_line(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"id": "a", "prompt": "p", "answer": "x", "assertion": "y", "label": "PASS"}\n'
                    '{"id": "b", "prompt": "p", "answer": "x", "assertion": "y", "label": "MAYBE"}\n')
    with FakeAnthropic() as fake:
        done = run_cli("calibrate-judge", str(path), "--library", str(EXAMPLE), "--no-record", fake=fake, key=KEY)
    assert done.returncode == 2 and f"{path}:2: label" in done.stderr and "Traceback" not in done.stderr


def test_judge_errors_in_a_run_are_judge_error_not_fail(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, error(500, "api_error", "judge down"))
        fake.script(key_of(NIGHTLY), skill(TRIAGE), text("TEST REPORT TRIAGE — nightly\n[NOT PROVEN]"))
        done = skill_evals_run(fake, out, "--case", NIGHTLY, "--repeats", "3")
        assert done.returncode == 0, done.stderr
    result = case(results_of(out), NIGHTLY)
    assert result["state"] == "JUDGE-ERROR" and result["activation"]["state"] == "PASS"
    assert result["repeats_run"] == 3  # judge errors count for neither side, and are not replaced
    assert results_of(out)["assertion_counts"]["judge_error"] >= 1
