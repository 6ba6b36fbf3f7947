"""Resuming a run folder (issue 28, finding 7), through the real CLI (`python -m runner`) against the fake API:

- `run --resume DIR` and `judge DIR` read the library plan.json recorded, not the current folder's (which gave a
  false "library changed", or, from a folder that is no library, a refusal); a recorded library that is gone is one
  clear error;
- a resume without a key keeps every finished case's result: only the attempts not run yet are UNRUN no-credentials;
- a run made without a key, resumed with the key set (the README's path), runs its cases, judged.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from runner.testing.fake_anthropic import FakeAnthropic, spend_limit, text
from runner.testing.fake_judge import JUDGE_MATCH, verdicts
from tests.conftest import EXAMPLE, fake_env, run_cli
from tests.helpers import KEY, TRIAGE, attempts, case, key_of, results_of

# no_trigger cases whose only prose assertion is a2: a plain answer passes the activation, then the judge decides.
NEGATIVES = [f"{TRIAGE}/evals/negative-dependency-bump-review",
             "incident-postmortem-writer/evals/negative-flaky-test-triage",
             "migration-planner/evals/negative-postmortem-after-migration-outage"]
ANSWER = "Plain answer without any skill."


def case_args(uids: list[str]) -> list[str]:
    return [arg for uid in uids for arg in ("--case", uid)]


def scripted(fake: FakeAnthropic) -> None:
    fake.script(JUDGE_MATCH, verdicts("PASS"))
    fake.default(text(ANSWER))


def test_resume_and_judge_read_the_library_the_plan_recorded(tmp_path: Path) -> None:
    library = tmp_path / "library"
    shutil.copytree(EXAMPLE, library)
    elsewhere = tmp_path / "elsewhere"  # another library: the current folder of the resume
    shutil.copytree(EXAMPLE, elsewhere)
    skill_md = elsewhere / ".claude" / "skills" / TRIAGE / "SKILL.md"
    skill_md.write_text(skill_md.read_text(encoding="utf-8") + "\nAnother line.\n", encoding="utf-8")
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        scripted(fake)
        env = fake_env(fake, KEY)
        first = run_cli("run", "--library", str(library), "--out", str(out), "--host", "api", *case_args(NEGATIVES),
                        "--repeats", "1", env=env)
        assert first.returncode == 0, first.stdout + first.stderr
        again = run_cli("run", "--resume", str(out), env=env, cwd=elsewhere)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "library changed" not in again.stderr
        judged = run_cli("judge", str(out), env=env, cwd=elsewhere)
        assert judged.returncode == 0, judged.stdout + judged.stderr
        assert "Re-judged" in judged.stdout
        # From the run folder itself and from the repository root, by relative paths, as the README's user types them.
        for where, folder in ((out, "."), (library, "../run")):
            resumed = run_cli("run", "--resume", folder, env=env, cwd=where)
            assert resumed.returncode == 0 and "library changed" not in resumed.stderr, resumed.stdout + resumed.stderr
            rejudged = run_cli("judge", folder, env=env, cwd=where)
            assert rejudged.returncode == 0 and "Re-judged" in rejudged.stdout, rejudged.stdout + rejudged.stderr
        # An empty folder is no library at all: still the recorded one.
        empty = tmp_path / "empty"
        empty.mkdir()
        assert run_cli("run", "--resume", str(out), env=env, cwd=empty).returncode == 0
        # --library given: that one (here, the changed library: refused as changed).
        changed = run_cli("run", "--library", str(elsewhere), "--resume", str(out), env=env)
        assert changed.returncode == 2 and "library changed" in changed.stderr
    assert {case(results_of(out), uid)["state"] for uid in NEGATIVES} == {"PASS"}

    shutil.rmtree(library)
    gone = run_cli("run", "--resume", str(out), env=fake_env(None, KEY), cwd=empty)
    lines = [line for line in gone.stderr.splitlines() if line.strip()]
    assert gone.returncode == 2 and len(lines) == 1, gone.stderr
    assert "plan.json" in lines[0] and str(library) in lines[0] and "no longer exists" in lines[0]
    assert "Traceback" not in gone.stdout + gone.stderr


def test_a_resume_without_a_key_keeps_what_finished(tmp_path: Path) -> None:
    # In the plan's order, one at a time: two finish, the third meets a spend limit, the fourth never starts.
    done_uids = ["dependency-upgrade-reviewer/evals/negative-cve-exploitability", NEGATIVES[1]]
    limited, never = NEGATIVES[2], f"{TRIAGE}/evals/positive-junit-in-workspace"
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        scripted(fake)
        fake.script(key_of(limited), spend_limit("tier"))
        first = run_cli("run", "--library", str(EXAMPLE), "--out", str(out), "--host", "api",
                        *case_args([*done_uids, limited, never]), "--repeats", "1", "--concurrency", "1",
                        env=fake_env(fake, KEY))
        assert first.returncode == 0, first.stdout + first.stderr
    planned = [c["uid"] for c in json.loads((out / "plan.json").read_text())["cases"]]
    assert planned == [*done_uids, limited, never]
    before = results_of(out)
    assert {case(before, uid)["state"] for uid in done_uids} == {"PASS"} and before["stop_reason"] == "spend-limit"

    keyless = run_cli("run", "--resume", str(out), env=fake_env(None, None))
    assert keyless.returncode == 0, keyless.stdout + keyless.stderr
    assert "no ANTHROPIC_API_KEY reached this resume" in keyless.stdout
    after = results_of(out)
    for uid in done_uids:  # the finished cases keep their result
        assert case(after, uid) == case(before, uid), uid
    assert case(after, limited)["state"] == "ERROR"  # its attempt finished (spend-limit): kept too
    untouched = case(after, never)
    assert (untouched["state"], untouched["reason"]) == ("UNRUN", "no-credentials")
    assert after["stop_reason"] == "no-credentials" and after["spend"]["usd"] == before["spend"]["usd"]


def test_a_run_made_without_a_key_runs_when_resumed_with_one(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        scripted(fake)
        keyless = run_cli("run", "--library", str(EXAMPLE), "--out", str(out), "--host", "api", *case_args(NEGATIVES),
                          "--repeats", "1", env=fake_env(fake, None))
        assert keyless.returncode == 0, keyless.stdout + keyless.stderr
        assert "Set ANTHROPIC_API_KEY" in keyless.stdout and f"--resume {out}" in keyless.stdout
        assert {case(results_of(out), uid)["reason"] for uid in NEGATIVES} == {"no-credentials"}
        assert fake.message_requests == []

        keyed = run_cli("run", "--resume", str(out), env=fake_env(fake, KEY))
        assert keyed.returncode == 0, keyed.stdout + keyed.stderr
        judged = [r for r in fake.message_requests if JUDGE_MATCH in json.dumps(r.body)]
    results = results_of(out)
    assert {case(results, uid)["state"] for uid in NEGATIVES} == {"PASS"}, [case(results, u) for u in NEGATIVES]
    assert len(attempts(out)) == len(NEGATIVES) and len(judged) == len(NEGATIVES)
    assert results["plan"]["judge_model"] is not None and results["plan"]["unrun_all"] is None
    assert json.loads((out / "plan.json").read_text())["unrun_all"] == "no-credentials"  # plan.json as planned


def test_a_resume_reads_again_what_the_run_was_given(tmp_path: Path) -> None:
    """A run given the repository reads the repository again (its routing set at evals/ is part of the library and
    of its content hash); one given a skills folder reads that folder; a plan from before read_from, its folder."""
    from runner.cli.options import recorded_library

    def planned(library: dict[str, str]) -> Path:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        (folder / "plan.json").write_text(json.dumps({"library": library}), encoding="utf-8")
        return folder

    root = {"root": str(EXAMPLE), "skills_dir": ".claude/skills"}
    assert recorded_library(planned({**root, "read_from": "root"})) == EXAMPLE
    assert recorded_library(planned({**root, "read_from": "skills_dir"})) == EXAMPLE / ".claude" / "skills"
    assert recorded_library(planned(root)) == EXAMPLE / ".claude" / "skills"
    assert (EXAMPLE / "evals" / "routing.json").is_file()  # what the first would miss
