"""The early-stop and memory benchmarks still run (short mode, never timed), early stop never changes
a verdict, and RunDir streams attempts (torn lines, plan filter, slim records)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import early_stop, memory
from benchmarks.synthetic import generate
from runner.core.observation import ToolCall
from runner.core.outcomes import AttemptOutcome
from runner.core.quorum import QuorumRule
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.execute.rundir import ATTEMPTS, AttemptRecord, RunDir
from tests.conftest import EXAMPLE


def test_early_stop_short_mode_runs_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "early_stop.json"
    early_stop.main(["--short", "--out", str(out)])
    data = json.loads(out.read_text())
    assert data["repeats"] == 3 and data["quorum"] == 2 and data["seeds"] == 100
    assert len(data["rows"]) == 2 * len(early_stop.RATES)
    for row in data["rows"]:
        assert row["sessions_fixed"] == 3 * row["cases"]
        assert 2 * row["cases"] <= row["sessions_early_stop"] <= 3 * row["cases"]
        assert set(row["mismatches"]) == {"trigger", "no_trigger"}
    e2e = data["e2e"]
    assert e2e["exit_code"] == 0 and [g["p"] for g in e2e["groups"]] == [0.05, 0.5, 0.95]
    for group in e2e["groups"]:
        assert 2 * group["cases"] <= group["sessions_started"] <= group["sessions_fixed"] == 3 * group["cases"]
        assert sum(group["states"].values()) == group["cases"]
    # Every session the runner started asked the fake exactly once for its first turn.
    assert e2e["requests_turn0"] == sum(g["sessions_started"] for g in e2e["groups"])


@pytest.mark.parametrize("error_rate", [0.0, 0.1])
def test_early_stop_never_changes_a_verdict(error_rate: float) -> None:
    rule = QuorumRule(3, 2)
    for p in (0.0, 0.1, 0.3, 0.5, 0.9, 1.0):
        row = early_stop.simulate_rate(p, error_rate, 300, rule)
        assert row.mismatches == {"trigger": 0, "no_trigger": 0}, (p, row)
        assert sum(row.verdicts["trigger"].values()) == 300
    # And it does stop early: at p = 0 without errors every case is decided by its first two attempts.
    certain = early_stop.simulate_rate(0.0, 0.0, 300, rule)
    assert certain.sessions_early_stop == 600 and certain.verdicts["trigger"] == {"FAIL": 300}


def test_early_stop_replays_the_executor_start_policy() -> None:
    """Two attempts start together; a third only when they split (N=3, k=2)."""
    rule = QuorumRule(3, 2)
    case = early_stop.make_case("trigger")
    split = [early_stop.record(case, i + 1, d).outcome for i, d in enumerate([True, False, True])]
    agree = [early_stop.record(case, i + 1, d).outcome for i, d in enumerate([True, True, False])]
    timing = __import__("random").Random(1)
    assert early_stop.early_stop_repeats(rule, split, timing) == [1, 2, 3]
    assert early_stop.early_stop_repeats(rule, agree, timing) == [1, 2]


def test_memory_short_mode_runs_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "memory.json"
    memory.main(["--short", "--out", str(out)])
    data = json.loads(out.read_text())
    steps = list(memory.STEPS[1:])
    assert [(f["scale"], f["step"]) for f in data["figures"]] == [(s, st) for s in ("1x", "3x") for st in steps]
    by = {(f["scale"], f["step"]): f for f in data["figures"]}
    assert by[("3x", "plan")]["cases"] == 3 * by[("1x", "plan")]["cases"] > 0
    for scale in ("1x", "3x"):
        planned = by[(scale, "write")]["attempts"]
        assert planned > 0 and by[(scale, "read")]["attempts"] == by[(scale, "finish")]["attempts"] == planned
        assert by[(scale, "finish")]["results_bytes"] > 0
        assert 0 < by[(scale, "execute")]["attempts"] <= planned
    assert all(f["peak_mib_median"] >= data["baseline_mib"] > 0 for f in data["figures"])
    assert [m["step"] for m in data["marginal"]] == steps


def test_synthetic_copies_are_self_consistent(tmp_path: Path) -> None:
    corpus = generate(tmp_path / "x2", 2, EXAMPLE / ".claude" / "skills")
    library, findings = load_library(corpus.root, Settings())
    original, original_findings = load_library(EXAMPLE, Settings())
    # The copies are of the skills folder: the example's routing set at the repository's evals/ is not in them.
    in_skills = [c for c in original.cases if c.file.startswith(".claude/skills/")]
    assert len(in_skills) == len(original.cases) - 3
    assert len(library.cases) == 2 * len(in_skills)
    assert sorted(f.rule for f in findings) == sorted(2 * [f.rule for f in original_findings])
    renamed = [c for c in library.cases if c.skill.endswith("-c1")]
    assert renamed and all(c.target.endswith("-c1") or c.target not in original.skills for c in renamed)
    assert all(n.endswith("-c1") for c in renamed for n in c.should_not_trigger if n in library.skills)


# ---- RunDir streams attempts -------------------------------------------------------------------

def _record(attempt: str, plan_hash: str = "h1") -> AttemptRecord:
    outcome = AttemptOutcome(state="PASS", activation="PASS", fired=["x"], target_fired=True, fired_instead=[])
    return AttemptRecord(attempt_id=attempt, uid="s/evals/c", arm="main", repeat=1, plan_hash=plan_hash,
                         status="finished", outcome=outcome, final_answer="é" * 50,
                         tool_calls=[ToolCall(name="Skill", input="{}", turn=0)])


def test_read_attempts_skips_a_torn_last_line_even_mid_character(tmp_path: Path) -> None:
    rundir = RunDir(tmp_path)
    rundir.create()
    rundir.append_attempt(_record("a"))
    rundir.append_attempt(_record("b", plan_hash="h2"))
    whole = _record("c").model_dump_json().encode()
    cut = whole.index("é".encode()) + 1  # half of a two-byte character: what a crash mid-write leaves
    with open(tmp_path / ATTEMPTS, "ab") as handle:
        handle.write(whole[:cut])
    assert [r.attempt_id for r in rundir.read_attempts()] == ["a", "b"]
    assert [r.attempt_id for r in rundir.iter_attempts(plan_hash="h2")] == ["b"]


def test_slim_records_keep_verdicts_and_drop_the_bulk(tmp_path: Path) -> None:
    rundir = RunDir(tmp_path)
    rundir.create()
    rundir.append_attempt(_record("a"))
    full, = rundir.read_attempts()
    slim, = rundir.read_attempts(slim=True)
    assert full.final_answer == "é" * 50 and full.tool_calls
    assert slim.final_answer is None and slim.tool_calls == []
    assert slim.outcome == full.outcome and slim.model_dump(exclude={"final_answer", "tool_calls"}) == \
        full.model_dump(exclude={"final_answer", "tool_calls"})
