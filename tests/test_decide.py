"""Decide early (issue 21 §1): an activation-only attempt ends once its outcome can no longer change.

The rule (runner.corpus.decide) is held against the verdict itself (runner.execute.grading.attempt_outcome): for
every activation-only case of the example library and of a skill-creator trigger set, no continuation of a sequence
the rule calls decided changes the outcome. Then the real Claude Code CLI against the fake Messages API: a decided
session makes one request and stops; a case whose answer is checked runs to its end; [run] decide_early = false
runs every session to its end; an API fault is still ERROR.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

from runner.core.observation import Activation, Observation
from runner.corpus.decide import activation_only, decide_when, first_turn_ineligible
from runner.corpus.library import Case
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.execute.grading import attempt_outcome
from runner.hosts.activation import decided
from runner.plan import sweep
from runner.report import html, junit, markdown
from runner.results.build import Results
from runner.testing import trigger_set
from runner.testing.fake_anthropic import FakeAnthropic, error, skill, text
from tests.conftest import EXAMPLE, fake_env, run_cli

KEY = "sk-ant-test-decide-7e21"


def observed(names: list[str]) -> Observation:
    return Observation(attempt_id="a#main#1", host="test", final_answer=None, activations=[
        Activation(name=name, mechanism="skill-tool", turn=turn) for turn, name in enumerate(names)])


def verdict(case: Case, names: list[str], known: dict[str, str]) -> tuple:
    """What an activation-only attempt's outcome is made of (what fired instead is informational: left out)."""
    outcome = attempt_outcome(case, observed(names), known)
    return (outcome.state, outcome.activation, outcome.target_fired, sorted(outcome.pairs.items()),
            [(a.index, a.state) for a in outcome.assertions])


def libraries(tmp_path: Path) -> list[tuple[Case, dict[str, str]]]:
    found = []
    for root in (EXAMPLE, trigger_set.write_library(tmp_path / "trigger-set")):
        library, _ = load_library(root, Settings())
        found += [(case, library.names()) for case in library.cases if activation_only(case)]
    # A routing sweep's copies (runner.plan.sweep): every routing case measured for its activation part, refusals too.
    library, _ = load_library(EXAMPLE, Settings())
    found += [(case, library.names()) for case in sweep.measured_library(library).cases
              if case.activation_part_only and not activation_only(next(c for c in library.cases if c.uid == case.uid))]
    return found


def test_no_continuation_of_a_decided_sequence_changes_the_outcome(tmp_path: Path) -> None:
    cases = libraries(tmp_path)
    kinds = {case.kind for case, _ in cases}
    assert kinds == {"trigger", "no_trigger", "discrimination", "refusal", "routing"}, kinds
    rng = random.Random(21)
    checked = 0
    for case, known in cases:
        sets = decide_when(case, known)
        assert sets, case.uid
        universe = sorted(set(known.values()))
        for length in range(1, 4):
            for sequence in itertools.product(universe, repeat=length):
                names = list(sequence)
                if decided(sets, names) is None:
                    continue
                before = verdict(case, names, known)
                for _ in range(3):
                    later = names + rng.sample(universe, rng.randint(1, len(universe)))
                    assert verdict(case, later, known) == before, (case.uid, names, later)
                    checked += 1
    assert checked > 1000


def test_only_activation_only_cases_are_decided_early() -> None:
    library, _ = load_library(EXAMPLE, Settings())
    for case in library.cases:
        sets = decide_when(case, library.names())
        reads_answer = any(a.assertion_class in ("semantic", "artifact_shape") for a in case.assertions)
        assert (sets == []) == (reads_answer or case.kind in ("refusal", "probe")), case.uid
    # A routing sweep's copy of every routing case is decided early: what reads the answer was left out of it.
    swept = sweep.measured_library(library).cases
    assert all(decide_when(case, library.names()) for case in swept if case.kind != "probe")
    assert {case.kind for case in swept if case.activation_part_only} == {"trigger", "no_trigger", "discrimination",
                                                                          "refusal", "routing"}
    # A discrimination case is certain only once the target and every neighbour fired (each pair is scored).
    case = next(c for c in library.cases if c.uid == "test-report-triage/trigger/triage-wins-here")
    assert decide_when(case, library.names()) == [["test-report-triage", "release-publisher",
                                                   "dependency-upgrade-reviewer"]]


def run(fake: FakeAnthropic, root: Path, out: Path, *args: str) -> dict:
    done = run_cli("run", "--library", str(root), "--out", str(out), "--host", "claude-code", "--timeout", "60",
                   *args, env=fake_env(fake, KEY))
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert KEY not in done.stdout + done.stderr
    return json.loads((out / "results.json").read_text())


def processes_talking_to(url: str) -> list[int]:
    """Processes whose environment points them at this fake (a CLI left running after its session ended)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if url.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def records(out: Path) -> dict[str, dict]:
    lines = (out / "attempts.jsonl").read_text().splitlines()
    return {r["uid"]: r for r in map(json.loads, lines) if r["status"] == "finished"}


def test_the_real_cli_stops_once_decided_and_runs_the_rest_to_the_end(tmp_path: Path) -> None:
    root = trigger_set.write_library(tmp_path / "lib", 6)  # q1-q3 should trigger, q4-q6 should not
    (root / ".skill-evals.toml").write_text("[run]\nearly_stop = false\n")
    with FakeAnthropic() as fake:
        trigger_set.script(fake)
        results = run(fake, root, tmp_path / "run", "--repeats", "1", "--quorum", "1")
        sessions = [r for r in fake.message_requests]
        assert processes_talking_to(fake.url) == []  # every CLI the hook stopped has exited: no orphan
    got = records(tmp_path / "run")
    assert {c["uid"]: c["state"] for c in results["cases"]} == {
        f"{trigger_set.SKILL}/trigger/q{i}": "PASS" for i in range(1, 7)}
    # One request per session: the trigger sessions stopped after the Skill call, the others ended by themselves.
    assert len(sessions) == 6
    for i in (1, 2, 3):
        record = got[f"{trigger_set.SKILL}/trigger/q{i}"]
        assert record["decided"] == {"names": [trigger_set.SKILL], "turn": 0,
                                     "event": f"PostToolUse Skill({trigger_set.SKILL}), turn 0"}
        assert record["model_calls"] == 1 and record["final_answer"] is None
        assert record["cost_usd"] > 0 and record["usage"]["output_tokens"] > 0  # the cut-short session is paid for
    for i in (4, 5, 6):
        record = got[f"{trigger_set.SKILL}/trigger/q{i}"]
        assert record["decided"] is None and record["final_answer"] == "Here you go."
    assert abs(sum(r["cost_usd"] for r in got.values()) - results["spend"]["usd"]) < 1e-6
    assert (results["cost"]["decided_early"], results["cost"]["model_calls"]) == (3, 6)
    shown = Results.model_validate(results)
    for report in (markdown.render(shown), html.render(shown, tmp_path / "run")):
        assert "1.00 request(s) per session" in report and "3 session(s) ended once their outcome was certain" in report
    assert ("decided_early", "3") in junit.cost_properties(shown)

    # [run] decide_early = false: every session runs to its end (the trigger ones take their second turn).
    (root / ".skill-evals.toml").write_text("[run]\nearly_stop = false\ndecide_early = false\n")
    with FakeAnthropic() as fake:
        trigger_set.script(fake)
        run(fake, root, tmp_path / "run-to-end", "--repeats", "1", "--quorum", "1")
        assert len(fake.message_requests) == 9
    assert all(r["decided"] is None for r in records(tmp_path / "run-to-end").values())


def test_a_forbidden_skill_that_fires_decides_a_should_not_case_and_faults_stay_error(tmp_path: Path) -> None:
    root = trigger_set.write_library(tmp_path / "lib", 4)  # q1, q2 should; q3, q4 should not
    should_not = trigger_set.SHOULD_NOT[0]
    with FakeAnthropic() as fake:
        fake.script(should_not, skill(trigger_set.SKILL), text("read it anyway"))
        fake.script(trigger_set.SHOULD_NOT[1], error(500, "api_error", "boom"))
        fake.script(trigger_set.SHOULD[0], skill(trigger_set.SKILL), error(500, "api_error", "late"))
        fake.script(trigger_set.SHOULD[1], skill(trigger_set.NEIGHBOURS[0]), skill(trigger_set.SKILL), text("x"))
        results = run(fake, root, tmp_path / "run", "--repeats", "1", "--quorum", "1")
        forbidden = fake.requests_for(should_not)
    states = {c["uid"].rsplit("/", 1)[1]: c["state"] for c in results["cases"]}
    got = records(tmp_path / "run")
    # The forbidden skill fired: FAIL, decided there, one request.
    assert states["q3"] == "FAIL" and len(forbidden) == 1
    assert got[f"{trigger_set.SKILL}/trigger/q3"]["decided"]["names"] == [trigger_set.SKILL]
    # A 500 before anything fired is ERROR, never PASS.
    assert states["q4"] == "ERROR" and got[f"{trigger_set.SKILL}/trigger/q4"]["error_kind"] == "api-error"
    # Decided at the Skill call: the request the 500 would have answered is never made.
    assert states["q1"] == "PASS" and got[f"{trigger_set.SKILL}/trigger/q1"]["model_calls"] == 1
    # Another skill first, then the target: decided at the target's call, in the second turn.
    second = got[f"{trigger_set.SKILL}/trigger/q2"]
    assert states["q2"] == "PASS" and second["decided"]["turn"] == 1 and second["model_calls"] == 2


def test_the_plan_compares_the_hosts_and_names_what_the_first_turn_would_decide(tmp_path: Path) -> None:
    root = trigger_set.write_library(tmp_path / "lib", 20)
    library, _ = load_library(EXAMPLE, Settings())

    def plan(*args: str, at: Path = root) -> dict:
        done = run_cli("plan", "--library", str(at), "--no-surface", "--format", "json", *args, env=fake_env(None, None))
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout)

    found = plan()
    cc, ft = found["estimate"]["by_host"]
    assert (cc["host"], ft["host"]) == ("claude-code", "first-turn")
    assert cc["sessions_max"] == ft["sessions_max"] == 60 and ft["decided_cases"] == 20
    assert ft["requests_per_session"] == 1.0 and ft["expected_usd"] < cc["expected_usd"]
    assert all(c["decide_when"] == [[trigger_set.SKILL]] for c in found["cases"])
    # The example library: only its activation-only cases are decided early; the others run to the end on both.
    example = plan(at=EXAMPLE)
    decidable = [c["uid"] for c in example["cases"] if c["decide_when"] and c["unrun_reason"] is None]
    assert decidable and all(activation_only(next(x for x in library.cases if x.uid == uid)) for uid in decidable)
    first = [c["uid"] for c in example["cases"] if c["first_turn"] and c["unrun_reason"] is None]
    assert example["estimate"]["by_host"][1]["decided_cases"] == len(first) and set(first) < set(decidable)
    assert "test-report-triage/trigger/triage-wins-here" in decidable and "test-report-triage/trigger/triage-wins-here" \
        not in first  # two neighbours: no first reply can settle it
    assert example["estimate"]["by_host"][1]["requests_per_session"] > 1.0
    # The first-turn host reserves one request more per session: its first turn, then perhaps a whole session.
    on_first_turn = plan("--host", "first-turn")["estimate"]
    assert on_first_turn["worst_session_usd"] > found["estimate"]["worst_session_usd"]
    # The same request shape either way (Claude Code's own): the same rows, whichever host the run picks.
    figures = ("host", "sessions_max", "requests_per_session", "expected_usd", "decided_cases")
    assert [{k: row[k] for k in figures} for row in on_first_turn["by_host"]] == \
        [{k: row[k] for k in figures} for row in found["estimate"]["by_host"]]
    assert on_first_turn["cache_layout"] == found["estimate"]["cache_layout"] == "conversation"
    text = run_cli("plan", "--library", str(root), "--no-surface", env=fake_env(None, None)).stdout
    assert "Hosts (the same sessions):" in text and "claude-code (this run): 60 sessions" in text
    assert "first-turn would decide from Claude Code's first request" in text
    (root / ".skill-evals.toml").write_text("[run]\ndecide_early = false\n")
    assert all(c["decide_when"] == [] for c in plan()["cases"])


def test_the_first_turn_host_takes_only_cases_a_first_reply_can_settle() -> None:
    """A discrimination case with neighbours is certain only once they all fired: a first reply that calls the
    target would hand every passing attempt off (a first turn paid for nothing), so it runs on Claude Code."""
    library, _ = load_library(EXAMPLE, Settings())
    by_uid = {case.uid: case for case in library.cases}
    for uid, eligible in (("incident-postmortem-writer/trigger/postmortem-wins-here", True),  # no neighbours
                          ("incident-postmortem-writer/evals/edge-no-single-root-cause", True),
                          ("test-report-triage/trigger/triage-wins-here", False),  # two neighbours
                          ("test-report-triage/evals/positive-nightly-summary-with-skip", False)):  # checks the answer
        case = by_uid[uid]
        why = first_turn_ineligible(decide_when(case, library.names()), [], case.files, case.prompt)
        assert (why is None) == eligible, (uid, why)
    assert "several skills" in (first_turn_ineligible([["a", "b"]], [], [], "p") or "")
