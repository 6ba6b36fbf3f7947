"""Merging the shards of one run, and the history of runs (changes, flips, stability record)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from runner.execute.rundir import AttemptRecord, TailRepair
from runner.report import rollup
from runner.report.history import History, compare, escape, render_markdown
from runner.results.build import CaseResult, Results, Spend, assertion_counts
from runner.results.merge import NO_SHARD_RAN, MergeError, merge, merge_dirs
from tests.report_fixtures import HOSTILE, assemble, assertion, every_state, plan_summary

SCHEMA = Path(__file__).resolve().parent.parent / "runner" / "schemas" / "results.schema.json"
SHARD_SPEND = [Spend(usd=0.5, judge_usd=0.1, judge_calls=2, cap_usd=10.0, refused_reservations=1),
               Spend(usd=0.5, judge_usd=0.05, judge_calls=1, cap_usd=10.0),
               Spend(usd=0.23, judge_usd=0.05, judge_calls=1, cap_usd=10.0)]
STAMPS = ["2026-11-30T11:00:00+00:00", "2026-11-30T12:30:00+00:00", "2026-11-30T12:10:00+00:00"]


def other_shard(case: CaseResult) -> CaseResult:
    return CaseResult(uid=case.uid, skill=case.skill, kind=case.kind, target=case.target, state="UNRUN",
                      reason="other-shard", repeats_planned=case.repeats_planned, quorum=case.quorum)


def shards(whole: Results, n: int = 3) -> list[Results]:
    """Round-robin shards of `whole`, each assembled as a shard's own results.json would be."""
    out = []
    for index in range(n):
        cases = [c if position % n == index else other_shard(c) for position, c in enumerate(whole.cases)]
        shard = assemble(cases)
        out.append(shard.model_copy(update={"spend": SHARD_SPEND[index % len(SHARD_SPEND)],
                                            "finished_at": STAMPS[index % len(STAMPS)]}))
    return out


def without(dump: dict, *keys: str) -> dict:
    return {k: v for k, v in dump.items() if k not in keys}


def schema_errors(data: dict) -> list[str]:
    return [e.message for e in Draft202012Validator(json.loads(SCHEMA.read_text())).iter_errors(data)]


# --- merge -------------------------------------------------------------------------------------


def unsharded() -> Results:
    """every_state() with the assertion counts runner.results.build.build would write (the fixture leaves them out)."""
    whole = every_state()
    return whole.model_copy(update={"assertion_counts": assertion_counts(whole.cases)})


def test_merged_shards_equal_the_unsharded_run() -> None:
    whole = unsharded()
    parts = shards(whole)
    assert all(sum(1 for c in p.cases if c.reason == "other-shard") > 0 for p in parts)
    merged = merge(parts)
    assert [c.model_dump() for c in merged.cases] == [c.model_dump() for c in whole.cases]
    assert merged.counts == whole.counts
    assert merged.unrun_by_reason == whole.unrun_by_reason
    assert merged.assertion_counts == whole.assertion_counts == {"judge_error": 1, "judged": 2, "unjudgeable": 1,
                                                                 "unrun:judge-disabled": 1}
    assert merged.attempts_finished == whole.attempts_finished
    assert merged.attempts_errored == whole.attempts_errored
    assert merged.not_executed == whole.not_executed
    # Spend is summed over the shards (the shards' spends add up to the unsharded fixture's);
    # the cap is the plan's, which each shard had.
    assert merged.spend.usd == pytest.approx(1.23)
    assert merged.spend.judge_usd == pytest.approx(0.2)
    assert merged.spend.judge_calls == 4
    assert merged.spend.refused_reservations == 1
    assert merged.spend.cap_usd == whole.plan.cap_usd
    assert merged.finished_at == "2026-11-30T12:30:00+00:00"  # the latest shard
    assert without(merged.model_dump(), "finished_at", "spend") == without(whole.model_dump(), "finished_at", "spend")
    assert without(rollup.build(merged).model_dump(), "header") == without(rollup.build(whole).model_dump(), "header")
    assert rollup.build(merged).header == rollup.build(whole).header


def test_spend_lost_in_flight_and_repairs_of_every_shard_are_kept() -> None:
    """A shard killed and resumed brings its lost-in-flight spend and its cut lines; a merge keeps all of them."""
    parts = shards(unsharded())
    killed = [Spend(usd=0.5, cap_usd=10.0, lost_in_flight_usd=0.3, lost_in_flight_reservations=2,
                    lost_in_flight_attempts=["a#main#1", "b#main#1"]),
              Spend(usd=0.5, cap_usd=10.0),
              Spend(usd=0.2, cap_usd=10.0, lost_in_flight_usd=0.1, lost_in_flight_reservations=1,
                    lost_in_flight_attempts=["c#main#2"])]
    repair = TailRepair(file="attempts.jsonl", offset=10, bytes_cut=5, saved_to="torn/001-attempts.jsonl-at-10",
                        at="2026-11-30T11:00:00+00:00")
    parts = [p.model_copy(update={"spend": spend, "repairs": [repair] if i == 2 else []})
             for i, (p, spend) in enumerate(zip(parts, killed))]
    merged = merge(parts)
    assert merged.spend.lost_in_flight_usd == pytest.approx(0.4)
    assert merged.spend.lost_in_flight_reservations == 3
    assert merged.spend.lost_in_flight_attempts == ["a#main#1", "b#main#1", "c#main#2"]
    assert merged.repairs == [repair]


def test_a_case_unrun_for_its_own_reason_keeps_that_reason() -> None:
    merged = merge(shards(every_state()))
    reasons = {c.uid: c.reason for c in merged.cases if c.state == "UNRUN"}
    assert reasons["gamma/evals/unrun-budget-cap"] == "budget-cap"
    assert reasons["gamma/evals/unrun-kill-switch"] == "kill-switch"
    assert "other-shard" not in merged.unrun_by_reason


def test_cases_of_a_missing_shard_stay_other_shard_and_it_is_said() -> None:
    whole = every_state()
    parts = shards(whole)
    merged = merge([parts[0], parts[2]])
    missing = [c for position, c in enumerate(merged.cases) if position % 3 == 1]
    assert missing and all(c.state == "UNRUN" and c.reason == "other-shard" for c in missing)
    assert all(NO_SHARD_RAN in c.warnings for c in missing)
    assert merged.unrun_by_reason["other-shard"] == len(missing)
    assert f"{len(missing)} of them were assigned to a shard whose results are not in this merge" in merged.not_executed
    ran = [c for position, c in enumerate(merged.cases) if position % 3 != 1]
    assert [c.model_dump() for c in ran] == [c.model_dump() for p, c in enumerate(whole.cases) if p % 3 != 1]


def test_different_plan_hashes_are_refused() -> None:
    parts = shards(every_state())
    other = parts[1].model_copy(update={"plan": plan_summary().model_copy(update={"hash": "fedcba9876543210"})})
    with pytest.raises(MergeError, match="input 1 and input 2 are results of different plans"):
        merge([parts[0], other, parts[2]])
    with pytest.raises(MergeError, match="run-a and run-b"):
        merge([parts[0], other], labels=["run-a", "run-b"])


def test_a_case_executed_in_two_shards_is_refused() -> None:
    parts = shards(every_state())
    stolen = parts[0].cases[0]  # owned by shard 1
    cases = [stolen if c.uid == stolen.uid else c for c in parts[1].cases]
    with pytest.raises(MergeError, match=f"{stolen.uid} was executed in two shards: input 1 .PASS. and input 2"):
        merge([parts[0], assemble(cases), parts[2]])
    with pytest.raises(MergeError, match="executed in two shards"):
        merge([parts[0], parts[0]])


def test_stop_reasons_take_the_first_and_list_all_when_they_differ() -> None:
    parts = shards(every_state())
    parts[1] = parts[1].model_copy(update={"stop_reason": "budget-cap"})
    parts[2] = parts[2].model_copy(update={"stop_reason": "cancelled"})
    merged = merge(parts, labels=["a", "b", "c"])
    assert merged.stop_reason == "budget-cap"
    assert "The shards stopped differently: a: not stopped; b: budget-cap; c: cancelled." in merged.not_executed


def write_shard(folder: Path, results: Results, attempt_uids: list[str]) -> None:
    (folder / "transcripts").mkdir(parents=True)
    folder.joinpath("results.json").write_text(results.model_dump_json(indent=2))
    lines = []
    for uid in attempt_uids:
        attempt_id = f"{uid}#main#1"
        name = attempt_id.replace("/", "_").replace("#", "_") + ".json"
        folder.joinpath("transcripts", name).write_text(json.dumps([{"role": "user", "content": uid}]))
        lines.append(AttemptRecord(attempt_id=attempt_id, uid=uid, arm="main", repeat=1, plan_hash=results.plan.hash,
                                   status="finished", transcript=f"transcripts/{name}").model_dump_json())
    folder.joinpath("attempts.jsonl").write_text("\n".join(lines) + "\n" + '{"attempt_id": "torn')


def test_merge_dirs_writes_a_valid_merged_run(tmp_path: Path) -> None:
    parts = shards(every_state())
    dirs = []
    for index, part in enumerate(parts):
        folder = tmp_path / f"shard-{index + 1}"
        owned = [c.uid for c in part.cases if c.reason != "other-shard" and c.attempts]
        write_shard(folder, part, owned)
        folder.joinpath("plan.json").write_text(json.dumps({"shard": index + 1}))
        dirs.append(folder)
    out = tmp_path / "merged"
    merged = merge_dirs(dirs, out)
    data = json.loads((out / "results.json").read_text())
    assert not schema_errors(data)
    assert Results.model_validate(data) == merged
    assert json.loads((out / "plan.json").read_text()) == {"shard": 1}  # the first shard's plan
    records = [AttemptRecord.model_validate_json(line) for line in (out / "attempts.jsonl").read_text().splitlines()]
    executed = [c.uid for c in every_state().cases if c.attempts]
    assert sorted(r.uid for r in records) == sorted(executed)  # torn lines are left out
    assert all((out / r.transcript).is_file() for r in records if r.transcript)
    with pytest.raises(MergeError, match="new folder"):
        merge_dirs(dirs, dirs[0])


def test_merge_dirs_refuses_attempts_of_another_plan(tmp_path: Path) -> None:
    parts = shards(every_state(), n=2)
    folders = [tmp_path / "one", tmp_path / "two"]
    for folder, part in zip(folders, parts):
        write_shard(folder, part, [])
    folders[1].joinpath("attempts.jsonl").write_text(AttemptRecord(
        attempt_id="x#main#1", uid="x", arm="main", repeat=1, plan_hash="another", status="finished").model_dump_json())
    with pytest.raises(MergeError, match="recorded under plan another"):
        merge_dirs(folders, tmp_path / "out")
    with pytest.raises(MergeError, match="no results.json"):
        merge_dirs([folders[0], tmp_path / "nowhere"], tmp_path / "out")


# --- history -----------------------------------------------------------------------------------

FLAKY, STEADY, GAP, JUDGE = "a/evals/flaky", "a/evals/steady", "a/evals/gap", "b/evals/judge"


def case(uid: str, state: str, reason: str | None = None, assertions: list | None = None) -> CaseResult:
    skill = uid.split("/")[0]
    ran = state != "UNRUN"
    return CaseResult(uid=uid, skill=skill, kind="trigger", target=skill, state=state, reason=reason,
                      repeats_run=2 if ran else 0, repeats_planned=3, quorum=2,
                      assertions=assertions if assertions is not None else
                      ([assertion(1, "PASS" if state == "PASS" else "FAIL")] if ran else []))


def run(day: int, flaky: str, gap: str, judge: str, usd: float, plan_hash: str = "0123456789abcdef") -> Results:
    judge_assertions = [assertion(1, "PASS"), assertion(2, "JUDGE-ERROR", reason="timeout")] \
        if judge == "JUDGE-ERROR" else [assertion(1, "PASS"), assertion(2, "PASS")]
    cases = [case(FLAKY, flaky), case(STEADY, "PASS"),
             case(GAP, gap, reason="budget-cap" if gap == "UNRUN" else None),
             case(JUDGE, judge, assertions=judge_assertions)]
    results = assemble(cases, spend=usd)
    return results.model_copy(update={"finished_at": f"2026-11-{day:02d}T12:00:00+00:00",
                                      "plan": plan_summary().model_copy(update={"hash": plan_hash})})


def window() -> tuple[Results, list[Results]]:
    runs = [run(1, "PASS", "FAIL", "PASS", 1.0, plan_hash="aaaaaaaaaaaaaaaa"),
            run(2, "FAIL", "UNRUN", "JUDGE-ERROR", 2.5),
            run(3, "PASS", "FAIL", "PASS", 5.0),
            run(4, "FAIL", "FAIL", "PASS", 10.0)]
    return runs[-1], runs[:-1]


def test_flips_candidates_and_changes() -> None:
    current, previous = window()
    # Given newest first: the window is ordered by finished_at, not by argument order.
    history = compare(current, list(reversed(previous)), labels=["run-3", "run-2", "run-1"])
    assert isinstance(history, History)
    assert history.compared_with == "run-3"
    assert history.comparable
    assert [c.model_dump() for c in history.changes] == [
        {"uid": FLAKY, "before": "PASS", "after": "FAIL", "before_reason": None, "after_reason": None}]
    assert [c.uid for c in history.candidates] == [FLAKY]
    flaky = history.candidates[0]
    assert flaky.flips == 3
    assert flaky.states == ["PASS", "FAIL", "PASS", "FAIL"]
    assert flaky.flips_involving_flagged_runs == 1  # run-1 was planned differently
    assert not flaky.quarantined_now
    assert history.stability.flips_by_case == {FLAKY: 3}  # GAP's UNRUN and JUDGE's JUDGE-ERROR are skipped
    assert "never quarantined automatically" in history.note


def test_stability_record_numbers_are_exact() -> None:
    current, previous = window()
    history = compare(current, previous, labels=["run-1", "run-2", "run-3"], current_label="run-4")
    stability = history.stability
    assert stability.runs_in_window == 4
    assert stability.total_flips == 3
    assert stability.flipping_cases == 1
    assert [r.label for r in stability.runs] == ["run-1", "run-2", "run-3", "run-4"]
    assert [r.current for r in stability.runs] == [False, False, False, True]
    # semantic assertions: flaky 1, steady 1, gap 1 (0 when UNRUN), judge 2
    assert [(r.judge_errors, r.judged_semantic) for r in stability.runs] == [(0, 5), (1, 4), (0, 5), (0, 5)]
    assert [r.judge_error_rate for r in stability.runs] == [0.0, 0.25, 0.0, 0.0]
    assert [(r.spend_usd, r.cap_usd, r.spend_of_cap) for r in stability.runs] == [
        (1.0, 10.0, 0.1), (2.5, 10.0, 0.25), (5.0, 10.0, 0.5), (10.0, 10.0, 1.0)]
    assert [(r.executed, r.unrun) for r in stability.runs] == [(4, 0), (3, 1), (4, 0), (4, 0)]
    assert stability.flagged_runs == ["run-1"]
    assert stability.runs[0].plan_hash_differs and not stability.runs[0].library_hash_differs


def test_threshold_and_a_flagged_newest_previous() -> None:
    current, previous = window()
    assert compare(current, previous, flip_threshold=4).candidates == []
    library = plan_summary().model_copy(update={"library_hash": "e" * 64})
    moved = previous[-1].model_copy(update={"plan": library})
    history = compare(current, [*previous[:-1], moved])
    assert not history.comparable
    assert history.stability.runs[2].library_hash_differs
    assert "Flagged" in render_markdown(history)
    assert compare(current, []).changes == [] and compare(current, []).compared_with is None


def test_markdown_section_and_escaping() -> None:
    current, previous = window()
    text = render_markdown(compare(current, previous, labels=["r1", "r2", HOSTILE], current_label="now"))
    assert "| a/evals/flaky | PASS | FAIL |" in text
    assert "| a/evals/flaky | 3 | PASS → FAIL → PASS → FAIL | 1 |" in text
    assert "Flips: 3 in 1 case(s)" in text
    assert "1/4 (25.0%)" in text and "$10.00 / $10.00 (100.0%)" in text
    assert "<script>" not in text and "@someone" not in text
    escaped = escape(HOSTILE)
    assert "|" not in escaped and "<" not in escaped and ">" not in escaped and "@someone" not in escaped
    assert "&lt;script&gt;" in escaped and "&amp;amp;" in escaped
