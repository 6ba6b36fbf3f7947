"""`skill-evals merge`: the results of the shards of one run, merged into one results file.

Each case comes from the shard that owns it, and every rollup is recomputed as runner.results.build computes it.
Different plans, or a case owned twice, are refused (MergeError); each shard's lines are vetted with its own key.

Design notes: docs/design/run-folder-and-records.md.
"""

from __future__ import annotations

import filecmp
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from runner.core.errors import UsageError
from runner.core.states import CASE_STATES
from runner.execute.rundir import ATTEMPTS, PLAN, RESULTS, SURFACE, TRANSCRIPTS, RunDir, signed_line
from runner.plan.plan import Plan
from runner.results import modelfile, routing, vetting
from runner.results.build import (
    CaseResult,
    Results,
    assertion_counts,
    moment,
    not_executed,
    refuse_cases,
    sequential_summary,
)
from runner.results.vetting import RefusedRecord

OTHER_SHARD = "other-shard"
NO_SHARD_RAN = ("no merged shard executed this case (UNRUN other-shard in every input): a shard is missing "
                "from the merge; no result is claimed for it")


class MergeError(UsageError):
    """The inputs cannot be merged into one run (a usage error: which folders and why)."""


def is_other_shard(case: CaseResult) -> bool:
    """True for the placeholder a shard writes for a case another shard owns."""
    if case.reason != OTHER_SHARD:
        return False
    return case.state == "UNRUN" or (case.state == "QUARANTINED" and case.underlying_state == "UNRUN")


def _label(labels: list[str], position: int, results: Results) -> str:
    shard = getattr(results, "shard", None)
    return f"{labels[position]} (shard {shard})" if shard else labels[position]


def _missing_shards(results: list[Results]) -> str | None:
    """`2/3` and the like when every input names its shard and some index of n is absent."""
    shards = [getattr(r, "shard", None) for r in results]
    if not shards or any(not s for s in shards):
        return None
    parsed = set()
    for shard in shards:
        index, _, of = str(shard).partition("/")
        if not index.isdigit() or not of.isdigit():
            return None
        parsed.add((int(index), int(of)))
    counts = {count for _, count in parsed}
    if len(counts) != 1:
        return None
    count = counts.pop()
    missing = [f"{i}/{count}" for i in range(1, count + 1) if (i, count) not in parsed]
    return ", ".join(missing) or None


def _signed(results: list[Results]) -> bool | None:
    states = {r.records_signed for r in results}
    if False in states:
        return False
    return True if states == {True} else None


def merge(results: list[Results], labels: list[str] | None = None,
          refused: list[RefusedRecord] | None = None) -> Results:
    """One Results for the whole plan from the Results of its shards (see docs/design/run-folder-and-records.md).

    `labels` name the inputs in error messages (merge_dirs passes the folders); by default
    `input 1`, `input 2`, ... `refused`: the records refused in the shards' logs (merge_dirs vets them again);
    by default what each shard's results list.
    """
    if not results:
        raise MergeError("nothing to merge: give the results of at least one shard")
    labels = list(labels) if labels is not None else [f"input {i + 1}" for i in range(len(results))]
    if len(labels) != len(results):
        raise MergeError(f"{len(results)} results but {len(labels)} labels")
    first = results[0]
    for position, other in enumerate(results[1:], start=1):
        if other.plan.hash != first.plan.hash:
            raise MergeError(f"{_label(labels, 0, first)} and {_label(labels, position, other)} are results of "
                             f"different plans (plan hash {first.plan.hash} and {other.plan.hash}); only the "
                             f"shards of one run (one plan) can be merged")
        if other.schema_version != first.schema_version:
            raise MergeError(f"{_label(labels, 0, first)} and {_label(labels, position, other)} have different "
                             f"results schema versions ({first.schema_version} and {other.schema_version})")
        if [c.uid for c in other.cases] != [c.uid for c in first.cases]:
            raise MergeError(f"{_label(labels, 0, first)} and {_label(labels, position, other)} share a plan "
                             f"hash but list different cases; a results file was edited or is damaged")

    by_position = [{c.uid: c for c in shard.cases} for shard in results]
    owner: dict[str, int] = {}
    for position, shard in enumerate(results):
        for case in shard.cases:
            if is_other_shard(case):
                continue
            if case.uid in owner:
                before = owner[case.uid]
                raise MergeError(f"{case.uid} was executed in two shards: {_label(labels, before, results[before])} "
                                 f"({by_position[before][case.uid].state}) and {_label(labels, position, shard)} "
                                 f"({case.state}); only one shard may own a case (was a shard, or an unsharded "
                                 f"run, given twice?)")
            owner[case.uid] = position

    cases: list[CaseResult] = []
    nobody = 0
    for placeholder in first.cases:
        ran_in = owner.get(placeholder.uid)
        if ran_in is not None:
            cases.append(by_position[ran_in][placeholder.uid])
            continue
        nobody += 1
        warnings = [*placeholder.warnings, NO_SHARD_RAN] if NO_SHARD_RAN not in placeholder.warnings \
            else list(placeholder.warnings)
        cases.append(placeholder.model_copy(update={"warnings": warnings}))
    if refused is None:
        refused = [record for shard in results for record in shard.refused_records]
    cases = refuse_cases(cases, refused)

    counts = Counter(c.state for c in cases)
    unrun = Counter(c.reason or "unknown" for c in cases if c.state == "UNRUN" or c.underlying_state == "UNRUN")
    sentence = not_executed(unrun)
    if nobody:
        missing = _missing_shards(results)
        sentence += (f" {nobody} of them were assigned to a shard whose results are not in this merge "
                     f"(other-shard{f'; missing shard(s): {missing}' if missing else ''}).")
    stops = [r.stop_reason for r in results]
    stop_reason = next((s for s in stops if s is not None), None)
    if len(set(stops)) > 1:
        listed = "; ".join(f"{_label(labels, i, r)}: {r.stop_reason or 'not stopped'}" for i, r in enumerate(results))
        sentence += f" The shards stopped differently: {listed}."

    spend = first.spend.model_copy(update={
        "usd": round(sum(r.spend.usd for r in results), 6),
        "judge_usd": round(sum(r.spend.judge_usd for r in results), 6),
        "judge_calls": sum(r.spend.judge_calls for r in results),
        "refused_reservations": sum(r.spend.refused_reservations for r in results),
        "lost_in_flight_usd": round(sum(r.spend.lost_in_flight_usd for r in results), 6),
        "lost_in_flight_reservations": sum(r.spend.lost_in_flight_reservations for r in results),
        "lost_in_flight_attempts": [a for r in results for a in r.spend.lost_in_flight_attempts],
        "bound_usd": round(sum(r.spend.bound_usd for r in results), 6),
        "lost_replies": sum(r.spend.lost_replies for r in results),
        "reconciled": [c for r in results for c in r.spend.reconciled],
        "cap_usd": first.plan.cap_usd,
    })
    update = {
        "finished_at": max((r.finished_at for r in results), key=moment),
        "stop_reason": stop_reason,
        "counts": {state: counts.get(state, 0) for state in CASE_STATES},
        "unrun_by_reason": dict(unrun.most_common()),
        "attempts_finished": sum(r.attempts_finished for r in results),
        "attempts_errored": sum(r.attempts_errored for r in results),
        "cases": cases,
        "assertion_counts": assertion_counts(cases),
        "spend": spend,
        "repairs": [repair for r in results for repair in r.repairs],
        "not_executed": sentence,
        "records_signed": _signed(results),
        "refused_records": refused,
        "routing": merged_routing(results, cases),
        "sequential": sequential_summary(first.plan.sequential, cases),
    }
    if "shard" in Results.model_fields:
        update["shard"] = None
    # Validated again from plain data: the merged file is a Results like any other, detached from its inputs.
    return Results.model_validate(first.model_copy(update=update).model_dump())


def merged_routing(results: list[Results], cases: list[CaseResult]) -> routing.Routing | None:
    """The shards' matrices added up; the planned attempts of the routing cases no shard in the merge ran are UNRUN
    `other-shard`. None when a shard's results.json is from before the matrix."""
    parts = [r.routing for r in results]
    if any(part is None for part in parts):
        return None
    elsewhere = sum(c.repeats_planned for c in cases if is_other_shard(c) and routing.in_matrix(c.kind, c.target))
    return routing.merge([p for p in parts if p is not None], {"other-shard": elsewhere} if elsewhere else {})


def read_results(folder: Path) -> Results:
    path = folder / RESULTS
    if not path.is_file():
        raise MergeError(f"{folder}: no {RESULTS} (is this a finished run folder?)")
    try:
        return modelfile.read(path, Results, "a results file of this runner")
    except modelfile.Unreadable as exc:  # one line: where the JSON breaks, or the first key that is wrong
        raise MergeError(str(exc)) from None


def _shard_plan(folder: Path, plan_hash: str) -> Plan | None:
    """The shard's plan.json when it is this plan (its cases hold each record's id); None when it cannot be read."""
    try:
        plan = Plan.model_validate_json((folder / PLAN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return plan if plan.digest() == plan_hash else None


def _vetted_lines(folder: Path, shard: Results) -> tuple[list[dict[str, Any]], list[RefusedRecord]]:
    """The shard's accepted records (the JSON objects its lines hold) and the lines refused, vetted with the shard's
    own key when its plan (or its results) say its records are signed, and against its plan when it has one."""
    plan_hash = shard.plan.hash
    rundir = RunDir(folder)
    for line in rundir.iter_lines():
        if line.record is not None and line.record.plan_hash != plan_hash:
            raise MergeError(f"{folder / ATTEMPTS}: attempt {line.record.attempt_id} was recorded under plan "
                             f"{line.record.plan_hash}, not {plan_hash}; the folder mixes runs")
    plan = _shard_plan(folder, plan_hash)
    signed = (plan is not None and plan.record_mac is not None) or shard.records_signed is True
    key = rundir.load_key() if signed else None
    planned = {case.uid: case for case in plan.cases} if plan is not None else None
    vetted = vetting.vet(rundir.iter_lines(), plan_hash, key, planned, file=f"{folder}/{ATTEMPTS}", slim=True)
    accepted = set(vetted.accepted_lines)
    return [line.fields for line in rundir.iter_lines() if line.number in accepted and line.fields is not None], \
        vetted.refused


def _copy_transcripts(folder: Path, out: Path, copied: dict[str, Path]) -> None:
    source = folder / TRANSCRIPTS
    if not source.is_dir():
        return
    target = out / TRANSCRIPTS
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.rglob("*")):
        if not path.is_file():
            continue
        relative = path.relative_to(source).as_posix()
        destination = target / relative
        if relative in copied:
            if filecmp.cmp(copied[relative], path, shallow=False):
                continue
            raise MergeError(f"{copied[relative].parent.parent} and {folder} both hold a different transcript "
                             f"{TRANSCRIPTS}/{relative}")
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)
        copied[relative] = path


def merge_dirs(dirs: list[Path], out: Path) -> Results:
    """Merge the run folders of the shards into `out`.

    Writes `<out>/results.json` (merged), `<out>/attempts.jsonl` (every shard's accepted attempt
    records, in input order, torn and refused lines left out, signed under `<out>`'s own key when the
    plan signs records), `<out>/transcripts/` (every shard's transcripts, so the attempts' transcript
    paths stay valid) and the plan.json / surface.json of the first folder (all shards share one
    plan). `out` may not be one of the inputs.
    """
    dirs = [Path(d) for d in dirs]
    out = Path(out)
    if not dirs:
        raise MergeError("nothing to merge: give the run folders of the shards")
    resolved = [d.resolve() for d in dirs]
    if len(set(resolved)) != len(resolved):
        twice = next(d for i, d in enumerate(dirs) if resolved[i] in resolved[:i])
        raise MergeError(f"{twice} is given twice")
    if out.resolve() in resolved:
        raise MergeError(f"{out}: the merged run must go to a new folder, not into one of the shards")
    inputs = [read_results(d) for d in dirs]
    labels = [str(d) for d in dirs]
    merge(inputs, labels=labels)  # refuses inputs that are not the shards of one plan before any log is read

    records: list[dict[str, Any]] = []
    refused: list[RefusedRecord] = []
    seen: dict[str, Path] = {}
    for folder, shard in zip(dirs, inputs):
        accepted, refused_here = _vetted_lines(folder, shard)
        refused += refused_here
        for fields in accepted:
            attempt_id = str(fields.get("attempt_id"))
            if fields.get("status") == "finished":
                if attempt_id in seen:
                    raise MergeError(f"attempt {attempt_id} is recorded in both {seen[attempt_id]} and {folder}")
                seen[attempt_id] = folder
            records.append(fields)
    merged = merge(inputs, labels=labels, refused=refused)

    rundir = RunDir(out)
    out.mkdir(parents=True, exist_ok=True)
    plan = _shard_plan(dirs[0], merged.plan.hash)
    key = rundir.make_key() if (plan is not None and plan.record_mac is not None) or merged.records_signed else None
    copied: dict[str, Path] = {}
    for folder in dirs:
        _copy_transcripts(folder, out, copied)
    for name in (PLAN, SURFACE):
        if (dirs[0] / name).is_file():
            rundir.write_json(name, (dirs[0] / name).read_text(encoding="utf-8"))
    rundir.write_json(ATTEMPTS, "".join(signed_line(fields, key) + "\n" for fields in records))
    rundir.write_json(RESULTS, merged.model_dump_json(indent=2))
    return merged
