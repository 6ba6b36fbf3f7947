"""Issue 28: the attempt log is the runner's. A record the runner did not write never counts.

The attack: a process that reaches the run folder appends `finished` PASS lines to attempts.jsonl (forged, or
replayed copies of genuine lines) or lines with a negative cost; results.json counted them (wins 3 + losses 2 for
N = 3, spend.usd = -99.86). Now every record carries an HMAC under the run folder's key (plan.json says so), and
results, resume and merge vet each line (runner.results.vetting): refused lines are listed, never counted, and
the case each one claims is ERROR.

The run folders here are real: made by the runner's own `prepare` / `write_plan` (in-process, with the runner's
own writer for the genuine records), or by `skill-evals run` against the fake Messages API (one end-to-end run
and resume). A forger is the test writing bytes into attempts.jsonl without the key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.core.outcomes import AssertionOutcome, AttemptOutcome
from runner.core.quorum import QuorumRule
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.execute.executor import CaseStarts
from runner.execute.rundir import ATTEMPTS, KEY, REPAIRS, AttemptRecord, RunDir, RunFolderKeyError, signed_line
from runner.pipeline import run as runs_mod
from runner.report import markdown, rollup
from runner.results.build import Results
from runner.testing.fake_anthropic import FakeAnthropic, skill, text
from tests.helpers import demo_skill, results_of

ALPHA = "demo/evals/alpha"  # its sessions fire the skill: PASS
BRAVO = "demo/evals/bravo"  # its sessions do not: FAIL


def demo_library(root: Path) -> Path:
    """One skill, two should-trigger cases whose one assertion is an activation claim (no judge call)."""
    return demo_skill(root, [{"id": name, "type": "should_trigger",
                              "prompt": f"{name} prompt: summarise the demo report please.",
                              "expect": {"triggers": True, "assertions": ["The demo skill activates."]}}
                             for name in ("alpha", "bravo")])


def outcome(passed: bool) -> AttemptOutcome:
    state = "PASS" if passed else "FAIL"
    return AttemptOutcome(state=state, activation=state, fired=["demo"] if passed else [], target_fired=passed,
                          fired_instead=[], assertions=[AssertionOutcome(index=1, state=state)])


def record(prepared: runs_mod.Prepared, uid: str, repeat: int, passed: bool, cost: float = 0.01,
           arm: str = "main") -> AttemptRecord:
    return AttemptRecord(attempt_id=f"{uid}#{arm}#{repeat}", uid=uid, arm=arm, repeat=repeat,
                         plan_hash=prepared.plan_hash, status="finished", outcome=outcome(passed), cost_usd=cost)


def planned_folder(tmp_path: Path, signed: bool = True, run: str = "run",
                   shard: tuple[int, int] | None = None) -> tuple[runs_mod.Prepared, RunDir]:
    """A run folder as `skill-evals run` makes it (plan.json, and the key when the plan signs its records), N = 3."""
    root = tmp_path / "lib"
    library, _ = load_library(root if root.exists() else demo_library(root), Settings())
    rundir = RunDir(tmp_path / run)
    prepared = runs_mod.prepare(library, Settings(), runs_mod.Options(host="api", repeats=3, shard=shard),
                                runs_mod.Credentials(api_key="sk-test-not-used", base_url="http://127.0.0.1:9"),
                                audit=False, rundir=rundir)
    if not signed:  # a plan from before records were signed: no record_mac, no key
        plan = prepared.plan.model_copy(update={"record_mac": None})
        prepared.plan, prepared.plan_hash = plan, plan.digest()
    runs_mod.write_plan(rundir, prepared)
    return prepared, rundir


def append_raw(rundir: RunDir, line: str) -> None:
    """What a forger can do: append bytes to attempts.jsonl (it cannot read the key)."""
    with open(rundir.path / ATTEMPTS, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def genuine_lines(rundir: RunDir) -> list[dict]:
    return [json.loads(line) for line in (rundir.path / ATTEMPTS).read_text(encoding="utf-8").splitlines()]


def case_of(results: Results, uid: str):  # type: ignore[no-untyped-def]
    return next(c for c in results.cases if c.uid == uid)


def test_forged_replayed_and_impossible_records_are_refused_and_their_cases_are_error(tmp_path: Path) -> None:
    prepared, rundir = planned_folder(tmp_path)
    assert prepared.plan.record_mac == "hmac-sha256"
    key_file = rundir.path / KEY
    assert key_file.stat().st_size == 32 and key_file.stat().st_mode & 0o777 == 0o600
    # Genuine: alpha passes 2 of 2, bravo fails 2 of 2 (the runner's own writer, signed with the folder's key).
    for repeat in (1, 2):
        rundir.append_attempt(record(prepared, ALPHA, repeat, True))
        rundir.append_attempt(record(prepared, BRAVO, repeat, False))
    alpha_1, bravo_1 = genuine_lines(rundir)[0], genuine_lines(rundir)[1]
    assert all("mac" in line for line in genuine_lines(rundir))
    # The forger: a PASS for bravo's third repeat without a MAC; a genuine bravo line turned PASS (its MAC kept);
    # a replayed genuine line; a negative cost; an id the plan cannot produce.
    forged = {**bravo_1, "attempt_id": f"{BRAVO}#main#3", "repeat": 3, "outcome": outcome(True).model_dump()}
    append_raw(rundir, json.dumps({k: v for k, v in forged.items() if k != "mac"}))
    append_raw(rundir, json.dumps({**bravo_1, "outcome": outcome(True).model_dump()}))
    append_raw(rundir, json.dumps(alpha_1))
    append_raw(rundir, json.dumps({**alpha_1, "attempt_id": f"{ALPHA}#main#3", "repeat": 3, "cost_usd": -100}))
    # The same, written with the folder's key (a record the runner itself got wrong): refused by rule, not by MAC.
    rundir.append_attempt(record(prepared, ALPHA, 3, True, cost=-100))
    rundir.append_attempt(record(prepared, ALPHA, 7, True))
    rundir.append_attempt(record(prepared, "demo/evals/nowhere", 1, True))
    rundir.append_attempt(record(prepared, ALPHA, 3, True).model_copy(update={"arm": "control",
                                                                             "attempt_id": f"{ALPHA}#control#3"}))
    rundir.append_attempt(record(prepared, ALPHA, 3, True).model_copy(update={"uid": BRAVO}))
    assert rundir.key is not None
    append_raw(rundir, signed_line({**json.loads(record(prepared, ALPHA, 3, True).model_dump_json()),
                                    "cost_usd": float("nan")}, rundir.key))

    results = runs_mod.finish(prepared, rundir, None)
    refused = [(r.line, r.rule) for r in results.refused_records]
    assert refused == [(5, "mac-missing"), (6, "mac-wrong"), (7, "duplicate"), (8, "mac-wrong"), (9, "bad-number"),
                       (10, "not-in-plan"), (11, "not-in-plan"), (12, "not-in-plan"), (13, "id-mismatch"),
                       (14, "bad-number")]
    assert results.refused_records[0].attempt_id == f"{BRAVO}#main#3"
    assert "cost_usd is -100" in results.refused_records[4].reason
    # Nothing refused counted: the genuine tally stands, the cases they claim are ERROR, never PASS.
    alpha, bravo = case_of(results, ALPHA), case_of(results, BRAVO)
    assert (alpha.wins, alpha.losses, bravo.wins, bravo.losses) == (2, 0, 0, 2)
    assert alpha.state == bravo.state == "ERROR"
    assert bravo.reason is not None and bravo.reason.startswith("refused-record") and "line 5" in bravo.reason
    assert results.counts["PASS"] == 0 and results.attempts_finished == 4
    assert results.spend.usd == pytest.approx(0.04) and results.records_signed is True
    # Every report says it in one line (the PR comment's Markdown here; all take it from rollup).
    line = rollup.records_line(results)
    assert line is not None and line.startswith("10 (") and "mac-missing" in line and "duplicate" in line
    assert f"**Attempt log:** {line.split(' (')[0]}" in markdown.render(results)
    # results.json carries the list, and validates against the shipped schema.
    saved = results_of(rundir.path)
    assert [r["line"] for r in saved["refused_records"]] == [r for r, _ in refused]


def test_a_refused_record_never_stands_for_an_attempt_on_resume(tmp_path: Path) -> None:
    """The resume's own reading: what a refused record claims is not covered (it runs again unless the quorum is
    decided), what an accepted record covers is never run again, and the refused cost is not spend."""
    prepared, rundir = planned_folder(tmp_path)
    rundir.append_attempt(record(prepared, ALPHA, 1, True))
    rundir.append_attempt(record(prepared, ALPHA, 2, False))
    genuine = genuine_lines(rundir)[0]
    append_raw(rundir, json.dumps({**genuine, "attempt_id": f"{ALPHA}#main#3", "repeat": 3}))  # MAC of #1: wrong
    append_raw(rundir, json.dumps({**genuine, "cost_usd": -100}))

    prior, refused = runs_mod.prior_attempts(rundir, prepared.plan, prepared.plan_hash)
    assert [r.rule for r in refused] == ["mac-wrong", "mac-wrong"]
    assert [r.repeat for r in prior[ALPHA]] == [1, 2]
    planned = next(c for c in prepared.plan.cases if c.uid == ALPHA)
    starts = CaseStarts(planned, prior[ALPHA], rule=QuorumRule(planned.repeats, planned.quorum), first_alone=False)
    assert starts.take() == [("main", 3)]  # 1 win, 1 loss: the forged PASS did not decide the case
    _, ledger = runs_mod.open_ledger(RunDir(rundir.path), prepared.plan, prepared.plan_hash)
    assert ledger.spent_usd == pytest.approx(0.02)


def test_a_signed_folder_without_its_key_or_with_a_planted_one_is_an_error(tmp_path: Path) -> None:
    prepared, rundir = planned_folder(tmp_path)
    rundir.append_attempt(record(prepared, ALPHA, 1, True))
    key_file = rundir.path / KEY
    key = key_file.read_bytes()
    key_file.unlink()  # the downgrade: without the key, a plan that signs its records cannot be read unsigned
    with pytest.raises(RunFolderKeyError, match="missing"):
        runs_mod.finish(prepared, RunDir(rundir.path), None)
    elsewhere = tmp_path / "planted"
    elsewhere.write_bytes(key)
    key_file.symlink_to(elsewhere)
    with pytest.raises(RunFolderKeyError, match="symbolic link"):
        runs_mod.finish(prepared, RunDir(rundir.path), None)
    key_file.unlink()
    key_file.write_bytes(key)
    key_file.chmod(0o644)
    with pytest.raises(RunFolderKeyError, match="0644"):
        runs_mod.finish(prepared, RunDir(rundir.path), None)
    key_file.chmod(0o600)
    key_file.write_bytes(key[:16])
    with pytest.raises(RunFolderKeyError, match="16 bytes"):
        runs_mod.finish(prepared, RunDir(rundir.path), None)


def test_an_unsigned_run_folder_from_before_still_reports_and_still_refuses_what_it_can(tmp_path: Path) -> None:
    prepared, rundir = planned_folder(tmp_path, signed=False)
    assert not (rundir.path / KEY).exists()
    for repeat in (1, 2):
        rundir.append_attempt(record(prepared, ALPHA, repeat, True))
        rundir.append_attempt(record(prepared, BRAVO, repeat, False))
    lines = genuine_lines(rundir)
    assert not any("mac" in line for line in lines)
    results = runs_mod.finish(prepared, rundir, None)
    assert (case_of(results, ALPHA).state, case_of(results, BRAVO).state) == ("PASS", "FAIL")
    assert results.records_signed is False and results.refused_records == []
    assert "unsigned" in (rollup.records_line(results) or "")
    # What an unsigned log still cannot hide: a replayed line, a negative cost.
    append_raw(rundir, json.dumps(lines[1]))
    append_raw(rundir, json.dumps({**lines[1], "attempt_id": f"{BRAVO}#main#3", "repeat": 3, "cost_usd": -100,
                                   "outcome": outcome(True).model_dump()}))
    results = runs_mod.finish(prepared, rundir, None)
    assert [r.rule for r in results.refused_records] == ["duplicate", "bad-number"]
    assert case_of(results, BRAVO).state == "ERROR" and case_of(results, BRAVO).losses == 2
    assert results.spend.usd == pytest.approx(0.04)


def test_a_whole_last_record_missing_only_its_newline_is_completed_not_cut(tmp_path: Path) -> None:
    prepared, rundir = planned_folder(tmp_path)
    rundir.append_attempt(record(prepared, ALPHA, 1, True))
    rundir.append_attempt(record(prepared, ALPHA, 2, True))
    path = rundir.path / ATTEMPTS
    path.write_bytes(path.read_bytes()[:-1])  # killed between the record and its newline

    again = RunDir(rundir.path)
    repair, = again.claim()
    again.release()
    assert (repair.kind, repair.bytes_cut, repair.file) == ("completed", 0, ATTEMPTS)
    assert path.read_bytes().endswith(b"\n") and len(genuine_lines(rundir)) == 2
    assert json.loads((rundir.path / REPAIRS).read_text().splitlines()[-1])["kind"] == "completed"
    results = runs_mod.finish(prepared, again, None)
    assert case_of(results, ALPHA).state == "PASS" and results.refused_records == []
    prior, _ = runs_mod.prior_attempts(again, prepared.plan, prepared.plan_hash)
    assert len(prior[ALPHA]) == 2  # a resume runs neither again (it would be paid twice)

    # A whole last line the runner did not sign is still cut (kept in torn/), never completed into the log.
    forged = {**genuine_lines(rundir)[0], "attempt_id": f"{ALPHA}#main#3", "repeat": 3}
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({k: v for k, v in forged.items() if k != "mac"}))
    third = RunDir(rundir.path)
    cut, = third.claim()
    third.release()
    assert cut.kind == "cut" and len(genuine_lines(rundir)) == 2


def test_resume_through_the_cli_refuses_forged_duplicate_and_negative_records(tmp_path: Path) -> None:
    """`skill-evals run` then `run --resume` against the fake (api host): the forged lines are said on stderr,
    never counted, their cases are ERROR, and spend never goes below what was billed."""
    library = demo_library(tmp_path / "lib")
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        fake.script("alpha prompt", skill("demo"), text("One line."))
        fake.script("bravo prompt", text("One line, no skill."))
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env.update({"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "sk-ant-test-integrity", "CI": "true"})

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "runner", "run", "--library", str(library), *args], env=env,
                                  capture_output=True, text=True, timeout=600, check=False)

        first = run("--out", str(out), "--host", "api", "--repeats", "3")
        assert first.returncode == 0, first.stdout + first.stderr
        before = results_of(out)
        assert {c["uid"]: (c["state"], c["losses"]) for c in before["cases"]} == {ALPHA: ("PASS", 0),
                                                                                 BRAVO: ("FAIL", 2)}
        lines = [json.loads(line) for line in (out / ATTEMPTS).read_text(encoding="utf-8").splitlines()]
        bravo = next(r for r in lines if r["uid"] == BRAVO)
        alpha = next(r for r in lines if r["uid"] == ALPHA)
        passing = alpha["outcome"]
        forged = [
            {k: v for k, v in {**bravo, "attempt_id": f"{BRAVO}#main#3", "repeat": 3, "outcome": passing}.items()
             if k != "mac"},                                                          # forged PASS, no MAC
            {**bravo, "outcome": passing},                                            # genuine line altered
            bravo,                                                                    # replayed genuine line
            {k: v for k, v in {**bravo, "cost_usd": -100.0}.items() if k != "mac"},  # negative cost
            {k: v for k, v in {**alpha, "attempt_id": "demo/evals/zulu#main#1", "uid": "demo/evals/zulu",
                               "repeat": 1}.items()
             if k != "mac"},                                                          # a case the plan has not
        ]
        with open(out / ATTEMPTS, "a", encoding="utf-8") as handle:
            handle.writelines(json.dumps(line) + "\n" for line in forged)
        requests = len(fake.message_requests)

        resumed = run("--resume", str(out))
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert len(fake.message_requests) == requests  # both cases were decided by accepted records: nothing ran
    said = [line for line in resumed.stderr.splitlines() if line.startswith("skill-evals:   refused ")]
    assert len(said) == len(forged), resumed.stderr
    assert "mac-missing" in resumed.stderr and "mac-wrong" in resumed.stderr
    results = results_of(out)
    states = {c["uid"]: (c["state"], c["wins"], c["losses"]) for c in results["cases"]}
    assert states == {ALPHA: ("PASS", 2, 0), BRAVO: ("ERROR", 0, 2)}  # no refused line claims alpha
    assert [r["rule"] for r in results["refused_records"]] == ["mac-missing", "mac-wrong", "duplicate",
                                                               "mac-missing", "mac-missing"]
    assert results["spend"]["usd"] == before["spend"]["usd"] >= 0
    assert results["attempts_finished"] == before["attempts_finished"] == 4
    assert "Attempt log:" in resumed.stdout
    report = subprocess.run([sys.executable, "-m", "runner", "report", str(out), "--format", "markdown"],
                            capture_output=True, text=True, timeout=120, check=True).stdout
    assert "**Attempt log:** 5 (3 mac-missing, 1 mac-wrong, 1 duplicate) attempt record(s) refused" in report


def test_merge_vets_each_shard_with_its_own_key_and_signs_the_merged_log_with_a_new_one(tmp_path: Path) -> None:
    from runner.results import vetting
    from runner.results.merge import merge_dirs

    shards = []
    for index, (uid, passed) in enumerate(((ALPHA, True), (BRAVO, False)), start=1):
        prepared, rundir = planned_folder(tmp_path, run=f"shard-{index}", shard=(index, 2))
        for repeat in (1, 2):
            rundir.append_attempt(record(prepared, uid, repeat, passed))
        shards.append((prepared, rundir))
    assert shards[0][0].plan_hash == shards[1][0].plan_hash
    assert shards[0][1].key != shards[1][1].key
    # A genuine line of shard 1, replayed into shard 2: its MAC is of shard 1's key.
    append_raw(shards[1][1], json.dumps(genuine_lines(shards[0][1])[0]))
    for prepared, rundir in shards:
        runs_mod.finish(prepared, rundir, None)

    out = tmp_path / "merged"
    merged = merge_dirs([rundir.path for _, rundir in shards], out)
    assert [(r.rule, r.line, r.uid) for r in merged.refused_records] == [("mac-wrong", 3, ALPHA)]
    assert case_of(merged, ALPHA).state == "ERROR" and case_of(merged, BRAVO).state == "FAIL"
    assert merged.records_signed is True
    merged_key = (out / KEY).read_bytes()
    assert merged_key not in (shards[0][1].key, shards[1][1].key)
    again = vetting.read(RunDir(out), shards[0][0].plan, shards[0][0].plan_hash)
    assert again.refused == [] and len(again.accepted) == 4  # the replayed line was left out, the rest re-signed


def test_a_forged_record_never_lowers_what_a_killed_session_counts(tmp_path: Path) -> None:
    """A reservation a SIGKILL left open is reconciled on resume from the attempt's record, if the vetting accepts
    it: a forged record naming that reservation at $0 is no evidence, so the reservation keeps its worst case."""
    import asyncio

    from runner.execute.budget import Journal, Ledger
    from runner.execute.rundir import RESERVATIONS

    prepared, rundir = planned_folder(tmp_path)

    async def killed() -> str:
        journal = Journal(prepared.plan_hash, lambda line, durable: rundir.append_line(RESERVATIONS, line, durable))
        found = await Ledger(cap_usd=5.0, journal=journal).reserve(0.4, f"{ALPHA}#main#1")
        assert found is not None and found.id is not None
        return found.id

    reservation = asyncio.run(killed())
    forged = record(prepared, ALPHA, 1, True, cost=0.0).model_copy(update={"reservation_id": reservation})
    append_raw(rundir, forged.model_dump_json())  # without the key: no MAC
    (done,) = runs_mod.reconcile_killed(rundir, prepared.plan)
    assert done.source == "none" and done.usd == pytest.approx(0.4), done
