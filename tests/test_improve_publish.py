"""`skill-evals publish --improve DIR`: the description suggestion on a pull request (runner.publish.suggestion).

PyGithub over real HTTP against runner/testing/fake_github.py, which validates every request against GitHub's OpenAPI
description (the vendored subset) and refuses a line comment outside the pull request's diff, as GitHub does. The
improve.json is built from the Improve model (what `skill-evals improve` writes); SKILL.md lives in a real git
repository, in a subfolder, so the comment's path must be joined to the repository root.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from runner.improve.model import Candidate, HeldOutComparison, Improve, Outcome, Score, Spend
from runner.improve.skillmd import description_line, rewrite_description
from runner.publish import suggestion
from runner.publish.github import Context
from runner.testing import github_contract
from runner.testing.fake_github import FakeGitHub
from tests.conftest import run_cli

TOKEN = "ghs_IMPROVE-MARKER-5d21e0"
HEAD = "d" * 40
PR = 11
REPO_ROOT = Path(__file__).resolve().parent.parent
SKILL_MD = ".claude/skills/demo/SKILL.md"  # from the library root
IN_REPO = "lib/" + SKILL_MD  # from the repository root: the library is the folder lib/
OLD = "Triage test reports."
NEW = "Triage failing test reports: group failures by cause, flag flaky tests, and name the suspect commit."
ONE_LINE = f"---\nname: demo\ndescription: {OLD}\nlicense: MIT\n---\n\n# Demo\n\nBody.\n"
FOLDED = "---\nname: demo\ndescription: >-\n  Triage test\n  reports.\nlicense: MIT\n---\n\n# Demo\n\nBody.\n"


def library(tmp_path: Path, text: str = ONE_LINE) -> Path:
    """A git repository holding the library in lib/; returns the library root."""
    repo = tmp_path / "repo"
    (repo / "lib" / ".claude" / "skills" / "demo").mkdir(parents=True)
    (repo / "lib" / SKILL_MD).write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo / "lib"


def score(passed: int, failed: int, run_dir: str) -> Score:
    from runner.core.quorum import wilson_interval

    decided = passed + failed
    return Score(run_dir=run_dir, passed=passed, failed=failed, errored=0, unrun=0,
                 rate=passed / decided if decided else None, wilson_95=wilson_interval(passed, decided),
                 spend_usd=0.5, cases=[])


def record(verdict: str | None = "better", text: str = ONE_LINE) -> Improve:
    """What `skill-evals improve` writes when r1c2 was put to the held-out test with `verdict`."""
    current = Candidate(id="current", round=0, description=OLD, chars=len(OLD), state="evaluated",
                        train=score(3, 9, "runs/r0-current-train"))
    chosen = Candidate(id="r1c2", round=1, description=NEW, chars=len(NEW), state="evaluated",
                       train=score(12, 0, "runs/r1c2-train"))
    tested = {"better": (score(2, 10, "runs/test-current"), score(12, 0, "runs/test-r1c2")),
              "no better": (score(6, 6, "runs/test-current"), score(8, 4, "runs/test-r1c2")),
              "worse": (score(12, 0, "runs/test-current"), score(2, 10, "runs/test-r1c2")),
              "undecided": (score(6, 6, "runs/test-current"), score(8, 4, "runs/test-r1c2"))}
    comparison = None
    if verdict is not None:
        now, then = tested[verdict]
        comparison = HeldOutComparison(candidate="r1c2", current=now, proposed=then, verdict=verdict,  # type: ignore[arg-type]
                                       why=f"candidate vs current: {verdict}")
    diff = "--- a/x\n+++ b/x\n" + "".join(f"-{line}\n" for line in text.splitlines()[2:3]) + \
        f"+{description_line(NEW)}\n"
    return Improve(skill="demo", skill_md=SKILL_MD, current_description=OLD, host="api", model="claude-sonnet-4-5",
                   proposer_model="claude-opus-4-1", repeats=3, quorum=2, rounds_max=3, candidates_per_round=3,
                   listing_budget_chars=8000, seed=7, holdout=0.4, train=[f"t{i}" for i in range(12)],
                   test=[f"h{i}" for i in range(12)], split_by_kind={"trigger": (12, 12)}, neighbours=["other"],
                   neighbour_cases=["other/evals/a"], candidates=[current, chosen], test_comparison=comparison,
                   spend=Spend(cap_usd=5.0, usd=2.5),
                   outcome=Outcome(state="DONE", verdict=verdict, chosen="r1c2" if verdict else None,  # type: ignore[arg-type]
                                   summary="r1c2 on the held-out test cases"),
                   diff=diff if verdict else None)


def patch_around(first: int, last: int) -> str:
    """A pull request patch whose one hunk covers new-file lines first..last."""
    count = last - first + 1
    return f"@@ -{first},{count} +{first},{count} @@\n" + "".join(f" line {n}\n" for n in range(first, last + 1))


def context(gh: FakeGitHub, tmp_path: Path) -> Context:
    return Context(api_url=gh.url, repository=gh.repository, event_name="pull_request", sha="e" * 40,
                   head_sha=HEAD, pr_number=PR, step_summary=tmp_path / "summary.md")


def publish(rec: Improve, ctx: Context, root: Path) -> suggestion.SuggestionOutcome:
    return suggestion.publish_suggestion(rec, ctx, TOKEN, root, path_prefix="lib/", seconds_between_requests=None,
                                         seconds_between_writes=None)


def assert_in_contract(gh: FakeGitHub) -> set[str]:
    """Every request the publisher sent is an operation of GitHub's description, valid against it."""
    contract = github_contract.load()
    seen = set()
    for request in gh.requests:
        operation, problems = contract.check(request.method, request.path, request.query, request.raw)
        assert operation is not None and problems == [], (request.method, request.path, problems)
        seen.add(operation.operation_id)
        assert TOKEN not in request.raw and request.headers.get("Authorization") == f"token {TOKEN}"
    assert gh.rejected == []
    return seen


def suggested(body: str) -> list[str]:
    """The lines of the ```suggestion block in a comment body."""
    lines = body.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith("suggestion") and line.startswith("```"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i] == lines[start][: -len("suggestion")])
    return lines[start + 1:end]


# ---- a better candidate: one review comment, updated in place ---------------------------------------------------

def test_a_better_candidate_is_one_review_comment_with_a_suggestion_then_updated_in_place(tmp_path: Path) -> None:
    root = library(tmp_path)
    with FakeGitHub(token=TOKEN) as gh:
        gh.add_pull_file(PR, IN_REPO, patch_around(1, 9))
        gh.add_review_comment(PR, "Nice change", IN_REPO, 3)  # a reviewer's, left alone
        ctx = context(gh, tmp_path)
        first = publish(record(), ctx, root)
        assert (first.posted, first.action, first.notes) == ("review-comment", "created", [])
        mine = [c for c in gh.review_comments_on(PR) if c["body"].startswith(suggestion.marker("demo"))]
        assert len(mine) == 1 and len(gh.review_comments_on(PR)) == 2 and not gh.comments
        made = mine[0]
        assert (made["path"], made["line"], made["side"], made["start_line"], made["commit_id"]) == \
            (IN_REPO, 3, "RIGHT", None, HEAD)
        # The suggestion replaces line 3 of SKILL.md, the description, with the candidate's one line.
        assert ONE_LINE.splitlines()[2] == f"description: {OLD}"
        assert suggested(made["body"]) == [description_line(NEW)]
        assert rewrite_description(ONE_LINE, NEW).splitlines()[2] == description_line(NEW)
        # The figures: train and held-out test with their Wilson intervals.
        assert "| current | 3/12 [0.09, 0.53] | 2/12 [0.05, 0.45] |" in made["body"]
        assert "| r1c2 | 12/12 [0.76, 1.00] | 12/12 [0.76, 1.00] |" in made["body"]
        assert "never commits or pushes" in made["body"]
        assert {"pulls/list-files", "pulls/list-review-comments", "pulls/create-review-comment"} <= assert_in_contract(gh)

        # The second publish edits the same comment (PATCH), never a second one.
        before = len(gh.requests)
        second = publish(record(), ctx, root)
        assert (second.posted, second.action, second.comment_id) == ("review-comment", "updated", first.comment_id)
        writes = [(r.method, r.path) for r in gh.requests[before:] if r.method != "GET"]
        assert writes == [("PATCH", f"/repos/acme/skills/pulls/comments/{first.comment_id}")]
        assert len(gh.review_comments_on(PR)) == 2
        assert "pulls/update-review-comment" in assert_in_contract(gh)
        assert not any(r.method in ("PUT", "DELETE") or "/git/" in r.path or "/contents/" in r.path
                       for r in gh.requests)  # never a commit, never a push
    summary = ctx.step_summary.read_text(encoding="utf-8")  # type: ignore[union-attr]
    assert summary.count("skill-evals improve demo:") == 2 and "lines 3–3 was updated" in summary


def test_a_description_over_several_lines_is_a_multi_line_suggestion(tmp_path: Path) -> None:
    root = library(tmp_path, FOLDED)
    with FakeGitHub(token=TOKEN) as gh:
        gh.add_pull_file(PR, IN_REPO, patch_around(1, 9))
        outcome = publish(record(text=FOLDED), context(gh, tmp_path), root)
        assert (outcome.posted, outcome.lines) == ("review-comment", (3, 5))
        (made,) = gh.review_comments_on(PR)
        assert (made["start_line"], made["line"], made["start_side"], made["side"]) == (3, 5, "RIGHT", "RIGHT")
        assert suggested(made["body"]) == [description_line(NEW)]
        assert rewrite_description(FOLDED, NEW).splitlines()[2:4] == [description_line(NEW), "license: MIT"]
        assert_in_contract(gh)


def test_backticks_in_the_description_cannot_close_the_suggestion_block(tmp_path: Path) -> None:
    root = library(tmp_path)
    rec = record()
    rec.candidates[1].description = "Use for ``` fenced logs and `inline` errors."
    with FakeGitHub(token=TOKEN) as gh:
        gh.add_pull_file(PR, IN_REPO, patch_around(1, 9))
        publish(rec, context(gh, tmp_path), root)
        (made,) = gh.review_comments_on(PR)
        assert "````suggestion" in made["body"]
        assert suggested(made["body"]) == [description_line(rec.candidates[1].description)]


# ---- the line is not in the pull request's diff: a PR comment with the diff ---------------------------------------

def test_a_line_outside_the_diff_falls_back_to_a_pr_comment_with_the_diff(tmp_path: Path) -> None:
    root = library(tmp_path)
    with FakeGitHub(token=TOKEN) as gh:
        gh.add_pull_file(PR, IN_REPO, patch_around(7, 9))  # the PR changed the body, not the frontmatter
        ctx = context(gh, tmp_path)
        first = publish(record(), ctx, root)
        assert (first.posted, first.action) == ("pr-comment", "created")
        assert any("not in one hunk of this pull request's diff" in n for n in first.notes)
        assert not gh.review_comments and not any(r.method == "POST" and "/pulls/" in r.path for r in gh.requests)
        (comment,) = gh.comments_on(PR)
        assert comment["body"].startswith(suggestion.marker("demo")) and "```diff" in comment["body"]
        assert f"+{description_line(NEW)}" in comment["body"]
        second = publish(record(), ctx, root)
        assert (second.action, second.comment_id) == ("updated", first.comment_id) and len(gh.comments_on(PR)) == 1
        assert_in_contract(gh)
    assert "as a PR comment" in ctx.step_summary.read_text(encoding="utf-8")  # type: ignore[union-attr]


def test_the_fake_refuses_a_line_comment_outside_the_diff_as_github_does(tmp_path: Path) -> None:
    """Why the publisher looks at the patch first: GitHub answers 422 to a line outside the diff."""
    from github import Auth, Github, GithubException

    with FakeGitHub(token=TOKEN) as gh:
        gh.expect_rejections = True
        gh.add_pull_file(PR, IN_REPO, patch_around(7, 9))
        pull = Github(base_url=gh.url, auth=Auth.Token(TOKEN), lazy=True, retry=None, seconds_between_requests=None,
                      seconds_between_writes=None).get_repo(gh.repository).get_pull(PR)
        with pytest.raises(GithubException) as caught:
            pull.create_review_comment("x", HEAD, IN_REPO, line=3, side="RIGHT")
        assert caught.value.status == 422 and "part of the diff" in json.dumps(caught.value.data)
        with pytest.raises(GithubException):
            pull.create_review_comment("x", HEAD, IN_REPO, line=8, side="RIGHT", start_line=3, start_side="RIGHT")
        assert pull.create_review_comment("x", HEAD, IN_REPO, line=8, side="RIGHT").id in gh.review_comments


# ---- anything but better posts nothing ----------------------------------------------------------------------------

@pytest.mark.parametrize("verdict", ["no better", "worse", "undecided", None])
def test_any_other_verdict_posts_nothing_and_the_summary_says_why(tmp_path: Path, verdict: str | None) -> None:
    root = library(tmp_path)
    with FakeGitHub(token=TOKEN) as gh:
        gh.add_pull_file(PR, IN_REPO, patch_around(1, 9))
        ctx = context(gh, tmp_path)
        outcome = publish(record(verdict), ctx, root)
        # It looks for an earlier suggestion to withdraw (GETs only); with none there, it writes nothing.
        assert gh.writes() == [] and outcome.posted == "nothing" and outcome.action == "skipped"
        assert outcome.withdrawn == []
    summary = ctx.step_summary.read_text(encoding="utf-8")  # type: ignore[union-attr]
    assert "no suggestion was posted" in summary
    assert (repr(verdict) in summary) if verdict else ("none was better on train" in summary)


def test_a_skill_md_that_changed_since_improve_posts_nothing(tmp_path: Path) -> None:
    root = library(tmp_path, ONE_LINE.replace(OLD, "Something the author wrote since."))
    with FakeGitHub(token=TOKEN) as gh:
        gh.add_pull_file(PR, IN_REPO, patch_around(1, 9))
        outcome = publish(record(), context(gh, tmp_path), root)
        assert gh.writes() == [] and outcome.posted == "nothing"
        assert any("no longer carries the description" in n for n in outcome.notes)


# ---- a suggestion that is no longer true is withdrawn, never deleted -------------------------------------------------

def assert_withdrawn(body: str, why: str) -> None:
    """The comment still carries the marker (a later `better` finds it again), says it is withdrawn and why, and holds
    no suggestion block, so it cannot be accepted in one click."""
    assert body.startswith(suggestion.marker("demo")) and "withdrawn" in body and why in body
    assert "suggestion" not in [line.lstrip("`") for line in body.splitlines() if line.startswith("```")]
    assert description_line(NEW) not in body


@pytest.mark.parametrize("later", ["no better", "worse", "undecided", None, "UNRUN"])
def test_a_later_verdict_that_is_not_better_withdraws_the_earlier_review_comment(tmp_path: Path,
                                                                                 later: str | None) -> None:
    root = library(tmp_path)
    with FakeGitHub(token=TOKEN) as gh:
        gh.add_pull_file(PR, IN_REPO, patch_around(1, 9))
        gh.add_review_comment(PR, "Nice change", IN_REPO, 3)  # a reviewer's, left alone
        ctx = context(gh, tmp_path)
        first = publish(record(), ctx, root)
        assert first.posted == "review-comment"
        if later == "UNRUN":  # the later improve found nothing at all (no key, the kill switch, no cap)
            rec = record(None)
            rec.outcome = Outcome(state="UNRUN", reason="no-credentials", summary="nothing ran")
        else:
            rec = record(later)
        before = len(gh.requests)
        outcome = publish(rec, ctx, root)
        assert (outcome.posted, outcome.action) == ("nothing", "updated")
        assert outcome.withdrawn == [first.comment_url]
        # Edited in place (PATCH), never deleted; the reviewer's comment untouched.
        writes = [(r.method, r.path) for r in gh.requests[before:] if r.method != "GET"]
        assert writes == [("PATCH", f"/repos/acme/skills/pulls/comments/{first.comment_id}")]
        assert len(gh.review_comments_on(PR)) == 2
        mine = gh.review_comments[first.comment_id]
        why = {"no better": "'no better'", "worse": "'worse'", "undecided": "'undecided'",
               None: "none was better on train", "UNRUN": "improve ended UNRUN"}[later]
        assert_withdrawn(mine["body"], why)
        assert any(c["body"] == "Nice change" for c in gh.review_comments_on(PR))
        # A second publish with the same verdict writes nothing more (already withdrawn, for the same reason).
        again = len(gh.requests)
        assert publish(rec, ctx, root).withdrawn == [] and [r for r in gh.requests[again:] if r.method != "GET"] == []
        # A later `better` brings the suggestion back in the same comment.
        back = publish(record(), ctx, root)
        assert (back.action, back.comment_id) == ("updated", first.comment_id)
        assert suggested(gh.review_comments[first.comment_id]["body"]) == [description_line(NEW)]
        assert_in_contract(gh)
    summary = ctx.step_summary.read_text(encoding="utf-8")  # type: ignore[union-attr]
    assert "the earlier suggestion" in summary and "was withdrawn" in summary


def test_a_withdrawn_pr_comment_loses_its_diff(tmp_path: Path) -> None:
    """The fallback PR comment (the line was not in the diff) is withdrawn the same way."""
    root = library(tmp_path)
    with FakeGitHub(token=TOKEN) as gh:
        gh.add_pull_file(PR, IN_REPO, patch_around(7, 9))
        ctx = context(gh, tmp_path)
        first = publish(record(), ctx, root)
        assert first.posted == "pr-comment"
        outcome = publish(record("worse"), ctx, root)
        assert outcome.withdrawn == [first.comment_url] and outcome.action == "updated"
        (comment,) = gh.comments_on(PR)
        assert_withdrawn(comment["body"], "'worse'") and "```diff" not in comment["body"]
        assert_in_contract(gh)


def test_a_description_the_author_changed_since_withdraws_the_suggestion(tmp_path: Path) -> None:
    """The suggestion would replace text the author has since rewritten: withdrawn, not left to be accepted."""
    root = library(tmp_path)
    with FakeGitHub(token=TOKEN) as gh:
        gh.add_pull_file(PR, IN_REPO, patch_around(1, 9))
        ctx = context(gh, tmp_path)
        first = publish(record(), ctx, root)
        (root / SKILL_MD).write_text(ONE_LINE.replace(OLD, "Something the author wrote since."), encoding="utf-8")
        outcome = publish(record(), ctx, root)
        assert outcome.withdrawn == [first.comment_url]
        assert_withdrawn(gh.review_comments[first.comment_id]["body"], "no longer carries the description")


# ---- the command, and the token ---------------------------------------------------------------------------------

def cli_env(gh: FakeGitHub, tmp_path: Path) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": PR, "head": {"sha": HEAD, "repo": {
        "full_name": gh.repository}}, "base": {"repo": {"full_name": gh.repository}}}}), encoding="utf-8")
    return {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "ANTHROPIC_"))} | {
        "GITHUB_API_URL": gh.url, "GITHUB_REPOSITORY": gh.repository, "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event), "GITHUB_SHA": "e" * 40, "GITHUB_TOKEN": TOKEN,
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "PYTHONPATH": str(REPO_ROOT)}


def test_the_cli_posts_the_suggestion_and_never_shows_the_token(tmp_path: Path) -> None:
    root = library(tmp_path)
    better, worse = tmp_path / "improve-better", tmp_path / "improve-worse"
    for folder, rec in ((better, record()), (worse, record("worse"))):
        folder.mkdir()
        (folder / "improve.json").write_text(rec.model_dump_json(indent=2), encoding="utf-8")
    with FakeGitHub(token=TOKEN) as gh:
        gh.add_pull_file(PR, IN_REPO, patch_around(1, 9))
        env = cli_env(gh, tmp_path)
        done = run_cli("publish", "--improve", str(better), "--improve", str(worse), "--library", str(root), env=env)
        assert done.returncode == 0, done.stderr
        outcomes = json.loads(done.stdout)
        assert [(o["skill"], o["posted"], o["path"]) for o in outcomes] == \
            [("demo", "review-comment", IN_REPO), ("demo", "nothing", None)]
        assert len(gh.review_comments_on(PR)) == 1
        assert_in_contract(gh)
        # A token that cannot write: GitHub's 403 becomes a note, without the token in it.
        gh.deny_writes = 403
        refused = run_cli("publish", "--improve", str(better), "--library", str(root), env=env)
        assert refused.returncode == 0 and "pull-requests: write" in refused.stdout
        usage = run_cli("publish", str(tmp_path), "--improve", str(better), env=env)
        assert usage.returncode == 2 and "takes no RUN_DIR" in usage.stderr
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    for text in (done.stdout, done.stderr, refused.stdout, refused.stderr, summary):
        assert TOKEN not in text


# ---- the action's input ---------------------------------------------------------------------------------------------

def test_the_action_has_an_improve_input_off_by_default_and_documented() -> None:
    action = yaml.safe_load((REPO_ROOT / "action.yml").read_text(encoding="utf-8"))
    spec = action["inputs"]["improve"]
    assert spec["default"] == "false" and "suggestion" in spec["description"]
    docs = (REPO_ROOT / "docs" / "github-action.md").read_text(encoding="utf-8")
    assert "| `improve` | `false` |" in docs
    run_step = next(s for s in action["runs"]["steps"] if s.get("id") == "run")
    publish_step = next(s for s in action["runs"]["steps"] if s.get("id") == "publish")
    # The key stays in the run step and the token in the publish step: improve runs beside the run, under its cap,
    # and its suggestion is published with the results.
    assert run_step["env"]["IMPROVE"] == "${{ inputs.improve }}" and "GITHUB_TOKEN" not in run_step["env"]
    assert publish_step["env"]["IMPROVE"] == "${{ inputs.improve }}" and "ANTHROPIC_API_KEY" not in publish_step["env"]
