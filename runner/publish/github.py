"""Publishing one results.json to GitHub: a check run with annotations, one PR comment, the job summary.

`GitHubForge` writes the forge-neutral `Publication` of runner.publish.rules through PyGithub. Contract: advisory by
default (never "failure"); publishing never raises for what GitHub answers, it says what was skipped; GitHub's size
limits are bytes; the token goes only into PyGithub's Authorization header.

Design notes: docs/design/publishing.md.
"""

from __future__ import annotations

import json
import logging
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Mapping

import requests
from github import Auth, Github, GithubException
from github.GithubObject import NotSet
from pydantic import BaseModel, Field

from runner.core.states import CaseState
from runner.corpus import repopath
from runner.publish import lanes, rules
from runner.publish.forges import Refused
from runner.publish.lanes import Lane
from runner.publish.rules import CHECK_NAME, MARKER, Conclusion, Mode, Publication
from runner.report import markdown
from runner.results.build import CaseResult, Results

log = logging.getLogger(__name__)

EXTERNAL_ID = "skill-evals-report"
DEFAULT_API_URL = "https://api.github.com"
GITHUB_TEXT_LIMIT = 65_535   # output.summary, output.text, a comment body: UTF-8 bytes, not characters
ANNOTATION_BATCH = 50        # the Checks API takes at most 50 annotations per request
ANNOTATION_MESSAGE_CUT = 2_000
ANNOTATION_TITLE_CUT = 255
FORGE = "GitHub"  # in the note after a text cut to GitHub's limit
TRUNCATED = rules.truncated_note(FORGE, GITHUB_TEXT_LIMIT)

Action = Literal["created", "updated", "skipped"]

# UNDECIDED (the sequential verdict left the rate open): a notice, neither a failure nor a warning.
LEVELS: dict[CaseState, str] = {"FAIL": "failure", "ERROR": "warning", "JUDGE-ERROR": "warning", "UNDECIDED": "notice"}
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clip_bytes(text: str) -> str:
    """`text` clipped to what GitHub takes in output.summary, output.text or a comment body (rules.clip_bytes)."""
    return rules.clip_bytes(text, GITHUB_TEXT_LIMIT, TRUNCATED)


# ---- context ---------------------------------------------------------------------------------------

class Context(BaseModel):
    """Where to publish, read from the GitHub Actions environment. Holds no token."""

    api_url: str = DEFAULT_API_URL
    repository: str | None = Field(default=None, description="owner/name (GITHUB_REPOSITORY).")
    event_name: str | None = None
    sha: str | None = Field(default=None, description="GITHUB_SHA: on pull_request events, the merge commit.")
    head_sha: str | None = Field(default=None, description="The commit the check run goes on: the PR's head "
                                                           "commit on pull-request events, else GITHUB_SHA.")
    pr_number: int | None = None
    is_fork: bool = Field(default=False, description="The PR's head repository is not its base repository.")
    step_summary: Path | None = Field(default=None, description="GITHUB_STEP_SUMMARY: the job summary file.")
    server_url: str = Field(default="https://github.com", description="GITHUB_SERVER_URL (GitHub Enterprise).")
    run_id: str | None = Field(default=None, description="GITHUB_RUN_ID: the workflow run (the check's details).")
    run_attempt: str | None = Field(default=None, description="GITHUB_RUN_ATTEMPT: a re-run of the same run.")
    workflow: str | None = Field(default=None, description="GITHUB_WORKFLOW: with `job`, names this job's lane "
                                                           "on a check run several jobs publish to.")
    job: str | None = Field(default=None, description="GITHUB_JOB: the job's id in its workflow.")
    warnings: list[str] = Field(default=[], description="What could not be read from the environment.")

    @property
    def run_url(self) -> str | None:
        """The workflow run's page: the check run's details_url and the report's link to its artifacts."""
        if not (self.repository and self.run_id and self.run_id.isdigit()):
            return None
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"

    def lane(self, conclusion: Conclusion, title: str, library: str = "") -> Lane:
        """This job's entry on the commit's check run (runner.publish.lanes)."""
        run = f"{self.run_id}/{self.run_attempt or '1'}" if self.run_id else None
        return Lane(job=lanes.job_name(self.workflow, self.job), run=run, run_url=self.run_url, library=library,
                    conclusion=conclusion, title=title)

    @property
    def read_only_token(self) -> bool:
        """A fork's pull request runs with a read-only GITHUB_TOKEN (pull_request_target runs in the base)."""
        return self.is_fork and self.event_name != "pull_request_target"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Context:
        env = os.environ if environ is None else environ
        warnings: list[str] = []
        sha = env.get("GITHUB_SHA") or None
        head_sha, number, fork = sha, None, False
        event_path = env.get("GITHUB_EVENT_PATH")
        if event_path:
            try:
                event = json.loads(Path(event_path).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                warnings.append(f"the event payload {event_path} could not be read ({type(exc).__name__})")
                event = {}
            pull = event.get("pull_request") if isinstance(event, dict) else None
            if isinstance(pull, dict):
                number = pull.get("number") if isinstance(pull.get("number"), int) else event.get("number")
                head = pull.get("head") or {}
                base = pull.get("base") or {}
                head_sha = head.get("sha") or sha
                head_repo = (head.get("repo") or {}).get("full_name")
                base_repo = (base.get("repo") or {}).get("full_name")
                # A deleted fork has no head repository: still a fork.
                fork = head_repo is None or (base_repo is not None and head_repo.lower() != base_repo.lower())
        summary = env.get("GITHUB_STEP_SUMMARY")
        return cls(api_url=(env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"),
                   repository=env.get("GITHUB_REPOSITORY") or None, event_name=env.get("GITHUB_EVENT_NAME") or None,
                   sha=sha, head_sha=head_sha, pr_number=number if isinstance(number, int) else None, is_fork=fork,
                   step_summary=Path(summary) if summary else None,
                   server_url=(env.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/"),
                   run_id=env.get("GITHUB_RUN_ID") or None, run_attempt=env.get("GITHUB_RUN_ATTEMPT") or None,
                   workflow=env.get("GITHUB_WORKFLOW") or None, job=env.get("GITHUB_JOB") or None,
                   warnings=warnings)


class PublishOutcome(BaseModel):
    """What publish did. Never holds the token."""

    conclusion: Conclusion
    title: str
    check_run_id: int | None = None
    check_run_action: Action = "skipped"
    check_run_url: str | None = None
    check_run_conclusion: Conclusion | None = Field(default=None, description="What the check run concludes: the "
                                                    "worst of every job's that published to it (runner.publish.lanes); "
                                                    "`conclusion` is this job's own.")
    jobs: int = Field(default=0, description="How many jobs' results the check run now holds (this one included).")
    annotations_sent: int = Field(default=0, description="Annotations sent by this publish (an update does not "
                                                         "resend those the check run already carries).")
    comment_id: int | None = None
    comment_action: Action = "skipped"
    comment_url: str | None = None
    summary_written: bool = False
    notes: list[str] = []


# ---- annotations --------------------------------------------------------------------------------------

def _plain(text: object, cut: int) -> str:
    """Annotation text is plain text: drop control and bidi characters, collapse whitespace, clip."""
    value = re.sub(r"\s+", " ", _CONTROL.sub("", "" if text is None else str(text))).strip()
    return value if len(value) <= cut else value[: cut - 1].rstrip() + "…"


def annotation(case: CaseResult, path_prefix: str = "") -> dict[str, Any]:
    """The annotation of one FAIL, ERROR, JUDGE-ERROR or UNDECIDED case, at its eval file from the repository root."""
    details = rules.case_details(case)
    line = max(1, case.line)
    return {"path": repopath.join(path_prefix, case.file), "start_line": line, "end_line": line,
            "annotation_level": LEVELS[case.state],
            "title": _plain(f"{CHECK_NAME} {case.state}: {case.uid}", ANNOTATION_TITLE_CUT),
            "message": _plain("; ".join(details), ANNOTATION_MESSAGE_CUT)}


def case_annotations(results: Results, path_prefix: str = "") -> tuple[list[dict[str, Any]], list[str]]:
    """Annotations for FAIL, ERROR, JUDGE-ERROR and UNDECIDED cases, and the uids that have no eval file to point at."""
    made, unplaced = [], []
    for case in results.cases:
        if case.state not in LEVELS:
            continue
        if not case.file:
            unplaced.append(case.uid)
            continue
        made.append(annotation(case, path_prefix))
    return made, unplaced


def _key(item: Mapping[str, Any]) -> tuple[Any, ...]:
    return (item.get("path"), item.get("start_line"), item.get("annotation_level"), item.get("title") or "",
            item.get("message"))


# ---- publishing ---------------------------------------------------------------------------------------

class _Skip(Exception):
    """A part of publishing that could not be written; the message says why (no token in it)."""


def why_not_written(exc: Exception, what: str, permission: str) -> str:
    if isinstance(exc, GithubException):
        data = exc.data if isinstance(exc.data, dict) else {}
        message = data.get("message") or ""
        said = f"GitHub answered {exc.status}" + (f" ({message})" if message else "")
        if exc.status in (403, 404):
            return (f"{what} not written: {said}. The token cannot write here: a pull request from a fork gets a "
                    f"read-only token, otherwise the workflow needs `permissions: {permission}: write`.")
        return f"{what} not written: {said}."
    return f"{what} not written: GitHub could not be reached ({type(exc).__name__})."


def why_blocked(ctx: Context, token: str | None) -> str | None:
    """Why nothing can be posted to GitHub at all (no token, not in Actions, a fork's read-only token), or None."""
    if not token:
        return "no-token"
    if not ctx.repository:
        return "no-repository"
    if ctx.read_only_token:
        return "fork"
    return None


def make_client(ctx: Context, token: str, seconds_between_requests: float | None, seconds_between_writes: float | None,
            timeout: int) -> Github:
    return Github(base_url=ctx.api_url, auth=Auth.Token(token), per_page=100, lazy=True, timeout=timeout,
                  user_agent="skill-evals", seconds_between_requests=seconds_between_requests,
                  seconds_between_writes=seconds_between_writes)


def not_ours(run: Any, exc: GithubException) -> str:
    """Why a check run found on the commit was passed over: GitHub refused this token a write to it."""
    data = exc.data if isinstance(exc.data, dict) else {}
    said = f" ({data['message']})" if data.get("message") else ""
    return (f"skill-evals' check run {run.id} on this commit was left alone: GitHub answered 403{said}; only the "
            "GitHub App that created a check run can change it (or the token lacks `checks: write`)")


def _candidates(repo: Any, head: str, check_run_id: int | None, notes: list[str]) -> list[Any]:
    """skill-evals' check runs on `head` this publish may update, in the order to try them: the one `start` made
    (`check_run_id`) while it is ours and on this commit, then the others carrying our external_id, newest first.
    Which of them this token's app made is only known by writing: GitHub answers 403 for another app's."""
    first = None
    if check_run_id is not None:
        try:
            first = repo.get_check_run(check_run_id)
        except GithubException as exc:
            if exc.status != 404:
                raise
        if first is None or first.external_id != EXTERNAL_ID or first.head_sha != head:
            first = None
            notes.append(f"the started check run {check_run_id} is not skill-evals' check run on {head[:12]} (or "
                         "is gone): the check run of this commit was looked up by name instead")
    found = [run for run in repo.get_commit(head).get_check_runs(check_name=CHECK_NAME, filter="all")
             if run.external_id == EXTERNAL_ID and (first is None or run.id != first.id)]
    found.sort(key=lambda run: -run.id)
    return [first, *found] if first is not None else found


def _text(run: Any | None) -> str | None:
    """A check run's output.text (where its lanes are), None when it has none."""
    output = getattr(run, "output", None) if run is not None else None
    text = getattr(output, "text", None)
    return text if isinstance(text, str) else None


def _another_app(exc: Exception) -> bool:
    return isinstance(exc, GithubException) and exc.status == 403


def _check_run(repo: Any, results: Results, mode: Mode, head: str, summary: str,
               outcome: PublishOutcome, notes: list[str], mine: Lane, *, check_run_id: int | None = None,
               path_prefix: str = "", details_url: str | None = None) -> list[Lane]:
    """Complete (or create) the commit's one check run with this job's results merged into the lanes it holds;
    the lanes it now holds."""
    for existing in _candidates(repo, head, check_run_id, notes):
        try:
            return _write_check_run(repo, existing, results, mode, head, summary, outcome, notes, mine,
                                    path_prefix=path_prefix, details_url=details_url)
        except GithubException as exc:
            if not _another_app(exc) or outcome.check_run_id is not None:
                raise
            notes.append(not_ours(existing, exc))
    return _write_check_run(repo, None, results, mode, head, summary, outcome, notes, mine, path_prefix=path_prefix,
                            details_url=details_url)


def _write_check_run(repo: Any, existing: Any | None, results: Results, mode: Mode, head: str, summary: str,
                     outcome: PublishOutcome, notes: list[str], mine: Lane, *, path_prefix: str = "",
                     details_url: str | None = None) -> list[Lane]:
    wanted, unplaced = case_annotations(results, path_prefix)
    held = lanes.merged(lanes.read(_text(existing)), mine)
    others = len(held) > 1
    stale = 0
    if existing is not None:
        present = {_key(a.raw_data) for a in existing.get_annotations()}
        current = {_key(a) for a in wanted}
        stale = len(present - current)
        wanted = [a for a in wanted if _key(a) not in present]
    text_lines = [lanes.trailer(held),
                  f"Mode: {mode}. " + ("Advisory: eval results never fail this check or the job."
                                       if mode == "advisory" else "Required: FAIL, ERROR or JUDGE-ERROR fail this check.")]
    mine_notes = list(notes)
    if unplaced:
        mine_notes.append(f"{len(unplaced)} failing or erroring case(s) have no eval file to annotate: "
                          + ", ".join(unplaced[:10]) + (" …" if len(unplaced) > 10 else ""))
    if stale and others:
        mine_notes.append(f"{stale} annotation(s) on this check run are not among this job's results: another "
                          "job's, or an earlier publish's that no longer apply (GitHub's API cannot remove one).")
    elif stale:
        mine_notes.append(f"{stale} annotation(s) from an earlier publish for this commit no longer apply; "
                          "GitHub's API cannot remove an annotation.")
    text_lines += [f"- {markdown.escape(n)}" for n in mine_notes]
    text = clip_bytes("\n".join(text_lines))
    batches = [wanted[i:i + ANNOTATION_BATCH] for i in range(0, len(wanted), ANNOTATION_BATCH)] or [[]]
    verdict, title = lanes.worst(held), lanes.title(held)
    output = {"title": title, "summary": clip_bytes(lanes.table(held, mine) + summary), "text": text}
    first = {**output, "annotations": batches[0]} if batches[0] else output
    now = datetime.now(timezone.utc)
    if existing is None:
        extra = {"details_url": details_url} if details_url else {}
        run = repo.create_check_run(name=CHECK_NAME, head_sha=head, external_id=EXTERNAL_ID, status="completed",
                                    conclusion=verdict, completed_at=now, output=first, **extra)
        outcome.check_run_action = "created"
    else:
        run = existing
        run.edit(status="completed", conclusion=verdict, completed_at=now, output=first)
        outcome.check_run_action = "updated"
    notes[:] = mine_notes
    outcome.check_run_id, outcome.check_run_url = run.id, run.html_url
    outcome.check_run_conclusion, outcome.jobs, outcome.title = verdict, len(held), title
    outcome.annotations_sent = len(batches[0])
    for batch in batches[1:]:
        run.edit(output={**output, "annotations": batch})
        outcome.annotations_sent += len(batch)
    return held


def upsert_comment(repo: Any, number: int, marker: str, body: str) -> tuple[Any, Literal["created", "updated"]]:
    """The PR's one comment that starts with `marker`: edited in place when it exists, made otherwise (one comment
    per marker however often the job runs)."""
    issue = repo.get_issue(number)
    ours = next((c for c in issue.get_comments() if (c.body or "").startswith(marker)), None)
    if ours is None:
        return issue.create_comment(body), "created"
    ours.edit(body)
    return ours, "updated"


def with_jobs(comment: str, held: list[Lane], mine: Lane) -> str:
    """The comment with the table of the jobs that published to the commit's check run under its marker line, when
    there are others: the comment is one per pull request, and this job's report must not pass for all of them."""
    table = lanes.table(held, mine)
    if not table or not comment.startswith(MARKER + "\n"):
        return comment
    return clip_bytes(MARKER + "\n" + table + comment[len(MARKER) + 1:])


def _comment(repo: Any, pr_number: int, body: str, outcome: PublishOutcome) -> None:
    comment, action = upsert_comment(repo, pr_number, MARKER, body)
    outcome.comment_id, outcome.comment_url, outcome.comment_action = comment.id, comment.html_url, action


def _job_summary(path: Path, rollup: str, outcome: PublishOutcome, posted: list[str]) -> None:
    lines = []
    if outcome.notes:
        lines += ["> **skill-evals publish:** " + ("; ".join(posted) if posted else "nothing was posted to GitHub")
                  + ". Why:", ">"]
        lines += [f"> - {markdown.escape(note)}" for note in outcome.notes]
        lines.append("")
    lines += [rollup.rstrip("\n"), ""]
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")


def publish(results: Results, ctx: Context, token: str | None, mode: Mode = "advisory", comment: bool = True, *,
            check_run_id: int | None = None, path_prefix: str = "", links: Mapping[str, str] | None = None,
            seconds_between_requests: float | None = 0.25, seconds_between_writes: float | None = 1.0,
            timeout: int = 30) -> PublishOutcome:
    """Post the check run, the PR comment and the job summary (see docs/design/publishing.md): `post` of the
    publication runner.publish.rules makes of `results` for GitHub.

    `links`: label -> URL of the reports uploaded as artifacts, linked from the summary, the comment and the
    job summary together with the workflow run. The other arguments are `post`'s.
    """
    publication = rules.publication(results, mode, forge=FORGE, text_limit=GITHUB_TEXT_LIMIT, links=links,
                                    run_url=ctx.run_url)
    return post(publication, results, ctx, token, comment, check_run_id=check_run_id, path_prefix=path_prefix,
                seconds_between_requests=seconds_between_requests, seconds_between_writes=seconds_between_writes,
                timeout=timeout)


def post(publication: Publication, results: Results, ctx: Context, token: str | None, comment: bool = True, *,
         check_run_id: int | None = None, path_prefix: str = "", seconds_between_requests: float | None = 0.25,
         seconds_between_writes: float | None = 1.0, timeout: int = 30) -> PublishOutcome:
    """Write `publication` to GitHub: the check run with the annotations of `results`' failing cases, the PR
    comment and the job summary.

    `check_run_id`: the check run `start` created, completed here instead of a new one. `path_prefix`: the
    library root's path inside the repository (runner.corpus.repopath.prefix), put before every annotation's path.

    Never raises for what GitHub answers or for an unreachable API: each part that could not be written is
    skipped and the reason recorded in `notes` (and in the job summary). The pacing arguments are
    PyGithub's (its defaults keep clear of GitHub's secondary rate limits).
    """
    mode, verdict, report = publication.mode, publication.conclusion, publication.report
    outcome = PublishOutcome(conclusion=verdict, title=publication.title)
    notes: list[str] = [*ctx.warnings, *publication.notes]
    head = ctx.head_sha or ctx.sha

    # One sentence, true as a whole: "this job summary is the only report" only when a job summary is written;
    # without GITHUB_STEP_SUMMARY (outside Actions) it says that nothing was published at all, and where the
    # results are.
    blocked = why_blocked(ctx, token)
    why = {"no-token": "no GitHub token was given",
           "no-repository": "GITHUB_REPOSITORY is not set (not running in GitHub Actions)",
           "fork": "this pull request comes from a fork, whose workflow token is read-only", None: None}[blocked]
    if why is None:
        reason = None
    elif ctx.step_summary is not None:
        reason = (f"{why}: no check run, no annotations and no PR comment were posted; this job summary is the "
                  "only report")
    else:
        reason = (f"{why}, and GITHUB_STEP_SUMMARY is not set: nothing was published (no check run, annotations, PR "
                  "comment or job summary); `skill-evals report RUN_DIR` shows the results")
    if reason:
        notes.append(reason)
    else:
        client = make_client(ctx, token or "", seconds_between_requests, seconds_between_writes, timeout)
        assert ctx.repository  # why_blocked() found it set
        try:
            repo = client.get_repo(ctx.repository)
            held: list[Lane] = []
            mine = ctx.lane(verdict, publication.title, path_prefix)
            if head:
                check_notes: list[str] = []
                try:
                    held = _check_run(repo, results, mode, head, report, outcome, check_notes, mine,
                                      check_run_id=check_run_id, path_prefix=path_prefix, details_url=ctx.run_url)
                except (GithubException, requests.RequestException) as exc:
                    check_notes.append(why_not_written(exc, "check run" if outcome.check_run_id is None
                                            else "some annotations of the check run", "checks"))
                notes += check_notes
            else:
                notes.append("no commit SHA (GITHUB_SHA is not set): no check run was posted")
            if not comment:
                notes.append("the PR comment is turned off")
            elif ctx.pr_number is None:
                notes.append(f"not a pull request event ({ctx.event_name or 'unknown'}): no PR comment was posted")
            else:
                try:
                    _comment(repo, ctx.pr_number, with_jobs(publication.comment, held, mine), outcome)
                except (GithubException, requests.RequestException) as exc:
                    notes.append(why_not_written(exc, "PR comment", "pull-requests"))
        finally:
            client.close()

    outcome.notes = [rules.scrub(n, token) for n in notes]
    posted = []
    if outcome.check_run_action != "skipped":
        posted.append(f"check run {outcome.check_run_action} ({outcome.check_run_conclusion or verdict}"
                      + (f", the worst of {outcome.jobs} jobs'" if outcome.jobs > 1 else "") + ")")
    if outcome.comment_action != "skipped":
        posted.append(f"PR comment {outcome.comment_action}")
    if ctx.step_summary is None:
        if not reason:  # a blocked publish said it in its one sentence
            outcome.notes.append("GITHUB_STEP_SUMMARY is not set: no job summary was written")
    else:
        try:
            _job_summary(ctx.step_summary, report, outcome, posted)
            outcome.summary_written = True
        except OSError as exc:
            outcome.notes.append(f"the job summary could not be written ({type(exc).__name__})")
    for note in outcome.notes:
        log.info("publish: %s", note)
    return outcome


# ---- the check run in progress ----------------------------------------------------------------------------

class StartOutcome(BaseModel):
    """What start did. Never holds the token."""

    check_run_id: int | None = None
    check_run_url: str | None = None
    check_run_action: Action = "skipped"
    notes: list[str] = []


STARTED_TITLE = "Running the evals"


def start(ctx: Context, token: str | None, *, seconds_between_requests: float | None = 0.25,
          seconds_between_writes: float | None = 1.0, timeout: int = 30) -> StartOutcome:
    """Create skill-evals' check run `in_progress` on the head commit, with started_at and the workflow run as
    its details_url, so the pull request shows the evals running. `publish(check_run_id=...)` completes it.

    One check run per commit: when another job (another workflow, a re-run) already made skill-evals' check run on
    this commit and this token's app may write it, its id is returned and it is left as it is (its results stay
    shown until this job's publish merges its own into them, runner.publish.lanes); only when there is none is
    one created.

    Never raises for what GitHub answers: a fork's read-only token, a missing permission or an outage leave
    no check run started, and the note says why (the final publish then creates one if it can).
    """
    outcome = StartOutcome()
    notes: list[str] = list(ctx.warnings)
    head = ctx.head_sha or ctx.sha
    blocked = why_blocked(ctx, token)
    if blocked:
        notes.append({"no-token": "no GitHub token was given: no check run was started",
                      "no-repository": "GITHUB_REPOSITORY is not set (not running in GitHub Actions): no check run "
                                       "was started",
                      "fork": "this pull request comes from a fork, whose workflow token is read-only: no check run "
                              "was started"}[blocked])
    elif not head:
        notes.append("no commit SHA (GITHUB_SHA is not set): no check run was started")
    else:
        client = make_client(ctx, token or "", seconds_between_requests, seconds_between_writes, timeout)
        summary = ("skill-evals is running the evals of this commit. This check is completed with the results when "
                   "the run ends" + (f"; the [workflow run]({ctx.run_url}) shows its progress." if ctx.run_url
                                     else "."))
        assert ctx.repository  # why_blocked() found it set
        try:
            repo = client.get_repo(ctx.repository)
            run = _reusable(repo, head, notes)
            if run is None:
                run = repo.create_check_run(
                    name=CHECK_NAME, head_sha=head, external_id=EXTERNAL_ID, status="in_progress",
                    started_at=datetime.now(timezone.utc), output={"title": STARTED_TITLE, "summary": summary},
                    details_url=ctx.run_url or NotSet)
                outcome.check_run_action = "created"
            else:
                outcome.check_run_action = "updated"
                notes.append(f"skill-evals' check run on {head[:12]} already exists (another job or an earlier run "
                             f"made it): this job publishes into it; it shows its {run.status.replace('_', ' ')} "
                             "state until then")
            outcome.check_run_id, outcome.check_run_url = run.id, run.html_url
        except (GithubException, requests.RequestException) as exc:
            notes.append(why_not_written(exc, "the in-progress check run", "checks"))
        finally:
            client.close()
    outcome.notes = [rules.scrub(n, token) for n in notes]
    for note in outcome.notes:
        log.info("start: %s", note)
    return outcome


def _reusable(repo: Any, head: str, notes: list[str]) -> Any | None:
    """The newest skill-evals check run on `head` this token's app may write, or None. GitHub says whose a check
    run is only by refusing a write (403), so each is probed with a write that changes nothing (its external_id)."""
    for run in _candidates(repo, head, None, notes):
        try:
            run.edit(external_id=EXTERNAL_ID)
        except GithubException as exc:
            if not _another_app(exc):
                raise
            notes.append(not_ours(run, exc))
            continue
        return run
    return None


def close_without_results(ctx: Context, token: str | None, check_run_id: int, mode: Mode = "advisory", *,
                          seconds_between_requests: float | None = 0.25, seconds_between_writes: float | None = 1.0,
                          timeout: int = 30) -> PublishOutcome:
    """Complete the started check run when the run left no readable results.json (it failed, or the job was
    cancelled): never left `in_progress` for ever. Nothing ran that can be claimed, so the conclusion is the
    action's rule for no results: neutral in advisory mode, failure in required mode."""
    verdict = rules.no_results_conclusion(mode)
    outcome = PublishOutcome(conclusion=verdict, title="No results: the run produced no results.json")
    notes: list[str] = list(ctx.warnings)
    head = ctx.head_sha or ctx.sha
    if why_blocked(ctx, token) or not head:
        notes.append("no check run to complete here (no token, no repository, a fork's token or no commit)")
    else:
        client = make_client(ctx, token or "", seconds_between_requests, seconds_between_writes, timeout)
        summary = ("The run produced no results: it failed before writing results.json, or the job was cancelled. "
                   "No result is claimed for any case; "
                   + (f"the [workflow run]({ctx.run_url})'s log says why." if ctx.run_url else "the run's log says why."))
        assert ctx.repository  # why_blocked() found it set
        try:
            try:
                run = client.get_repo(ctx.repository).get_check_run(check_run_id)
            except GithubException as exc:
                if exc.status != 404:
                    raise
                run = None
            # Only the check run `start` made: an earlier one with real results is never overwritten here.
            if run is None or run.external_id != EXTERNAL_ID or run.head_sha != head:
                notes.append(f"check run {check_run_id} is not skill-evals' check run on {head[:12]}: left alone")
            else:
                # Another job's results on this check run stay, and its conclusion stays the worst of theirs.
                held = lanes.merged(lanes.read(_text(run)), ctx.lane(verdict, outcome.title))
                worst = lanes.worst(held)
                run.edit(status="completed", conclusion=worst, completed_at=datetime.now(timezone.utc),
                         output={"title": lanes.title(held),
                                 "summary": clip_bytes(lanes.table(held, held[-1]) + summary),
                                 "text": lanes.trailer(held)})
                outcome.check_run_id, outcome.check_run_url, outcome.check_run_action = run.id, run.html_url, "updated"
                outcome.check_run_conclusion, outcome.jobs = worst, len(held)
        except (GithubException, requests.RequestException) as exc:
            notes.append(why_not_written(exc, "check run", "checks"))
        finally:
            client.close()
    outcome.notes = [rules.scrub(n, token) for n in notes]
    for note in outcome.notes:
        log.info("publish: %s", note)
    return outcome


# ---- the forge ------------------------------------------------------------------------------------------------

class GitHubOptions(BaseModel):
    """publish's options that are GitHub's own (runner.publish.forges declares them), as click parsed them."""

    start: bool = False
    check_run_id: int | None = None
    improve_dirs: tuple[Path, ...] = ()


class GitHubForge:
    """GitHub for `skill-evals publish` (runner.publish.forges.Forge): the context and the token from the
    GitHub Actions environment, and the options of publish that are GitHub's own."""

    text_limit = GITHUB_TEXT_LIMIT

    def __init__(self, ctx: Context, token: str | None, options: GitHubOptions) -> None:
        self.ctx, self.token, self.options = ctx, token, options

    @classmethod
    def from_env(cls, environ: Mapping[str, str], options: Mapping[str, object]) -> GitHubForge:
        return cls(Context.from_env(environ), environ.get("GITHUB_TOKEN") or None,
                   GitHubOptions.model_validate(dict(options)))

    @property
    def run_url(self) -> str | None:
        return self.ctx.run_url

    def own(self, run_dir: Path | None, library: Path | None) -> str | None:
        if self.options.improve_dirs:
            if run_dir is not None or self.options.start:
                raise Refused("publish --improve takes no RUN_DIR and no --start: it posts the improve folders' "
                              "suggestions")
            return self._improve(library or Path("."))
        if self.options.start:
            if run_dir is not None:
                raise Refused("publish --start takes no RUN_DIR: the run has not written one yet")
            return start(self.ctx, self.token).model_dump_json(indent=2)
        if run_dir is None:
            raise Refused("publish needs RUN_DIR (or --start)")
        return None

    def no_results(self, mode: Mode) -> str | None:
        if self.options.check_run_id is None:
            return None
        return close_without_results(self.ctx, self.token, self.options.check_run_id, mode).model_dump_json(indent=2)

    def publish(self, publication: Publication, results: Results, *, comment: bool, path_prefix: str) -> str:
        return post(publication, results, self.ctx, self.token, comment, check_run_id=self.options.check_run_id,
                    path_prefix=path_prefix).model_dump_json(indent=2)

    def _improve(self, library: Path) -> str:
        """`publish --improve DIR...`: each folder's suggestion (runner.publish.suggestion), their outcomes."""
        from runner.corpus import layout
        from runner.improve.loop import IMPROVE_JSON
        from runner.improve.model import Improve
        from runner.publish import suggestion
        from runner.results import modelfile

        try:
            root = layout.locate(library).root
        except layout.LibraryError as exc:
            raise Refused(f"--library: {exc}") from None
        prefix, _ = rules.library_prefix(library, root)
        records = []
        for folder in self.options.improve_dirs:
            if not (folder / IMPROVE_JSON).exists():
                raise Refused(f"{folder}: no {IMPROVE_JSON} (not an improve folder)")
            records.append(modelfile.read(folder / IMPROVE_JSON, Improve, "an improve record of this runner"))
        outcomes = [suggestion.publish_suggestion(record, self.ctx, self.token, root, path_prefix=prefix)
                    for record in records]
        return json.dumps([o.model_dump(mode="json") for o in outcomes], indent=2)
