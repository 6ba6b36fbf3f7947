"""The fake GitHub holds GitHub's own contract: what real GitHub would refuse, it refuses, so no test passes on it.

The contract is GitHub's REST description as Octokit publishes it (@octokit/openapi 23.0.2, MIT), cut down to
the operations skill-evals calls and vendored in runner/testing/contracts/ (scripts/extract_github_openapi.py), plus the
limits GitHub enforces beyond it: output.summary, output.text and a comment body count UTF-8 BYTES (65,535),
at most 50 annotations per request. Requests are sent with PyGithub over HTTP, as runner.publish.github sends them.
A FakeGitHub that refused a request fails the test that used it when it closes, unless the test expected it.
"""

from __future__ import annotations

import importlib.util
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from github import Auth, Github, GithubException

from runner.publish import github as gh_mod
from runner.testing.fake_github import FakeGitHub
from tests.report_fixtures import every_state

REPO = Path(__file__).resolve().parent.parent
SUBSET = REPO / "runner" / "testing" / "contracts" / "github-openapi-subset.json"
EXTRACTOR = REPO / "scripts" / "extract_github_openapi.py"
TOKEN = "ghs_contract_marker_31c7"
HEAD = "c" * 40
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


def client(gh: FakeGitHub) -> Any:
    return Github(base_url=gh.url, auth=Auth.Token(TOKEN), lazy=True, retry=None,
                  seconds_between_requests=None, seconds_between_writes=None).get_repo(gh.repository)


def refused(call: Any) -> dict[str, Any]:
    """GitHub's 422 answer to `call`, checked for GitHub's error shape."""
    with pytest.raises(GithubException) as caught:
        call()
    assert caught.value.status == 422, (caught.value.status, caught.value.data)
    data = caught.value.data
    assert data["message"] == "Validation Failed" and data["documentation_url"].startswith("https://docs.github.com/")
    assert data["errors"] and all({"resource", "field", "code"} <= set(e) for e in data["errors"]), data
    return data


def fields(data: dict[str, Any]) -> set[str]:
    return {e["field"] for e in data["errors"]}


# ---- what GitHub refuses, the fake refuses -------------------------------------------------------------------

def test_a_conclusion_github_does_not_know_is_refused() -> None:
    with FakeGitHub(token=TOKEN) as gh:
        gh.expect_rejections = True
        repo = client(gh)
        data = refused(lambda: repo.create_check_run(name="skill-evals", head_sha=HEAD, status="completed",
                                                     conclusion="advisory", completed_at=NOW))
        assert "conclusion" in fields(data) and not gh.check_runs
        made = repo.create_check_run(name="skill-evals", head_sha=HEAD, status="completed", conclusion="neutral",
                                     completed_at=NOW, output={"title": "t", "summary": "s"})
        assert gh.check_runs[made.id]["conclusion"] == "neutral"
        # Completing a check run needs its conclusion (the update's anyOf).
        data = refused(lambda: made.edit(status="completed", completed_at=NOW))
        assert data["errors"] and gh.check_runs[made.id]["status"] == "completed"
        assert len(gh.rejected) == 2


def test_bodies_are_limited_in_utf8_bytes_not_characters() -> None:
    with FakeGitHub(token=TOKEN) as gh:
        gh.expect_rejections = True
        repo = client(gh)
        cyrillic = "я" * 40_000  # 40,000 characters, 80,000 bytes
        data = refused(lambda: repo.create_check_run(name="skill-evals", head_sha=HEAD,
                                                     output={"title": "t", "summary": cyrillic}))
        assert "output.summary" in fields(data)
        data = refused(lambda: repo.create_check_run(name="skill-evals", head_sha=HEAD,
                                                     output={"title": "t", "summary": "s", "text": "🚀" * 16_384}))
        assert "output.text" in fields(data)
        issue = repo.get_issue(7)
        data = refused(lambda: issue.create_comment("日" * 30_000))  # 90,000 bytes
        assert "body" in fields(data) and not gh.comments
        # At the limit: 65,535 bytes, in ASCII or in 2-byte characters, is accepted.
        made = repo.create_check_run(name="skill-evals", head_sha=HEAD,
                                     output={"title": "t", "summary": "a" * 65_535, "text": "я" * 32_767 + "a"})
        comment = issue.create_comment("я" * 32_767 + "a")
        data = refused(lambda: comment.edit("я" * 32_768))  # 65,536 bytes
        assert gh.check_runs[made.id]["output"]["summary"] == "a" * 65_535
        assert gh.comments[comment.id]["body"] == "я" * 32_767 + "a"


def test_at_most_50_annotations_per_request_and_annotation_fields() -> None:
    note = {"path": "a.md", "start_line": 1, "end_line": 1, "annotation_level": "warning", "message": "m"}
    with FakeGitHub(token=TOKEN) as gh:
        gh.expect_rejections = True
        repo = client(gh)
        data = refused(lambda: repo.create_check_run(name="skill-evals", head_sha=HEAD, output={
            "title": "t", "summary": "s", "annotations": [note] * 51}))
        assert "output.annotations" in fields(data)
        data = refused(lambda: repo.create_check_run(name="skill-evals", head_sha=HEAD, output={
            "title": "t", "summary": "s", "annotations": [{**note, "annotation_level": "error"}]}))
        assert any(f.startswith("output.annotations") for f in fields(data))
        refused(lambda: repo.create_check_run(name="skill-evals", head_sha=HEAD, output={
            "title": "t", "summary": "s", "annotations": [{**note, "title": "x" * 256}]}))
        made = repo.create_check_run(name="skill-evals", head_sha=HEAD, output={
            "title": "t", "summary": "s", "annotations": [note] * 50})
        assert len(gh.annotations[made.id]) == 50


def test_required_fields_parameters_and_routes() -> None:
    with FakeGitHub(token=TOKEN) as gh:
        gh.expect_rejections = True
        repo = client(gh)
        # POST /check-runs without head_sha: PyGithub always sends it, so send the raw request.
        status, _, body = repo._requester.requestJson("POST", f"{repo.url}/check-runs", input={"name": "x"})
        assert status == 422 and "head_sha" in json.dumps(json.loads(body)["errors"])
        status, _, body = repo._requester.requestJson("GET", f"{repo.url}/commits/{HEAD}/check-runs",
                                                      parameters={"filter": "newest"})
        assert status == 422 and "filter" in json.dumps(json.loads(body)["errors"])
        status, _, _ = repo._requester.requestJson("GET", f"{repo.url}/check-runs/not-a-number")
        assert status == 404  # no operation has a check_run_id that is not an integer
        status, _, _ = repo._requester.requestJson("DELETE", f"{repo.url}/check-runs/12")
        assert status == 404  # not an operation of the contract
        status, _, _ = repo._requester.requestJson("PUT", f"{repo.url}/issues/comments/12", input={"body": "x"})
        assert status == 404


def test_only_the_app_that_made_a_check_run_may_change_it() -> None:
    """GitHub's rule, kept by the fake: another app's check run is listed (and by app_id) but refuses a PATCH."""
    with FakeGitHub(token=TOKEN) as gh:
        foreign = gh.add_check_run(HEAD, "skill-evals", app_id=4242)
        mine = gh.add_check_run(HEAD, "skill-evals")
        repo = client(gh)
        with pytest.raises(GithubException) as caught:
            repo.get_check_run(foreign["id"]).edit(status="completed", conclusion="neutral", completed_at=NOW)
        assert caught.value.status == 403
        assert caught.value.data["message"] == ("Invalid app_id `15368` - check run can only be modified by the GitHub "
                                                "App that created it.")
        assert foreign["status"] == "in_progress" and gh.rejected == []  # refused by rule, not by the contract
        repo.get_check_run(mine["id"]).edit(status="completed", conclusion="neutral", completed_at=NOW)
        assert mine["conclusion"] == "neutral"
        listed = repo.get_commit(HEAD).get_check_runs(check_name="skill-evals")
        assert [(r.id, r.app.id) for r in listed] == [(mine["id"], 15368), (foreign["id"], 4242)]
        status, _, body = repo._requester.requestJson("GET", f"{repo.url}/commits/{HEAD}/check-runs",
                                                      parameters={"app_id": 4242})
        assert status == 200 and [r["id"] for r in json.loads(body)["check_runs"]] == [foreign["id"]]


def test_a_refused_request_fails_the_test_that_made_it() -> None:
    """publish swallows GitHub's refusals into notes; the fake does not let a test pass on one."""
    with pytest.raises(AssertionError, match="refused 1 request"):
        with FakeGitHub(token=TOKEN) as gh:
            with pytest.raises(GithubException):
                client(gh).create_check_run(name="skill-evals", head_sha=HEAD, status="completed",
                                            conclusion="advisory", completed_at=NOW)


def test_every_request_of_a_full_publish_is_in_the_contract(tmp_path: Path) -> None:
    from runner.testing import github_contract

    results = every_state()
    cases = [c.model_copy(update={"file": f"lib/{c.skill}/evals/evals.json", "line": 10 + i})
             for i, c in enumerate(results.cases)]
    results = results.model_copy(update={"cases": cases * 20})
    with FakeGitHub(token=TOKEN) as gh:
        ctx = gh_mod.Context(api_url=gh.url, repository=gh.repository, event_name="pull_request", sha=HEAD,
                             head_sha=HEAD, pr_number=7, step_summary=tmp_path / "summary.md", run_id="42")
        fast = {"seconds_between_requests": None, "seconds_between_writes": None}
        started = gh_mod.start(ctx, TOKEN, **fast)
        outcome = gh_mod.publish(results, ctx, TOKEN, check_run_id=started.check_run_id, **fast)
        again = gh_mod.publish(results, ctx, TOKEN, **fast)
        assert outcome.notes == [] and again.notes == [] and started.notes == []
        # A second job on the commit: its start finds the check run and writes nothing but a probe.
        other = ctx.model_copy(update={"job": "other", "run_id": "43"})
        joined = gh_mod.start(other, TOKEN, **fast)
        assert joined.check_run_id == started.check_run_id and len(joined.notes) == 1
        assert gh_mod.publish(results, other, TOKEN, **fast).check_run_conclusion == "neutral"
        contract = github_contract.load()
        operations = set()
        for request in gh.requests:
            operation, problems = contract.check(request.method, request.path, request.query, request.raw)
            assert operation is not None and problems == [], (request.method, request.path, problems)
            operations.add(operation.operation_id)
        assert gh.rejected == []
    assert {"checks/create", "checks/update", "checks/get", "checks/list-for-ref", "checks/list-annotations",
            "issues/list-comments", "issues/create-comment", "issues/update-comment"} <= operations


# ---- the vendored subset is the pinned description's ------------------------------------------------------

def description_file() -> Path | None:
    base = Path(os.environ.get("SKILL_EVALS_OPENAPI_DIR") or Path.home() / ".cache" / "skill-evals-openapi")
    found = base / "node_modules" / "@octokit" / "openapi" / "generated" / "api.github.com.json"
    return found if found.is_file() else None


def extractor() -> Any:
    spec = importlib.util.spec_from_file_location("extract_github_openapi", EXTRACTOR)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_vendored_subset_is_the_pinned_descriptions() -> None:
    found = description_file()
    if found is None:
        where = "$SKILL_EVALS_OPENAPI_DIR or ~/.cache/skill-evals-openapi"
        if os.environ.get("CI"):
            pytest.fail(f"CI must have @octokit/openapi@23.0.2 under {where} (.ci/run installs it)")
        pytest.skip(f"@octokit/openapi@23.0.2 is not installed under {where} (.ci/run installs it; `npm install "
                    "--prefix ~/.cache/skill-evals-openapi @octokit/openapi@23.0.2` here): the vendored subset is "
                    "not compared with the full description")
    module = extractor()
    fresh = module.render(module.extract(json.loads(found.read_text(encoding="utf-8"))))
    assert fresh == SUBSET.read_text(encoding="utf-8"), \
        "runner/testing/contracts/github-openapi-subset.json drifted: re-run scripts/extract_github_openapi.py"


def test_the_subset_names_its_source_and_license() -> None:
    subset = json.loads(SUBSET.read_text(encoding="utf-8"))
    source = subset["x-source"]
    assert source["package"] == "@octokit/openapi@23.0.2" and source["license"] == "MIT"
    license_text = (SUBSET.parent / source["license_file"]).read_text(encoding="utf-8")
    assert source["copyright"] in license_text and "MIT License" in license_text
    module = extractor()
    assert {(m, p) for p, methods in subset["paths"].items() for m in methods} == set(module.OPERATIONS)
