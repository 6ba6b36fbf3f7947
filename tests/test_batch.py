"""`--batch`: the Message Batches path gives the direct path's states, never turns a failed result into a
verdict, resumes the same batch after an interruption, and the judge marks its fixed prefix for caching.

Every test runs the real CLI (a separate process) or the real `anthropic` SDK against the fake Messages
API in runner/testing/fake_anthropic.py, whose batch endpoints answer each request with the same scripting as
/v1/messages.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from runner.core.observation import ToolCall
from runner.corpus.loader import load_library
from runner.corpus.settings import Price, Settings
from runner.hosts.prices import PriceTable
from runner.judge.prose import EPHEMERAL, SYSTEM_PROMPT, Judge, JudgeSettingsView, build_user_message
from runner.testing.fake_anthropic import (
    SPEND_LIMIT_MESSAGES,
    FakeAnthropic,
    dynamic,
    error,
    first_user_text,
    spend_limit,
    text,
    tool,
)
from runner.testing.fake_judge import JUDGE_MATCH, final_answer, rubric_ids, verdicts
from tests.conftest import EXAMPLE, REPO, fake_env, run_cli

KEY = "sk-ant-test-batch-7c1e"
TRIAGE = "test-report-triage"
LIBRARY, _ = load_library(EXAMPLE, Settings())
CASES = {case.uid: case for case in LIBRARY.cases}

NIGHTLY = f"{TRIAGE}/evals/positive-nightly-summary-with-skip"        # Skill, then an answer: PASS
JUNIT = f"{TRIAGE}/evals/positive-junit-in-workspace"                 # Read of SKILL.md, then an answer
ZERO = f"{TRIAGE}/evals/edge-zero-test-suite-reported-ok"             # split 1-1: a third repeat decides
SKIPPED = f"{TRIAGE}/evals/should-not-mark-green-with-skipped-tests"  # judged FAIL
NEGATIVE = f"{TRIAGE}/evals/negative-dependency-bump-review"          # one overload, then an answer (retried)
WINS = f"{TRIAGE}/trigger/triage-wins-here"                           # HTTP 400 every time: ERROR
BUMP = f"{TRIAGE}/trigger/bump-review-goes-to-dependency-upgrade-reviewer"
QUARANTINE = f"{TRIAGE}/trigger/quarantine-incident-goes-to-postmortem"         # nothing fires: FAIL


def key_of(uid: str) -> str:
    return CASES[uid].prompt[:60]


def judge_reply(body: dict[str, Any]) -> Any:
    """PASS quoting the answer's first line, except answers that say BAD: FAIL."""
    answer = final_answer(body)
    verdict = "FAIL" if "BAD" in answer else "PASS"
    quote = answer.strip().splitlines()[0][:120] if verdict == "PASS" else ""
    return text(json.dumps({"verdicts": [{"id": i, "verdict": verdict, "evidence": quote, "reason": "scripted"}
                                         for i in rubric_ids(body)]}))


def alternate(first: Any, second: Any) -> Any:
    """The n-th request for this turn gets `first` when n is odd, `second` when even (a 1-1 split)."""
    seen = [0]

    def pick(body: dict[str, Any]) -> Any:
        seen[0] += 1
        return first if seen[0] % 2 else second
    return dynamic(pick)


def skill_call(name: str) -> Any:
    """A Skill call with a fixed tool_use id: the fake numbers ids in request order, and an id one digit
    longer changes the fake's input token count (JSON length / 4) between the two paths."""
    return tool("Skill", {"skill": name}, id=f"toolu_{name.replace('-', '_')}")


def scripted(fake: FakeAnthropic) -> None:
    fake.script(JUDGE_MATCH, dynamic(judge_reply))
    fake.script(key_of(NIGHTLY), skill_call(TRIAGE), text("TEST REPORT TRIAGE — nightly\n[NOT PROVEN] api skipped"))
    fake.script(key_of(JUNIT), tool("Read", {"file_path": f".claude/skills/{TRIAGE}/SKILL.md"}, id="toolu_read"),
                text("TEST REPORT TRIAGE — junit"))
    fake.script(key_of(ZERO), alternate(skill_call(TRIAGE), text("No skill.")),
                text("TEST REPORT TRIAGE — zero\n[NOT PROVEN] contract suite ran 0 tests"))
    fake.script(key_of(SKIPPED), skill_call(TRIAGE), text("BAD: marked green"))
    fake.script(key_of(NEGATIVE), error(529, "overloaded_error", times=1), text("Review the changelog yourself."))
    fake.script(key_of(WINS), error(400, "invalid_request_error", "bad request"))
    fake.script(key_of(BUMP), skill_call("dependency-upgrade-reviewer"), text("Reviewed."))
    fake.default(text("A plain answer."))


def run_args(out: Path, *extra: str) -> list[str]:
    return ["run", "--library", str(EXAMPLE), "--out", str(out), "--host", "api", "--skill", TRIAGE,
            "--repeats", "3", "--max-usd", "1000", "--timeout", "30", *extra]


def attempts_of(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines() if line.strip()]


def states(out: Path) -> dict[str, Any]:
    """Everything the two paths must agree on: case states and tallies, assertion states, and each case's
    attempt states (as a multiset: which repeat got which of two scripted answers may differ).

    One thing is left out for a case that ends ERROR: how many errored repeats ran. On the direct path an
    attempt that errors while its sibling is still running lets the next repeat start (the sibling might
    still win), and whether it does depends on which finishes first; a batch round sees both results at
    once and starts nothing the verdict can no longer use. Its state and its attempts' states still agree."""
    results = json.loads((out / "results.json").read_text())
    attempts: dict[str, Counter[tuple[str | None, str | None]]] = {}
    for record in attempts_of(out):
        outcome = record.get("outcome") or {}
        attempts.setdefault(record["uid"], Counter())[(outcome.get("state"), record.get("error_kind"))] += 1
    out_states = {}
    for case in results["cases"]:
        seen = attempts.get(case["uid"], Counter())
        entry = {"state": case["state"], "assertions": [(a["index"], a["state"]) for a in case["assertions"]],
                 "attempts": sorted(seen) if case["state"] == "ERROR" else dict(seen)}
        if case["state"] != "ERROR":
            entry.update(wins=case["wins"], losses=case["losses"], errors=case["errors"],
                         repeats_run=case["repeats_run"])
        out_states[case["uid"]] = entry
    return out_states


def test_batch_run_has_the_direct_states_at_half_the_cost(tmp_path: Path) -> None:
    direct, batched = tmp_path / "direct", tmp_path / "batched"
    with FakeAnthropic() as fake:
        scripted(fake)
        done = run_cli(*run_args(direct), fake=fake, key=KEY)
        assert done.returncode == 0, done.stderr[-3000:]
        assert not fake.batch_creates
    with FakeAnthropic() as fake:
        scripted(fake)
        done = run_cli(*run_args(batched, "--batch", "--batch-poll", "0.05"), fake=fake, key=KEY)
        assert done.returncode == 0, done.stderr[-3000:]
        assert fake.message_requests == [], "in batch mode nothing goes to /v1/messages"
        assert fake.batch_creates
        kinds = Counter(item.kind for item in fake.batch_items)
    want, got = states(direct), states(batched)
    assert got == want
    # The scripts really exercised every path (else the comparison proves little).
    assert want[NIGHTLY]["state"] == "PASS" and want[JUNIT]["state"] == "PASS"
    assert want[ZERO]["repeats_run"] == 3 and want[ZERO]["state"] == "PASS"
    assert want[SKIPPED]["state"] == "FAIL" and ("FAIL" in {s for _, s in want[SKIPPED]["assertions"]})
    assert want[NEGATIVE]["state"] == "PASS"
    assert want[WINS]["state"] == "ERROR" and want[BUMP]["state"] == "PASS"
    assert want[QUARANTINE]["state"] == "FAIL"
    assert kinds["errored"] >= 3  # the overload (then retried in a later batch) and the two 400s
    # Same usage, half the price: the Batches API bills 50% of every token.
    spend_direct = json.loads((direct / "results.json").read_text())["spend"]
    spend_batch = json.loads((batched / "results.json").read_text())["spend"]
    usage = lambda out: sorted((a["uid"], a["usage"]["input_tokens"], a["usage"]["output_tokens"])  # noqa: E731
                               for a in attempts_of(out) if a["usage"]["input_tokens"])  # errored: no usage
    assert usage(batched) == usage(direct)
    # The plan and results say the run was batched; the direct run's say it was not.
    assert json.loads((batched / "results.json").read_text())["plan"]["batch"] is True
    assert json.loads((direct / "results.json").read_text())["plan"]["batch"] is False
    assert json.loads((batched / "plan.json").read_text())["batch"] is True
    assert spend_batch["usd"] > 0 and spend_batch["judge_usd"] > 0
    for key in ("usd", "judge_usd"):  # results.json rounds to 6 decimals
        assert abs(spend_batch[key] - spend_direct[key] / 2) <= 2e-6, (spend_batch, spend_direct)
    errored = [a for a in attempts_of(batched) if a["uid"] == WINS]
    assert errored and all(a["error_kind"] == "api-error" and "invalid_request_error" in a["error_message"]
                           for a in errored)


def test_errored_expired_and_canceled_results_are_never_a_verdict(tmp_path: Path) -> None:
    out = tmp_path / "run"
    judged = next(a.text for a in CASES[NIGHTLY].assertions if a.assertion_class == "semantic")
    with FakeAnthropic() as fake:
        scripted(fake)
        fake.batch_result(key_of(JUNIT), "expired")  # the session's first turn: ERROR
        fake.batch_result(key_of(NEGATIVE), "canceled")
        fake.batch_result(judged[:40], "errored", err_type="invalid_request_error", message="judge request refused")
        done = run_cli(*run_args(out, "--batch", "--batch-poll", "0.05"), fake=fake, key=KEY)
        assert done.returncode == 0, done.stderr[-3000:]
    results = {c["uid"]: c for c in json.loads((out / "results.json").read_text())["cases"]}
    assert results[JUNIT]["state"] == "ERROR"
    assert results[NEGATIVE]["state"] == "ERROR"
    for uid, word in ((JUNIT, "expired"), (NEGATIVE, "canceled")):
        records = [a for a in attempts_of(out) if a["uid"] == uid]
        assert records and all(a["outcome"]["state"] == "ERROR" and a["error_kind"] == "api-error"
                               and word in a["error_message"] for a in records), records
    # The judge's batch result errored: its assertions are JUDGE-ERROR with the cause, the case too.
    nightly = results[NIGHTLY]
    assert nightly["state"] == "JUDGE-ERROR", nightly["state"]
    assert {a["state"] for a in nightly["assertions"]} == {"PASS", "JUDGE-ERROR"}  # the shape check still ran
    assert all(a["state"] == "JUDGE-ERROR" for a in nightly["assertions"]
               if CASES[NIGHTLY].assertions[a["index"] - 1].assertion_class == "semantic")
    records = [a for a in attempts_of(out) if a["uid"] == NIGHTLY]
    assert records and all("invalid_request_error" in (a["judge"]["error"] or "") for a in records)
    assert all(a["outcome"]["state"] == "JUDGE-ERROR" for a in records)


def test_a_batch_refused_for_a_spend_limit_stops_the_run_and_its_rejudge(tmp_path: Path) -> None:
    """The Batches API answers a batch create with the usage tier's spend limit (429 without retry-after,
    error_code enforced_spend_limit_reached): one request, never retried; the sessions of that batch are ERROR
    `spend-limit`, the run stops with the rest UNRUN (spend-limit); a batched re-judge says spend_limit."""
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        scripted(fake)
        fake.refuse_batch_creates(spend_limit("tier"))
        done = run_cli(*run_args(out, "--batch", "--batch-poll", "0.05"), fake=fake, key=KEY)
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(fake.batch_creates) == 1, "a spend limit is never retried"
        results = json.loads((out / "results.json").read_text())
        assert results["stop_reason"] == "spend-limit"
        records = attempts_of(out)
        assert records and all(a["error_kind"] == "spend-limit" and SPEND_LIMIT_MESSAGES["tier"] in a["error_message"]
                               for a in records), [(a["error_kind"], a["error_message"]) for a in records]
        # Every attempt was a request of the one refused batch (the first round): no later round started.
        assert len(records) == len(fake.batch_creates[0].body["requests"])
        assert {c["state"] for c in results["cases"] if c["uid"] in {a["uid"] for a in records}} == {"ERROR"}

        fake.refuse_batch_creates(None)
        plain = tmp_path / "plain"
        assert run_cli(*run_args(plain, "--no-judge"), fake=fake, key=KEY).returncode == 0
        fake.refuse_batch_creates(spend_limit("tier"))
        creates = len(fake.batch_creates)
        batched = run_cli("judge", str(plain), "--library", str(EXAMPLE), "--batch", "--batch-poll", "0.05",
                          fake=fake, key=KEY)
        assert batched.returncode == 0, batched.stderr[-3000:]
        assert len(fake.batch_creates) == creates + 1
    rejudged = next(p for p in plain.iterdir() if p.name.startswith("rejudged-"))
    judged = [a for a in attempts_of(rejudged) if a.get("judge") and a["judge"].get("error")]
    assert judged and all(a["judge"]["spend_limit"] is True for a in judged), judged[:1]
    assert json.loads((rejudged / "results.json").read_text())["stop_reason"] == "spend-limit"


def test_a_direct_rejudge_stops_at_the_first_spend_limit(tmp_path: Path) -> None:
    """`judge DIR` one call at a time: the first call meets the spend limit, no other call is made, and the
    assertions not judged are UNRUN (spend-limit), never JUDGE-ERROR from calls that were never sent."""
    plain = tmp_path / "plain"
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, spend_limit("org"))
        fake.default(text("A plain answer."))
        # The whole library, every repeat: more answers to judge than the re-judge runs at once.
        assert run_cli("run", "--library", str(EXAMPLE), "--out", str(plain), "--host", "api", "--repeats", "3",
                       "--no-early-stop", "--no-judge", "--max-usd", "1000", "--timeout", "30",
                       fake=fake, key=KEY).returncode == 0
        before = len(fake.message_requests)
        done = run_cli("judge", str(plain), "--library", str(EXAMPLE), fake=fake, key=KEY)
        assert done.returncode == 0, done.stderr[-3000:]
        # The re-judge runs 4 calls at once (rejudge's default): at most those were sent before the first refusal.
        assert 1 <= len(fake.message_requests) - before <= 4
    rejudged = next(p for p in plain.iterdir() if p.name.startswith("rejudged-"))
    results = json.loads((rejudged / "results.json").read_text())
    assert results["stop_reason"] == "spend-limit"
    unrun = [a["reason"] for c in results["cases"] for a in c["assertions"] if a["state"] == "UNRUN"]
    assert "spend-limit" in unrun


def test_resume_after_an_interruption_polls_the_same_batch(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        scripted(fake)
        fake.script(key_of(QUARANTINE), text("No skill needed."))
        fake.batch_timing(polls=10_000)  # the batch never ends while the first process runs
        args = ["run", "--library", str(EXAMPLE), "--out", str(out), "--host", "api", "--case", QUARANTINE,
                "--repeats", "1", "--batch", "--batch-poll", "0.05"]
        process = subprocess.Popen([sys.executable, "-m", "runner", *args], env=fake_env(fake, KEY),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while not list((out / "batches").glob("*.json")) and time.monotonic() < deadline:
                time.sleep(0.05)
            record = json.loads(next((out / "batches").glob("*.json")).read_text())
            assert record["delivered"] is False
            process.send_signal(signal.SIGTERM)
            stdout, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 130, stderr[-2000:]
        assert f"results not yet delivered (a resume polls them): {record['batch_id']}" in stdout
        assert len(fake.batch_creates) == 1
        assert not [a for a in attempts_of(out) if a["status"] == "finished"]
        fake.batch_timing(polls=0)
        # Without --batch: a run planned batched resumes batched.
        done = run_cli("run", "--library", str(EXAMPLE), "--resume", str(out), "--batch-poll", "0.05",
                       fake=fake, key=KEY)
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(fake.batch_creates) == 1, "the resumed run polled the recorded batch instead of paying again"
        polled = [r.path for r in fake.requests if r.method == "GET" and r.path.endswith(record["batch_id"])]
        assert len(polled) >= 2  # polled before the interruption and again after the resume
    finished = [a for a in attempts_of(out) if a["status"] == "finished"]
    assert [(a["outcome"]["state"], a["outcome"]["fired"]) for a in finished] == [("FAIL", [])]
    assert json.loads((out / "batches" / f"{record['batch_id']}.json").read_text())["delivered"] is True


def test_judge_batch_rejudge_matches_the_direct_rejudge(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        scripted(fake)
        done = run_cli(*run_args(out, "--no-judge"), fake=fake, key=KEY)
        assert done.returncode == 0, done.stderr[-3000:]
        plain = run_cli("judge", str(out), "--library", str(EXAMPLE), fake=fake, key=KEY)
        assert plain.returncode == 0, plain.stderr[-3000:]
        judged_direct = len(fake.message_requests)
        batched = run_cli("judge", str(out), "--library", str(EXAMPLE), "--batch", "--batch-poll", "0.05",
                          fake=fake, key=KEY)
        assert batched.returncode == 0, batched.stderr[-3000:]
        assert len(fake.message_requests) == judged_direct, "the batch re-judge sent no direct message"
        assert len(fake.batch_creates) == 1, "all pending judge calls go into one batch"
    folders = sorted(p for p in out.iterdir() if p.name.startswith("rejudged-"))
    assert len(folders) == 2
    assert states(folders[0]) == states(folders[1])
    assert any(a["state"] == "FAIL" for c in json.loads((folders[1] / "results.json").read_text())["cases"]
               for a in c["assertions"])


def test_judge_marks_its_fixed_prefix_for_caching() -> None:
    prices = PriceTable(read_on="2026-11-30", source="test", models={"claude-sonnet-4-6": Price(input=3, output=15)})
    settings = JudgeSettingsView(model="claude-sonnet-4-6", timeout_s=20, max_tokens=512, max_retries=0)
    assertions = CASES[NIGHTLY].assertions
    calls = [ToolCall(name="Skill", input='{"skill": "test-report-triage"}', turn=0)]
    answer = "TEST REPORT TRIAGE — nightly"
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("PASS"))

        async def once() -> Any:
            judge = Judge(settings, KEY, fake.url, prices)
            try:
                return await judge.judge(CASES[NIGHTLY].prompt, answer, calls, assertions)
            finally:
                await judge.aclose()
        outcomes, call = asyncio.run(once())
        (record,) = fake.message_requests
    assert call.error is None and {o.state for o in outcomes} == {"PASS"}
    body = record.body
    assert body["system"] == [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": EPHEMERAL}]
    rubric, transcript = body["messages"][0]["content"]
    assert rubric["cache_control"] == {"type": "ephemeral"} and "cache_control" not in transcript
    assert rubric["text"].startswith("<rubric>") and rubric["text"].endswith("</rubric>")
    nonce = first_user_text(body).split("NONCE = ", 1)[1].split(")", 1)[0]
    # The model sees exactly the layout it saw before the split (prompt_version unchanged).
    assert rubric["text"] + transcript["text"] == build_user_message(CASES[NIGHTLY].prompt, answer, calls,
                                                                     assertions, nonce)
    assert nonce not in rubric["text"]  # the cached prefix holds nothing that changes per call


def test_benchmark_short_mode_runs(tmp_path: Path) -> None:
    out = tmp_path / "batch.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.batch", "--short", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(out.read_text())
    assert {row["mode"] for row in data["rows"]} == {"direct", "batch", "batch+cache"}
    for row in data["rows"]:
        assert row["input_tokens"] > 0 and row["cost_usd"] > 0 and row["states_match_direct"] is True
    assert "load_average" in data and data["short"] is True


def test_claude_code_sessions_run_directly_and_their_judge_calls_are_batched(tmp_path: Path) -> None:
    """The CLI makes its own calls (no batching possible); only the judge calls go into a batch."""
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        scripted(fake)
        done = run_cli("run", "--library", str(EXAMPLE), "--out", str(out), "--case", NIGHTLY,
                       "--repeats", "1", "--timeout", "60", "--batch", "--batch-poll", "0.05", fake=fake, key=KEY)
        assert done.returncode == 0, done.stderr[-3000:]
        sessions = fake.message_requests
        judged = [item for item in fake.batch_items if "<rubric>" in first_user_text(item.params)]
    assert sessions and all("<rubric>" not in first_user_text(r.body) for r in sessions)
    assert len(judged) == 1 and judged[0].kind == "succeeded"
    case = next(c for c in json.loads((out / "results.json").read_text())["cases"] if c["uid"] == NIGHTLY)
    assert case["state"] == "PASS", case
    (record,) = [a for a in attempts_of(out) if a["status"] == "finished"]
    assert record["judge"]["error"] is None and record["judge"]["usage"]["input_tokens"] > 0


def test_a_batch_result_without_usage_is_charged_its_bound(tmp_path: Path) -> None:
    """A succeeded batch result was billed (at the batch discount) whatever its usage says: a session turn and a judge
    call whose result carries `usage: null` are charged their bound (issue 28), the session is ERROR, the judge call
    JUDGE-ERROR, and what they record covers what the fake billed for them."""
    from runner.testing.fake_anthropic import odd_message
    from tests.billed import billed_usd

    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, odd_message(text(json.dumps({"verdicts": []})), usage=None))
        fake.script(key_of(NIGHTLY), skill_call(TRIAGE), odd_message(usage=None))
        fake.script(key_of(NEGATIVE), text("Review the changelog yourself."))
        done = run_cli("run", "--library", str(EXAMPLE), "--out", str(out), "--host", "api", "--case", NIGHTLY,
                       "--case", NEGATIVE, "--repeats", "1", "--batch", "--batch-poll", "0.05", fake=fake, key=KEY)
        assert done.returncode == 0, done.stderr[-3000:]
        session_billed = billed_usd(fake, match=key_of(NIGHTLY))
        judge_billed = billed_usd(fake, match=JUDGE_MATCH)
        assert all(b.batch for b in fake.billed) and session_billed > 0 and judge_billed > 0
    records = {a["uid"]: a for a in attempts_of(out)}
    cut = records[NIGHTLY]
    assert cut["outcome"]["state"] == "ERROR" and cut["error_kind"] == "malformed"
    assert cut["cost_usd"] >= session_billed and cut["cost_basis"] == "bound" and cut["lost_replies"] == 1
    judged = records[NEGATIVE]
    assert judged["outcome"]["state"] == "JUDGE-ERROR" and judged["judge"]["cost_basis"] in ("bound", "reservation")
    assert judged["judge"]["cost_usd"] >= judge_billed
