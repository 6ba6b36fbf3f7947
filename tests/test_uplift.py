"""`run --baseline`: the uplift arm of output evals, end to end on the api host against the fake Messages API.

The fake model is scripted by what its session holds: with the skill in the listing it calls the Skill tool; once the
skill's body is in the conversation it answers from it; without the skill (the control arm) it answers without it.
The judge passes a rubric item only when the answer carries the skill's marker. So a skill whose answer differs shows
uplift and one whose answer is the same with and without it shows none — with the real runner, host and SDK.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from runner.report import html, markdown, terminal
from runner.report.markdown import UPLIFT_HEAD
from runner.results.build import Results
from runner.testing.fake_anthropic import FakeAnthropic, dynamic, skill, text
from runner.testing.fake_judge import JUDGE_MATCH, final_answer, rubric_ids, verdicts
from runner.testing.trigger_set import listed
from tests.conftest import EXAMPLE, fake_env, run_cli
from tests.helpers import attempts, case, key_of, results_of

KEY = "sk-ant-test-uplift-marker-3c9d"
TRIAGE = "test-report-triage"
HELPS = f"{TRIAGE}/evals/positive-nightly-summary-with-skip"  # the skill's answer satisfies the rubric
SAME = "migration-planner/evals/positive-add-not-null-column"  # the same answer with and without the skill
MARK = "[NOT PROVEN]"
REPEATS = "5"  # 5 of 5 against 0 of 5: Wilson intervals [0.57, 1] and [0, 0.43] do not overlap


def _tool_results(body: dict[str, Any]) -> str:
    return json.dumps([m.get("content") for m in body.get("messages", []) if m.get("role") == "user"])


def session(name: str, with_skill: str, without_skill: str) -> tuple[Any, ...]:
    """A model that calls `name` when it is listed, answers `with_skill` once its body was loaded, and
    `without_skill` when the session has no such skill (the control arm). One reply per turn the session may
    take (the fake plays a script's items by turn)."""
    def reply(body: dict[str, Any]) -> Any:
        if f"Launching skill: {name}" in _tool_results(body):
            return text(with_skill)
        if f"- {name}:" in json.dumps(body.get("system", "")):
            return skill(name)
        return text(without_skill)
    return (dynamic(reply),) * 3


def marker_judge() -> Any:
    """PASS for every rubric item when the answer carries the marker, FAIL otherwise."""
    def reply(body: dict[str, Any]) -> Any:
        verdict = "PASS" if MARK in final_answer(body) else "FAIL"
        items = [{"id": i, "verdict": verdict, "evidence": MARK if verdict == "PASS" else "", "reason": "scripted"}
                 for i in rubric_ids(body)]
        return text(json.dumps({"verdicts": items}))
    return dynamic(reply)


def scripted(fake: FakeAnthropic) -> None:
    fake.script(JUDGE_MATCH, marker_judge())
    fake.script(key_of(HELPS), *session(TRIAGE, f"TEST REPORT TRIAGE — nightly\n{MARK} api skipped: reason stated",
                                        "All green, ship it."))
    fake.script(key_of(SAME), *session("migration-planner", f"MIGRATION PLAN\n{MARK} expand, migrate, contract",
                                       f"MIGRATION PLAN\n{MARK} expand, migrate, contract"))


def reports(out: Path) -> tuple[str, str, str]:
    """The Markdown, the terminal and the HTML report of a run folder's results.json."""
    results = Results.model_validate_json((out / "results.json").read_text())
    console = Console(record=True, width=400, color_system=None)
    terminal.render(results, console)
    return markdown.render(results), console.export_text(), html.render(results, out)


def run(fake: FakeAnthropic, out: Path, *args: str) -> dict:
    done = run_cli("run", "--library", str(EXAMPLE), "--out", str(out), "--timeout", "20", "--host", "api",
                   "--case", HELPS, "--case", SAME, "--repeats", REPEATS, *args, env=fake_env(fake, KEY))
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert KEY not in done.stdout + done.stderr
    return results_of(out)


def test_a_skill_that_helps_shows_uplift_and_one_that_does_not_shows_none(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        scripted(fake)
        results = run(fake, tmp_path / "run", "--baseline")
    helps, same = case(results, HELPS), case(results, SAME)
    # The treatment arm is the case's own attempts: its state is decided as without --baseline.
    assert helps["state"] == "PASS" and same["state"] == "PASS"
    up = helps["uplift"]
    assert (up["treatment"]["passes"], up["treatment"]["fails"]) == (5, 0)
    assert (up["control"]["passes"], up["control"]["fails"]) == (0, 5)
    assert up["difference"] == 1.0 and up["verdict"] == "uplift"
    low, high = up["difference_interval"]
    assert low > 0 and low == round(up["treatment"]["wilson_95"][0] - up["control"]["wilson_95"][1], 4)
    assert high == round(up["treatment"]["wilson_95"][1] - up["control"]["wilson_95"][0], 4)
    none = same["uplift"]
    assert none["treatment"]["pass_rate"] == none["control"]["pass_rate"] == 1.0
    assert none["difference"] == 0.0 and none["verdict"] == "no measurable uplift"
    assert none["difference_interval"][0] < 0 < none["difference_interval"][1]
    # Tokens, turns and duration per arm: the treatment loaded the skill (two turns), the control did not.
    assert up["treatment"]["turns"] == 10 and up["control"]["turns"] == 5
    assert up["treatment"]["mean_tokens"] > up["control"]["mean_tokens"] > 0
    # Per skill: one row each, pooled over the skill's baselined cases.
    by_skill = {row["skill"]: row for row in results["uplift"]}
    assert by_skill[TRIAGE]["uplift"]["verdict"] == "uplift"
    assert by_skill["migration-planner"]["uplift"]["verdict"] == "no measurable uplift"
    # The reports: an uplift column per skill and a row per baselined case, "no measurable uplift" said.
    md, term, page = reports(tmp_path / "run")
    assert "uplift (with − without the skill" in page and "+0 pts [-44, +44] no measurable uplift" in page
    for report, shown in ((md, markdown.escape), (term, str)):
        assert UPLIFT_HEAD in report and "Uplift per case" in report
        assert shown("+100 pts [+13, +100]") in report and shown("+0 pts [-44, +44] no measurable uplift") in report
    assert "5/5 100% (56–100%)" in md and "0/5 0% (0–44%)" in md


def test_costs_per_arm_add_up_to_the_spend_and_control_never_saw_the_skill(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        scripted(fake)
        results = run(fake, out, "--baseline")
        control_requests = [r for r in fake.requests_for(key_of(HELPS))
                            if "Launching skill" not in _tool_results(r.body)]
    arms = [case(results, uid)["uplift"][arm]["cost_usd"] for uid in (HELPS, SAME) for arm in ("treatment", "control")]
    assert abs(sum(arms) - results["spend"]["usd"]) < 1e-5
    assert abs(sum(case(results, uid)["cost_usd"] for uid in (HELPS, SAME)) - results["spend"]["usd"]) < 1e-5
    records = attempts(out, HELPS)
    assert sorted(r["arm"] for r in records) == ["control"] * 5 + ["main"] * 5
    # The control arm's sessions had no listing entry for the skill; the judge graded every attempt of both arms
    # but the control's, whose shape assertion (the block's literal) a script already failed.
    control = [r for r in records if r["arm"] == "control"]
    assert all(TRIAGE not in r["outcome"]["fired"] for r in control)
    assert all(r["outcome"]["state"] == "FAIL" and r["judge"] is None for r in control)
    listed = [r for r in control_requests if f"- {TRIAGE}:" in json.dumps(r.body.get("system", ""))]
    assert len(listed) == 5  # the treatment's first turns only (the control's had no entry)


def test_without_baseline_nothing_changes(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        scripted(fake)
        results = run(fake, tmp_path / "run")
    assert results["uplift"] == []
    for uid in (HELPS, SAME):
        assert case(results, uid)["uplift"] is None
    assert all(r["arm"] == "main" for r in attempts(tmp_path / "run"))
    md, term, page = reports(tmp_path / "run")
    for report in (md, term):
        assert UPLIFT_HEAD not in report and "Uplift per case" not in report
    assert "uplift (with" not in page


def plan_json(*args: str, config: Path | None = None) -> dict:
    extra = ("--config", str(config)) if config else ()
    done = run_cli("plan", "--library", str(EXAMPLE), "--no-surface", "--format", "json", "--case", HELPS,
                   "--case", f"{TRIAGE}/evals/negative-dependency-bump-review", "--case", f"{TRIAGE}/trigger/*",
                   *extra, *args, env=fake_env(None, None))
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_the_plan_doubles_the_baselined_cases_and_says_so(tmp_path: Path) -> None:
    plain, baselined = plan_json(), plan_json("--baseline")
    cases = {c["uid"]: c for c in baselined["cases"]}
    assert cases[HELPS]["arms"] == ["main", "control"]
    # Output cases only: a trigger-set case has no assertion about the answer.
    doubled = [c for c in baselined["cases"] if c["arms"]]
    assert doubled and all(c["uid"].split("/")[1] == "evals" for c in doubled)
    e, p = baselined["estimate"], plain["estimate"]
    repeats = baselined["repeats"]
    assert e["baseline_cases"] == len(doubled) and e["baseline_sessions"] == repeats * len(doubled)
    assert e["sessions_max"] == p["sessions_max"] + repeats * len(doubled)
    assert abs(e["worst_usd"] - p["worst_usd"] - e["baseline_worst_usd"]) < 1e-3
    assert plain["estimate"]["baseline_cases"] == 0 and all(not c["arms"] for c in plain["cases"])
    text = run_cli("plan", "--library", str(EXAMPLE), "--no-surface", "--case", HELPS, "--baseline",
                   env=fake_env(None, None))
    assert "Baseline (uplift): 1 output case(s) also run a control arm" in text.stdout
    assert "sessions double" in text.stdout and "the cap covers both arms" in text.stdout
    # [run] baseline and [tiers.<tier>] baseline: the tier's wins over the run's.
    config = tmp_path / "settings.toml"
    config.write_text("[run]\nbaseline = true\n[tiers.full]\nbaseline = false\n")
    assert plan_json(config=config)["estimate"]["baseline_cases"] == 0
    config.write_text("[run]\nbaseline = true\n")
    assert plan_json(config=config)["estimate"]["baseline_cases"] == len(doubled)


def cli_session(name: str, with_skill: str, without_skill: str) -> tuple[Any, ...]:
    """The real Claude Code CLI's sessions: the listing is a system-reminder in the first user message, and the
    Skill tool's result comes back as a user message. Calls `name` when it is listed, answers `with_skill` once a
    tool result is in the conversation, `without_skill` when the session has no such skill."""
    def reply(body: dict[str, Any]) -> Any:
        messages = json.dumps(body.get("messages", []))
        if '"tool_result"' in messages:
            return text(with_skill)
        if listed(name, body):
            return skill(name)
        return text(without_skill)
    return (dynamic(reply),) * 3


def test_baseline_on_the_claude_code_host_leaves_the_skill_out_of_the_real_cli(tmp_path: Path) -> None:
    """The control arm on the real host: the CLI's own listing has no entry for the skill (its folder is left out
    of the session's project, as a probe's control arm), and the uplift is measured from the CLI's answers."""
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, marker_judge())
        fake.script(key_of(HELPS), *cli_session(TRIAGE, f"TEST REPORT TRIAGE — nightly\n{MARK} api skipped",
                                                "All green, ship it."))
        done = run_cli("run", "--library", str(EXAMPLE), "--out", str(out), "--timeout", "60",
                       "--host", "claude-code", "--case", HELPS, "--repeats", REPEATS, "--baseline",
                       env=fake_env(fake, KEY))
        assert done.returncode == 0, done.stdout + done.stderr
        sessions = [r for r in fake.requests_for(key_of(HELPS)) if JUDGE_MATCH not in json.dumps(r.body)]
        firsts = [r for r in sessions if '"tool_result"' not in json.dumps(r.body["messages"])]
    results = results_of(out)
    assert results["plan"]["host"] == "claude-code"
    records = attempts(out, HELPS)
    assert sorted(r["arm"] for r in records) == ["control"] * 5 + ["main"] * 5
    assert all(TRIAGE not in r["outcome"]["fired"] for r in records if r["arm"] == "control")
    assert all(TRIAGE in r["outcome"]["fired"] for r in records if r["arm"] == "main")
    # Ten first requests from the CLI: five listed the skill (treatment), five did not (control).
    with_skill = [r for r in firsts if listed(TRIAGE, r.body)]
    assert len(firsts) == 10 and len(with_skill) == 5
    up = case(results, HELPS)["uplift"]
    assert (up["treatment"]["passes"], up["control"]["passes"]) == (5, 0) and up["verdict"] == "uplift"
    assert abs(up["treatment"]["cost_usd"] + up["control"]["cost_usd"] - results["spend"]["usd"]) < 1e-5
    assert KEY not in done.stdout + done.stderr


def test_rejudging_a_baselined_run_judges_both_arms_again(tmp_path: Path) -> None:
    """`judge RUN_DIR` keeps the arms: a judge that now fails everything leaves no uplift to claim."""
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        scripted(fake)
        assert case(run(fake, out, "--baseline"), HELPS)["uplift"]["verdict"] == "uplift"
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("FAIL"))
        done = run_cli("judge", str(out), "--library", str(EXAMPLE), env=fake_env(fake, KEY))
        assert done.returncode == 0, done.stdout + done.stderr
        assert not [r for r in fake.message_requests if JUDGE_MATCH not in json.dumps(r.body)], "no session"
    rejudged = results_of(next(out.glob("rejudged-*")))
    up = case(rejudged, HELPS)["uplift"]
    assert (up["treatment"]["passes"], up["treatment"]["fails"]) == (0, 5)
    assert (up["control"]["passes"], up["control"]["fails"]) == (0, 5)
    assert up["verdict"] == "no measurable uplift"
