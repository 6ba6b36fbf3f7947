"""Publishing to GitHub: PyGithub over real HTTP against runner/testing/fake_github.py (no mocks).

Check run (one per head SHA, updated in place), annotations in batches of 50, one PR comment found
by the hidden marker and edited in place, the job summary, the advisory / required conclusions,
fork and permission failures, and the token never leaving the Authorization header.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from runner.core.states import AGAINST, BROKEN, NOT_DECIDED
from runner.plan.quarantine import QuarantineEntry
from runner.publish import github as gh_mod
from runner.publish import lanes, rules
from runner.publish.github import Context, PublishOutcome, publish
from runner.publish.rules import conclusion
from runner.report import markdown
from runner.results.build import CaseResult, Results
from runner.testing.fake_github import FakeGitHub
from tests.conftest import EXAMPLE, run_cli
from tests.report_fixtures import assemble, every_state, large

TOKEN = "ghs_TOKEN-MARKER-7f3a9c"
HEAD = "a" * 40
MERGE = "b" * 40
PR = 7
FAST = {"seconds_between_requests": None, "seconds_between_writes": None}


def placed(results: Results) -> Results:
    """Give every case an eval file and a line (the report fixtures leave them empty)."""
    cases = [c.model_copy(update={"file": f".claude/skills/{c.skill}/evals/evals.json", "line": 10 + i})
             for i, c in enumerate(results.cases)]
    return results.model_copy(update={"cases": cases})


def failing(n: int) -> Results:
    return assemble([CaseResult(uid=f"s/evals/fail-{i:03d}", skill="s", file="s/evals/evals.json", line=i + 1,
                                kind="trigger", target="s", state="FAIL", losses=2, repeats_run=2, repeats_planned=3,
                                quorum=2) for i in range(n)])


def passing(n: int = 3, unrun: int = 0) -> Results:
    cases = [CaseResult(uid=f"s/evals/ok-{i}", skill="s", file="s/evals/evals.json", line=i + 1, kind="trigger",
                        target="s", state="PASS", wins=2, repeats_run=2, repeats_planned=3, quorum=2)
             for i in range(n)]
    cases += [CaseResult(uid=f"s/evals/unrun-{i}", skill="s", kind="trigger", target="s", state="UNRUN",
                         reason="budget-cap", repeats_planned=3, quorum=2) for i in range(unrun)]
    return assemble(cases, spend=0.42)


def context(gh: FakeGitHub, tmp_path: Path, **update: object) -> Context:
    ctx = Context(api_url=gh.url, repository=gh.repository, event_name="pull_request", sha=MERGE, head_sha=HEAD,
                  pr_number=PR, step_summary=tmp_path / "step_summary.md")
    return ctx.model_copy(update=update)


def run(results: Results, ctx: Context, token: str | None = TOKEN, **kwargs: object) -> PublishOutcome:
    return publish(results, ctx, token, **FAST, **kwargs)


def assert_token_kept_secret(gh: FakeGitHub, outcome: PublishOutcome, ctx: Context) -> None:
    for request in gh.requests:
        assert TOKEN not in request.raw and TOKEN not in request.path
        assert request.headers.get("Authorization") == f"token {TOKEN}"
        assert all(TOKEN not in v for k, v in request.headers.items() if k != "Authorization")
    assert TOKEN not in outcome.model_dump_json() and TOKEN not in ctx.model_dump_json()
    if ctx.step_summary and ctx.step_summary.exists():
        assert TOKEN not in ctx.step_summary.read_text(encoding="utf-8")


# ---- the first and the second publish for one commit ---------------------------------------------------

def test_first_publish_then_second_updates_the_same_check_run_and_comment(tmp_path: Path) -> None:
    results = placed(every_state())
    with FakeGitHub(token=TOKEN) as gh:
        # Already on the PR: someone's comment quoting the marker (not at the start), an unrelated one,
        # and the workflow job's own check run, which shares the name but is not ours.
        gh.add_comment(PR, "Why does " + markdown.MARKER + " show up?")
        gh.add_comment(PR, "LGTM")
        job_run = gh.add_check_run(HEAD, "skill-evals")
        ctx = context(gh, tmp_path)

        first = run(results, ctx)
        assert first.conclusion == "neutral" and first.check_run_action == "created"
        assert first.title == "PASS 1 · FAIL 2 · ERROR 1 · JUDGE-ERROR 1 · QUARANTINED 1 · UNRUN 8 · $1.23 of $10.00"
        ours = [r for r in gh.check_runs.values() if r["external_id"] == gh_mod.EXTERNAL_ID]
        assert len(ours) == 1 and ours[0]["id"] == first.check_run_id
        run_json = ours[0]
        assert (run_json["name"], run_json["head_sha"], run_json["status"], run_json["conclusion"]) == \
            ("skill-evals", HEAD, "completed", "neutral")
        assert run_json["output"]["title"] == first.title
        rollup = markdown.render(results, limit=65_000)
        assert run_json["output"]["summary"] == rollup and rollup.startswith(markdown.MARKER)
        assert job_run["status"] == "in_progress" and not gh.annotations[job_run["id"]]  # untouched

        # Annotations at each FAIL / ERROR / JUDGE-ERROR case's eval file and line.
        sent = {a["title"]: a for a in gh.annotations[first.check_run_id]}
        expected = {c.uid: c for c in results.cases if c.state in AGAINST}
        assert first.annotations_sent == len(sent) == len(expected) == 4
        levels = {"FAIL": "failure", "ERROR": "warning", "JUDGE-ERROR": "warning"}
        for uid, case in expected.items():
            note = sent[f"skill-evals {case.state}: {uid}"]
            assert (note["path"], note["start_line"], note["end_line"]) == (case.file, case.line, case.line)
            assert note["annotation_level"] == levels[case.state]
            assert note["message"].startswith(f"{case.state}: {uid}")
        assert "api-error: HTTP 500" in sent["skill-evals ERROR: beta/evals/negative-api-down"]["message"]

        # One comment with the marker, created; the others left alone.
        assert first.comment_action == "created"
        mine = [c for c in gh.comments_on(PR) if c["body"].startswith(markdown.MARKER)]
        assert len(mine) == 1 and mine[0]["id"] == first.comment_id
        assert mine[0]["body"].startswith(rollup) and "neutral" in mine[0]["body"]
        assert len(gh.comments_on(PR)) == 3

        # Job summary appended.
        assert first.summary_written and rollup.rstrip() in ctx.step_summary.read_text(encoding="utf-8")

        # Second publish, same SHA: the same check run and the same comment, edited in place.
        before = len(gh.requests)
        second = run(results, ctx)
        assert second.check_run_id == first.check_run_id and second.check_run_action == "updated"
        assert second.comment_id == first.comment_id and second.comment_action == "updated"
        assert len(gh.check_runs) == 2 and len(gh.comments_on(PR)) == 3
        writes = [(r.method, r.path) for r in gh.requests[before:] if r.method != "GET"]
        assert writes == [("PATCH", f"/repos/acme/skills/check-runs/{first.check_run_id}"),
                          ("PATCH", f"/repos/acme/skills/issues/comments/{first.comment_id}")]
        # GitHub appends annotations on every update: the ones already there are not sent again.
        assert second.annotations_sent == 0 and len(gh.annotations[first.check_run_id]) == 4
        assert second.notes == []
        assert ctx.step_summary.read_text(encoding="utf-8").count(markdown.MARKER) == 2

        assert_token_kept_secret(gh, second, ctx)


def test_an_update_sends_new_annotations_and_says_how_many_old_ones_no_longer_apply(tmp_path: Path) -> None:
    with FakeGitHub(token=TOKEN) as gh:
        ctx = context(gh, tmp_path)
        first = run(failing(3), ctx)
        fixed = failing(3)
        cases = [fixed.cases[0].model_copy(update={"state": "PASS", "losses": 0, "wins": 2}), *fixed.cases[1:],
                 fixed.cases[0].model_copy(update={"uid": "s/evals/fail-new", "line": 99})]
        second = run(assemble(cases), ctx)
        assert second.check_run_id == first.check_run_id
        assert second.annotations_sent == 1 and len(gh.annotations[first.check_run_id]) == 4
        assert any("1 annotation(s) from an earlier publish" in n for n in second.notes)
        assert "no longer apply" in gh.check_runs[first.check_run_id]["output"]["text"]


# ---- annotations in batches ------------------------------------------------------------------------------

def test_120_failing_cases_are_annotated_in_three_batches_on_one_check_run(tmp_path: Path) -> None:
    results = failing(120)
    with FakeGitHub(token=TOKEN) as gh:
        ctx = context(gh, tmp_path)
        outcome = run(results, ctx)
        calls = [r for r in gh.requests if r.path.endswith("/check-runs") and r.method == "POST"
                 or r.method == "PATCH" and "/check-runs/" in r.path]
        sizes = [len(r.body["output"].get("annotations", [])) for r in calls]
        assert [r.method for r in calls] == ["POST", "PATCH", "PATCH"] and sizes == [50, 50, 20]
        assert all(r.body["output"]["title"] == outcome.title and r.body["output"]["summary"] for r in calls)
        assert outcome.annotations_sent == 120 and len(gh.check_runs) == 1
        assert [a["start_line"] for a in gh.annotations[outcome.check_run_id]] == list(range(1, 121))
        assert gh.check_runs[outcome.check_run_id]["conclusion"] == "neutral"  # advisory: never failure


def test_a_2000_case_run_fits_githubs_limits(tmp_path: Path) -> None:
    results = placed(large(2000))
    with FakeGitHub(token=TOKEN) as gh:  # the fake answers 422 over 65,535 characters or 50 annotations
        outcome = run(results, context(gh, tmp_path))
        assert outcome.notes == [] and outcome.comment_action == "created"
        assert outcome.annotations_sent == 1200 == len(gh.annotations[outcome.check_run_id])
        assert all(len(r.raw) < 200_000 for r in gh.writes())


def non_ascii(n: int = 1600) -> Results:
    """n cases over 160 skills named in Cyrillic, CJK and emoji, with ids and assertion texts likewise: every
    character takes 2 to 4 bytes in UTF-8, so a report that fits 65,535 characters can be twice as many bytes."""
    cases = []
    states = ("FAIL", "ERROR", "JUDGE-ERROR", "PASS", "UNRUN")
    for i in range(n):
        state = states[i % len(states)]
        skill = f"навык-{i % 160:03d}-技能-🚀"
        cases.append(CaseResult(
            uid=f"{skill}/evals/случай-{i:04d}-测试-✅", skill=skill, file=f".claude/skills/{skill}/evals/evals.json",
            line=i + 1, kind="trigger", target=skill, state=state, reason="budget-cap" if state == "UNRUN" else None,
            losses=2 if state == "FAIL" else 0, errors=3 if state in BROKEN else 0,
            repeats_run=0 if state == "UNRUN" else 2, repeats_planned=3, quorum=2,
            fired_instead={"другой-навык-🎯": 1} if state == "FAIL" else {}))
    return assemble(cases, spend=3.21)


def test_a_non_ascii_1600_case_report_fits_githubs_byte_limits(tmp_path: Path) -> None:
    """GitHub counts output.summary, output.text and a comment body in bytes (65,535): a report cut to 65,000
    characters of Cyrillic, CJK and emoji is refused. Every body sent must fit in UTF-8 bytes, still says it
    was shortened, and still ends with what the comment always ends with."""
    results = non_ascii(1600)
    with FakeGitHub(token=TOKEN) as gh:
        ctx = context(gh, tmp_path)
        outcome = run(results, ctx)
        bodies = []
        for request in gh.writes():
            body = request.body or {}
            bodies += [body["output"][key] for key in ("summary", "text") if key in (body.get("output") or {})]
            if "body" in body:
                bodies.append(body["body"])
        assert bodies and all(len(text.encode("utf-8")) <= 65_535 for text in bodies), \
            sorted(len(text.encode("utf-8")) for text in bodies)[-3:]
        assert outcome.notes == [] and outcome.check_run_action == "created" and outcome.comment_action == "created"
        summary = gh.check_runs[outcome.check_run_id]["output"]["summary"]
        assert summary.startswith(markdown.MARKER) and "This report was shortened" in summary
        assert "навык-" in summary and "not executed" in summary  # the counts and the closing sentence stay
        comment = gh.comments[outcome.comment_id]["body"]
        assert comment.startswith(markdown.MARKER) and "This comment is updated in place" in comment
        assert outcome.annotations_sent == 960 == len(gh.annotations[outcome.check_run_id])


def test_text_is_cut_on_a_character_boundary_in_bytes_with_the_note() -> None:
    rockets = "a" + "🚀" * 20_000  # 80,001 bytes: a cut at 65,535 - len(note) bytes falls inside an emoji
    clipped = gh_mod.clip_bytes(rockets)
    assert len(clipped.encode("utf-8")) <= 65_535 and clipped.endswith(gh_mod.TRUNCATED)
    kept = clipped[:-len(gh_mod.TRUNCATED)]
    assert kept == "a" + "🚀" * (len(kept) - 1), "only whole characters are kept"
    assert len(kept.encode("utf-8")) > 65_535 - len(gh_mod.TRUNCATED.encode("utf-8")) - 4  # no more cut than needed
    assert gh_mod.clip_bytes("я" * 32_767) == "я" * 32_767  # 65,534 bytes: whole


def test_annotation_paths_are_relative_to_the_repository_root(tmp_path: Path) -> None:
    """With the library in a subfolder of the repository (examples/library), results.json's paths are relative
    to the library; GitHub reads an annotation's path from the repository root. `publish --library` makes them
    so: every annotated path names a file from the root of the repository (a real git repository here)."""
    repo = tmp_path / "repo"
    library = repo / "examples" / "library"
    shutil.copytree(EXAMPLE, library, symlinks=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, timeout=60)
    evals = sorted(library.glob(".claude/skills/*/evals/*.json"))
    cases = [CaseResult(uid=f"{path.parent.parent.name}/evals/case-{i}", skill=path.parent.parent.name,
                        file=path.relative_to(library).as_posix(), line=2, kind="trigger",
                        target=path.parent.parent.name, state="FAIL", losses=2, repeats_run=2, repeats_planned=3,
                        quorum=2) for i, path in enumerate(evals)]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "results.json").write_text(assemble(cases).model_dump_json(), encoding="utf-8")
    with FakeGitHub(token=TOKEN) as gh:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "ANTHROPIC_"))} | {
            "GITHUB_API_URL": gh.url, "GITHUB_REPOSITORY": gh.repository, "GITHUB_EVENT_NAME": "push",
            "GITHUB_SHA": HEAD, "GITHUB_TOKEN": TOKEN}
        done = subprocess.run([sys.executable, "-m", "runner", "publish", str(run_dir), "--library", "examples/library"],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        sent = [a for r in gh.writes() for a in ((r.body or {}).get("output") or {}).get("annotations", [])]
    assert len(sent) == len(evals) > 5
    for note in sent:
        assert note["path"].startswith("examples/library/.claude/skills/"), note["path"]
        assert (repo / note["path"]).is_file(), f"{note['path']} does not resolve from the repository root"


# ---- conclusions ------------------------------------------------------------------------------------------

def test_required_mode_fails_the_check_on_failures(tmp_path: Path) -> None:
    with FakeGitHub(token=TOKEN) as gh:
        outcome = run(placed(every_state()), context(gh, tmp_path), mode="required")
        assert outcome.conclusion == "failure" == gh.check_runs[outcome.check_run_id]["conclusion"]
        assert "Required" in gh.check_runs[outcome.check_run_id]["output"]["text"]


def test_all_pass_is_success_in_both_modes(tmp_path: Path) -> None:
    with FakeGitHub(token=TOKEN) as gh:
        outcome = run(passing(3, unrun=10), context(gh, tmp_path))
        assert outcome.conclusion == "success" == gh.check_runs[outcome.check_run_id]["conclusion"]
        assert outcome.title == "PASS 3 · FAIL 0 · UNRUN 10 · $0.42 of $10.00"
        assert outcome.annotations_sent == 0
    assert conclusion(passing(3), "required") == "success"


def test_nothing_executed_is_neutral_and_says_nothing_ran(tmp_path: Path) -> None:
    results = passing(0, unrun=10)
    with FakeGitHub(token=TOKEN) as gh:
        outcome = run(results, context(gh, tmp_path), mode="required")
        assert outcome.conclusion == "neutral" == gh.check_runs[outcome.check_run_id]["conclusion"]
        assert outcome.title.startswith("Nothing ran, no result claimed · PASS 0 · FAIL 0 · UNRUN 10")
    assert conclusion(results) == "neutral"


def test_quarantined_cases_do_not_count_for_the_conclusion() -> None:
    ran = every_state()
    only_quarantined = assemble([c for c in ran.cases if c.state in NOT_DECIDED])
    assert conclusion(only_quarantined, "required") == "neutral"
    assert rules.title(only_quarantined).startswith("Nothing ran but quarantined cases")
    with_pass = assemble([c for c in ran.cases if c.state in ("QUARANTINED", "PASS", "UNRUN")])
    assert conclusion(with_pass, "required") == "success"
    with pytest.raises(ValueError):
        conclusion(with_pass, "strict")  # type: ignore[arg-type]


def test_a_quarantined_case_that_never_ran_is_unrun_in_the_job_summary_and_the_check_run(tmp_path: Path) -> None:
    """No key: the quarantined case is QUARANTINED over UNRUN (no-credentials); nothing is said to have run."""
    quarantined = CaseResult(uid="s/evals/flaky", skill="s", kind="trigger", target="s", state="QUARANTINED",
                             underlying_state="UNRUN", reason="no-credentials", repeats_planned=3, quorum=2,
                             quarantine=QuarantineEntry(uid="s/evals/flaky", reason="flips", date=date(2026, 11, 1)))
    unrun = CaseResult(uid="s/evals/plain", skill="s", kind="trigger", target="s", state="UNRUN",
                       reason="no-credentials", repeats_planned=3, quorum=2)
    with FakeGitHub(token=TOKEN) as gh:
        ctx = context(gh, tmp_path)
        outcome = run(assemble([unrun, quarantined]), ctx)
        assert outcome.title.startswith("Nothing ran, no result claimed") and outcome.conclusion == "neutral"
        for text in (ctx.step_summary.read_text(encoding="utf-8"),
                     gh.check_runs[outcome.check_run_id]["output"]["summary"]):
            assert "still ran" not in text and "QUARANTINED (UNRUN no-credentials)" in text
            assert "2 case(s) were not executed (UNRUN)" in text


# ---- when GitHub cannot be written ---------------------------------------------------------------------

@pytest.mark.parametrize("status", [403, 404])
def test_writes_refused_leave_the_job_summary_with_the_reason(tmp_path: Path, status: int) -> None:
    with FakeGitHub(token=TOKEN, deny_writes=status) as gh:
        ctx = context(gh, tmp_path)
        outcome = run(placed(every_state()), ctx)
        assert outcome.check_run_id is None and outcome.check_run_action == "skipped"
        assert outcome.comment_id is None and outcome.comment_action == "skipped"
        assert outcome.summary_written and not gh.check_runs and not gh.comments
        assert any(n.startswith(f"check run not written: GitHub answered {status}") for n in outcome.notes)
        assert any(n.startswith(f"PR comment not written: GitHub answered {status}") for n in outcome.notes)
        summary = ctx.step_summary.read_text(encoding="utf-8")
        assert "nothing was posted to GitHub" in summary and f"GitHub answered {status}" in summary
        assert "read-only token" in summary and markdown.MARKER in summary
        assert_token_kept_secret(gh, outcome, ctx)


def test_a_fork_pull_request_writes_only_the_job_summary(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"number": PR, "pull_request": {
        "number": PR, "head": {"sha": HEAD, "repo": {"full_name": "mallory/skills"}},
        "base": {"sha": "c" * 40, "repo": {"full_name": "acme/skills"}}}}))
    with FakeGitHub(token=TOKEN, deny_writes=403) as gh:
        ctx = Context.from_env({"GITHUB_API_URL": gh.url, "GITHUB_REPOSITORY": "acme/skills",
                                "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event),
                                "GITHUB_SHA": MERGE, "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")})
        assert ctx.is_fork and ctx.read_only_token and ctx.head_sha == HEAD and ctx.pr_number == PR
        outcome = run(placed(every_state()), ctx)
        assert gh.requests == []  # nothing attempted with a read-only token
        assert outcome.check_run_action == outcome.comment_action == "skipped" and outcome.summary_written
        assert any("comes from a fork" in n for n in outcome.notes)
        assert "comes from a fork" in (tmp_path / "summary.md").read_text(encoding="utf-8")


def test_no_token_writes_the_job_summary_and_says_so(tmp_path: Path) -> None:
    with FakeGitHub() as gh:
        ctx = context(gh, tmp_path)
        outcome = run(placed(every_state()), ctx, token=None)
        assert gh.requests == [] and outcome.summary_written
        assert outcome.notes[0].startswith("no GitHub token was given")
        assert "no GitHub token was given" in ctx.step_summary.read_text(encoding="utf-8")


def test_comment_turned_off_or_no_pull_request_still_posts_the_check_run(tmp_path: Path) -> None:
    with FakeGitHub(token=TOKEN) as gh:
        outcome = run(placed(every_state()), context(gh, tmp_path), comment=False)
        assert outcome.check_run_action == "created" and outcome.comment_action == "skipped"
        assert "the PR comment is turned off" in outcome.notes and not gh.comments
        push = run(placed(every_state()), context(gh, tmp_path, pr_number=None, event_name="push"))
        assert push.check_run_action == "updated" and push.comment_action == "skipped"
        assert any("not a pull request event (push)" in n for n in push.notes) and not gh.comments


def test_only_the_comment_refused_still_posts_the_check_run(tmp_path: Path) -> None:
    with FakeGitHub(token=TOKEN, deny_writes=403, deny_only="/comments") as gh:
        ctx = context(gh, tmp_path)
        outcome = run(placed(every_state()), ctx)
        assert outcome.check_run_action == "created" and outcome.annotations_sent == 4
        assert outcome.comment_action == "skipped" and not gh.comments
        assert outcome.notes[0].startswith("PR comment not written: GitHub answered 403")
        assert "`permissions: pull-requests: write`" in outcome.notes[0]  # plain in the outcome, escaped in Markdown
        summary = ctx.step_summary.read_text(encoding="utf-8")
        assert summary.startswith("> **skill-evals publish:** check run created (neutral). Why:")
        assert "PR comment not written: GitHub answered 403" in summary


def test_cases_without_an_eval_file_are_not_annotated_but_named(tmp_path: Path) -> None:
    with FakeGitHub(token=TOKEN) as gh:
        outcome = run(every_state(), context(gh, tmp_path))  # fixture cases have no file
        assert outcome.annotations_sent == 0 and outcome.check_run_action == "created"
        assert any(n.startswith("4 failing or erroring case(s) have no eval file") for n in outcome.notes)
        hostile = every_state().cases[1].model_copy(update={"uid": "x/<script>alert(1)</script>"})
        ctx = context(gh, tmp_path, step_summary=tmp_path / "hostile.md")
        run(assemble([hostile]), ctx)
        summary = ctx.step_summary.read_text(encoding="utf-8")
        assert "<script>" not in summary and "x/&lt;script&gt;" in summary


# ---- the check run in progress, and links to the reports ------------------------------------------------

def test_start_shows_the_run_in_progress_and_publish_completes_that_check_run(tmp_path: Path) -> None:
    results = placed(every_state())
    with FakeGitHub(token=TOKEN) as gh:
        gh.add_check_run(HEAD, "skill-evals")  # the workflow job's own check run, same name, not ours
        ctx = context(gh, tmp_path, run_id="987654321", server_url="https://github.example")
        started = gh_mod.start(ctx, TOKEN, **FAST)
        assert started.notes == [] and started.check_run_id is not None
        created = [r for r in gh.writes()]
        assert [(r.method, r.path) for r in created] == [("POST", "/repos/acme/skills/check-runs")]
        body = created[0].body
        assert (body["status"], body["head_sha"], body["external_id"]) == ("in_progress", HEAD, gh_mod.EXTERNAL_ID)
        assert body["details_url"] == "https://github.example/acme/skills/actions/runs/987654321"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", body["started_at"]) and "conclusion" not in body
        assert gh.check_runs[started.check_run_id]["status"] == "in_progress"

        before = len(gh.requests)
        outcome = run(results, ctx, check_run_id=started.check_run_id)
        assert outcome.check_run_id == started.check_run_id and outcome.check_run_action == "updated"
        writes = [r for r in gh.requests[before:] if r.method != "GET"]
        assert [(r.method, r.path) for r in writes][0] == ("PATCH", f"/repos/acme/skills/check-runs/{started.check_run_id}")
        done = writes[0].body
        assert (done["status"], done["conclusion"]) == ("completed", "neutral") and done["completed_at"]
        assert done["output"]["title"] == outcome.title and len(done["output"]["annotations"]) == 4
        assert not [r for r in gh.requests[before:] if r.method == "POST" and r.path.endswith("/check-runs")]
        ours = [r for r in gh.check_runs.values() if r["external_id"] == gh_mod.EXTERNAL_ID]
        assert len(ours) == 1 and ours[0]["status"] == "completed"
        assert_token_kept_secret(gh, outcome, ctx)


def job(gh: FakeGitHub, tmp_path: Path, workflow: str, name: str, run_id: str, attempt: str = "1") -> Context:
    """The context of one job of a workflow run on the pull request's head commit."""
    return context(gh, tmp_path, workflow=workflow, job=name, run_id=run_id, run_attempt=attempt,
                   step_summary=tmp_path / f"summary-{name}-{run_id}-{attempt}.md")


def ours(gh: FakeGitHub) -> list[dict]:
    return [r for r in gh.check_runs.values() if r["external_id"] == gh_mod.EXTERNAL_ID]


def test_two_jobs_on_one_commit_share_one_check_run_and_neither_hides_the_other(tmp_path: Path) -> None:
    """Two workflows on one head commit, each `start` then `publish`: one check run, created once and updated;
    the job that passed does not turn the other's FAIL into a success; a re-run of a job replaces its result."""
    hostile = "evals --> <!-- | x"
    with FakeGitHub(token=TOKEN) as gh:
        a, b = job(gh, tmp_path, hostile, "lib-a", "100"), job(gh, tmp_path, "nightly", "lib-b", "101")
        started_a = gh_mod.start(a, TOKEN, **FAST)
        first = run(failing(2), a, check_run_id=started_a.check_run_id)
        assert started_a.check_run_action == "created" and first.check_run_conclusion == "neutral"

        before = len(gh.requests)
        started_b = gh_mod.start(b, TOKEN, **FAST)
        assert started_b.check_run_id == started_a.check_run_id and started_b.check_run_action == "updated"
        assert any("already exists" in n for n in started_b.notes)
        second = run(passing(3), b, check_run_id=started_b.check_run_id)
        assert len(ours(gh)) == 1 and second.check_run_id == first.check_run_id
        rid = first.check_run_id
        sent = [(r.method, r.path) for r in gh.requests[before:] if r.method != "GET"]
        # b's start: a write that changes nothing (GitHub says whose a check run is only by taking or refusing a
        # write), no new check run; b's publish: the one check run completed again.
        assert sent == [("PATCH", f"/repos/acme/skills/check-runs/{rid}"),
                        ("PATCH", f"/repos/acme/skills/check-runs/{rid}"),
                        ("PATCH", f"/repos/acme/skills/issues/comments/{first.comment_id}")], sent
        probe = next(r for r in gh.requests[before:] if r.method == "PATCH")
        assert probe.body == {"external_id": gh_mod.EXTERNAL_ID}
        assert any(r.method == "GET" and r.path == f"/repos/acme/skills/commits/{HEAD}/check-runs"
                   and r.query.get("check_name") == ["skill-evals"] for r in gh.requests[before:])

        check = gh.check_runs[rid]
        assert second.conclusion == "success" and second.check_run_conclusion == "neutral" == check["conclusion"]
        assert second.jobs == 2 and check["output"]["title"].startswith("2 jobs: ")
        summary = check["output"]["summary"]
        assert "2 jobs published to this check run" in summary and "its conclusion is the worst of theirs (neutral)" in summary
        assert "nightly / lib-b (this job)" in summary and "FAIL 2" in summary and "PASS 3" in summary
        held = lanes.read(check["output"]["text"])
        assert [(lane.job, lane.run, lane.conclusion) for lane in held] == [
            (f"{hostile} / lib-a", "100/1", "neutral"), ("nightly / lib-b", "101/1", "success")]
        assert "-->" not in check["output"]["text"].split("\n")[0][:-3]  # the workflow's name cannot end the comment
        comment = gh.comments[first.comment_id]["body"]
        assert comment.startswith(markdown.MARKER + "\n**2 jobs published") and "lib-a" in comment
        assert len(gh.annotations[rid]) == 2  # a's FAIL annotations stay: GitHub only appends them

        # A re-run of a's job (attempt 2) that passes replaces a's result; b's stays.
        again = run(passing(3), job(gh, tmp_path, hostile, "lib-a", "100", attempt="2"))
        assert again.check_run_id == rid and again.check_run_conclusion == "success" == check["conclusion"]
        assert [(lane.run, lane.conclusion) for lane in lanes.read(check["output"]["text"])] == [
            ("101/1", "success"), ("100/2", "success")]
        assert len(ours(gh)) == 1


def test_two_legs_of_one_job_in_one_run_are_both_kept(tmp_path: Path) -> None:
    """A matrix: the same job in the same run attempt publishes twice (two libraries): siblings, not a re-run."""
    with FakeGitHub(token=TOKEN) as gh:
        leg = job(gh, tmp_path, "evals", "eval", "300")
        run(failing(1), leg, mode="required", path_prefix="libs/a")
        last = run(passing(2), leg, mode="required", path_prefix="libs/b")
        assert last.conclusion == "success" and last.check_run_conclusion == "failure" and last.jobs == 2
        assert [lane.library for lane in lanes.read(ours(gh)[0]["output"]["text"])] == ["libs/a", "libs/b"]
        # "Re-run job" on the leg that passed (attempt 2): its entry is replaced, the other leg's FAIL stays.
        rerun = run(passing(2), job(gh, tmp_path, "evals", "eval", "300", attempt="2"), mode="required",
                    path_prefix="libs/b")
        assert rerun.check_run_conclusion == "failure" and rerun.jobs == 2
        assert [(lane.library, lane.run) for lane in lanes.read(ours(gh)[0]["output"]["text"])] == [
            ("libs/a", "300/1"), ("libs/b", "300/2")]


def test_a_check_run_another_app_made_is_left_alone(tmp_path: Path) -> None:
    """GitHub lets only the app that created a check run change it: one another app made (a custom app's token in
    another workflow) is passed over, and this job's check run is one of its own, created once."""
    with FakeGitHub(token=TOKEN) as gh:
        foreign = gh.add_check_run(HEAD, "skill-evals", gh_mod.EXTERNAL_ID, app_id=4242, status="completed",
                                   conclusion="success")
        ctx = job(gh, tmp_path, "evals", "eval", "400")
        started = gh_mod.start(ctx, TOKEN, **FAST)
        assert started.check_run_action == "created" and started.check_run_id != foreign["id"]
        assert any(f"check run {foreign['id']} on this commit was left alone: GitHub answered 403 (Invalid app_id"
                   in n for n in started.notes), started.notes
        # Without the started id (its step output lost), publish finds its own check run, not the other app's.
        done = run(failing(1), ctx)
        assert done.check_run_id == started.check_run_id and done.check_run_action == "updated"
        assert (foreign["status"], foreign["conclusion"]) == ("completed", "success")
    with FakeGitHub(token=TOKEN) as gh:
        foreign = gh.add_check_run(HEAD, "skill-evals", gh_mod.EXTERNAL_ID, app_id=4242)
        alone = run(failing(1), job(gh, tmp_path, "evals", "eval", "401"))
        assert alone.check_run_action == "created" and len(ours(gh)) == 2 and foreign["status"] == "in_progress"
        assert any("left alone" in n for n in alone.notes)
        refused = [r for r in gh.requests if r.method == "PATCH" and r.path.endswith(f"/{foreign['id']}")]
        assert len(refused) == 1  # tried once, then a check run of its own


def test_a_job_with_no_results_keeps_the_other_jobs_failure(tmp_path: Path) -> None:
    with FakeGitHub(token=TOKEN) as gh:
        first = run(failing(1), job(gh, tmp_path, "evals", "a", "500"), mode="required")
        assert first.check_run_conclusion == "failure"
        other = job(gh, tmp_path, "evals", "b", "501")
        started = gh_mod.start(other, TOKEN, **FAST)
        assert started.check_run_id == first.check_run_id
        closed = gh_mod.close_without_results(other, TOKEN, started.check_run_id, "advisory", **FAST)
        check = gh.check_runs[first.check_run_id]
        assert closed.conclusion == "neutral" and closed.check_run_conclusion == "failure" == check["conclusion"]
        assert [lane.conclusion for lane in lanes.read(check["output"]["text"])] == ["failure", "neutral"]
        assert "No results" in check["output"]["title"] and "FAIL 1" in check["output"]["title"]


def test_the_lanes_line_survives_any_name_and_a_foreign_text_holds_none() -> None:
    mine = lanes.Lane(job="a --> b <!-- c ] -->", run="1/1", conclusion="failure", title="FAIL 1 · $0.10")
    line = lanes.trailer([mine])
    assert line.count("-->") == 1 and line.endswith(" -->") and "<!--" not in line[4:]
    assert lanes.read("Mode: advisory.\n" + line + "\n- a note") == [mine]
    for text in (None, "", "Mode: advisory.", lanes.TRAILER + "[{\"job\": 1}] -->", lanes.TRAILER + "[nope] -->"):
        assert lanes.read(text) == []
    ok = lanes.Lane(job="x", run=None, conclusion="success", title="PASS 1")
    assert lanes.merged([ok], ok.model_copy(update={"title": "PASS 2"})) == [ok.model_copy(update={"title": "PASS 2"})]
    assert lanes.worst([ok, mine]) == "failure" and lanes.title([ok]) == "PASS 1" and lanes.table([ok], ok) == ""


def test_start_posts_nothing_on_a_forks_read_only_token_or_without_a_token(tmp_path: Path) -> None:
    with FakeGitHub(token=TOKEN) as gh:
        fork = gh_mod.start(context(gh, tmp_path, is_fork=True), TOKEN, **FAST)
        none = gh_mod.start(context(gh, tmp_path), None, **FAST)
        assert gh.requests == [] and fork.check_run_id is None and none.check_run_id is None
        assert "fork" in fork.notes[0] and "no GitHub token" in none.notes[0]
    with FakeGitHub(token=TOKEN, deny_writes=403) as gh:
        refused = gh_mod.start(context(gh, tmp_path), TOKEN, **FAST)
        assert refused.check_run_id is None and "GitHub answered 403" in refused.notes[0]


def test_the_reports_are_linked_from_the_summary_the_comment_and_the_job_summary(tmp_path: Path) -> None:
    report = "https://github.com/acme/skills/actions/runs/42/artifacts/9001"
    with FakeGitHub(token=TOKEN) as gh:
        ctx = context(gh, tmp_path, run_id="42")
        outcome = run(placed(every_state()), ctx, links={"HTML report and JUnit XML": report,
                                                         "evil": "javascript:alert(1)"})
        summary = gh.check_runs[outcome.check_run_id]["output"]["summary"]
        comment = gh.comments[outcome.comment_id]["body"]
        job = ctx.step_summary.read_text(encoding="utf-8")
        for text in (summary, comment, job):
            assert f"[HTML report and JUnit XML]({report})" in text
            assert "[workflow run](https://github.com/acme/skills/actions/runs/42)" in text
            assert "javascript:" not in text
        assert any("'evil' was left out" in n for n in outcome.notes)


def cli_env(gh: FakeGitHub, tmp_path: Path, **extra: str) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": PR, "head": {"sha": HEAD, "repo": {
        "full_name": gh.repository}}, "base": {"repo": {"full_name": gh.repository}}}}), encoding="utf-8")
    return {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "ANTHROPIC_"))} | {
        "GITHUB_API_URL": gh.url, "GITHUB_REPOSITORY": gh.repository, "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event), "GITHUB_SHA": MERGE, "GITHUB_TOKEN": TOKEN, "GITHUB_RUN_ID": "77",
        "GITHUB_SERVER_URL": "https://github.com", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), **extra}


def cli_publish(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli("publish", *args, env=env)


def test_the_cli_starts_the_check_run_then_completes_it_or_closes_it_without_results(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "results.json").write_text(placed(every_state()).model_dump_json(), encoding="utf-8")
    with FakeGitHub(token=TOKEN) as gh:
        env = cli_env(gh, tmp_path)
        started = cli_publish("--start", env=env)
        assert started.returncode == 0, started.stderr
        rid = json.loads(started.stdout)["check_run_id"]
        assert gh.check_runs[rid]["status"] == "in_progress"
        assert gh.check_runs[rid]["details_url"] == "https://github.com/acme/skills/actions/runs/77"
        done = cli_publish(str(run_dir), "--check-run-id", str(rid), "--link", f"report={gh.url}/report", env=env)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["check_run_id"] == rid and len(gh.check_runs) == 1
        assert gh.check_runs[rid]["status"] == "completed" and gh.check_runs[rid]["conclusion"] == "neutral"
        assert f"[report]({gh.url}/report)" in gh.check_runs[rid]["output"]["summary"]

        # A run that left no results.json: the started check run is completed, never left in progress.
        second = json.loads(cli_publish("--start", env=env).stdout)["check_run_id"]
        closed = cli_publish(str(tmp_path / "never-written"), "--check-run-id", str(second), env=env)
        assert closed.returncode == 0, closed.stderr
        assert (gh.check_runs[second]["status"], gh.check_runs[second]["conclusion"]) == ("completed", "neutral")
        assert "no results" in gh.check_runs[second]["output"]["summary"]
        required = json.loads(cli_publish("--start", env=env).stdout)["check_run_id"]
        failed = cli_publish(str(tmp_path / "never-written"), "--check-run-id", str(required), "--mode", "required",
                             env=env)
        assert failed.returncode == 1 and gh.check_runs[required]["conclusion"] == "failure"
        # An id that is not skill-evals' check run (the workflow job's own, same name) is never touched.
        other = gh.add_check_run(HEAD, "skill-evals")["id"]
        left = cli_publish(str(tmp_path / "never-written"), "--check-run-id", str(other), env=env)
        assert left.returncode == 0 and "left alone" in left.stdout
        assert gh.check_runs[other]["status"] == "in_progress" and gh.check_runs[other]["conclusion"] is None
        for request in gh.requests:
            assert TOKEN not in request.raw
        assert TOKEN not in started.stdout + done.stdout + closed.stdout + failed.stdout


def test_two_jobs_publishing_from_two_processes_leave_one_check_run(tmp_path: Path) -> None:
    """Two jobs of the action as processes, each with its own GITHUB_WORKFLOW, GITHUB_JOB and GITHUB_RUN_ID: the
    first publishes (its start step posted nothing), the second starts then publishes: one check run."""
    ran_ok, ran_bad = tmp_path / "ok", tmp_path / "bad"
    for folder, results in ((ran_ok, passing(2)), (ran_bad, failing(1))):
        folder.mkdir()
        (folder / "results.json").write_text(results.model_dump_json(), encoding="utf-8")
    with FakeGitHub(token=TOKEN) as gh:
        outcomes = []
        for name, run_id, folder in (("first", "201", ran_bad), ("second", "202", ran_ok)):
            env = cli_env(gh, tmp_path, GITHUB_WORKFLOW="skill-evals", GITHUB_JOB=name, GITHUB_RUN_ID=run_id,
                          GITHUB_RUN_ATTEMPT="1")
            if name == "first":  # a job whose start step posted nothing: publish finds or makes the check run
                done = cli_publish(str(folder), env=env)
            else:
                started = cli_publish("--start", env=env)
                assert started.returncode == 0, started.stderr
                rid = json.loads(started.stdout)["check_run_id"]
                done = cli_publish(str(folder), "--check-run-id", str(rid), env=env)
            assert done.returncode == 0, done.stderr
            outcomes.append(json.loads(done.stdout))
        created = [r for r in gh.requests if r.method == "POST" and r.path.endswith("/check-runs")]
        assert len(created) == 1 and len(ours(gh)) == 1
        assert outcomes[0]["check_run_id"] == outcomes[1]["check_run_id"] == ours(gh)[0]["id"]
        assert (outcomes[1]["conclusion"], outcomes[1]["check_run_conclusion"], outcomes[1]["jobs"]) == \
            ("success", "neutral", 2)
        assert [lane.job for lane in lanes.read(ours(gh)[0]["output"]["text"])] == \
            ["skill-evals / first", "skill-evals / second"]


# ---- the context ----------------------------------------------------------------------------------------

def test_context_from_a_push_event_and_defaults(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"ref": "refs/heads/main", "after": MERGE}))
    ctx = Context.from_env({"GITHUB_REPOSITORY": "acme/skills", "GITHUB_EVENT_NAME": "push",
                            "GITHUB_EVENT_PATH": str(event), "GITHUB_SHA": MERGE, "GITHUB_TOKEN": TOKEN})
    assert ctx.api_url == "https://api.github.com" and ctx.head_sha == MERGE and ctx.pr_number is None
    assert not ctx.is_fork and ctx.step_summary is None
    assert TOKEN not in ctx.model_dump_json()  # the library never reads the token from the environment
    same_repo = tmp_path / "pr.json"
    same_repo.write_text(json.dumps({"pull_request": {"number": 3, "head": {"sha": HEAD, "repo": {
        "full_name": "acme/skills"}}, "base": {"repo": {"full_name": "acme/skills"}}}}))
    pr = Context.from_env({"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(same_repo),
                           "GITHUB_SHA": MERGE, "GITHUB_API_URL": "https://ghe.example/api/v3/"})
    assert (pr.pr_number, pr.head_sha, pr.is_fork, pr.api_url) == (3, HEAD, False, "https://ghe.example/api/v3")
    broken = Context.from_env({"GITHUB_EVENT_PATH": str(tmp_path / "missing.json")})
    assert broken.warnings and broken.pr_number is None
    assert broken.run_url is None and pr.run_url is None  # no repository, no run id: nothing to link
    run = Context.from_env({"GITHUB_REPOSITORY": "acme/skills", "GITHUB_RUN_ID": "123",
                            "GITHUB_SERVER_URL": "https://ghe.example/"})
    assert run.run_url == "https://ghe.example/acme/skills/actions/runs/123"
