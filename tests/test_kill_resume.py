"""A run killed with SIGKILL mid-session, its last attempts line torn, then resumed: nothing lost, nothing hidden.

Real `skill-evals run` processes (the api host, and the real Claude Code CLI) against the fake Messages API
with a latency, so that sessions are in flight when the kill lands. Every request the fake answers has a
fixed usage, so the test knows exactly what the API billed and can hold the run's own spend figures to it:
recorded spend + spend lost in flight must cover every billed request and stay within the cap.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.core.observation import Usage as RunnerUsage
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.execute.rundir import ATTEMPTS, AttemptRecord, RunDir
from runner.hosts.prices import load as load_prices
from runner.testing.fake_anthropic import FakeAnthropic, Usage, dynamic, hang, skill, text
from runner.testing.fake_judge import JUDGE_MATCH, verdicts
from tests.conftest import EXAMPLE
from tests.helpers import demo_skill, results_of

KEY = "sk-ant-test-kill-resume-7d1e"
LATENCY = 0.4
SESSION_USAGE = Usage(input_tokens=100, output_tokens=800)  # every model turn of a session
JUDGE_USAGE = Usage(input_tokens=300, output_tokens=60)     # every judge call
CONFIG = "[run]\nmax_turns = 2\nmax_output_tokens = 1000\n"  # a small worst case, so a small cap binds
ROUNDING = 2e-6  # results.json rounds each dollar figure to 6 decimals
HELD_S = 600  # a held request's hang: past anything a test waits for (a kill or the fake's close ends it first)


def example_cases() -> list[tuple[str, str, str]]:
    library, _ = load_library(EXAMPLE, Settings())
    return [(case.uid, case.skill, case.prompt) for case in library.cases]


def library_copy(tmp_path: Path) -> Path:
    target = tmp_path / "library"
    shutil.copytree(EXAMPLE, target, symlinks=True)
    (target / ".skill-evals.toml").write_text(CONFIG, encoding="utf-8")
    return target


def script_everything(fake: FakeAnthropic, hold: threading.Event | None = None) -> set[str]:
    """Every case's prompt fires its own skill and answers; the judge passes. Returns the script keys. While `hold`
    is set, a session's second request (the one after its skill fired) hangs instead of being answered."""
    fake.script(JUDGE_MATCH, verdicts("PASS"), usage=JUDGE_USAGE)  # first: judge requests quote case prompts
    keys = {JUDGE_MATCH}
    answer = text("TEST REPORT TRIAGE — scripted\n[NOT PROVEN] x")
    second = dynamic(lambda body: hang(HELD_S) if hold is not None and hold.is_set() else answer)
    for _uid, skill_name, prompt in example_cases():
        key = prompt[:60]
        if key not in keys:
            fake.script(key, skill(skill_name), second, usage=SESSION_USAGE)
            keys.add(key)
    fake.set_latency(LATENCY)
    return keys


def billed_usd(fake: FakeAnthropic, keys: set[str]) -> float:
    """What the API billed: every message request the fake received, at its fixed usage and the model's price."""
    prices = load_prices(Settings())
    total = 0.0
    for request in fake.message_requests:
        if request.body is None and request.outcome == "error 400":
            # A kill while the request was still being sent: the body never arrived whole, the API refused it and
            # billed nothing (no model ran).
            continue
        assert request.script in keys, f"an unscripted request reached the fake: {request.script}"
        usage = JUDGE_USAGE if request.script == JUDGE_MATCH else SESSION_USAGE
        cost = prices.cost(request.body["model"], RunnerUsage(input_tokens=usage.input_tokens,
                                                              output_tokens=usage.output_tokens))
        assert cost is not None
        total += cost
    return total


def env_for(fake: FakeAnthropic, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_") and k != "TMPDIR"}
    env.update({"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": KEY, "CI": "true", **extra})
    return env


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def start_run(args: list[str], env: dict[str, str], log: Path) -> Running:
    """`skill-evals run` in its own process group (the kill takes the run and the CLI sessions it started)."""
    with open(log, "wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "runner", "run", *args], env=env, stdout=sink,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    return Running(process, log)


def complete_lines(path: Path) -> list[bytes]:
    data = path.read_bytes() if path.exists() else b""
    return data.split(b"\n")[:-1]


def held(fake: FakeAnthropic) -> int:
    return sum(1 for r in fake.message_requests if r.outcome == "hang")


def wait_until(condition: Any, run: Running, what: str, bound_s: float = 240) -> None:
    """Poll until `condition()` while the run lives (the bound stops a hang; it is never what a test asserts)."""
    deadline = time.monotonic() + bound_s
    while not condition():
        assert run.process.poll() is None, f"the run ended before {what}:\n" + run.output()
        assert time.monotonic() < deadline, f"the run never got to {what}:\n" + run.output()
        time.sleep(0.01)


def kill_mid_session(run: Running, out: Path, fake: FakeAnthropic, hold: threading.Event) -> None:
    """SIGKILL the run once it recorded an attempt and then a session's second request is held at the fake.

    The hold (script_everything's) is what makes the kill land mid-session however slow the machine is: the held
    session has had its first reply (journaled) and waits on its second request until the kill, where a latency
    window could close before a kill that came late under load."""
    before = len(complete_lines(out / ATTEMPTS))
    wait_until(lambda: len(complete_lines(out / ATTEMPTS)) > before, run, "a recorded attempt")
    already = held(fake)
    hold.set()
    try:
        wait_until(lambda: held(fake) > already, run, "a held second request")
        os.killpg(run.process.pid, signal.SIGKILL)
        run.process.wait(timeout=60)
    finally:
        hold.clear()


@dataclass
class Tear:
    offset: int
    fragment: bytes
    record: dict[str, Any] | None  # the record whose line was cut (None: the kill itself cut it)


def tear_last_line(path: Path) -> Tear:
    """Cut the last line of attempts.jsonl in the middle of its record, without its newline (a kill mid-write)."""
    data = path.read_bytes()
    if not data.endswith(b"\n"):  # the kill itself landed mid-write
        start = data.rfind(b"\n") + 1
        return Tear(start, data[start:], None)
    start = data[:-1].rfind(b"\n") + 1
    line = data[start:-1]
    fragment = line[: len(line) // 2]
    path.write_bytes(data[:start] + fragment)
    return Tear(start, fragment, json.loads(line))


def assert_whole_lines(path: Path) -> None:
    """Every complete line is one whole record: none was glued onto a fragment torn by an earlier kill."""
    for number, line in enumerate(complete_lines(path), start=1):
        try:
            json.loads(line)
        except ValueError:
            raise AssertionError(f"{path.name} line {number} is not one record (glued onto a torn line?): "
                                 f"{line[:80]!r}...{line[-80:]!r}") from None


def finished_ids(path: Path) -> set[str]:
    ids = set()
    for line in complete_lines(path):
        record = json.loads(line)
        if record["status"] == "finished":
            ids.add(record["attempt_id"])
    return ids


def assert_nothing_lost(out: Path, finished_before: set[str], tears: list[Tear]) -> list[dict[str, Any]]:
    raw = (out / ATTEMPTS).read_bytes()
    assert raw.endswith(b"\n")
    assert_whole_lines(out / ATTEMPTS)
    records = [json.loads(line) for line in raw.split(b"\n")[:-1]]
    finished = [r["attempt_id"] for r in records if r["status"] == "finished"]
    assert len(finished) == len(set(finished)), "an attempt was recorded twice"
    assert finished_before <= set(finished), "an attempt finished before a kill is missing"
    torn = {t.record["attempt_id"] for t in tears if t.record is not None}
    assert torn <= set(finished), "an attempt whose line was torn was not run again"
    results = results_of(out)
    cuts = [r for r in results["repairs"] if r["file"] == ATTEMPTS]
    assert [(c["offset"], c["bytes_cut"]) for c in cuts] == [(t.offset, len(t.fragment)) for t in tears]
    for cut, tear in zip(cuts, tears):
        assert (out / cut["saved_to"]).read_bytes() == tear.fragment, "the cut bytes were not kept"
    return records


def test_three_sigkills_with_torn_lines_lose_nothing_and_keep_the_cap(tmp_path: Path) -> None:
    library = library_copy(tmp_path)
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        hold = threading.Event()
        keys = script_everything(fake, hold)
        env = env_for(fake)
        plan = subprocess.run([sys.executable, "-m", "runner", "plan", "--library", str(library), "--host", "api",
                               "--format", "json", "--no-surface"], env=env, capture_output=True, text=True, check=True)
        estimate = json.loads(plan.stdout)["estimate"]
        worst = estimate["worst_session_usd"]
        session = 2 * load_prices(Settings()).cost("claude-sonnet-4-6", RunnerUsage(input_tokens=100, output_tokens=800))
        cap = round(11 * worst, 6)
        # The setup, not the runner: the cap binds (the whole plan needs more), and a session is far below its
        # worst case (so the bound counted ≥ billed is about in-flight spend, not about estimates).
        assert estimate["sessions_min"] * session > cap and session < worst / 3

        finished_before: set[str] = set()
        tears: list[Tear] = []
        first = ["--library", str(library), "--out", str(out), "--host", "api", "--max-usd", f"{cap}",
                 "--concurrency", "2"]
        for kill in range(3):
            args = first if kill == 0 else ["--library", str(library), "--resume", str(out)]
            run = start_run(args, env, tmp_path / f"run-{kill}.log")
            kill_mid_session(run, out, fake, hold)
            assert_whole_lines(out / ATTEMPTS)
            tears.append(tear_last_line(out / ATTEMPTS))
            finished_before |= finished_ids(out / ATTEMPTS)

        done = subprocess.run([sys.executable, "-m", "runner", "run", "--library", str(library), "--resume", str(out)],
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "torn" in done.stderr and ATTEMPTS in done.stderr, "the repair was not said on stderr"
        assert_nothing_lost(out, finished_before, tears)
        results = results_of(out)
        spend = results["spend"]
        counted = spend["usd"] + spend["lost_in_flight_usd"]
        billed = billed_usd(fake, keys)
        assert results["stop_reason"] == "budget-cap", "the cap did not bind"
        assert counted <= cap + ROUNDING, f"recorded ${spend['usd']} + lost in flight ${spend['lost_in_flight_usd']} > cap"
        assert counted >= billed - ROUNDING, f"the API billed ${billed:.6f}, the run shows only ${counted:.6f}"
        # The test is not vacuous: each kill landed while a session waited on its held second request, so each of
        # the three left a reservation in flight. The next process reconciled each from the last figure its session
        # journaled (the api host leaves no session folder), below its worst case: what it had reported plus the
        # request in flight at its bound.
        reconciled = spend["reconciled"]
        assert reconciled and spend["lost_in_flight_usd"] > 0 and spend["lost_in_flight_reservations"] == 0
        progressed = [r for r in reconciled if r["source"] == "progress"]  # (`none`: killed before its first request)
        assert progressed and {r["source"] for r in reconciled} <= {"progress", "none"}
        assert all(r["usd"] < r["reserved_usd"] for r in progressed)
        report = subprocess.run([sys.executable, "-m", "runner", "report", str(out), "--format", "markdown"],
                                capture_output=True, text=True, timeout=120, check=True).stdout
        assert "Killed before" in report and f"{spend['lost_in_flight_usd']:.4f}" in report


def test_sigkill_with_claude_code_leaves_no_session_folder_after_resume(tmp_path: Path) -> None:
    library = library_copy(tmp_path)
    out = tmp_path / "run"
    parent = tmp_path / "session-parent"  # TMPDIR: the session folders go here, not to /dev/shm
    parent.mkdir()
    # Another run's session folder (another run folder): resume must never touch it.
    other = parent / f"skill-evals-run-{os.getuid()}-{'0' * 16}" / "skill-evals-live"
    other.mkdir(parents=True)
    (other / "marker").write_text("another run's session", encoding="utf-8")
    with FakeAnthropic() as fake:
        hold = threading.Event()
        keys = script_everything(fake, hold)
        env = env_for(fake, TMPDIR=str(parent))
        run = start_run(["--library", str(library), "--out", str(out), "--skill", "test-report-triage",
                         "--repeats", "3", "--concurrency", "2", "--timeout", "60"], env, tmp_path / "run.log")
        kill_mid_session(run, out, fake, hold)
        tears = [tear_last_line(out / ATTEMPTS)]
        finished_before = finished_ids(out / ATTEMPTS)
        killed = [p for p in parent.iterdir() if p != other.parent]
        assert killed, "the killed run left nothing in the session-folder parent: the test proves nothing"

        done = subprocess.run([sys.executable, "-m", "runner", "run", "--library", str(library), "--resume", str(out)],
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        assert_nothing_lost(out, finished_before, tears)
        assert sorted(parent.iterdir()) == [other.parent], "a session folder of the killed run is still there"
        assert (other / "marker").read_text(encoding="utf-8") == "another run's session"
        spend = results_of(out)["spend"]
        counted = spend["usd"] + spend["lost_in_flight_usd"]
        assert billed_usd(fake, keys) - ROUNDING <= counted <= spend["cap_usd"] + ROUNDING


def test_a_second_process_on_the_same_run_folder_is_refused(tmp_path: Path) -> None:
    library = library_copy(tmp_path)
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        script_everything(fake)
        env = env_for(fake)
        # The whole library one session at a time: minutes of work, it is still running when the others try.
        run = start_run(["--library", str(library), "--out", str(out), "--host", "api", "--concurrency", "1"],
                        env, tmp_path / "run.log")
        try:
            deadline = time.monotonic() + 120
            while not fake.message_requests:
                assert time.monotonic() < deadline and run.process.poll() is None, run.output()
                time.sleep(0.02)
            plan = (out / "plan.json").read_bytes()
            for args in (["--resume", str(out)], ["--out", str(out), "--host", "api"]):
                second = subprocess.run([sys.executable, "-m", "runner", "run", "--library", str(library), *args],
                                        env=env, capture_output=True, text=True, timeout=600, check=False)
                assert second.returncode == 2, second.stdout + second.stderr
                assert "another skill-evals process" in second.stderr and str(run.process.pid) in second.stderr
                assert (out / "plan.json").read_bytes() == plan, "the refused run touched the live run's plan"
            assert run.process.poll() is None, "the live run was disturbed"
        finally:
            run.process.send_signal(signal.SIGTERM)
            run.process.wait(timeout=120)


def record(attempt_id: str, cost: float = 0.01) -> AttemptRecord:
    return AttemptRecord(attempt_id=attempt_id, uid=attempt_id.split("#")[0], arm="main", repeat=1, plan_hash="h",
                         status="finished", cost_usd=cost)


def test_the_first_append_after_a_torn_line_cuts_it_first(tmp_path: Path) -> None:
    RunDir(tmp_path).append_attempt(record("s/evals/a#main#1"))
    RunDir(tmp_path).append_attempt(record("s/evals/b#main#1"))
    whole = (tmp_path / ATTEMPTS).read_bytes()
    torn = b'{"attempt_id": "s/evals/c#main#1", "uid": "s/evals/\xd0'  # cut mid-record, mid-character
    (tmp_path / ATTEMPTS).write_bytes(whole + torn)

    rundir = RunDir(tmp_path)  # a new process on the same folder, e.g. `run --out` reusing it
    rundir.append_attempt(record("s/evals/d#main#1"))
    assert [r.attempt_id for r in rundir.read_attempts()] == ["s/evals/a#main#1", "s/evals/b#main#1",
                                                              "s/evals/d#main#1"]
    assert (tmp_path / ATTEMPTS).read_bytes().startswith(whole)
    cut, = rundir.repairs()
    assert (cut.file, cut.offset, cut.bytes_cut) == (ATTEMPTS, len(whole), len(torn))
    assert (tmp_path / cut.saved_to).read_bytes() == torn


def test_a_resumed_ledger_counts_what_no_record_shows(tmp_path: Path) -> None:
    """The arithmetic under the kill tests: journal + records of one plan, with every kind of loss."""
    import asyncio

    from runner.execute.budget import Journal, Ledger
    from runner.judge.prose import JudgeCall
    from runner.pipeline.run import open_ledger
    from runner.plan.plan import Plan

    rundir = RunDir(tmp_path)
    rundir.append_attempt(record("s/evals/old#main#1", cost=0.05))  # written before journaling existed

    async def killed_process() -> None:
        journal = Journal("h", lambda line, durable: rundir.append_line("reservations.jsonl", line, durable))
        ledger = Ledger(cap_usd=2.0, journal=journal)
        done = await ledger.reserve(0.4, "s/evals/done#main#1")
        judge = await ledger.reserve(0.1)  # a judge call's own reservation (no attempt id)
        assert done is not None and judge is not None
        await ledger.settle(done, 0.02)
        await ledger.settle(judge, 0.01)
        call = JudgeCall(model="m", prompt_version="v", cost_usd=0.01)
        rundir.append_attempt(record("s/evals/done#main#1", cost=0.02).model_copy(
            update={"reservation_id": done.id, "judge": call}))
        unrecorded = await ledger.reserve(0.4, "s/evals/lost-record#main#1")
        assert unrecorded is not None
        await ledger.settle(unrecorded, 0.03)  # settled, then killed before its record was written
        in_flight = await ledger.reserve(0.4, "s/evals/in-flight#main#1")  # killed mid-session
        assert in_flight is not None
        other = Ledger(cap_usd=2.0, journal=Journal("another-plan", journal.append))
        assert await other.reserve(0.7, "x#main#1") is not None  # another plan's run in the same folder

    asyncio.run(killed_process())
    from runner.plan.plan import PlannedCase
    # The plan's cases: a record's id must be one the plan can produce (runner.results.vetting).
    cases = [PlannedCase.model_construct(uid=f"s/evals/{name}", repeats=1, arms=[], unrun_reason=None)
             for name in ("old", "done", "lost-record", "in-flight")]
    plan = Plan.model_construct(cap_usd=2.0, cases=cases, record_mac=None)
    prior, ledger = open_ledger(rundir, plan, "h")  # type: ignore[arg-type]
    assert sorted(prior) == ["s/evals/done", "s/evals/old"]
    # recorded 0.05 + 0.02 + 0.01 judge; lost: 0.4 in flight at its worst case + 0.03 settled without a record
    assert abs(ledger.spent_usd - (0.08 + 0.43)) < 1e-9
    from runner.pipeline.run import lost_in_flight
    lost = lost_in_flight(rundir, "h", prior)
    assert abs(lost.usd - 0.43) < 1e-9 and lost.reservations == 1 and lost.attempts == ("s/evals/in-flight#main#1",)
    # A journal that is gone never makes recorded spend disappear.
    (tmp_path / "reservations.jsonl").unlink()
    _, again = open_ledger(rundir, plan, "h")  # type: ignore[arg-type]
    assert abs(again.spent_usd - 0.08) < 1e-9


COLLIDING = {"case one": "Alpha", "case_one": "Bravo", "тест-1": "Charlie", "проверка-1": "Delta"}
PASSING = {"case one", "тест-1"}


def colliding_library(tmp_path: Path) -> Path:
    return demo_skill(tmp_path / "collide", [
        {"id": case_id, "type": "should_trigger", "prompt": f"{word} prompt: summarise the demo report please.",
         "expect": {"triggers": True, "assertions": ["Answers in one line."]}} for case_id, word in COLLIDING.items()])


def test_transcripts_of_ids_that_look_alike_never_overwrite_each_other(tmp_path: Path) -> None:
    library = colliding_library(tmp_path)
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("PASS"))
        for case_id, word in COLLIDING.items():
            turns = (skill("demo"), text(f"{word} answer.")) if case_id in PASSING else (text(f"{word} answer."),)
            fake.script(f"{word} prompt", *turns)
        done = subprocess.run([sys.executable, "-m", "runner", "run", "--library", str(library), "--out", str(out),
                               "--host", "api", "--repeats", "1"], env=env_for(fake), capture_output=True, text=True,
                              timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    results = results_of(out)
    states = {c["uid"].rsplit("/", 1)[1]: c["state"] for c in results["cases"]}
    assert states == {case_id: "PASS" if case_id in PASSING else "FAIL" for case_id in COLLIDING}
    records = RunDir(out).read_attempts()
    assert len({r.transcript for r in records}) == len(COLLIDING) == len(records)
    for r in records:
        word = COLLIDING[r.uid.rsplit("/", 1)[1]]
        assert r.transcript is not None and f"{word} prompt" in (out / r.transcript).read_text(encoding="utf-8"), (
            f"{r.attempt_id}: its transcript file holds another attempt's session")
        name = Path(r.transcript).name
        assert name.startswith("demo_evals_") and len(name) < 120  # readable, bounded
    # An old run folder keeps working: its records name their transcript files, whatever the naming then.
    old = records[0].model_copy(update={"attempt_id": "old#main#1", "transcript": "transcripts/old_main_1.json"})
    (out / "transcripts" / "old_main_1.json").write_text('[{"role": "user", "content": "old"}]', encoding="utf-8")
    from runner.report.html import load_transcript
    assert load_transcript(out, old, 10_000)["messages"] == [{"role": "user", "content": "old"}]


# In the plan's order: the first two start together (the cap holds two worst cases at once, not three).
KILLED_CASES = ["migration-planner/evals/positive-add-not-null-column",
                "test-report-triage/evals/positive-nightly-summary-with-skip",
                "test-report-triage/evals/edge-zero-test-suite-reported-ok"]


def logged_requests(parent: Path) -> int:
    """API requests the live sessions' CLI logs show so far. The sessions create and remove files (lock folders, logs)
    while this walks their folders, so a file gone between listing and reading counts as nothing, not an error."""
    count = 0
    for folder, _, names in os.walk(parent):  # os.walk skips a folder that vanished; Path.rglob raises
        for name in names:
            if name.endswith(".jsonl"):
                try:
                    count += (Path(folder) / name).read_text(errors="replace").count('"type":"api-request"')
                except FileNotFoundError:
                    pass
    return count


def test_sigkill_worst_cases_are_reconciled_from_the_killed_sessions_logs(tmp_path: Path) -> None:
    """Two claude-code sessions wait on their second request when the run is killed with SIGKILL: their reservations
    stay unsettled in the journal. The cap leaves room for the run's three sessions only if those two count at what
    they really spent, not at their worst case (then it would stop at once, every case UNRUN budget-cap). The resume
    reconciles each from its session's CLI log (the reply it got, and the request in flight at its bound), says so,
    runs every case, and the spend it counts still covers everything the fake billed."""
    from tests.billed import billed_usd as billed_by

    library = library_copy(tmp_path)
    out = tmp_path / "run"
    parent = tmp_path / "session-parent"  # TMPDIR: the killed sessions' folders are found there
    parent.mkdir()
    prompts = {uid: prompt for uid, _, prompt in example_cases()}
    with FakeAnthropic() as fake:
        for number, uid in enumerate(KILLED_CASES):  # the first two sessions' second request hangs once: in
            # flight at the kill, answered on resume
            hung = (hang(HELD_S, times=1),) if number < 2 else ()
            fake.script(prompts[uid][:60], skill(uid.split("/")[0]), *hung,
                        text("TEST REPORT TRIAGE — scripted\n[NOT PROVEN] x"))
        env = env_for(fake, TMPDIR=str(parent))
        cases = [a for uid in KILLED_CASES for a in ("--case", uid)]
        planned = subprocess.run([sys.executable, "-m", "runner", "plan", "--library", str(library), *cases,
                                  "--repeats", "1", "--format", "json"], env=env, capture_output=True, text=True,
                                 check=True)
        worst = json.loads(planned.stdout)["estimate"]["worst_session_usd"]
        cap = round(2.5 * worst, 6)  # two reservations at their worst case leave less than one more
        run = start_run(["--library", str(library), "--out", str(out), *cases, "--repeats", "1", "--concurrency", "2",
                         "--no-judge", "--timeout", "300", "--max-usd", f"{cap}"], env, tmp_path / "run.log")
        deadline = time.monotonic() + 240
        # Killed once both sessions wait on their second request and the CLI's logs show it (the CLI writes its log
        # a moment behind the session; a staler log is no evidence: test_a_stale_log_leaves_the_journaled_figure).
        while sum(1 for r in fake.message_requests if r.outcome == "hang") < 2 or logged_requests(parent) < 4:
            assert run.process.poll() is None and time.monotonic() < deadline, run.output()
            time.sleep(0.02)
        os.killpg(run.process.pid, signal.SIGKILL)
        run.process.wait(timeout=60)
        assert len(list(parent.rglob("*.attempt.json"))) == 2, "the killed sessions left no marked folder"

        done = subprocess.run([sys.executable, "-m", "runner", "run", "--library", str(library), "--resume", str(out)],
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        billed = billed_by(fake)
    assert done.stderr.count("reconciled from session-log") == 2, done.stderr
    results = results_of(out)
    spend = results["spend"]
    reconciled = spend["reconciled"]
    assert [r["source"] for r in reconciled] == ["session-log"] * 2
    assert json.loads((out / "plan.json").read_text())["cases"][0]["uid"] == KILLED_CASES[0]
    assert sorted(r["attempt"] for r in reconciled) == sorted(f"{uid}#main#1" for uid in KILLED_CASES[:2])
    assert all(0 < r["usd"] < r["reserved_usd"] for r in reconciled), reconciled
    # Not starved: every case ran (none UNRUN budget-cap), each once.
    assert "budget-cap" not in results["unrun_by_reason"] and results["stop_reason"] is None, results["unrun_by_reason"]
    finished = sorted(r["uid"] for r in (json.loads(line) for line in (out / ATTEMPTS).read_text().splitlines())
                      if r["status"] == "finished")
    assert finished == sorted(KILLED_CASES)
    counted = spend["usd"] + spend["lost_in_flight_usd"]
    assert billed - ROUNDING <= counted <= cap + ROUNDING, (billed, spend)
    assert list(parent.iterdir()) == [], "a killed session's folder is still there"
