"""Issue 6 end to end: a real PR in git -> select -> check run started -> run in the container -> publish to a
fake GitHub (which holds every request to GitHub's OpenAPI contract, runner/testing/github_contract.py).

Real parts only: a git repository made here, the runner image built from this repository's
Dockerfile on the real Docker daemon, the fake Messages API and the fake GitHub REST server on
127.0.0.1 (PyGithub talks to it over HTTP). The API key is a unique marker that must appear in no
request GitHub received, no file of the run folder and no log line.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from runner.testing.fake_anthropic import FakeAnthropic, text
from runner.testing.fake_github import FakeGitHub
from runner.testing.fake_judge import JUDGE_MATCH, verdicts
from tests.conftest import EXAMPLE, run_cli
from tests.helpers import git

KEY = "sk-ant-e2e-marker-7d41b9"
TOKEN = "ghs_e2e_token_marker_55aa"
BASE_IMAGE = os.environ.get("SKILL_EVALS_BASE_IMAGE", "skill-evals-base:local")


def docker_ready() -> bool:
    try:
        import docker
        client = docker.from_env()
        client.ping()
        client.images.get(BASE_IMAGE)
        return True
    except Exception:  # noqa: BLE001 - no daemon or no base image: the same answer
        return False


@pytest.fixture
def pr_repo(tmp_path: Path) -> tuple[Path, str, str]:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    skill_md = repo / ".claude" / "skills" / "migration-planner" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("Plan a database schema migration", "Plan a schema migration", 1))
    git(repo, "commit", "-q", "-am", "shorter description")
    return repo, base, git(repo, "rev-parse", "HEAD")


def test_pr_select_container_run_publish_twice(pr_repo: tuple[Path, str, str], tmp_path: Path) -> None:
    if not docker_ready():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have a Docker daemon and the {BASE_IMAGE} image (.ci/run sets them up)")
        pytest.skip(f"no Docker daemon or no {BASE_IMAGE} image here; .ci/run sets both up")
    repo, base, head = pr_repo
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "GITHUB_"))}
    env["SKILL_EVALS_BASE_IMAGE"] = BASE_IMAGE

    selected = run_cli("select", "--library", str(repo), "--tier", "pr", "--base", base, "--head", head, env=env)
    assert selected.returncode == 0, selected.stderr
    selection = json.loads(selected.stdout)
    assert selection["changed_skills"] == ["migration-planner"]
    reasons = {c["uid"]: c["why"] for c in selection["cases"]}
    assert any(uid.startswith("migration-planner/") and "changed" in why for uid, why in reasons.items())
    assert any(not uid.startswith("migration-planner/") and "neighbour of migration-planner" in why
               for uid, why in reasons.items())

    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "head": {"sha": head, "repo": {"full_name": "o/r"}},
                                                  "base": {"repo": {"full_name": "o/r"}}}}))
    summary = tmp_path / "summary.md"
    out = tmp_path / "run"
    gh_env = {**env, "GITHUB_REPOSITORY": "o/r", "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event),
              "GITHUB_SHA": head, "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_TOKEN": TOKEN, "GITHUB_RUN_ID": "31337"}
    with FakeAnthropic() as fake, FakeGitHub(token=TOKEN, repository="o/r") as github:
        gh_env["GITHUB_API_URL"] = github.url
        started = run_cli("publish", "--start", env=gh_env)
        assert started.returncode == 0, started.stderr
        check_run_id = json.loads(started.stdout)["check_run_id"]
        assert github.check_runs[check_run_id]["status"] == "in_progress"
        fake.script(JUDGE_MATCH, verdicts("PASS"))
        fake.default(text("A plain answer."))  # no skill fires: trigger cases of the PR's skills FAIL
        run_env = {**env, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.url, "CI": "true"}
        done = run_cli("run", "--container", "--library", str(repo), "--tier", "pr", "--base", base, "--head", head,
                       "--host", "api", "--repeats", "1", "--out", str(out), env=run_env,
                       timeout=1200)  # it builds the image and runs each tier in a container
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert KEY not in done.stdout + done.stderr
        results = json.loads((out / "results.json").read_text())
        assert {c["uid"] for c in results["cases"]} == set(reasons)
        failing = [c for c in results["cases"] if c["state"] == "FAIL"]
        assert failing, "the scripted fake fires nothing, so the PR skill's trigger cases fail"

        first = run_cli("publish", str(out), "--check-run-id", str(check_run_id), "--library", str(repo), env=gh_env)
        assert first.returncode == 0, first.stderr
        second = run_cli("publish", str(out), env=gh_env)
        assert second.returncode == 0, second.stderr
        requests = list(github.requests)

    check_runs = [r for r in requests if r.method == "POST" and r.path.endswith("/check-runs")]
    assert len(check_runs) == 1, "one check run per head SHA: started, completed, updated on the second publish"
    created = check_runs[0].body
    assert created["head_sha"] == head and created["name"] == "skill-evals" and created["status"] == "in_progress"
    assert created["details_url"].endswith("/o/r/actions/runs/31337")
    completed = [r for r in requests if r.method == "PATCH" and r.path.endswith(f"/check-runs/{check_run_id}")]
    assert completed and completed[0].body["status"] == "completed"
    conclusions = [r.body.get("conclusion") for r in requests if r.body and "conclusion" in r.body]
    assert conclusions and set(conclusions) == {"neutral"}, "advisory mode: failures give a neutral check"
    notes = [a for r in requests if r.body and r.body.get("output") for a in r.body["output"].get("annotations", [])]
    where = {(a["path"], a["start_line"]) for a in notes}
    assert {(c["file"], c["line"]) for c in failing} <= where
    comments = [r for r in requests if r.method == "POST" and r.path.endswith("/comments")]
    edits = [r for r in requests if r.method == "PATCH" and "/issues/comments/" in r.path]
    assert len(comments) == 1 and len(edits) == 1, "one comment, edited in place on the second run"
    assert summary.read_text().count("<!-- skill-evals-report -->") >= 1

    for request in requests:
        assert KEY not in json.dumps(request.body or {}) and KEY not in request.path
        assert TOKEN not in json.dumps(request.body or {})
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path
