"""Which planned cases a run takes from the cache, putting their attempts in the run folder, and the entries a
finished run leaves for the next.

A case is taken from the cache only whole: when its entry's attempts decide it under this plan's rule (k of N with
early stop; every repeat of every arm without), each attempt finished with a verdict (an ERROR, a JUDGE-ERROR or an
assertion left unjudged never enters the cache, and would never be read from it), and every skill that fired in
them besides the case's own is unchanged. Its attempts are written to this run's attempt log as records of this
plan (signed with this run folder's key, as every record is) that say where they ran (`AttemptRecord.reused`) and
cost this run nothing; the spend of their own run is kept there.

Design notes: docs/design/result-cache.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runner.cache.folder import Entry, Origin, Store
from runner.cache.keys import Folders, RunContext, case_key
from runner.core.quorum import Tally, VerdictRule
from runner.corpus.files import ReadPolicy
from runner.corpus.library import Case, Library, is_subagent
from runner.execute.executor import ALREADY_FAILED
from runner.execute.rundir import MAC_FIELD, AttemptRecord, Reused, RunDir
from runner.plan.plan import CachedFrom, PlannedCase, RuleOf

VERDICTS = ("PASS", "FAIL")
SETTLED = ("PASS", "FAIL", "UNJUDGEABLE")


@dataclass(frozen=True)
class Hit:
    key: str
    entry: Entry
    records: list[AttemptRecord]  # the attempts this plan takes, as their run recorded them

    def cached_from(self) -> CachedFrom:
        origin = self.entry.origin
        return CachedFrom(key=self.key, run=origin.run, label=origin.label, finished_at=origin.finished_at,
                          plan_hash=origin.plan_hash, attempts=len(self.records),
                          spent_usd=round(sum(r.total_cost_usd for r in self.records), 6))


def clean(record: AttemptRecord) -> bool:
    """A finished attempt with a verdict whose every assertion is settled: decided (PASS, FAIL), unjudgeable as
    written, or not judged because the attempt had already failed. An error, a judge error, or an assertion left
    unjudged for a reason of its run (no judge, the cap) never enters or leaves the cache."""
    outcome = record.outcome
    return (record.status == "finished" and outcome is not None and outcome.state in VERDICTS
            and all(a.state in SETTLED or (a.state == "UNRUN" and a.reason == ALREADY_FAILED)
                    for a in outcome.assertions))


def enough(planned: PlannedCase, records: list[AttemptRecord], rule: VerdictRule | None) -> list[AttemptRecord] | None:
    """The attempts of `records` this plan needs, when they decide the case as this plan would: every repeat of
    every arm (`rule` None: no early stop, or arms), else repeats 1.. of the one arm up to where the rule (k of N,
    or the sequential verdict) decides or leaves the case undecided. None when they do not."""
    by_arm: dict[str, dict[int, AttemptRecord]] = {}
    for record in records:
        by_arm.setdefault(record.arm, {})[record.repeat] = record
    arms = planned.arms or ["main"]
    if rule is None:
        wanted = [by_arm.get(arm, {}).get(n) for arm in arms for n in range(1, planned.repeats + 1)]
        return [r for r in wanted if r is not None] if all(r is not None for r in wanted) else None
    taken: list[AttemptRecord] = []
    wins = losses = 0
    for repeat in sorted(by_arm.get("main", {})):
        if repeat > planned.repeats:
            break
        record = by_arm["main"][repeat]
        taken.append(record)
        wins += record.outcome is not None and record.outcome.state == "PASS"
        losses += record.outcome is not None and record.outcome.state == "FAIL"
        if rule.decide(Tally(wins=wins, losses=losses, errors=0, in_flight=0)) != "pending":
            return taken
    return None


def fired_besides(records: Iterable[AttemptRecord], case: Case) -> set[str]:
    own = {case.skill, case.target, *case.should_not_trigger}
    return {name for r in records if r.outcome for name in r.outcome.fired if name not in own and not is_subagent(name)}


def lookup(store: Store, context: RunContext, library: Library, planned: list[PlannedCase], rules: RuleOf,
           policy: ReadPolicy) -> tuple[dict[str, str], dict[str, Hit]]:
    """(the key of every runnable case, the hits): what of the plan the cache holds."""
    cases = {case.uid: case for case in library.cases}
    keys: dict[str, str] = {}
    hits: dict[str, Hit] = {}
    for one in planned:
        if one.unrun_reason is not None or one.kind == "probe":
            continue  # probes are calibrated per content version, and run from their own record
        case = cases[one.uid]
        keys[one.uid] = key = case_key(context, case, library, one.arms, policy)
        entry = store.get(key)
        if entry is None:
            continue
        hit = _hit(store, entry, one, case, context.folders, rules(one))
        if hit is not None:
            hits[one.uid] = hit
    return keys, hits


def _hit(store: Store, entry: Entry, planned: PlannedCase, case: Case, folders: Folders, rule: VerdictRule | None
         ) -> Hit | None:
    try:
        records = [AttemptRecord.model_validate(fields) for fields in entry.attempts]
    except ValidationError:
        store.notes.append(f"cache entry {entry.key[:16]} ({planned.uid}): its records are not readable; the case runs")
        return None
    if any(r.uid != planned.uid or not clean(r) for r in records):
        return None
    if any(folders.skills.get(name) != digest for name, digest in entry.fired.items()):
        return None  # a skill that fired in those attempts changed since
    taken = enough(planned, records, rule)
    return Hit(entry.key, entry, taken) if taken else None


def seed(rundir: RunDir, plan_hash: str, hits: dict[str, Hit]) -> int:
    """Write the hits' attempts to the run folder as this plan's records (transcripts too); how many. An attempt
    the folder already has a record of is left alone."""
    have = {line.record.attempt_id for line in rundir.iter_lines() if line.record is not None}
    written = 0
    for hit in hits.values():
        origin = hit.entry.origin
        for record in hit.records:
            if record.attempt_id in have:
                continue
            transcript = hit.entry.transcripts.get(record.attempt_id)
            rundir.append_attempt(_as_reused(record, hit.key, origin, plan_hash,
                                             rundir.write_transcript(record.attempt_id, transcript)
                                             if isinstance(transcript, list) else None))
            written += 1
    return written


def _as_reused(record: AttemptRecord, key: str, origin: Origin, plan_hash: str, transcript: str | None
               ) -> AttemptRecord:
    judge = record.judge.model_copy(update={"cost_usd": 0.0, "bound_usd": 0.0}) if record.judge else None
    return record.model_copy(update={
        "plan_hash": plan_hash, "cost_usd": 0.0, "bound_usd": 0.0, "host_cost_usd": None, "reserved_usd": 0.0,
        "reservation_id": None, "lost_replies": 0, "judge": judge, "transcript": transcript, "mac": None,
        "reused": Reused(key=key, run=origin.run, plan_hash=origin.plan_hash, finished_at=origin.finished_at,
                         label=origin.label, cost_usd=round(record.total_cost_usd, 6))})


def entries(planned: list[PlannedCase], keys: dict[str, str], records: list[AttemptRecord], cases: dict[str, Case],
            folders: Folders, origin: Origin, rundir: RunDir, rules: RuleOf) -> list[Entry]:
    """What a finished run leaves in the cache: per case it ran (not one it took from the cache) whose attempts
    are all clean and decide it, its attempts with their transcripts."""
    by_uid: dict[str, list[AttemptRecord]] = {}
    for record in records:
        by_uid.setdefault(record.uid, []).append(record)
    made = datetime.now(timezone.utc).isoformat(timespec="seconds")
    out = []
    for one in planned:
        mine = [r for r in by_uid.get(one.uid, []) if r.status == "finished"]
        if one.uid not in keys or not mine or any(r.reused is not None or not clean(r) for r in mine):
            continue
        if enough(one, mine, rules(one)) is None:
            continue
        fired = {name: folders.skills[name] for name in sorted(fired_besides(mine, cases[one.uid]))
                 if name in folders.skills}
        out.append(Entry(key=keys[one.uid], uid=one.uid, made_at=made, origin=origin, fired=fired,
                         attempts=[_stored(r) for r in mine],
                         transcripts={r.attempt_id: t for r in mine if (t := _transcript(rundir, r)) is not None}))
    return out


def _stored(record: AttemptRecord) -> dict[str, Any]:
    fields: dict[str, Any] = record.model_dump(mode="json", exclude={MAC_FIELD, "transcript"})
    return fields


def _transcript(rundir: RunDir, record: AttemptRecord) -> Any:
    if not record.transcript:
        return None
    try:
        return json.loads(rundir.read_text(record.transcript))
    except (OSError, ValueError):
        return None


def origin_of(rundir: RunDir, plan_hash: str, finished_at: str, label: str) -> Origin:
    return Origin(run=Path(rundir.path).name, plan_hash=plan_hash, finished_at=finished_at, label=label)
