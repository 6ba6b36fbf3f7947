"""`skill-evals run` end to end: the real Claude Code CLI (and the api host) against the fake API.

Every test starts the fake Messages API on 127.0.0.1, runs the CLI as a separate process (what a
user runs), and asserts the exact states in results.json — never a mock of the SDK or the CLI.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from runner.testing.fake_anthropic import FakeAnthropic, error, hang, skill, text, tool
from tests.conftest import EXAMPLE, fake_env, run_cli
from tests.helpers import KEY, PROMPTS, TRIAGE, attempts, case, key_of, results_of, skill_evals_run


def no_secret_anywhere(out: Path, *texts: str) -> None:
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), f"the key leaked into {path}"
    for value in texts:
        assert KEY not in value


def test_claude_code_states(fake: FakeAnthropic, tmp_path: Path) -> None:
    nightly = f"{TRIAGE}/evals/positive-nightly-summary-with-skip"
    zero = f"{TRIAGE}/evals/edge-zero-test-suite-reported-ok"
    negative = f"{TRIAGE}/evals/negative-dependency-bump-review"
    wins = f"{TRIAGE}/trigger/triage-wins-here"
    junit = f"{TRIAGE}/evals/positive-junit-in-workspace"
    fake.script(key_of(nightly), skill(TRIAGE), text("TEST REPORT TRIAGE — nightly\n[NOT PROVEN] api skipped"))
    fake.script(key_of(zero), tool("Read", {"file_path": "README.md"}), tool("Glob", {"pattern": "*.md"}),
                skill(TRIAGE), text("TEST REPORT TRIAGE — rc\n[NOT PROVEN]"))
    fake.script(key_of(negative), error(500, "api_error", "boom"))
    fake.script(key_of(wins), skill("dependency-upgrade-reviewer"), skill(TRIAGE), text("both"))
    fake.script(key_of(junit), text("No skill needed."))
    out = tmp_path / "run"
    done = skill_evals_run(fake, out, "--skill", TRIAGE, "--repeats", "3", "--quorum", "2",
                           "--case", f"{TRIAGE}/evals/positive-nightly*", "--case", f"{TRIAGE}/evals/edge-zero*",
                           "--case", f"{TRIAGE}/evals/negative*", "--case", f"{TRIAGE}/trigger/triage-wins-here",
                           "--case", f"{TRIAGE}/evals/positive-junit*")
    assert done.returncode == 0, done.stdout + done.stderr
    results = results_of(out)

    # Early stop: the first k=2 attempts won the activation and the shape check -> exactly 2 sessions.
    first = case(results, nightly)
    assert len(attempts(out, nightly)) == 2 and first["repeats_run"] == 2
    assert first["activation"]["state"] == "PASS" and first["wins"] == 2
    # Activation by the harness, the Output Format header by script, the prose by the (fake) judge.
    assert first["state"] == "PASS", first
    shape = next(a for a in first["assertions"] if a["assertion_class"] == "artifact_shape")
    assert shape["state"] == "PASS" and shape["passes"] == 2
    assert {a["state"] for a in first["assertions"]} == {"PASS"}
    assert results["spend"]["judge_calls"] >= 2 and results["plan"]["judge_model"]

    # The target fired after two other tools: it counts (no stopping at the first non-Skill tool).
    later = case(results, zero)
    assert later["activation"]["fired_runs"] == later["activation"]["observed_runs"] == 2

    # A should-not-trigger case whose sessions all got 500 is ERROR, never PASS.
    broken = case(results, negative)
    assert broken["state"] == "ERROR" and broken["errors"] == 3 and broken["wins"] == 0
    assert all(a["error_kind"] == "api-error" for a in attempts(out, negative))

    # Discrimination: the neighbour fired first -> the pair is lost, the case FAILs, what fired is shown.
    pair = case(results, wins)
    assert pair["state"] == "FAIL"
    pairs = {p["neighbour"]: (p["state"], p["reason"]) for p in pair["pairs"]}
    assert pairs["dependency-upgrade-reviewer"] == ("FAIL", None)
    # A manual-only neighbour cannot fire: its silence is no evidence, so the pair is not claimed.
    assert pairs["release-publisher"] == ("UNRUN", "manual-only-target")
    assert pair["fired_instead"] == {"dependency-upgrade-reviewer": 2}

    # A trigger case whose skill never fired FAILs after N-k+1 = 2 losses.
    missed = case(results, junit)
    assert missed["state"] == "FAIL" and missed["losses"] == 2 and missed["activation"]["state"] == "FAIL"

    assert results["plan"]["host"] == "claude-code" and results["plan"]["versions"]["claude-code-cli"]
    assert results["spend"]["usd"] > 0 and results["spend"]["usd"] <= results["spend"]["cap_usd"]
    no_secret_anywhere(out, done.stdout, done.stderr)
    # The CLI's requests carried the key (it is the real client), our files and logs never.
    assert any(r.headers.get("x-api-key") == KEY for r in fake.requests)


def test_hang_past_the_timeout_is_error(fake: FakeAnthropic, tmp_path: Path) -> None:
    uid = f"{TRIAGE}/evals/positive-nightly-summary-with-skip"
    fake.script(key_of(uid), hang(60))
    out = tmp_path / "run"
    done = skill_evals_run(fake, out, "--case", uid, "--repeats", "1", "--timeout", "4")
    assert done.returncode == 0, done.stderr
    # The session's requests reached the hang and none got the "late" reply: the timeout cut the session.
    hung = [r.outcome for r in fake.requests_for(key_of(uid))]
    assert hung and set(hung) == {"hang"}, hung
    result = case(results_of(out), uid)
    assert result["state"] == "ERROR"
    assert attempts(out, uid)[0]["error_kind"] == "timeout"


def test_no_credentials_and_kill_switch(fake: FakeAnthropic, tmp_path: Path) -> None:
    done = skill_evals_run(fake, tmp_path / "nokey", "--skill", TRIAGE, key=None)
    assert done.returncode == 0
    results = results_of(tmp_path / "nokey")
    assert_run_wide_reason(tmp_path / "nokey", results, "no-credentials")
    assert "ANTHROPIC_API_KEY" in done.stdout
    assert (tmp_path / "nokey" / "surface.json").exists(), "the surface audit needs no key and still runs"
    assert [r for r in fake.message_requests if r.headers.get("x-api-key") != "skill-evals-surface-audit-no-key"] == []

    done = skill_evals_run(fake, tmp_path / "off", "--skill", TRIAGE, extra_env={"SKILL_EVALS_DISABLED": "1"})
    assert done.returncode == 0
    assert_run_wide_reason(tmp_path / "off", results_of(tmp_path / "off"), "kill-switch")


def assert_run_wide_reason(run: Path, results: dict, reason: str) -> None:
    """Every case is UNRUN: the plan's runnable ones for the run-wide `reason`, the others for their own."""
    planned = {c["uid"]: c["unrun_reason"] for c in json.loads((run / "plan.json").read_text())["cases"]}
    assert results["plan"]["unrun_all"] == reason
    assert {c["state"] for c in results["cases"]} == {"UNRUN"}
    assert any(own is None for own in planned.values())
    for found in results["cases"]:
        assert found["reason"] == (planned[found["uid"]] or reason), found


def test_cap_below_the_plan_holds(fake: FakeAnthropic, tmp_path: Path) -> None:
    for uid in PROMPTS:
        if uid.startswith(f"{TRIAGE}/"):
            fake.script(key_of(uid), skill(TRIAGE), text("TEST REPORT TRIAGE — x"))
    out = tmp_path / "run"
    plan = run_cli("plan", "--library", str(EXAMPLE), "--skill", TRIAGE, "--format", "json", "--no-surface")
    assert plan.returncode == 0, plan.stderr
    worst = json.loads(plan.stdout)["estimate"]["worst_session_usd"]
    cap = worst * 1.5  # one worst-case reservation fits, a second one at the same time does not
    done = skill_evals_run(fake, out, "--skill", TRIAGE, "--max-usd", f"{cap:.6f}", "--concurrency", "4")
    assert done.returncode == 0, done.stderr
    results = results_of(out)
    assert results["spend"]["usd"] <= cap
    finished = attempts(out)
    assert all(a["reserved_usd"] >= a["cost_usd"] for a in finished)
    # The cap allows one reservation at a time: with concurrency 4, sessions still never overlapped, and each
    # started only after the one before settled its (much lower) real cost.
    from runner.testing.fake_anthropic import first_user_text
    calls = sorted((r for r in fake.message_requests if "<rubric>" not in first_user_text(r.body)),
                   key=lambda r: r.time)
    turns = [sum(m.get("role") == "assistant" for m in r.body["messages"]) for r in calls]
    assert turns == [0, 1] * len(finished) and len(finished) >= 2  # each session's two turns, never interleaved
    spent, refused = results["spend"]["usd"], results["spend"]["refused_reservations"]
    reserved = json.loads((out / "plan.json").read_text())["estimate"]["worst_session_usd"]  # with the surface
    if results["stop_reason"] == "budget-cap":  # stopped only when even with nothing in flight a start did not fit
        assert refused >= 1 and spent + reserved > cap - 1e-6
    else:
        # Cases UNRUN for other reasons (a manual-only target, an uncalibrated probe) were never to run.
        assert refused == 0 and "budget-cap" not in results["unrun_by_reason"]


def test_sigterm_then_resume_repeats_nothing(fake: FakeAnthropic, tmp_path: Path) -> None:
    for uid in PROMPTS:
        if uid.startswith(f"{TRIAGE}/"):
            fake.script(key_of(uid), skill(TRIAGE), text("TEST REPORT TRIAGE — x"))
    fake.set_latency(0.4)
    out = tmp_path / "run"
    env = fake_env(fake, KEY)
    args = [sys.executable, "-m", "runner", "run", "--library", str(EXAMPLE), "--out", str(out), "--skill", TRIAGE,
            "--repeats", "3", "--concurrency", "2", "--timeout", "30"]
    process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (out / "attempts.jsonl").exists() and len(attempts(out)) >= 3:
            break
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stdout + stderr
    first = results_of(out)
    assert first["stop_reason"] == "cancelled"
    finished_before = {a["attempt_id"] for a in attempts(out) if a["status"] == "finished"}
    assert finished_before
    assert first["counts"]["UNRUN"] > 0

    fake.set_latency(0.0)
    done = run_cli("run", "--library", str(EXAMPLE), "--resume", str(out), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    records = attempts(out)
    finished = [a["attempt_id"] for a in records if a["status"] == "finished"]
    assert len(finished) == len(set(finished)), "a finished attempt was run twice"
    assert finished_before <= set(finished)
    final = results_of(out)
    assert final["stop_reason"] is None
    assert "cancelled" not in final["unrun_by_reason"]


def test_resume_refuses_a_changed_library(fake: FakeAnthropic, tmp_path: Path) -> None:
    import shutil
    library = tmp_path / "library"
    shutil.copytree(EXAMPLE, library)
    out = tmp_path / "run"
    done = skill_evals_run(fake, out, "--case", f"{TRIAGE}/evals/positive-nightly*", "--repeats", "1", library=library)
    assert done.returncode == 0
    skill_md = library / ".claude" / "skills" / TRIAGE / "SKILL.md"
    skill_md.write_text(skill_md.read_text() + "\nOne more line.\n")
    again = run_cli("run", "--library", str(library), "--resume", str(out))
    assert again.returncode == 2 and "library changed" in again.stderr


def test_api_host_through_the_cli_says_it_is_an_approximation(fake: FakeAnthropic, tmp_path: Path) -> None:
    nightly = f"{TRIAGE}/evals/positive-nightly-summary-with-skip"
    negative = f"{TRIAGE}/evals/negative-dependency-bump-review"
    fake.script(key_of(nightly), tool("Read", {"file_path": ".claude/skills/test-report-triage/SKILL.md"}),
                skill(TRIAGE), text("TEST REPORT TRIAGE — nightly\n[NOT PROVEN]"))
    fake.script(key_of(negative), error(529, "overloaded_error", "busy"))
    out = tmp_path / "run"
    done = skill_evals_run(fake, out, "--host", "api", "--case", nightly, "--case", negative, "--repeats", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    results = results_of(out)
    assert results["plan"]["host"] == "api" and "approximation" in results["plan"]["approximation"]
    assert "approximation" in done.stdout
    first = case(results, nightly)
    assert first["activation"]["state"] == "PASS" and first["repeats_run"] == 2
    broken = case(results, negative)
    assert broken["state"] == "ERROR" and broken["wins"] == 0
    # The api host sends JSON requests (no stream); each errored session made 1 + 2 retried requests.
    # Two or three sessions start: when both first errors are seen at once, a third cannot reach the quorum.
    assert all(r.body.get("stream") in (None, False) for r in fake.requests_for(key_of(negative)))
    sessions = len(attempts(out, negative))
    assert sessions in (2, 3) and broken["errors"] == sessions
    assert len(fake.requests_for(key_of(negative))) == 3 * sessions
    no_secret_anywhere(out, done.stdout, done.stderr)


def test_rate_limit_pauses_new_starts_and_spend_limit_stops(fake: FakeAnthropic, tmp_path: Path) -> None:
    limited = f"{TRIAGE}/evals/positive-nightly-summary-with-skip"
    later = f"{TRIAGE}/evals/positive-junit-in-workspace"
    fake.script(key_of(limited), error(429, "rate_limit_error", "slow down", retry_after=0))
    fake.script(key_of(later), skill(TRIAGE), text("TEST REPORT TRIAGE — x"))
    library = tmp_path / "library"
    import shutil
    shutil.copytree(EXAMPLE, library)
    (library / ".skill-evals.toml").write_text("[run]\nrate_limit_pause_s = 3\nhost_max_retries = 0\n")
    out = tmp_path / "run"
    done = skill_evals_run(fake, out, "--host", "api", "--case", limited, "--case", later, "--repeats", "1",
                           "--concurrency", "1", library=library)
    assert done.returncode == 0, done.stderr
    results = results_of(out)
    assert case(results, limited)["state"] == "ERROR"
    assert attempts(out, limited)[0]["error_kind"] == "rate-limited"
    first = fake.requests_for(key_of(limited))[-1].time
    second = fake.requests_for(key_of(later))[0].time
    assert second - first >= 3.0, "no session may start during the rate-limit pause"

    spend = tmp_path / "spend"
    spender = f"{TRIAGE}/evals/edge-zero-test-suite-reported-ok"
    # Cases no earlier part of this test sent (so every request for their prompts below is from this run).
    fresh = [f"{TRIAGE}/evals/should-not-mark-green-with-skipped-tests",
             f"{TRIAGE}/evals/negative-dependency-bump-review", f"{TRIAGE}/trigger/triage-wins-here"]
    assert all(not fake.requests_for(key_of(uid)) for uid in [spender, *fresh])
    fake.script(key_of(spender), error(429, "rate_limit_error", "limit"))  # 429 without retry-after: a spend limit
    done = skill_evals_run(fake, spend, "--host", "api", "--case", f"{TRIAGE}/evals/edge-zero*", "--case", later,
                           *(arg for uid in fresh for arg in ("--case", uid)), "--repeats", "1", "--concurrency", "1",
                           library=library)
    assert done.returncode == 0, done.stderr
    results = results_of(spend)
    assert results["stop_reason"] == "spend-limit"
    # The attempt that met the limit is the last one: nothing started after it.
    finished = attempts(spend)
    assert finished[-1]["uid"] == spender and finished[-1]["error_kind"] == "spend-limit"
    assert [a["uid"] for a in finished].count(spender) == 1
    ran = {a["uid"] for a in finished}
    assert case(results, spender)["state"] == "ERROR"
    assert case(results, spender)["reason"].startswith("spend-limit: HTTP 429 without retry-after")
    # Every other case either ran before the limit (its attempt is recorded, its state comes from it) or is
    # UNRUN (spend-limit): never PASS or FAIL without having run, and never started after the stop.
    assert {c["uid"] for c in results["cases"]} == {spender, later, *fresh}
    unrun = [c["uid"] for c in results["cases"] if c["uid"] not in ran]
    assert unrun, f"the spend limit left no case unstarted ({ran}): the rest of this test would show nothing"
    for c in results["cases"]:
        if c["uid"] in ran:
            assert c["repeats_run"] == 1 and c["attempts"] == [f"{c['uid']}#main#1"], c
        else:
            assert (c["state"], c["reason"], c["repeats_run"], c["attempts"]) == ("UNRUN", "spend-limit", 0, []), c
            assert c["wins"] == c["losses"] == c["errors"] == 0
            assert not fake.requests_for(key_of(c["uid"])), f"{c['uid']} was sent after the spend limit"
    if later in ran:
        assert case(results, later)["state"] == "PASS"
    assert results["unrun_by_reason"] == {"spend-limit": len(unrun)}
    assert results["counts"]["UNRUN"] == len(unrun)
