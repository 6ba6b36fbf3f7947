"""The result cache (runner.cache): what is reused, what runs again, and what is never trusted from it.

The runs here are real `skill-evals run`s of a copy of the example library on the api host against the fake Messages
API (in this process: no CLI session); the judge passes every rubric item, so every attempt ends with a verdict the
cache may keep. The claude-code host's own path (its surface audit reused, no CLI started) is the end-to-end test at
the bottom.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from runner.cache.folder import Entry, Origin, Store
from runner.cache.keys import Folders
from runner.corpus.library import Library
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.testing.fake_anthropic import FakeAnthropic, error, skill, text
from runner.testing.fake_judge import JUDGE_MATCH, verdicts
from tests.conftest import EXAMPLE, REPO, cli, run_cli

KEY = "sk-ant-cache-test-5e1d"
TRIAGE = "test-report-triage"


@pytest.fixture
def library(tmp_path: Path) -> Path:
    copy = tmp_path / "library"
    shutil.copytree(EXAMPLE, copy)
    return copy


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    with FakeAnthropic() as server:
        server.script(JUDGE_MATCH, verdicts("PASS"))
        server.script("postmortem", skill("incident-postmortem-writer"), text("Postmortem drafted."))
        server.default(text("A plain answer without any skill."))
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("CI", "true")
        yield server


def requests(fake: FakeAnthropic) -> int:
    """Requests the fake has answered so far: sessions' turns and judge calls."""
    return len(fake.requests)


def read(library: Path) -> Library:
    return load_library(library, Settings())[0]


def run(library: Path, out: Path, *extra: str) -> dict:
    done = cli("run", "--library", str(library), "--out", str(out), "--host", "api", "--repeats", "1",
               "--no-library-validator", *extra)
    assert done.exit_code == 0, done.output[-3000:]
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def verdicts_of(results: dict) -> dict[str, tuple]:
    return {c["uid"]: (c["state"], c["wins"], c["losses"], c["errors"], tuple(a["state"] for a in c["assertions"]))
            for c in results["cases"]}


def executed_uids(results: dict) -> set[str]:
    return {c["uid"] for c in results["cases"] if c["state"] != "UNRUN"}


def rerun_uids(results: dict) -> set[str]:
    return {c["uid"] for c in results["cases"] if c["state"] != "UNRUN" and not c["reused"]}


def test_a_second_run_with_nothing_changed_runs_nothing_and_no_cache_proves_it(library: Path, fake: FakeAnthropic,
                                                                               tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = run(library, tmp_path / "run1", "--cache", str(cache))
    ran = requests(fake)
    executed = executed_uids(first)
    assert first["attempts_finished"] == len(executed) > 20 and first["attempts_reused"] == 0
    assert first["reused"] is None and {c["state"] for c in first["cases"] if c["uid"] in executed} <= {"PASS", "FAIL"}
    # The run's routing confusions are kept for the next pull request's pr tier (runner.cache.folder.put_routing).
    kept = json.loads((cache / "last-routing.json").read_text(encoding="utf-8"))
    assert kept["routing"]["confusions"] == first["routing"]["confusions"]

    second = run(library, tmp_path / "run2", "--cache", str(cache))
    assert requests(fake) == ran  # no session started, no judge call made
    assert second["spend"]["usd"] == 0 and second["attempts_finished"] == 0 and second["cost"]["sessions"] == 0
    assert verdicts_of(second) == verdicts_of(first)
    assert all(c["reused"] and c["reused"]["run"] == "run1" for c in second["cases"] if c["uid"] in executed)
    assert second["attempts_reused"] == len(executed)
    summary = second["reused"]
    assert summary["cases"] == len(executed) and [r["run"] for r in summary["runs"]] == ["run1"]
    assert summary["spent_usd"] == pytest.approx(first["spend"]["usd"], abs=1e-6)
    plan = json.loads((tmp_path / "run2" / "plan.json").read_text(encoding="utf-8"))
    assert plan["estimate"]["sessions_left_max"] == 0 and plan["estimate"]["cached_cases"] == len(executed)
    # What the cache held is not the plan's identity: the first run's plan hashes the same (shards that found
    # different entries merge).
    assert second["plan"]["hash"] == first["plan"]["hash"]
    # The reused records are this run's records now: signed with its key, their cost 0, their origin named.
    lines = [json.loads(line) for line in (tmp_path / "run2" / "attempts.jsonl").read_text().splitlines()]
    assert all(r["mac"] and r["cost_usd"] == 0 and r["reused"]["run"] == "run1" for r in lines)
    assert all((tmp_path / "run2" / r["transcript"]).is_file() for r in lines if r["transcript"])

    # Without the cache every case runs again, and each verdict is the one the cache gave.
    third = run(library, tmp_path / "run3", "--cache", str(cache), "--no-cache")
    assert requests(fake) == 2 * ran and third["attempts_finished"] == len(executed) and third["attempts_reused"] == 0
    assert verdicts_of(third) == verdicts_of(second)

    # Every report says which cases came from the cache, and from which run.
    for fmt in ("terminal", "markdown", "html", "junit"):
        shown = cli("report", str(tmp_path / "run2"), "--format", fmt).output
        assert "run1" in shown and "result cache" in shown.lower(), fmt


def test_an_edit_reruns_the_cases_it_can_change_and_nothing_else(library: Path, fake: FakeAnthropic,
                                                                 tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    executed = executed_uids(run(library, tmp_path / "run1", "--cache", str(cache)))
    named = {c.uid for c in read(library).cases if TRIAGE in (c.skill, c.target, *c.should_not_trigger)} & executed

    # The body of one skill (not its description): its cases and the cases that name it run again.
    skill_md = library / ".claude" / "skills" / TRIAGE / "SKILL.md"
    skill_md.write_text(skill_md.read_text(encoding="utf-8") + "\nOne more line of guidance.\n", encoding="utf-8")
    second = run(library, tmp_path / "run2", "--cache", str(cache))
    assert rerun_uids(second) == named and second["attempts_finished"] == len(named)
    assert second["attempts_reused"] == len(executed - named)

    # One description the listing shows: every session is shown it, so every case runs again.
    before = skill_md.read_text(encoding="utf-8")
    assert "description: 'Triage a CI or test-run summary" in before
    skill_md.write_text(before.replace("Triage a CI or", "Triage a CI pipeline or", 1), encoding="utf-8")
    third = run(library, tmp_path / "run3", "--cache", str(cache))
    assert third["attempts_reused"] == 0 and third["attempts_finished"] == len(executed)


def test_a_sibling_that_fired_in_a_cached_attempt_reruns_the_case_when_it_changes(library: Path, fake: FakeAnthropic,
                                                                                   tmp_path: Path) -> None:
    """A case whose cached attempt fired a skill it does not name depends on that skill too."""
    cache = tmp_path / "cache"
    first = run(library, tmp_path / "run1", "--cache", str(cache))
    fired = {c["uid"] for c in first["cases"] if "incident-postmortem-writer" in c["fired_instead"]}
    assert fired, "the fake fires incident-postmortem-writer on every prompt that names a postmortem"
    references = library / ".claude" / "skills" / "incident-postmortem-writer" / "references"
    references.mkdir(exist_ok=True)
    (references / "extra.md").write_text("A reference the skill may read.\n", encoding="utf-8")
    assert fired <= rerun_uids(run(library, tmp_path / "run2", "--cache", str(cache)))


def test_errors_never_enter_the_cache_and_a_read_only_cache_gains_nothing(library: Path, fake: FakeAnthropic,
                                                                         tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    fake.script("Dependabot wants to bump pydantic", error(500, "api_error", "fake outage"))
    first = run(library, tmp_path / "run1", "--cache", str(cache), "--skill", "dependency-upgrade-reviewer")
    errored = {c["uid"] for c in first["cases"] if c["state"] == "ERROR"}
    assert errored
    second = run(library, tmp_path / "run2", "--cache", str(cache), "--skill", "dependency-upgrade-reviewer")
    assert errored <= rerun_uids(second) and second["attempts_finished"] >= len(errored)

    entries = sorted((cache / "entries").rglob("*.json.gz"))
    routing = (cache / "last-routing.json").read_bytes()
    read_only = run(library, tmp_path / "run3", "--cache", str(cache), "--cache-read-only", "--skill", TRIAGE)
    assert read_only["reused"] is None and sorted((cache / "entries").rglob("*.json.gz")) == entries
    assert (cache / "last-routing.json").read_bytes() == routing  # a read-only run leaves the confusions alone


def test_the_plan_shows_what_the_cache_holds(library: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run(library, tmp_path / "run1", "--cache", str(cache), "--skill", TRIAGE)
    shown = cli("plan", "--library", str(library), "--host", "api", "--repeats", "1", "--no-library-validator",
                "--cache", str(cache), "--skill", TRIAGE)
    assert shown.exit_code == 0, shown.output
    assert "From the result cache:" in shown.output and "that ran in run1" in shown.output
    assert "Sessions left: 0–0" in shown.output


# ---- the folder ---------------------------------------------------------------------------------------------------

def entry(key: str, size: int = 10) -> Entry:
    return Entry(key=key, uid="s/evals/x", made_at="2026-12-07T00:00:00+00:00",
                 origin=Origin(run="r", plan_hash="h", finished_at="2026-12-07T00:00:00+00:00"),
                 attempts=[], transcripts={"a": os.urandom(size).hex()})


def test_a_damaged_or_misplaced_entry_is_a_miss_with_a_note(tmp_path: Path) -> None:
    store = Store(tmp_path).open()
    store.put(entry("ab" + "0" * 62))
    assert store.get("ab" + "0" * 62) is not None
    store.entry_path("ab" + "0" * 62).write_bytes(b"not gzip")
    assert store.get("ab" + "0" * 62) is None and "not a readable cache entry" in store.notes[-1]
    other = store.entry_path("cd" + "0" * 62)
    other.parent.mkdir(parents=True)
    other.write_bytes(gzip.compress(entry("ef" + "0" * 62).model_dump_json().encode()))
    assert store.get("cd" + "0" * 62) is None and "another key" in store.notes[-1]
    assert (tmp_path / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    # A small file that would expand without bound is refused, not read into memory.
    bomb = store.entry_path("ab" + "0" * 62)
    bomb.write_bytes(gzip.compress(b"{" + b" " * (4 * 1_048_576)))
    small = Store(tmp_path, max_expanded=1_048_576)
    assert small.get("ab" + "0" * 62) is None and "expands past" in small.notes[-1]


def test_eviction_keeps_the_folder_within_its_bound_least_recently_used_first(tmp_path: Path) -> None:
    store = Store(tmp_path, max_bytes=10**9).open()
    keys = [f"{i:02d}" + "0" * 62 for i in range(5)]
    for age, key in enumerate(keys):
        store.put(entry(key, size=100_000))
        os.utime(store.entry_path(key), (1_000_000 + age, 1_000_000 + age))
    store.get(keys[0])  # used now: the newest
    store.max_bytes = sum(store.entry_path(k).stat().st_size for k in (keys[0], keys[3], keys[4]))
    assert store.evict() == 2
    assert [k for k in keys if store.entry_path(k).exists()] == [keys[0], keys[3], keys[4]]


def test_folder_digests_leave_out_the_answer_key(library: Path) -> None:
    before = Folders.of(read(library), 1 << 20).skills[TRIAGE]
    evals = library / ".claude" / "skills" / TRIAGE / "evals" / "evals.json"
    evals.write_text(evals.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert Folders.of(read(library), 1 << 20).skills[TRIAGE] == before
    (library / ".claude" / "skills" / TRIAGE / "notes.md").write_text("new\n", encoding="utf-8")
    assert Folders.of(read(library), 1 << 20).skills[TRIAGE] != before


def test_the_repository_cannot_name_the_cache_under_untrusted_settings(library: Path) -> None:
    (library / ".skill-evals.toml").write_text('[run]\ncache = "planted"\n', encoding="utf-8")
    done = cli("plan", "--library", str(library), "--no-surface", "--untrusted-settings", "--no-library-validator")
    assert done.exit_code != 0 and "cache" in done.output, done.output


# ---- the claude-code host, end to end -------------------------------------------------------------------------------

def test_the_claude_code_host_starts_no_cli_for_what_the_cache_holds(tmp_path: Path) -> None:
    """The real CLI runs one skill's cases once; the second run reuses every attempt and the surface audit's
    result: the fake sees no request at all, and the results are the first run's."""
    cache = tmp_path / "cache"
    args = ["run", "--library", str(EXAMPLE), "--skill", "dependency-upgrade-reviewer", "--repeats", "1",
            "--concurrency", "2", "--timeout", "60", "--no-library-validator", "--cache", str(cache)]
    results = []
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("PASS"))
        fake.default(skill("dependency-upgrade-reviewer"), text("Reviewed."))
        for name in ("run1", "run2"):
            before = len(fake.requests)
            done = run_cli(*args, "--out", str(tmp_path / name), fake=fake, key=KEY, cwd=REPO)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
            results.append((json.loads((tmp_path / name / "results.json").read_text()), len(fake.requests) - before,
                            done.stdout))
    (first, first_requests, _), (second, second_requests, printed) = results
    assert first_requests >= first["attempts_finished"] > 0
    assert second_requests == 0 and second["attempts_finished"] == 0 and second["spend"]["usd"] == 0
    assert verdicts_of(second) == verdicts_of(first)
    assert "the surface audit's result reused from it" in printed
    assert second["plan"]["surface"] == first["plan"]["surface"]


def test_the_last_routing_matrix_keeps_each_row_from_the_last_run_that_measured_it(tmp_path: Path) -> None:
    """A pull request's run measures a few skills, a nightly all: the file keeps every row's newest confusions."""
    store = Store(tmp_path / "cache").open()
    a_to_b = {"expected": "a", "fired": "b", "attempts": 2, "of": 3, "cases": ["a/evals/1"]}
    c_to_d = {"expected": "c", "fired": "d", "attempts": 1, "of": 3, "cases": ["c/evals/1"]}
    store.put_routing({"rows": {"a": 3, "b": 3}, "confusions": [a_to_b]}, "nightly")
    store.put_routing({"rows": {"c": 3}, "confusions": [c_to_d]}, "pr 7")
    kept = json.loads(store.last_routing_path.read_text(encoding="utf-8"))
    assert kept["routing"]["confusions"] == [c_to_d, a_to_b] and kept["label"] == "pr 7"
    store.put_routing({"rows": {"a": 3}, "confusions": []}, "nightly 2")  # a no longer fires b
    assert json.loads(store.last_routing_path.read_text(encoding="utf-8"))["routing"]["confusions"] == [c_to_d]
    before = store.last_routing_path.read_bytes()
    Store(tmp_path / "cache", writable=False).open().put_routing({"rows": {"c": 3}, "confusions": []}, "fork")
    assert store.last_routing_path.read_bytes() == before
    store.last_routing_path.write_text("{not json", encoding="utf-8")
    store.put_routing({"rows": {}, "confusions": [a_to_b]}, "after damage")
    assert json.loads(store.last_routing_path.read_text(encoding="utf-8"))["routing"]["confusions"] == [a_to_b]
    assert any("unreadable" in note for note in store.notes)
