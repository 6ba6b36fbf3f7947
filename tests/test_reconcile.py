"""A killed run's worst cases reconciled with the evidence it left (runner.execute.reconcile), and the CLI's session
log read as untrusted data (runner.hosts.cli_log): the parts, in-process. The whole path, a run killed with
SIGKILL and resumed with the real Claude Code CLI, is tests/test_kill_resume.py."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from runner.core.observation import Usage
from runner.execute.budget import Journal, Ledger, journal_totals, open_reservations
from runner.execute.reconcile import plan_costs, reconcile
from runner.execute.rundir import RESERVATIONS, AttemptRecord, RunDir
from runner.hosts import cli_log
from runner.hosts.cli_spend import MARK_SUFFIX, write_mark
from runner.plan.plan import CostEstimate, Plan

REPLY = {"input_tokens": 0, "cache_creation_input_tokens": 4000, "cache_read_input_tokens": 0, "output_tokens": 20}


def plan() -> Plan:
    estimate = CostEstimate.model_construct(price_input_per_mtok=3.0, price_output_per_mtok=15.0,
                                            price_cache_write_per_mtok=3.75, price_cache_read_per_mtok=0.3,
                                            price_read_on="2026-11-30", first_turn_input_tokens=5000)
    return Plan.model_construct(model="claude-sonnet-4-6", max_output_tokens=1000, estimate=estimate, cap_usd=2.0)


def log_lines(*, in_flight: bool = True, usage: object = REPLY) -> list[dict]:
    """A CLI session log as CLI 2.1.332 writes it (cli_log's docstring): a request, its reply (a Skill call), the tool
    result, then the next request, in flight when the session was killed."""
    lines: list[dict] = [
        {"type": "user", "message": {"role": "user", "content": "the prompt"}},
        {"type": "api-request", "id": "r1"},
        {"type": "assistant", "requestRef": "r1", "message": {"model": "claude-sonnet-4-6", "usage": usage, "content": [
            {"type": "tool_use", "id": "t1", "name": "Skill", "input": {"skill": "demo"}}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "Launching skill: demo " + "x" * 4000}]}},
    ]
    if in_flight:
        lines.append({"type": "api-request", "id": "r2"})
    return lines


def session_folder(parent: Path, name: str, lines: list[dict], reservation: str | None) -> Path:
    root = parent / name
    logs = root / "config" / "projects" / "-project"
    logs.mkdir(parents=True)
    (logs / "session.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    if reservation is not None:
        write_mark(root, f"s/evals/{name}#main#1", reservation)
    return root


def test_the_session_log_shows_replies_and_the_request_in_flight(tmp_path: Path) -> None:
    root = session_folder(tmp_path, "a", log_lines(), None)
    log = cli_log.read(root / "config")
    assert log is not None and [r.id for r in log.requests] == ["r1", "r2"]
    assert log.requests[0].reply == Usage(**REPLY) and log.requests[1].reply is None
    # The request in flight carried the reply's input and output and the tool result (4 characters a token).
    estimate = log.requests[1].input_estimate
    assert estimate is not None and estimate >= 4000 + 20 + 4000 // 4


def test_a_retry_the_cli_made_silently_or_after_an_error_is_billed_unless_refused(tmp_path: Path) -> None:
    lines = [{"type": "api-request", "id": "cut"},
             {"type": "system", "subtype": "api_error", "error": {"connection": {"code": "ECONNRESET"}}},
             {"type": "api-request", "id": "overloaded"},
             {"type": "system", "subtype": "api_error", "error": {"status": 529}},
             {"type": "api-request", "id": "ok"},
             {"type": "assistant", "requestRef": "ok", "message": {"model": "m", "usage": REPLY, "content": []}},
             {"type": "api-request", "id": "beta-1"}, {"type": "api-request", "id": "beta-2"},
             {"type": "assistant", "isApiErrorMessage": True, "apiErrorStatus": 400,
              "message": {"model": "<synthetic>", "usage": REPLY, "content": []}}]
    root = session_folder(tmp_path, "b", lines, None)
    log = cli_log.read(root / "config")
    assert log is not None
    # The cut one was billed (its size: the reply to the same turn's retry); the 529 and the 400s were not.
    assert [(r.id, r.reply is not None, r.input_estimate) for r in log.requests] == [("cut", False, 4000),
                                                                                     ("ok", True, None)]


@pytest.mark.parametrize("usage", [None, {"input_tokens": None, "output_tokens": 3}, {"input_tokens": 0,
                                                                                     "output_tokens": 0}])
def test_a_reply_without_real_usage_is_a_lost_one(tmp_path: Path, usage: object) -> None:
    root = session_folder(tmp_path, "c", log_lines(in_flight=False, usage=usage), None)
    log = cli_log.read(root / "config")
    assert log is not None and log.lost == 1 and log.replies == []


def test_the_log_is_untrusted_data(tmp_path: Path) -> None:
    root = session_folder(tmp_path, "d", log_lines(), None)
    logs = root / "config" / "projects" / "-project"
    (logs / "zero.jsonl").symlink_to("/dev/zero")  # read without limit if followed
    os.mkfifo(logs / "fifo.jsonl")  # blocks a plain open
    (logs / "garbage.jsonl").write_bytes(b"\xff\xfe{not json\n" + b"[" * 100_000 + b"\n" + b"x" * 5_000_000 + b"\n"
                                         + json.dumps({"type": "api-request", "id": 7}).encode() + b"\n")
    log = cli_log.read(root / "config")
    assert log is not None and [r.id for r in log.requests] == ["r1", "r2"]  # the rest is no evidence
    assert cli_log.read(tmp_path / "nowhere") is None


def journal(rundir: RunDir, plan_hash: str = "h") -> Journal:
    return Journal(plan_hash, lambda line, durable: rundir.append_line(RESERVATIONS, line, durable))


def test_each_unsettled_reservation_is_reconciled_once_from_the_best_evidence(tmp_path: Path) -> None:
    rundir = RunDir(tmp_path / "run")
    rundir.create()
    parent = tmp_path / "parent"
    worst = 0.5
    ids: dict[str, str] = {}

    async def killed() -> None:
        ledger = Ledger(cap_usd=5.0, journal=journal(rundir))
        for name in ("recorded", "logged", "progressed", "nothing", "settled"):
            found = await ledger.reserve(worst, f"s/evals/{name}#main#1")
            assert found is not None and found.id is not None
            ids[name] = found.id
        assert ledger.journal is not None
        ledger.journal.progress(ids["progressed"], 0.2, 0.15)
        ledger.journal.progress(ids["logged"], 0.01, 0.0)  # behind the log: the log stands
        for label, cost in (("x", 0.1), ("y", 0.05)):  # settled: no reconciliation
            found = await ledger.reserve(worst, label)
            assert found is not None
            await ledger.settle(found, cost)

    asyncio.run(killed())
    rundir.append_attempt(AttemptRecord(attempt_id="s/evals/recorded#main#1", uid="s/evals/recorded", arm="main",
                                        repeat=1, plan_hash="h", status="finished", cost_usd=0.07,
                                        reservation_id=ids["recorded"]))
    parent.mkdir()
    session_folder(parent, "logged", log_lines(), ids["logged"])
    (parent / ("forged" + MARK_SUFFIX)).symlink_to(parent / ("logged" + MARK_SUFFIX))  # a link is no mark
    # reconcile() looks for the session folders where claim_run_parent puts them: under base, by the run's name.
    from runner.execute.reconcile import run_parent

    target = run_parent(rundir.path, tmp_path / "base")
    target.parent.mkdir()
    parent.rename(target)
    done = {r.label: r for r in reconcile(rundir, plan(), rundir.read_attempts(slim=True), base=tmp_path / "base")}
    assert set(done) == {f"s/evals/{n}#main#1" for n in ("recorded", "logged", "progressed", "nothing", "settled")}
    by = {label.split("/")[2].split("#")[0]: r for label, r in done.items() if label}
    assert (by["recorded"].source, by["recorded"].usd) == ("attempt-record", 0.07)
    costs = plan_costs(plan(), worst)
    reply = costs.cost(Usage(**REPLY))
    assert by["logged"].source == "session-log" and reply < by["logged"].usd < worst
    assert (by["progressed"].source, by["progressed"].usd) == ("progress", 0.2)
    assert (by["nothing"].source, by["nothing"].usd) == ("none", worst)
    # Done once: nothing is open any more, a second pass reconciles nothing, the totals count the figures.
    assert open_reservations(rundir.path / RESERVATIONS) == [] and reconcile(rundir, plan(), base=tmp_path / "base") == []
    totals = journal_totals(rundir.path / RESERVATIONS, "h")
    assert totals.unsettled == 0 and len(totals.reconciled) == 5
    assert totals.usd == pytest.approx(0.1 + 0.05 + 0.07 + by["logged"].usd + 0.2 + worst + by["settled"].usd)


def test_a_figure_is_never_above_the_reservation_nor_below_what_was_reported(tmp_path: Path) -> None:
    rundir = RunDir(tmp_path / "run")
    rundir.create()

    async def killed() -> list[str]:
        ledger = Ledger(cap_usd=5.0, journal=journal(rundir))
        small = await ledger.reserve(0.001, "s/evals/small#main#1")  # the log's bounds alone pass it
        big = await ledger.reserve(0.001, "s/evals/big#main#1")  # the log's replies alone pass it
        assert small is not None and big is not None and small.id and big.id
        return [small.id, big.id]

    small, big = asyncio.run(killed())
    base = tmp_path / "base"
    from runner.execute.reconcile import run_parent

    parent = run_parent(rundir.path, base)
    parent.mkdir(parents=True)
    session_folder(parent, "small", [{"type": "api-request", "id": "r1"}], small)
    session_folder(parent, "big", log_lines(in_flight=False), big)
    done = {r.id: r for r in reconcile(rundir, plan(), base=base)}
    assert done[small].usd == pytest.approx(0.001) and done[small].source == "session-log"
    reported = plan_costs(plan(), 0.001).cost(Usage(**REPLY))
    assert reported > 0.001 and done[big].usd == pytest.approx(reported)  # the evidence shows more: counted
