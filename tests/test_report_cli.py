"""The report, merge and shard commands end to end on real run folders (api host, fake API)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import EXAMPLE
from tests.fake_anthropic import FakeAnthropic, skill, text
from tests.fake_judge import JUDGE_MATCH, verdicts
from tests.test_run import PROMPTS, TRIAGE, key_of, results_of, run_cli


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
        whole = run_cli(fake, tmp_path / "whole", *args)
        assert whole.returncode == 0, whole.stderr
        for index in (1, 2, 3):
            done = run_cli(fake, tmp_path / f"shard{index}", *args, "--shard", f"{index}/3")
            assert done.returncode == 0, done.stderr
    plans = {json.loads((tmp_path / f"shard{i}" / "results.json").read_text())["plan"]["hash"] for i in (1, 2, 3)}
    assert len(plans) == 1, "every shard plans the same cases"
    merged = subprocess.run([sys.executable, "-m", "runner", "merge", *(str(tmp_path / f"shard{i}") for i in (1, 2, 3)),
                             "--out", str(tmp_path / "merged")], capture_output=True, text=True, timeout=120,
                            check=False)
    assert merged.returncode == 0, merged.stderr
    assert comparable(results_of(tmp_path / "merged")) == comparable(results_of(tmp_path / "whole"))


def test_report_formats_render_from_results_json(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        scripted(fake)
        assert run_cli(fake, out, "--host", "api", "--skill", TRIAGE, "--repeats", "1").returncode == 0
    for fmt, needle in (("markdown", "<!-- skill-evals-report -->"), ("junit", "<testsuites"),
                        ("html", "<!DOCTYPE html"), ("json", '"schema_version"'), ("terminal", "UNRUN")):
        done = subprocess.run([sys.executable, "-m", "runner", "report", str(out), "--format", fmt],
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, (fmt, done.stderr)
        assert needle.lower() in done.stdout.lower(), fmt
        assert "no result is claimed" in done.stdout or fmt in ("junit", "json")


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
            done = run_cli(fake, out, "--host", "api", "--case", nightly, "--case", flaky, "--repeats", "1",
                           library=library)
            assert done.returncode == 0, done.stderr
            runs.append(out)
    last = results_of(runs[1])
    quarantined = next(c for c in last["cases"] if c["uid"] == flaky)
    assert quarantined["state"] == "QUARANTINED" and quarantined["underlying_state"] == "FAIL"
    assert quarantined["quarantine"]["reason"] == "flips with the runner image"
    markdown = subprocess.run([sys.executable, "-m", "runner", "report", str(runs[1]), "--format", "markdown",
                               "--previous", str(runs[0])], capture_output=True, text=True, timeout=120, check=False)
    assert markdown.returncode == 0, markdown.stderr
    assert "flips with the runner image" in markdown.stdout and "QUARANTINED" in markdown.stdout
    assert "PASS" in markdown.stdout and "FAIL" in markdown.stdout and "positive-nightly-summary-with-skip" in markdown.stdout


def test_every_state_fixture_is_a_valid_results_file() -> None:
    from jsonschema import Draft202012Validator

    from tests.report_fixtures import every_state
    schema = json.loads((Path(__file__).parent.parent / "runner" / "schemas" / "results.schema.json").read_text())
    data = json.loads(every_state().model_dump_json())
    assert not list(Draft202012Validator(schema).iter_errors(data))
    assert set(data["counts"]) == {"PASS", "FAIL", "ERROR", "JUDGE-ERROR", "QUARANTINED", "UNRUN"}
    assert all(v >= 1 for v in data["counts"].values())
