"""Replies a client must survive, and spend limits (issue 13): a fault matrix driven through `skill-evals run`.

Every fault is played by the fake Messages API (runner/testing/fake_anthropic.py) on 127.0.0.1 to the real `anthropic`
SDK (the api host and the judge) and to the real Claude Code CLI (the claude-code host). No mock anywhere.

- A reply that is not a readable Message (status 200 with an error body, an SSE `error` event mid-stream, a
  Message whose usage, content, blocks or stop_reason are missing or of the wrong type) is an ERROR attempt
  (`malformed`, with the reason) or, for the judge, JUDGE-ERROR with the reason: recorded in attempts.jsonl,
  results.json written, exit 0, and `--resume` runs on.
- A spend limit (429 `enforced_spend_limit_reached`, 429 without retry-after, 400 "You have reached your specified
  ... API usage limits", 402 billing) is recognised from the first response the host can see: the attempt is ERROR
  `spend-limit` with the API's message (a judge call: JUDGE-ERROR), the run stops at once, and every case not
  started is UNRUN `spend-limit` — before a 20 s session bound runs out (no retry, no rate-limit pause).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runner.corpus.library import Assertion
from runner.corpus.settings import Settings
from runner.hosts.prices import load as load_prices
from runner.judge.prose import Judge, JudgeSettingsView
from runner.testing.fake_anthropic import (
    SPEND_LIMIT_MESSAGES,
    FakeAnthropic,
    Text,
    first_user_text,
    hang,
    odd_message,
    ok_error,
    spend_limit,
    sse_error,
    text,
)
from runner.testing.fake_judge import JUDGE_MATCH
from tests.conftest import run_cli
from tests.helpers import KEY, TRIAGE, attempts, case, key_of, results_of, skill_evals_run

# no_trigger cases whose only prose assertion is a2: a plain answer passes the activation, then the judge decides.
NEGATIVES = [
    f"{TRIAGE}/evals/negative-dependency-bump-review",
    "incident-postmortem-writer/evals/negative-flaky-test-triage",
    "migration-planner/evals/negative-postmortem-after-migration-outage",
    "dependency-upgrade-reviewer/evals/negative-cve-exploitability",
]
# Any runnable cases: each gets its own session fault.
CASES = [
    *NEGATIVES,
    f"{TRIAGE}/evals/positive-nightly-summary-with-skip",
    f"{TRIAGE}/evals/positive-junit-in-workspace",
    f"{TRIAGE}/evals/edge-zero-test-suite-reported-ok",
    "migration-planner/evals/positive-add-not-null-column",
    "migration-planner/evals/edge-rename-column-live-traffic",
]
SKILL_CALL = {"type": "tool_use", "id": "toolu_odd_1", "name": "Skill", "input": "test-report-triage"}

# fault name -> (the fake's reply, words the recorded reason must hold)
API_SESSION_FAULTS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "error body with status 200": (ok_error("overloaded_error", "Overloaded (fake 200)"),
                                   ("HTTP 200", "overloaded_error", "Overloaded (fake 200)")),
    "SSE error event mid-stream": (sse_error("overloaded_error", "Overloaded mid-stream (fake)"),
                                   ("event stream", "overloaded_error", "Overloaded mid-stream (fake)")),
    "usage null": (odd_message(usage=None), ("usage",)),
    "usage fields null": (odd_message(usage={"input_tokens": None, "output_tokens": None}), ("usage", "input_tokens")),
    "content null": (odd_message(content=None), ("content",)),
    "unknown block type": (odd_message(content=[{"type": "hologram", "x": 1}]), ("hologram",)),
    "tool_use input not an object": (odd_message(content=[SKILL_CALL], stop_reason="tool_use"), ("tool_use", "input")),
    "stop_reason missing": (odd_message(drop=("stop_reason",)), ("stop_reason",)),
    "text null": (odd_message(content=[{"type": "text", "text": None}]), ("text",)),
}
# What the CLI shows of the same faults (measured on CLI 2.1.332; see runner/hosts/claude_code.py).
CLI_SESSION_FAULTS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "error body with status 200": (ok_error("overloaded_error", "Overloaded (fake 200)"),
                                   ("malformed response (HTTP 200)",)),
    "SSE error event mid-stream": (sse_error("overloaded_error", "Overloaded mid-stream (fake)"),
                                   ("malformed response (HTTP 200)",)),
    "usage null": (odd_message(usage=None), ("usage",)),
    "usage fields null": (odd_message(usage={"input_tokens": None, "output_tokens": None}), ("usage",)),
}


def verdict_a2() -> Text:
    """A valid judge reply for the NEGATIVES (their prose assertion is a2; the evidence occurs in the answer)."""
    return text(json.dumps({"verdicts": [{"id": "a2", "verdict": "PASS", "evidence": "Plain answer", "reason": "r"}]}))


JUDGE_FAULTS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "error body with status 200": (ok_error("overloaded_error", "Overloaded (fake 200)"),
                                   ("HTTP 200", "Overloaded (fake 200)")),
    "SSE error event mid-stream": (sse_error("overloaded_error", "Overloaded mid-stream (fake)"),
                                   ("event stream", "Overloaded mid-stream (fake)")),
    "usage null": (odd_message(verdict_a2(), usage=None), ("usage",)),
    "content null": (odd_message(verdict_a2(), content=None), ("content",)),
}


def resume(fake: FakeAnthropic, out: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("run", "--library", str(library_of(out)), "--resume", str(out), fake=fake, key=KEY)


def library_of(out: Path) -> str:
    return json.loads((out / "plan.json").read_text())["library"]["root"]


def session_requests(fake: FakeAnthropic) -> list:
    return [r for r in fake.message_requests if JUDGE_MATCH not in first_user_text(r.body)]


def judge_requests(fake: FakeAnthropic) -> list:
    return [r for r in fake.message_requests if JUDGE_MATCH in first_user_text(r.body)]


def only(records: list[dict]) -> dict:
    assert len(records) == 1, records
    return records[0]


def case_args(uids: list[str]) -> list[str]:
    return [arg for uid in uids for arg in ("--case", uid)]


# ---- replies that are not a readable Message: the sessions ---------------------------------------------------

@pytest.mark.parametrize("host, faults", [("api", API_SESSION_FAULTS), ("claude-code", CLI_SESSION_FAULTS)],
                         ids=["api", "claude-code"])
def test_unreadable_session_replies_are_error_attempts(tmp_path: Path, host: str,
                                                       faults: dict[str, tuple[Any, tuple[str, ...]]]) -> None:
    uids = dict(zip(faults, CASES))
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdict_a2())
        for name, uid in uids.items():
            fake.script(key_of(uid), faults[name][0])
        out = tmp_path / "run"
        done = skill_evals_run(fake, out, "--host", host, *case_args(list(uids.values())), "--repeats", "1",
                               "--concurrency", "4")
        assert done.returncode == 0, done.stdout + done.stderr
        results = results_of(out)
        for name, uid in uids.items():
            record = only(attempts(out, uid))
            assert record["status"] == "finished" and record["outcome"]["state"] == "ERROR", (name, record)
            assert record["error_kind"] == "malformed", (name, record["error_kind"], record["error_message"])
            for word in faults[name][1]:
                assert word in record["error_message"], (name, word, record["error_message"])
            assert case(results, uid)["state"] == "ERROR", name
        assert judge_requests(fake) == [], "an attempt without a readable answer is never judged"

        before = len(fake.message_requests)
        again = resume(fake, out)
        assert again.returncode == 0, again.stdout + again.stderr
        assert len(fake.message_requests) == before, "every attempt was recorded: resuming runs nothing again"
        assert len(attempts(out)) == len(uids)
        assert {case(results_of(out), uid)["state"] for uid in uids.values()} == {"ERROR"}


# ---- replies that are not a readable Message: the judge --------------------------------------------------------

@pytest.mark.parametrize("host", ["api", "claude-code"])
def test_unreadable_judge_replies_are_judge_errors(tmp_path: Path, host: str) -> None:
    uids = dict(zip(JUDGE_FAULTS, NEGATIVES))
    with FakeAnthropic() as fake:
        # The judge's request holds the case prompt and the answer: the answer's marker picks the judge's fault
        # (registered first, so it wins over the session's script).
        for number, name in enumerate(uids):
            fake.script(f"MARK-{number}-", JUDGE_FAULTS[name][0])
        for number, uid in enumerate(uids.values()):
            fake.script(key_of(uid), text(f"Plain answer MARK-{number}- without any skill."))
        out = tmp_path / "run"
        done = skill_evals_run(fake, out, "--host", host, *case_args(list(uids.values())), "--repeats", "1",
                               "--concurrency", "4")
        assert done.returncode == 0, done.stdout + done.stderr
        results = results_of(out)
        for name, uid in uids.items():
            record = only(attempts(out, uid))
            assert record["error_kind"] is None and record["outcome"]["activation"] == "PASS", (name, record)
            assert record["outcome"]["state"] == "JUDGE-ERROR", (name, record["outcome"])
            cause = record["judge"]["error"]
            for word in JUDGE_FAULTS[name][1]:
                assert word in cause, (name, word, cause)
            prose = [a for a in record["outcome"]["assertions"] if a["index"] == 2]
            assert [a["state"] for a in prose] == ["JUDGE-ERROR"] and prose[0]["reason"] == cause
            assert case(results, uid)["state"] == "JUDGE-ERROR", name
        assert len(judge_requests(fake)) == len(uids)
        again = resume(fake, out)
        assert again.returncode == 0, again.stdout + again.stderr


# ---- spend limits: the sessions ---------------------------------------------------------------------------------

# (host, kind, session requests until the run knows, the API's words the recorded reason holds)
SPEND_SESSIONS = [
    *[("api", kind, 1, SPEND_LIMIT_MESSAGES[kind]) for kind in ("tier", "bare-429", "org", "workspace", "billing")],
    # The CLI retries a 429 itself (CLAUDE_CODE_MAX_RETRIES = host_max_retries, default 2) and says only
    # `api_retry` with error_status 429 meanwhile; a 400 it sends twice more at once, each time without one of
    # its beta headers; a 402 it reports in its own words. Measured on CLI 2.1.332 (runner/hosts/claude_code.py).
    # A 429 without retry-after whose message names no limit is not in this list: the CLI shows nothing that
    # tells it from a rate limit. (The workspace 400 takes the org 400's path: the api host run covers its words.)
    *[("claude-code", kind, 3, SPEND_LIMIT_MESSAGES[kind]) for kind in ("tier", "org")],
    ("claude-code", "billing", 1, "Credit balance is too low"),
]


@pytest.mark.parametrize("host, kind, requests, words", SPEND_SESSIONS,
                         ids=[f"{host}-{kind}" for host, kind, _, _ in SPEND_SESSIONS])
def test_a_spend_limit_stops_the_run_at_the_first_response(tmp_path: Path, host: str, kind: str,
                                                           requests: int, words: str) -> None:
    with FakeAnthropic() as fake:
        fake.default(spend_limit(kind))
        out = tmp_path / "run"
        # A 20 s session bound: a detection that waited out rate-limit pauses (before the fix: 30 s after each 429
        # without retry-after) would end the session as `timeout`, which the error_kind check below refuses.
        done = skill_evals_run(fake, out, "--host", host, *case_args(NEGATIVES[:3]), "--repeats", "1",
                               "--concurrency", "1", "--timeout", "20")
        assert done.returncode == 0, done.stdout + done.stderr
        results = results_of(out)
        assert results["stop_reason"] == "spend-limit", results["stop_reason"]
        record = only(attempts(out))
        assert record["error_kind"] == "spend-limit" and record["outcome"]["state"] == "ERROR", record
        assert words in record["error_message"], record["error_message"]
        assert results["unrun_by_reason"] == {"spend-limit": 2}, results["unrun_by_reason"]
        assert len(session_requests(fake)) == requests, [r.outcome for r in fake.message_requests]

        again = resume(fake, out)
        assert again.returncode == 0, again.stdout + again.stderr
        resumed = results_of(out)
        assert resumed["stop_reason"] == "spend-limit" and resumed["unrun_by_reason"] == {"spend-limit": 1}
        finished = [a["attempt_id"] for a in attempts(out) if a["status"] == "finished"]
        assert len(finished) == 2 == len(set(finished)), "resuming ran the next case once and stopped again"
        assert len(session_requests(fake)) == 2 * requests


# ---- spend limits: the judge -------------------------------------------------------------------------------------

# The judge is the same client on both hosts (every kind: test_the_judge_recognises_every_spend_limit_...).
@pytest.mark.parametrize("host, kind", [("api", "tier"), ("api", "org"), ("claude-code", "bare-429")])
def test_a_judge_call_that_hits_a_spend_limit_stops_the_run(tmp_path: Path, host: str, kind: str) -> None:
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, spend_limit(kind))
        fake.default(text("Plain answer without any skill."))
        out = tmp_path / "run"
        done = skill_evals_run(fake, out, "--host", host, *case_args(NEGATIVES[:3]), "--repeats", "1",
                               "--concurrency", "1", "--timeout", "600")
        assert done.returncode == 0, done.stdout + done.stderr
        results = results_of(out)
        assert results["stop_reason"] == "spend-limit"
        record = only(attempts(out))
        assert record["error_kind"] is None and record["outcome"]["state"] == "JUDGE-ERROR", record
        assert record["judge"]["spend_limit"] is True
        assert SPEND_LIMIT_MESSAGES[kind] in record["judge"]["error"], record["judge"]["error"]
        assert results["unrun_by_reason"] == {"spend-limit": 2}
        assert len(judge_requests(fake)) == 1 and len(session_requests(fake)) == 1  # never retried
        again = resume(fake, out)
        assert again.returncode == 0, again.stdout + again.stderr
        assert results_of(out)["stop_reason"] == "spend-limit"


def test_a_session_in_flight_when_the_judge_hit_a_spend_limit_is_not_judged(tmp_path: Path) -> None:
    """Two sessions at once: the first one's judge call meets the spend limit while the second still runs. The
    second is recorded as it ended, its prose assertion UNRUN (spend-limit): its judge call could only be refused."""
    first, second, never = sorted(NEGATIVES[:3])  # the plan's order (asserted below): the first two start at once
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, spend_limit("tier"))
        fake.script(key_of(second), hang(3))  # answers "late" after 3 s, long after the first one's judge call
        fake.default(text("Plain answer without any skill."))
        out = tmp_path / "run"
        done = skill_evals_run(fake, out, "--host", "api", *case_args([first, second, never]), "--repeats", "1",
                               "--concurrency", "2", "--timeout", "600")
        assert done.returncode == 0, done.stdout + done.stderr
        planned = json.loads((out / "plan.json").read_text())["cases"]
        assert [c["uid"] for c in planned] == [first, second, never]
        results = results_of(out)
        assert results["stop_reason"] == "spend-limit"
        assert len(judge_requests(fake)) == 1, "no judge call after the spend limit"
        assert only(attempts(out, first))["judge"]["spend_limit"] is True
        late = only(attempts(out, second))
        assert late["judge"] is None and late["final_answer"] == "late"
        assert [(a["state"], a["reason"]) for a in late["outcome"]["assertions"] if a["index"] == 2] == \
            [("UNRUN", "spend-limit")]
        assert attempts(out, never) == [] and case(results, never)["reason"] == "spend-limit"


# ---- the judge on its own (what `judge DIR` and `calibrate-judge` call) ---------------------------------------------

ASSERTIONS = [Assertion(index=2, text="Answers without a skill.", line=1, assertion_class="semantic", class_rule="t")]


def judge_with(fake: FakeAnthropic) -> tuple[list, Any]:
    async def once() -> tuple[list, Any]:
        view = JudgeSettingsView(model="claude-sonnet-4-6", timeout_s=600, max_tokens=512, max_retries=2)
        judge = Judge(view, "test-key", fake.url, load_prices(Settings()))
        try:
            return await judge.judge("the prompt", "Plain answer", [], ASSERTIONS)
        finally:
            await judge.aclose()
    return asyncio.run(once())


@pytest.mark.parametrize("kind", sorted(SPEND_LIMIT_MESSAGES))
def test_the_judge_recognises_every_spend_limit_from_one_request(kind: str) -> None:
    with FakeAnthropic() as fake:
        fake.default(spend_limit(kind))
        outcomes, call = judge_with(fake)
        assert len(fake.message_requests) == 1  # recognised at the first response: no SDK retry, no backoff
    assert call.spend_limit is True and SPEND_LIMIT_MESSAGES[kind] in call.error
    assert [o.state for o in outcomes] == ["JUDGE-ERROR"] and outcomes[0].reason == call.error


@pytest.mark.parametrize("name", [*JUDGE_FAULTS, "unknown block type", "text null", "stop_reason missing"])
def test_the_judge_never_raises_on_an_unreadable_reply(name: str) -> None:
    faults = {**JUDGE_FAULTS,
              "unknown block type": (odd_message(content=[{"type": "hologram"}]), ("hologram",)),
              "text null": (odd_message(content=[{"type": "text", "text": None}]), ("text",)),
              "stop_reason missing": (odd_message(verdict_a2(), drop=("stop_reason",)), ("stop_reason",))}
    reply, words = faults[name]
    with FakeAnthropic() as fake:
        fake.default(reply)
        outcomes, call = judge_with(fake)
    assert call.spend_limit is False and call.error is not None
    for word in words:
        assert word in call.error, (word, call.error)
    assert [o.state for o in outcomes] == ["JUDGE-ERROR"]


# ---- text JSON may carry and UTF-8 cannot write ------------------------------------------------------------------

@pytest.mark.parametrize("host", ["api", "claude-code"])
def test_an_answer_holding_half_a_surrogate_pair_is_recorded_and_judged(tmp_path: Path, host: str) -> None:
    """JSON allows the escape "\\ud83d" alone; a model's answer (or a tool input) may hold it. Before, writing the
    attempt raised PydanticSerializationError: the run crashed and the attempt was lost. It is kept as the visible
    escape, the judge still judges it, and the transcript reads back."""
    uid = NEGATIVES[0]
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdict_a2())
        fake.script(key_of(uid), text("Plain answer \ud83d without any skill."))
        out = tmp_path / "run"
        done = skill_evals_run(fake, out, "--host", host, "--case", uid, "--repeats", "1")
        assert done.returncode == 0, done.stdout + done.stderr
        record = only(attempts(out, uid))
        assert record["error_kind"] is None, record["error_message"]
        assert "Plain answer" in record["final_answer"] and "without any skill." in record["final_answer"]
        assert record["outcome"]["state"] == "PASS", record["outcome"]
        assert len(judge_requests(fake)) == 1
        assert json.loads((out / record["transcript"]).read_text(encoding="utf-8"))
        assert case(results_of(out), uid)["state"] == "PASS"
