"""`skill-evals judge DIR`: judge a finished run again from what it recorded, without any session.

The prose assertions go to the judge configured now; the new results and `changes.json` go to a new folder, and the
original run is never modified. Only records its vetting accepts are judged again: a forged record is never
laundered into a new result.

Design notes: docs/design/judge.md.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel

from runner.core.observation import Activation, Observation
from runner.corpus.library import Case, Probe
from runner.execute.budget import Ledger
from runner.execute.executor import STOP_SPEND_LIMIT, Executor, RunState, probe_arm
from runner.execute.rundir import ATTEMPTS, PLAN, RESULTS, AttemptRecord, RunDir
from runner.hosts.replay import ReplayHost
from runner.judge.prose import Grader, prompt_version
from runner.plan import sweep
from runner.plan.plan import Plan
from runner.results import build as results_mod
from runner.results import vetting


class Change(BaseModel):
    uid: str
    what: str  # "case" or "assertion <n>"
    before: str
    after: str


def observation_from_record(record: AttemptRecord) -> Observation:
    fired = record.outcome.fired if record.outcome else []
    return Observation(
        attempt_id=record.attempt_id, host="replay", error_kind=record.error_kind,  # type: ignore[arg-type]
        error_message=record.error_message,
        activations=[Activation(name=name, mechanism="skill-tool", turn=0) for name in fired],
        tool_calls=record.tool_calls, final_answer=record.final_answer, turns=record.turns, usage=record.usage,
        cost_usd=record.cost_usd, host_cost_usd=record.host_cost_usd, bounds_hit=record.bounds_hit,
        cost_basis=record.cost_basis, bound_usd=record.bound_usd, lost_replies=record.lost_replies,
        duration_s=record.duration_s)


def changes_between(before: dict[str, Any], after: results_mod.Results) -> list[Change]:
    old = {c["uid"]: c for c in before.get("cases", [])}
    out: list[Change] = []
    for case in after.cases:
        previous = old.get(case.uid)
        if previous is None:
            continue
        if previous["state"] != case.state:
            out.append(Change(uid=case.uid, what="case", before=previous["state"], after=case.state))
        old_assertions = {a["index"]: a["state"] for a in previous.get("assertions", [])}
        for assertion in case.assertions:
            was = old_assertions.get(assertion.index)
            if was is not None and was != assertion.state:
                out.append(Change(uid=case.uid, what=f"assertion {assertion.index}", before=was, after=assertion.state))
    return out


def rejudge(source: RunDir, cases: dict[str, Case], known: Collection[str], judge: Grader, cap_usd: float,
            concurrency: int = 4, probes: dict[str, Probe] | None = None
            ) -> tuple[RunDir, results_mod.Results, list[Change]]:
    plan = Plan.model_validate_json(source.read_text(PLAN))
    cases = sweep.applied(plan, cases)  # a routing sweep's run is judged as it was measured: activation parts only
    old_hash = plan.digest()
    new_plan = plan.model_copy(update={"judge_model": judge.settings.model, "judge_prompt_version": prompt_version(),
                                       "judge_unavailable": None, "cap_usd": cap_usd, "record_mac": "hmac-sha256"})
    new_hash = new_plan.digest()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = RunDir(source.path / f"rejudged-{stamp}")
    source_log = vetting.read(source, plan, old_hash, file=f"../{ATTEMPTS}")
    target.create()
    target.make_key()
    target.write_json(PLAN, new_plan.model_dump_json(indent=2))
    records = [r for r in source_log.accepted if r.status == "finished"]
    state = RunState(ledger=Ledger(cap_usd=cap_usd))
    # The replay of the source run stands as the host: the executor only grades and records here, and starts no
    # session (`one` below never calls the host).
    executor = Executor(new_plan, new_hash, cases, host=ReplayHost(source.path), rundir=target, state=state,
                        known_names=known, judge=judge, probes=probes)
    planned = {c.uid: c for c in new_plan.cases}
    gate = asyncio.Semaphore(concurrency)

    async def one(record: AttemptRecord) -> None:
        async with gate:
            obs = observation_from_record(record)
            # Probe attempts are graded again the same way (patterns, act, band defects).
            outcome, call, grade = await executor.graded(planned[record.uid], record.arm, obs)
        if call is not None and call.spend_limit:
            state.stop(STOP_SPEND_LIMIT)  # the calls not yet made stay UNRUN (spend-limit): they could only be refused
        case = planned[record.uid]
        spec = executor.spec(case, record.repeat, record.arm) if case.kind != "probe" else executor.probe_spec(
            case, probe_arm(record.arm), record.repeat)
        new = executor.record(case, spec, record.arm, record.repeat, obs, record.reserved_usd, outcome, call, grade)
        # The transcript stays in the original run folder, one level up.
        transcript = f"../{record.transcript}" if record.transcript else None
        target.append_attempt(new.model_copy(update={"transcript": transcript}))

    async def main() -> None:
        try:
            await asyncio.gather(*(one(r) for r in records if r.uid in planned
                                   and (r.arm == "main" or r.uid in executor.probes or planned[r.uid].baselined)))
        finally:
            await judge.aclose()

    asyncio.run(main())
    new_log = vetting.read(target, new_plan, new_hash)
    results = results_mod.build(new_plan, new_hash, cases, new_log.accepted, state.stop_reason, state.ledger.refused,
                                refused_records=source_log.refused + new_log.refused)
    target.write_json(RESULTS, results.model_dump_json(indent=2))
    before = json.loads(source.read_text(RESULTS)) if (source.path / RESULTS).exists() else {}
    changes = changes_between(before, results)
    target.write_json("changes.json", json.dumps({
        "rejudged_from": str(source.path), "judge_model": judge.settings.model,
        "judge_prompt_version": prompt_version(), "previous_judge_model": plan.judge_model,
        "previous_judge_prompt_version": plan.judge_prompt_version,
        "changes": [c.model_dump() for c in changes]}, indent=2))
    return target, results, changes

