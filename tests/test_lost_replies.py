"""Spend is what the API billed (issue 28, finding 5): a reply that was cut, reset, hung past the timeout or came with
`usage: null` was billed by the API, and the run counts it, never $0, and the attempt is ERROR as before.

The fake Messages API says what it billed (runner/testing/fake_anthropic.py, Billing: every request it began a
reply for, input plus the whole reply's output, whether or not the client read it). Every test holds the runner's
figures to it: the recorded cost >= what the fake billed, on the api host and the judge in-process (the real
`anthropic` SDK), and on the api and claude-code hosts through `skill-evals run` (the real Claude Code CLI).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from runner.core.observation import Observation, SessionSpec
from runner.corpus.library import Assertion, Library
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.hosts.api import ApiHost
from runner.hosts.prices import PriceTable
from runner.hosts.prices import load as load_prices
from runner.hosts.workspace import LibraryFiles
from runner.judge.prose import Judge, JudgeSettingsView
from runner.testing.fake_anthropic import (
    FakeAnthropic,
    break_stream,
    hang,
    malformed,
    odd_message,
    reset,
    skill,
    text,
)
from runner.testing.fake_judge import JUDGE_MATCH
from tests.billed import billed_usd
from tests.conftest import EXAMPLE
from tests.helpers import KEY, TRIAGE, attempts, case, key_of, results_of, skill_evals_run

MODEL = "claude-sonnet-4-6"
# fault name -> (the script's turns, the error kind the attempt ends with; None: it ends well after a retry)
API_FAULTS: dict[str, tuple[tuple[Any, ...], str | None]] = {
    "cut": ((skill(TRIAGE), break_stream()), "api-error"),
    "reset": ((reset(),), "api-error"),
    "hang": ((hang(30),), "timeout"),
    "usage null": ((skill(TRIAGE), odd_message(usage=None)), "malformed"),
    "body not JSON": ((malformed(),), "malformed"),
    "cut once, then answered": ((break_stream(times=1), text("answered after a retry")), None),
}


@pytest.fixture(scope="module")
def library() -> Library:
    return load_library(EXAMPLE, Settings())[0]


@pytest.fixture(scope="module")
def prices() -> PriceTable:
    return load_prices(Settings())


def api_session(library: Library, prices: PriceTable, fake: FakeAnthropic, prompt: str, **spec: Any) -> Observation:
    files = LibraryFiles.of(library, Settings().limits.max_file_bytes)
    host = ApiHost(library, files, prices, KEY, fake.url, None, max_retries=2)
    values: dict[str, Any] = dict(attempt_id="s/evals/x#main#1", uid="s/evals/x", prompt=prompt, model=MODEL,
                                  max_turns=4, timeout_s=2, max_output_tokens=512)

    async def once() -> Observation:
        try:
            return await host.run(SessionSpec(**{**values, **spec}))
        finally:
            await host.aclose()
    return asyncio.run(once())


@pytest.mark.parametrize("name", list(API_FAULTS))
def test_an_api_session_is_charged_what_its_lost_replies_could_cost(library: Library, prices: PriceTable,
                                                                    name: str) -> None:
    turns, kind = API_FAULTS[name]
    with FakeAnthropic() as fake:
        fake.script("Lost reply", *turns)
        obs = api_session(library, prices, fake, "Lost reply, please")
        billed = billed_usd(fake, prices)
    assert obs.error_kind == kind, (obs.error_kind, obs.error_message)
    assert billed > 0 and obs.cost_usd >= billed, f"the API billed ${billed:.6f}, the session shows ${obs.cost_usd:.6f}"
    assert obs.lost_replies >= 1 and obs.cost_basis == "bound" and 0 < obs.bound_usd <= obs.cost_usd
    reported = prices.cost(MODEL, obs.usage) or 0.0
    assert obs.cost_usd == pytest.approx(reported + obs.bound_usd)


def test_every_retry_of_a_lost_reply_is_counted_and_the_bound_stops_at_the_reservation(library: Library,
                                                                                        prices: PriceTable) -> None:
    with FakeAnthropic() as fake:
        fake.script("Always cut", break_stream())  # the SDK sends it 3 times (max_retries 2), each one billed
        roomy = api_session(library, prices, fake, "Always cut, please", max_usd=5.0)
        assert len(fake.billed) == 3 and roomy.lost_replies == 3
        assert roomy.cost_usd >= billed_usd(fake, prices) and roomy.cost_basis == "bound"
        # A budget that holds one request's worst case but not three bounds: charged the budget, said so.
        tight = roomy.bound_usd / 2
        capped = api_session(library, prices, fake, "Always cut, please", max_usd=tight)
    assert capped.lost_replies == 3 and capped.cost_usd == pytest.approx(tight) and capped.cost_basis == "reservation"
    from runner.hosts import billing

    assert billing.charge(1.0, 0.9, 0.5) == (0.5, 0.4, "reservation")
    assert billing.charge(1.0, 0.4, 0.5) == (0.6, 0.0, "reservation")  # reported usage alone passes it: counted
    assert billing.charge(0.3, 0.0, 0.1) == (0.3, 0.0, "reported")


def test_an_http_error_status_is_not_billed(library: Library, prices: PriceTable) -> None:
    from runner.testing.fake_anthropic import error

    with FakeAnthropic() as fake:
        fake.script("Overloaded", error(529, "overloaded_error"))
        obs = api_session(library, prices, fake, "Overloaded, please")
        assert fake.billed == [] and len(fake.message_requests) == 3
    assert obs.error_kind == "api-error" and obs.cost_usd == 0 and obs.lost_replies == 0


JUDGE_FAULTS = {"cut": break_stream(), "reset": reset(), "hang": hang(30), "usage null": odd_message(usage=None)}


@pytest.mark.parametrize("name", list(JUDGE_FAULTS))
def test_a_judge_call_is_charged_what_its_lost_reply_could_cost(prices: PriceTable, name: str) -> None:
    assertions = [Assertion(index=2, text="Answers plainly.", line=1, assertion_class="semantic", class_rule="t")]
    with FakeAnthropic() as fake:
        fake.default(JUDGE_FAULTS[name])

        async def once() -> Any:
            judge = Judge(JudgeSettingsView(model=MODEL, timeout_s=2, max_tokens=512, max_retries=2), KEY, fake.url,
                          prices)
            try:
                return await judge.judge("the prompt", "Plain answer", [], assertions)
            finally:
                await judge.aclose()
        outcomes, call = asyncio.run(once())
        billed = billed_usd(fake, prices)
    assert [o.state for o in outcomes] == ["JUDGE-ERROR"] and call.error
    assert billed > 0 and call.cost_usd >= billed and call.cost_basis == "bound" and call.bound_usd > 0


# ---- through `skill-evals run`: the recorded spend -------------------------------------------------------------

CASES = [f"{TRIAGE}/evals/positive-nightly-summary-with-skip", f"{TRIAGE}/evals/positive-junit-in-workspace",
         f"{TRIAGE}/evals/edge-zero-test-suite-reported-ok", "migration-planner/evals/positive-add-not-null-column",
         "migration-planner/evals/edge-rename-column-live-traffic"]
RUN_FAULTS = {"cut": (skill(TRIAGE), break_stream()), "reset": (reset(),), "hang": (hang(30),),
              "usage null": (skill(TRIAGE), odd_message(usage=None)),
              "cut once, then answered": (break_stream(times=1), text("TEST REPORT TRIAGE — answered"))}


@pytest.mark.parametrize("host", ["api", "claude-code"])
def test_recorded_spend_covers_what_the_api_billed_for_lost_replies(tmp_path: Path, host: str) -> None:
    uids = dict(zip(RUN_FAULTS, CASES))
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, text(json.dumps({"verdicts": []})))
        for name, uid in uids.items():
            fake.script(key_of(uid), *RUN_FAULTS[name])
        out = tmp_path / "run"
        done = skill_evals_run(fake, out, "--host", host, *[a for uid in uids.values() for a in ("--case", uid)],
                               "--repeats", "1", "--concurrency", "5", "--timeout", "12", "--no-judge")
        assert done.returncode == 0, done.stdout + done.stderr
        billed = {name: billed_usd(fake, match=key_of(uid)) for name, uid in uids.items()}
        total = billed_usd(fake)
    results = results_of(out)
    for name, uid in uids.items():
        record, = attempts(out, uid)
        assert billed[name] > 0, name
        assert record["cost_usd"] >= billed[name] - 1e-9, (name, record["cost_usd"], billed[name])
        assert record["lost_replies"] >= 1 and record["cost_basis"] in ("bound", "reservation"), (name, record)
        if name == "cut once, then answered":  # the CLI (and the SDK) retried it: a retried request was billed too
            assert record["error_kind"] is None, record["error_message"]
        else:
            assert record["outcome"]["state"] == "ERROR" and case(results, uid)["state"] == "ERROR", (name, record)
    spend = results["spend"]
    assert spend["usd"] >= total - 1e-6 and spend["bound_usd"] > 0 and spend["lost_replies"] >= len(uids)


# ---- SIGTERM with sessions in flight -------------------------------------------------------------------------------

@pytest.mark.parametrize("host", ["api", "claude-code"])
def test_sigterm_counts_what_sessions_in_flight_were_billed(tmp_path: Path, host: str) -> None:
    """Each session's second request hangs; SIGTERM once all of them wait on it. The API billed their first replies and
    the hung requests (from their arrival): the cancelled attempts are recorded with at least that, not $0."""
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import fake_env

    uids = CASES[:3]
    with FakeAnthropic() as fake:
        for uid in uids:
            fake.script(key_of(uid), skill(uid.split("/")[0]), hang(120))
        out = tmp_path / "run"
        args = [sys.executable, "-m", "runner", "run", "--library", str(EXAMPLE), "--out", str(out), "--host", host,
                *[a for uid in uids for a in ("--case", uid)], "--repeats", "1", "--concurrency", "3",
                "--timeout", "300", "--no-judge"]
        process = subprocess.Popen(args, env=fake_env(fake, KEY), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        deadline = time.monotonic() + 240
        while sum(1 for r in fake.message_requests if r.outcome == "hang") < len(uids):
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 130, stdout + stderr
        billed = billed_usd(fake)
    results = results_of(out)
    assert results["stop_reason"] == "cancelled"
    records = attempts(out)
    assert sorted(r["uid"] for r in records) == sorted(uids) and {r["status"] for r in records} == {"cancelled"}
    for record in records:
        assert record["cost_usd"] > 0 and record["lost_replies"] >= 1 and record["cost_basis"] != "reported", record
    spend = results["spend"]
    assert spend["usd"] + spend["lost_in_flight_usd"] >= billed > 0, (spend, billed)
