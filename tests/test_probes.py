"""Tier-2 probes (seed 000): validation, the two arms, and `skill-evals calibrate` end to end.

Calibration runs the real Claude Code CLI (and, once, the api host) against the fake Messages API.
The arms are told apart the way the host shows them: the treatment session's listing has an entry
`- <skill>: ...` (or, with explicit invocation, the CLI's `<command-name>/<skill>` expansion); the
control session's listing has none, because the skill's folder is not in the session.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.hosts import workspace
from runner.testing.fake_anthropic import FakeAnthropic, error, skill, text
from runner.testing.fake_judge import JUDGE_MATCH, rubric_ids
from tests.conftest import findings_of, line_of, run_cli
from tests.helpers import judge_queue

KEY = "sk-ant-test-probe-marker-77c1"
TEST_PROBES = Path(__file__).parent / "data" / "probes"
SKILLS = Path(".claude") / "skills"
RENOVATE = "dependency-upgrade-reviewer/probe/renovate-httpx-retry-licence"
RENOVATE_DIR = SKILLS / "dependency-upgrade-reviewer" / "evals" / "probes" / "renovate-httpx-retry-licence"
ORDERS = "migration-planner/probe/orders-customer-ref-rename"
ORDERS_DIR = SKILLS / "migration-planner" / "evals" / "probes" / "orders-customer-ref-rename"
EXAMPLE_PROBE = "test-report-triage/probe/rc-summary-empty-payments-suite"
EXAMPLE_PROBE_DIR = SKILLS / "test-report-triage" / "evals" / "probes" / "rc-summary-empty-payments-suite"
# The treatment session's listing names the skill; the control session's does not.
TREATMENT = "- dependency-upgrade-reviewer: Review a dependency"
EXPLICIT = "<command-name>/dependency-upgrade-reviewer</command-name>"
QUESTION = "Renovate opened #2291 overnight"
CAUGHT = "HOLD: the lockfile shows new distribution terms, which is a licence change; check the new licence first."
MISSED = "APPROVE: minor bump, release notes are benign and CI is GREEN."


@pytest.fixture
def library(example_copy: Path) -> Path:
    """The example library plus the two probes written for these tests (euphemized floor, structural band),
    and settings that keep the CLI from retrying (so one scripted error is one errored start)."""
    for source in TEST_PROBES.iterdir():
        for probe in source.iterdir():
            shutil.copytree(probe, example_copy / SKILLS / source.name / "evals" / "probes" / probe.name)
    (example_copy / ".skill-evals.toml").write_text("[run]\nhost_max_retries = 0\nconcurrency = 1\n")
    return example_copy


def calibrate(fake: FakeAnthropic, library: Path, *args: str, key: str | None = KEY) -> subprocess.CompletedProcess:
    return run_cli("calibrate", "--library", str(library), *args, fake=fake, key=key)


def record_of(library: Path, probe_dir: Path = RENOVATE_DIR, index: int = -1) -> dict[str, Any]:
    data = json.loads((library / probe_dir / "calibration.json").read_text())
    return data["records"][index]


def session_requests(fake: FakeAnthropic, needle: str) -> list:
    """Model requests of sessions (not the judge) whose first user message holds `needle`, first turn only."""
    from runner.testing.fake_anthropic import first_user_text
    return [r for r in fake.message_requests if "<rubric>" not in first_user_text(r.body)
            and needle in first_user_text(r.body) and not any(m.get("role") == "assistant"
                                                                for m in r.body.get("messages", []))]


# ---- validation (seed 000 rules 1, 2, 5, 6 and the shapes) ------------------------------------------

def test_the_example_probe_and_the_two_test_probes_validate(library: Path) -> None:
    code, findings = findings_of(library, "--no-library-validator")
    probe_findings = [f for f in findings if f["rule"].startswith("probe")]
    assert probe_findings == [] and code == 0, probe_findings
    loaded, _ = load_library(library, Settings())
    shapes = {p.uid: {d.shape for d in p.defects} for p in loaded.probes}
    assert shapes == {EXAMPLE_PROBE: {"buried"}, RENOVATE: {"euphemized"}, ORDERS: {"structural"}}
    kinds = {p.uid: (p.kind, p.seeded_defects) for p in loaded.probes}
    assert kinds[ORDERS] == ("band", 2) and kinds[RENOVATE] == ("floor", 1)


def _corrupt(path: Path, edit: Any) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=2))


@pytest.mark.parametrize("probe_dir", [EXAMPLE_PROBE_DIR, RENOVATE_DIR, ORDERS_DIR], ids=["buried", "euphemized",
                                                                                           "structural"])
def test_corrupted_probes_fail_with_the_rule_they_break(library: Path, probe_dir: Path) -> None:
    probe_json, question = library / probe_dir / "probe.json", library / probe_dir / "question.md"
    original_json, original_question = probe_json.read_text(), question.read_text()

    def rules_after() -> dict[str, dict]:
        _, findings = findings_of(library, "--no-library-validator")
        probe_json.write_text(original_json)
        question.write_text(original_question)
        shown = str(probe_dir)
        return {f["rule"]: f for f in findings if f["rule"].startswith("probe") and f["file"].startswith(shown)}

    # Rule 1: two defects in a floor probe (the count kept honest, so only rule 1 breaks).
    def two_defects(d: dict) -> None:
        d["kind"] = "floor"
        d["defects"] = d["defects"][:1] * 2
        d["defects"][1] = dict(d["defects"][1], id="d9")
        d["seeded_defects"] = 2
    _corrupt(probe_json, two_defects)
    assert "probe-floor-one-defect" in rules_after()

    # Rule 2: a locator that is not in question.md.
    _corrupt(probe_json, lambda d: d["defects"][0].update(locator="this text is nowhere in the artifact"))
    hit = rules_after()["probe-locator"]
    assert hit["line"] == line_of(library / probe_dir / "probe.json", '"id": "d1"') - 1 or hit["line"] > 1

    # Rule 2: seeded_defects drifted from the defects listed.
    _corrupt(probe_json, lambda d: d.update(seeded_defects=d["seeded_defects"] + 1))
    assert "probe-seeded-defects" in rules_after()

    # Rule 5: a 41-line artifact.
    lines = original_question.splitlines()
    question.write_text("\n".join(lines + ["filler line"] * (41 - len(lines))) + "\n")
    assert rules_after()["probe-too-long"]["message"].startswith("question.md has 41 lines")

    # Rule 6: signposting, reported at its line.
    question.write_text(original_question.replace("\n", "\nPlease note the following carefully.\n", 1))
    assert rules_after()["probe-signpost"]["line"] == 2

    # time_pressure is a modifier, never a shape.
    _corrupt(probe_json, lambda d: d["defects"][0].update(shape="time_pressure"))
    assert "probe-time-pressure-shape" in rules_after()


def test_band_probe_rules(library: Path) -> None:
    path = library / ORDERS_DIR / "probe.json"
    _corrupt(path, lambda d: d.update(defects=d["defects"][:1], seeded_defects=1))
    _, findings = findings_of(library, "--no-library-validator")
    assert [f["rule"] for f in findings if f["rule"].startswith("probe")] == ["probe-band-size"]
    _corrupt(path, lambda d: d["discriminator"].update(patterns=["(unclosed"]))
    _, findings = findings_of(library, "--no-library-validator")
    pattern = [f for f in findings if f["rule"] == "probe-pattern"]
    assert pattern and pattern[0]["line"] == line_of(path, '"discriminator"')


def test_the_census_lists_the_rules_a_person_must_review(library: Path) -> None:
    from tests.conftest import cli
    census = json.loads(cli("census", "--library", str(library), "--format", "json").output)
    probes = {p["uid"]: p for p in census["probes"]}
    assert set(probes) == {EXAMPLE_PROBE, RENOVATE, ORDERS}
    for probe in probes.values():
        items = " ".join(probe["review_items"]).lower()
        assert "independent" in items and "quiz" in items and "realistic" in items


# ---- the arms -----------------------------------------------------------------------------------------

def test_a_session_never_receives_the_eval_folders_and_control_lacks_the_skill(library: Path) -> None:
    loaded, _ = load_library(library, Settings())
    ws = workspace.build(workspace.LibraryFiles.of(loaded, 1_048_576), ["dependency-upgrade-reviewer"], [])
    try:
        copied = ws.project / ".claude" / "skills"
        assert not (copied / "dependency-upgrade-reviewer").exists()
        assert (copied / "migration-planner" / "SKILL.md").is_file()
        assert not list(copied.rglob("probe.json")) and not list(copied.rglob("evals.json"))
        assert not list(copied.glob("*/evals"))
    finally:
        ws.remove()


# ---- calibrate: the four verdicts, the exact number of starts ------------------------------------------

def _script(fake: FakeAnthropic, judge: Any, control: tuple, treatment: tuple, explicit: bool = False) -> None:
    fake.script(JUDGE_MATCH, judge)
    fake.script(EXPLICIT if explicit else TREATMENT, *treatment)
    fake.script(QUESTION, *control)


def _starts(record: dict) -> list[tuple[str, int, str]]:
    return [(s["arm"], s["rep"], s["state"]) for s in record["starts"]]


def test_ceiling_stops_after_two_control_starts(library: Path) -> None:
    with FakeAnthropic() as fake:
        _script(fake, judge_queue("PASS"), control=(text(CAUGHT),), treatment=(text(CAUGHT),))
        done = calibrate(fake, library, RENOVATE)
        assert done.returncode == 0, done.stderr + done.stdout
        record = record_of(library)
        assert record["verdict"] == "ceiling" and record["status"] == "finished"
        assert _starts(record) == [("control", 1, "CAUGHT"), ("control", 2, "CAUGHT")]
        assert session_requests(fake, TREATMENT) == []  # the treatment arm never ran
        assert len(session_requests(fake, QUESTION)) == 2
    assert "ceiling" in done.stdout and "2/2 caught" in done.stdout
    assert record["declaration"]["reps"] == 2 and record["declaration_hash"]
    assert record["declared_at"] <= record["starts"][0]["started_at"]


def test_window_control_misses_treatment_catches_and_the_skill_fired(library: Path) -> None:
    with FakeAnthropic() as fake:
        _script(fake, judge_queue("PASS"), control=(text(MISSED),),
                treatment=(skill("dependency-upgrade-reviewer"), text(CAUGHT)))
        done = calibrate(fake, library, RENOVATE)
        assert done.returncode == 0, done.stderr + done.stdout
        record = record_of(library)
        control_requests = session_requests(fake, QUESTION)
    assert record["verdict"] == "window"
    assert _starts(record) == [("control", 1, "MISSED"), ("control", 2, "MISSED"),
                               ("treatment", 1, "CAUGHT"), ("treatment", 2, "CAUGHT")]
    assert [s["skill_fired"] for s in record["starts"] if s["arm"] == "treatment"] == [True, True]
    # The control sessions' listing has no entry for the skill under test.
    from runner.testing.fake_anthropic import first_user_text
    control_only = [r for r in control_requests if TREATMENT not in first_user_text(r.body)]
    assert len(control_only) == 2 and all("- dependency-upgrade-reviewer:" not in first_user_text(r.body)
                                          for r in control_only)
    # A missed pattern is a miss decided by script: the judge was not asked for the control arm.
    assert all(s["judge_usd"] == 0 for s in record["starts"] if s["arm"] == "control")
    assert record["arms"]["control"]["missed"] == 2 and record["arms"]["treatment"]["caught"] == 2


def test_floor_neither_arm_catches_it(library: Path) -> None:
    with FakeAnthropic() as fake:
        _script(fake, judge_queue("PASS"), control=(text(MISSED),), treatment=(text(MISSED),))
        done = calibrate(fake, library, RENOVATE)
    record = record_of(library)
    assert done.returncode == 0 and record["verdict"] == "floor"
    assert len(record["starts"]) == 4 and {s["state"] for s in record["starts"]} == {"MISSED"}
    assert [s["skill_fired"] for s in record["starts"] if s["arm"] == "treatment"] == [False, False]


def test_inconclusive_treatment_catches_it_once(library: Path) -> None:
    with FakeAnthropic() as fake:
        # Control misses by script (no judge call); the two treatment answers are judged PASS, then FAIL.
        _script(fake, judge_queue("PASS", "FAIL"), control=(text(MISSED),), treatment=(text(CAUGHT),))
        done = calibrate(fake, library, RENOVATE)
    record = record_of(library)
    assert done.returncode == 0 and record["verdict"] == "inconclusive"
    assert sorted(s["state"] for s in record["starts"] if s["arm"] == "treatment") == ["CAUGHT", "MISSED"]
    assert len(record["starts"]) == 4


def test_an_errored_start_is_counted_and_never_replaced(library: Path) -> None:
    with FakeAnthropic() as fake:
        # Concurrency 1 and no CLI retries: the first control session gets the 500, the second answers.
        _script(fake, judge_queue("PASS"), control=(error(500, "api_error", times=1), text(MISSED)),
                treatment=(text(CAUGHT),))
        done = calibrate(fake, library, RENOVATE)
        assert done.returncode == 0, done.stderr + done.stdout
    record = record_of(library)
    assert _starts(record) == [("control", 1, "ERROR"), ("control", 2, "MISSED"),
                               ("treatment", 1, "CAUGHT"), ("treatment", 2, "CAUGHT")]
    # One miss proves control <= 1/2 whatever the errored start would have shown: window, with the error counted.
    assert record["verdict"] == "window" and record["arms"]["control"]["errors"] == 1
    assert "500" in record["starts"][0]["error"] and "1 error" in done.stdout


def test_an_error_that_leaves_the_ceiling_open_is_inconclusive(library: Path) -> None:
    with FakeAnthropic() as fake:
        _script(fake, judge_queue("PASS"), control=(error(500, "api_error", times=1), text(CAUGHT)),
                treatment=(text(CAUGHT),))
        done = calibrate(fake, library, RENOVATE)
        assert session_requests(fake, TREATMENT) == []
    record = record_of(library)
    assert done.returncode == 0 and record["verdict"] == "inconclusive" and len(record["starts"]) == 2
    assert "could have been catches" in record["verdict_reason"]


def test_explicit_invocation_and_band_scores(library: Path) -> None:
    """Explicit mode: the treatment prompt starts with /migration-planner; the CLI expands it and the
    attempt records the skill as fired (slash-command). Band probe: k of N defects judged per start."""
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, judge_queue("PASS"))
        fake.script("<command-name>/migration-planner</command-name>", text("Contract phase: drop later."))
        fake.script("We are renaming `orders.customer_ref`", text("Plan: one deploy as drafted."))
        done = calibrate(fake, library, ORDERS, "--explicit")
        assert done.returncode == 0, done.stderr + done.stdout
        judge_bodies = [r.body for r in fake.message_requests if "<rubric>" in json.dumps(r.body)]
    record = record_of(library, ORDERS_DIR)
    assert record["declaration"]["explicit_invocation"] is True and record["verdict"] == "window"
    treatment = [s for s in record["starts"] if s["arm"] == "treatment"]
    assert [s["skill_fired"] for s in treatment] == [True, True]
    assert all(s["caught_defects"] == 2 and s["defects"] == {"d1": "PASS", "d2": "PASS"} for s in treatment)
    # Control answers lack the "contract" pattern: only the defects went to the judge (a2, a3), not the act.
    assert sorted(len(rubric_ids(b)) for b in judge_bodies) == [2, 2, 3, 3]
    assert "explicit" in done.stdout


def test_calibrating_on_the_api_host_with_explicit_invocation(library: Path) -> None:
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, judge_queue("PASS"))
        fake.script(EXPLICIT, text(CAUGHT))
        fake.script(QUESTION, text(MISSED))
        done = calibrate(fake, library, RENOVATE, "--explicit", "--host", "api")
        assert done.returncode == 0, done.stderr + done.stdout
    record = record_of(library)
    assert record["verdict"] == "window" and record["declaration"]["host"] == "api"
    assert [s["skill_fired"] for s in record["starts"] if s["arm"] == "treatment"] == [True, True]


# ---- versions: frozen once calibrated; an edit is a new version ---------------------------------------

def test_a_calibrated_version_is_frozen_and_an_edit_is_a_new_version(library: Path) -> None:
    with FakeAnthropic() as fake:
        _script(fake, judge_queue("PASS"), control=(text(CAUGHT),), treatment=(text(CAUGHT),))
        assert calibrate(fake, library, RENOVATE).returncode == 0
        first = record_of(library)
        again = calibrate(fake, library, RENOVATE)
        assert again.returncode == 1 and "frozen" in again.stderr
        assert len(session_requests(fake, QUESTION)) == 2  # the refusal started nothing

        status = calibrate(fake, library, "--status", "--format", "json", key=None)
        states = {s["uid"]: s for s in json.loads(status.stdout)}
        assert states[RENOVATE]["state"] == "calibrated" and states[RENOVATE]["verdict"] == "ceiling"
        assert states[ORDERS]["state"] == "not-calibrated"

        question = library / RENOVATE_DIR / "question.md"
        question.write_text(question.read_text().replace("before standup", "before the 10:00 standup"))
        status = calibrate(fake, library, "--status", "--format", "json", key=None)
        edited = {s["uid"]: s for s in json.loads(status.stdout)}[RENOVATE]
        assert edited["state"] == "new-version" and edited["verdict"] is None
        assert edited["content_hash"] != first["content_hash"]
        assert "new version, not calibrated" in edited["message"]

        assert calibrate(fake, library, RENOVATE).returncode == 0
    data = json.loads((library / RENOVATE_DIR / "calibration.json").read_text())
    assert [r["content_hash"] for r in data["records"]] == [first["content_hash"], edited["content_hash"]]
    assert data["records"][0] == first  # the old record stays as it was


def test_calibrate_needs_a_key_and_names_unknown_probes(library: Path) -> None:
    with FakeAnthropic() as fake:
        no_key = calibrate(fake, library, RENOVATE, key=None)
        unknown = calibrate(fake, library, "no-such-probe")
        assert fake.message_requests == []
    assert no_key.returncode == 2 and "ANTHROPIC_API_KEY" in no_key.stderr
    assert unknown.returncode == 2 and "no-such-probe" in unknown.stderr and RENOVATE in unknown.stderr
    assert not (library / RENOVATE_DIR / "calibration.json").exists()


def test_an_unreadable_calibration_file_is_never_overwritten(library: Path) -> None:
    broken = library / RENOVATE_DIR / "calibration.json"
    broken.write_text('{"probe": "x", "records": [\n  {,}\n]}\n')
    with FakeAnthropic() as fake:
        done = calibrate(fake, library, RENOVATE)
        assert fake.message_requests == []
    assert done.returncode == 1 and "calibration.json:2" in done.stderr and "Traceback" not in done.stderr
    assert broken.read_text() == '{"probe": "x", "records": [\n  {,}\n]}\n'


def test_the_key_never_reaches_the_record(library: Path) -> None:
    with FakeAnthropic() as fake:
        _script(fake, judge_queue("PASS"), control=(text(MISSED),), treatment=(text(CAUGHT),))
        done = calibrate(fake, library, RENOVATE)
    assert KEY not in (library / RENOVATE_DIR / "calibration.json").read_text()
    assert KEY not in done.stdout + done.stderr


# ---- probes in `run`: both arms, rates, the difference, cost per arm -----------------------------------

def run_probe(fake: FakeAnthropic, library: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli("run", "--library", str(library), "--out", str(out), "--case", "*/probe/*",
                   "--no-library-validator", "--timeout", "30", *args, fake=fake, key=KEY)


def test_run_executes_calibrated_probes_in_both_arms(library: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        # Treatment catches it twice and misses once (the third treatment judge call fails the act);
        # control misses by script every time.
        _script(fake, judge_queue("PASS"), control=(text(MISSED),),
                treatment=(skill("dependency-upgrade-reviewer"), text(CAUGHT)))
        assert calibrate(fake, library, RENOVATE).returncode == 0
        assert record_of(library)["verdict"] == "window"
    with FakeAnthropic() as fake:
        _script(fake, judge_queue("PASS", "PASS", "FAIL"), control=(text(MISSED),),
                treatment=(skill("dependency-upgrade-reviewer"), text(CAUGHT)))
        done = run_probe(fake, library, out, "--repeats", "3")
        assert done.returncode == 0, done.stderr + done.stdout
    results = json.loads((out / "results.json").read_text())
    cases = {c["uid"]: c for c in results["cases"]}
    probe = cases[RENOVATE]
    assert probe["state"] == "PASS" and (probe["wins"], probe["losses"]) == (2, 1)
    arms = probe["probe"]
    assert (arms["control"]["caught"], arms["control"]["missed"]) == (0, 3)
    assert (arms["treatment"]["caught"], arms["treatment"]["missed"]) == (2, 1)
    assert arms["treatment"]["skill_fired"] == 3 and arms["control"]["skill_fired"] == 0
    assert arms["difference"] == pytest.approx(0.6667, abs=1e-3)
    low, high = arms["difference_interval"]
    assert low < 0 < arms["difference"] < high  # three reps per arm do not separate the arms at 95%
    assert arms["calibration"].startswith("window") and arms["explicit_invocation"] is False
    assert arms["control"]["cost_usd"] > 0 and arms["treatment"]["cost_usd"] > arms["control"]["cost_usd"]
    # The other probes were never calibrated: UNRUN with the reason.
    assert cases[ORDERS]["state"] == "UNRUN" and cases[ORDERS]["reason"] == "probe-not-calibrated"
    assert cases[EXAMPLE_PROBE]["reason"] == "probe-not-calibrated"
    records = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()]
    assert sorted((r["arm"], r["repeat"]) for r in records) == [
        ("control", 1), ("control", 2), ("control", 3), ("treatment", 1), ("treatment", 2), ("treatment", 3)]
    assert all(r["probe"]["arm"] == r["arm"] for r in records)
    from runner.report import markdown
    from runner.results.build import Results
    report = markdown.render(Results.model_validate(results))
    assert "### Tier-2 probes" in report and "0/3 caught" in report and "2/3 caught" in report
    assert "+67 pts" in report and "3/3" in report

    # `judge DIR` grades the stored probe answers again, without a session: now every act fails.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, judge_queue("FAIL"))
        env.update({"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": KEY})
        rejudged = subprocess.run([sys.executable, "-m", "runner", "judge", str(out), "--library", str(library)],
                                  env=env, capture_output=True, text=True, timeout=300, check=False)
        assert rejudged.returncode == 0, rejudged.stderr
        assert session_requests(fake, QUESTION) == [] and len(fake.message_requests) == 3  # treatment acts only
    target = next(out.glob("rejudged-*"))
    again = {c["uid"]: c for c in json.loads((target / "results.json").read_text())["cases"]}[RENOVATE]
    assert again["state"] == "FAIL" and again["probe"]["treatment"]["caught"] == 0

    # Editing the calibrated probe: a new version, not calibrated; the run refuses the old record.
    question = library / RENOVATE_DIR / "question.md"
    question.write_text(question.read_text() + "\nThanks!\n")
    with FakeAnthropic() as fake:
        again = run_probe(fake, library, tmp_path / "run2")
        assert again.returncode == 0, again.stderr
        assert fake.message_requests == []
    edited = {c["uid"]: c for c in json.loads((tmp_path / "run2" / "results.json").read_text())["cases"]}
    assert edited[RENOVATE]["state"] == "UNRUN" and edited[RENOVATE]["reason"] == "probe-new-version"


def test_an_interrupted_calibration_counts_the_cut_start_and_continues(library: Path) -> None:
    import signal
    import time

    from runner.testing.fake_anthropic import hang
    calibration = library / RENOVATE_DIR / "calibration.json"
    with FakeAnthropic() as fake:
        _script(fake, judge_queue("PASS"), control=(hang(60),), treatment=(text(CAUGHT),))
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env.update({"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": KEY, "CI": "true"})
        process = subprocess.Popen([sys.executable, "-m", "runner", "calibrate", "--library", str(library), RENOVATE],
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not session_requests(fake, QUESTION) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert session_requests(fake, QUESTION), "the first control session never reached the fake"
        running = json.loads(calibration.read_text())["records"][0]
        assert running["status"] == "running" and [s["state"] for s in running["starts"]] == ["running"]
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    stopped = record_of(library)
    assert stopped["status"] == "stopped" and stopped["stop_reason"] == "cancelled" and stopped["verdict"] is None
    assert _starts(stopped) == [("control", 1, "ERROR")] and "cancelled" in stopped["starts"][0]["error"]

    with FakeAnthropic() as fake:
        _script(fake, judge_queue("PASS"), control=(text(MISSED),), treatment=(text(CAUGHT),))
        done = calibrate(fake, library, RENOVATE)
        assert done.returncode == 0, done.stderr
        assert len(session_requests(fake, QUESTION)) == 1 + 2  # the one missing control rep, then treatment
    record = record_of(library)
    assert len(json.loads(calibration.read_text())["records"]) == 1  # continued, not a second record
    assert _starts(record) == [("control", 1, "ERROR"), ("control", 2, "MISSED"),
                               ("treatment", 1, "CAUGHT"), ("treatment", 2, "CAUGHT")]
    assert record["verdict"] == "window" and record["declaration_hash"] == stopped["declaration_hash"]


def test_the_spend_cap_stops_calibration_before_a_start_it_cannot_afford(library: Path) -> None:
    with FakeAnthropic() as fake:
        _script(fake, judge_queue("PASS"), control=(text(MISSED),), treatment=(text(CAUGHT),))
        done = calibrate(fake, library, RENOVATE, "--max-usd", "0.0001")
        assert fake.message_requests == []
    record = record_of(library)
    assert done.returncode == 1 and record["status"] == "stopped" and record["stop_reason"] == "budget-cap"
    assert record["starts"] == [] and record["verdict"] is None
    assert "budget-cap" in done.stdout


def test_a_pattern_that_backtracks_without_end_is_an_error_not_a_hang(example_copy: Path) -> None:
    """Issue 28: a discriminator pattern is the library's (maybe a pull request's) and runs on the model's answer.
    `(a|aa)+$` on 60 a's and a b takes `re` longer than the age of the universe; the grading engine's time limit
    makes it an ERROR attempt (never PASS or FAIL) in about PATTERN_TIMEOUT_S."""
    import asyncio

    from runner.core.observation import Observation
    from runner.probes import arms

    library, _ = load_library(example_copy, Settings())
    probe = library.probes[0].model_copy(update={"patterns": ["NOT_PROVEN", "(a|aa)+$"]})
    obs = Observation(attempt_id=f"{probe.uid}#treatment#1", host="test", final_answer="NOT_PROVEN " + "a" * 60 + "b")

    class NoJudge:  # the grading must stop before any judge call
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the judge was asked for {name}")

    grade, call = asyncio.run(arms.grade(probe, "treatment", obs, NoJudge()))  # type: ignore[arg-type]
    assert grade.state == "ERROR" and call is None, grade
    assert "(a|aa)+$" in (grade.error or "") and "did not finish" in (grade.error or "")
