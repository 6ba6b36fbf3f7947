"""Publishing one results.json to GitHub: a check run with annotations, one PR comment, the job summary.

CI posture (semantics §9): advisory. In the default "advisory" mode the check run's conclusion is
"success" or "neutral", never "failure", so eval results never fail the job or block a merge; a
human can opt into "required" mode, where failing or erroring cases give "failure". Publishing
itself never raises for what GitHub answers (403/404 on a fork, missing permissions, an outage):
each part that could not be written is skipped, and the reason is said in the PublishOutcome and
in the job summary.

UNRUN is never success by default: when no case executed (every case UNRUN, or only quarantined
cases ran), the conclusion is "neutral" in either mode and the title says that nothing ran.
Quarantined cases are left out of the conclusion, as they are left out of every health metric.
Note that GitHub's branch protection accepts "neutral" as passing for a required check.

What is written, all from one `Results` through `runner.report.markdown.render`:
- ONE check run named "skill-evals" per head SHA (`external_id` "skill-evals-report" tells ours
  apart from a workflow job that happens to carry the same name). A later publish for the same
  SHA updates it in place. Annotations sit at `case.file:case.line`: FAIL as "failure", ERROR
  and JUDGE-ERROR as "warning", at most 50 per request, the rest over repeated updates of the same
  check run. GitHub appends annotations on every update and has no call to remove one, so an
  update sends only the annotations the check run does not already carry, and says how many of
  the earlier ones no longer apply.
- ONE pull-request comment, found by the hidden marker at the start of its body and edited in
  place; created only when no comment starts with the marker.
- The rollup appended to $GITHUB_STEP_SUMMARY, with a note on top when something was not posted.

The token is passed in by the caller (this module never reads it from the environment), goes
only into PyGithub's Authorization header, and is scrubbed from every note; neither `Context`
nor `PublishOutcome` holds it.
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
from pydantic import BaseModel, Field

from runner.report import markdown
from runner.results import CaseResult, Results

log = logging.getLogger(__name__)

CHECK_NAME = "skill-evals"
EXTERNAL_ID = "skill-evals-report"
DEFAULT_API_URL = "https://api.github.com"
MARKER = markdown.MARKER
ROLLUP_LIMIT = 65_000        # the comment and output.summary both hold at most 65,535 characters
GITHUB_TEXT_LIMIT = 65_535
ANNOTATION_BATCH = 50        # the Checks API takes at most 50 annotations per request
ANNOTATION_MESSAGE_CUT = 2_000
ANNOTATION_TITLE_CUT = 255

Mode = Literal["advisory", "required"]
Conclusion = Literal["success", "neutral", "failure"]
Action = Literal["created", "updated", "skipped"]

RAN = ("PASS", "FAIL", "ERROR", "JUDGE-ERROR")
BAD = ("FAIL", "ERROR", "JUDGE-ERROR")
LEVELS = {"FAIL": "failure", "ERROR": "warning", "JUDGE-ERROR": "warning"}
TITLE_STATES = ("PASS", "FAIL", "ERROR", "JUDGE-ERROR", "QUARANTINED", "UNRUN")
ALWAYS_IN_TITLE = ("PASS", "FAIL", "UNRUN")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


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
    warnings: list[str] = Field(default=[], description="What could not be read from the environment.")

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
                   step_summary=Path(summary) if summary else None, warnings=warnings)


class PublishOutcome(BaseModel):
    """What publish did. Never holds the token."""

    conclusion: Conclusion
    title: str
    check_run_id: int | None = None
    check_run_action: Action = "skipped"
    check_run_url: str | None = None
    annotations_sent: int = Field(default=0, description="Annotations sent by this publish (an update does not "
                                                         "resend those the check run already carries).")
    comment_id: int | None = None
    comment_action: Action = "skipped"
    comment_url: str | None = None
    summary_written: bool = False
    notes: list[str] = []


# ---- conclusion and title -----------------------------------------------------------------------------

def _ran(results: Results) -> tuple[list[CaseResult], list[CaseResult]]:
    """(cases that count for the conclusion, quarantined cases that ran)."""
    counted = [c for c in results.cases if c.state in RAN]
    quarantined = [c for c in results.cases if c.state == "QUARANTINED" and c.underlying_state in RAN]
    return counted, quarantined


def conclusion(results: Results, mode: Mode = "advisory") -> Conclusion:
    """The check run's conclusion.

    - "advisory" (default): "neutral" when any case is FAIL, ERROR or JUDGE-ERROR, "success" when
      every executed case passed. Never "failure": eval results do not fail the job.
    - "required" (set by a human): "failure" when any case is FAIL, ERROR or JUDGE-ERROR, else "success".
    - In both modes UNRUN is never success by default: when no case executed (all UNRUN, or only
      quarantined cases ran) the conclusion is "neutral", and the title says nothing ran.
    Quarantined cases never count: they are excluded from health metrics (semantics §3).
    """
    if mode not in ("advisory", "required"):
        raise ValueError(f"unknown mode {mode!r}: use 'advisory' or 'required'")
    counted, _ = _ran(results)
    if not counted:
        return "neutral"
    if any(c.state in BAD for c in counted):
        return "failure" if mode == "required" else "neutral"
    return "success"


def dollars(value: float) -> str:
    return f"${value:,.2f}"


def title(results: Results) -> str:
    """e.g. "PASS 3 · FAIL 1 · UNRUN 10 · $0.42 of $10.00"; says so first when nothing ran."""
    counts = {state: sum(1 for c in results.cases if c.state == state) for state in TITLE_STATES}
    parts = [f"{state} {counts[state]}" for state in TITLE_STATES if counts[state] or state in ALWAYS_IN_TITLE]
    counted, quarantined = _ran(results)
    spend = f"{dollars(results.spend.usd)} of {dollars(results.spend.cap_usd)}"
    if not counted:
        lead = ("Nothing ran but quarantined cases, no result claimed" if quarantined
                else "Nothing ran, no result claimed")
        return " · ".join([lead, *parts, spend])
    return " · ".join([*parts, spend])


# ---- annotations --------------------------------------------------------------------------------------

def _plain(text: object, cut: int) -> str:
    """Annotation text is plain text: drop control and bidi characters, collapse whitespace, clip."""
    value = re.sub(r"\s+", " ", _CONTROL.sub("", "" if text is None else str(text))).strip()
    return value if len(value) <= cut else value[: cut - 1].rstrip() + "…"


def annotation(case: CaseResult) -> dict[str, Any]:
    details = [f"{case.state}: {case.uid} ({case.kind}, target {case.target})"]
    if case.reason:
        details.append(f"reason: {case.reason}")
    details.append(f"{case.wins} wins / {case.losses} losses / {case.errors} errors; "
                   f"{case.repeats_run} run of {case.repeats_planned} (quorum {case.quorum})")
    if case.fired_instead:
        details.append("fired instead: " + ", ".join(f"{k} x{v}" for k, v in case.fired_instead.items()))
    lost = [p.neighbour for p in case.pairs if p.state == "FAIL"]
    if lost:
        details.append("pairs lost: " + ", ".join(lost))
    for item in case.assertions:
        if item.state in BAD:
            details.append(f"assertion {item.index} {item.state}: {item.text}")
    line = max(1, case.line)
    return {"path": case.file, "start_line": line, "end_line": line, "annotation_level": LEVELS[case.state],
            "title": _plain(f"{CHECK_NAME} {case.state}: {case.uid}", ANNOTATION_TITLE_CUT),
            "message": _plain("; ".join(details), ANNOTATION_MESSAGE_CUT)}


def annotations(results: Results) -> tuple[list[dict[str, Any]], list[str]]:
    """Annotations for FAIL, ERROR and JUDGE-ERROR cases, and the uids that have no eval file to point at."""
    made, unplaced = [], []
    for case in results.cases:
        if case.state not in LEVELS:
            continue
        if not case.file:
            unplaced.append(case.uid)
            continue
        made.append(annotation(case))
    return made, unplaced


def _key(item: Mapping[str, Any]) -> tuple:
    return (item.get("path"), item.get("start_line"), item.get("annotation_level"), item.get("title") or "",
            item.get("message"))


# ---- publishing ---------------------------------------------------------------------------------------

class _Skip(Exception):
    """A part of publishing that could not be written; the message says why (no token in it)."""


def _why(exc: Exception, what: str, permission: str) -> str:
    if isinstance(exc, GithubException):
        data = exc.data if isinstance(exc.data, dict) else {}
        message = data.get("message") or ""
        said = f"GitHub answered {exc.status}" + (f" ({message})" if message else "")
        if exc.status in (403, 404):
            return (f"{what} not written: {said}. The token cannot write here: a pull request from a fork gets a "
                    f"read-only token, otherwise the workflow needs `permissions: {permission}: write`.")
        return f"{what} not written: {said}."
    return f"{what} not written: GitHub could not be reached ({type(exc).__name__})."


def _scrub(text: str, token: str | None) -> str:
    return text.replace(token, "[token]") if token else text


def _check_run(repo: Any, results: Results, mode: Mode, verdict: Conclusion, head: str,
               summary: str, outcome: PublishOutcome, notes: list[str]) -> None:
    wanted, unplaced = annotations(results)
    existing = None
    for run in repo.get_commit(head).get_check_runs(check_name=CHECK_NAME, filter="all"):
        if run.external_id == EXTERNAL_ID and (existing is None or run.id > existing.id):
            existing = run
    stale = 0
    if existing is not None:
        present = {_key(a.raw_data) for a in existing.get_annotations()}
        current = {_key(a) for a in wanted}
        stale = len(present - current)
        wanted = [a for a in wanted if _key(a) not in present]
    text_lines = [f"Mode: {mode}. " + ("Advisory: eval results never fail this check or the job."
                                       if mode == "advisory" else "Required: FAIL, ERROR or JUDGE-ERROR fail this check.")]
    if unplaced:
        notes.append(f"{len(unplaced)} failing or erroring case(s) have no eval file to annotate: "
                     + ", ".join(unplaced[:10]) + (" …" if len(unplaced) > 10 else ""))
    if stale:
        notes.append(f"{stale} annotation(s) from an earlier publish for this commit no longer apply; "
                     "GitHub's API cannot remove an annotation.")
    text_lines += [f"- {markdown.escape(n)}" for n in notes]
    text = "\n".join(text_lines)[:GITHUB_TEXT_LIMIT]
    batches = [wanted[i:i + ANNOTATION_BATCH] for i in range(0, len(wanted), ANNOTATION_BATCH)] or [[]]
    output = {"title": outcome.title, "summary": summary, "text": text}
    first = {**output, "annotations": batches[0]} if batches[0] else output
    now = datetime.now(timezone.utc)
    if existing is None:
        run = repo.create_check_run(name=CHECK_NAME, head_sha=head, external_id=EXTERNAL_ID, status="completed",
                                    conclusion=verdict, completed_at=now, output=first)
        outcome.check_run_action = "created"
    else:
        run = existing
        run.edit(status="completed", conclusion=verdict, completed_at=now, output=first)
        outcome.check_run_action = "updated"
    outcome.check_run_id, outcome.check_run_url = run.id, run.html_url
    outcome.annotations_sent = len(batches[0])
    for batch in batches[1:]:
        run.edit(output={**output, "annotations": batch})
        outcome.annotations_sent += len(batch)


def _comment(repo: Any, ctx: Context, body: str, outcome: PublishOutcome) -> None:
    issue = repo.get_issue(ctx.pr_number)
    ours = next((c for c in issue.get_comments() if (c.body or "").startswith(MARKER)), None)
    if ours is None:
        made = issue.create_comment(body)
        outcome.comment_id, outcome.comment_url, outcome.comment_action = made.id, made.html_url, "created"
    else:
        ours.edit(body)
        outcome.comment_id, outcome.comment_url, outcome.comment_action = ours.id, ours.html_url, "updated"


def _comment_body(rollup: str, verdict: Conclusion, mode: Mode) -> str:
    footer = (f"\n---\nCheck `{CHECK_NAME}`: **{verdict}** ({mode} mode"
              + ("; eval results never fail the job" if mode == "advisory" else "") + "). "
              "This comment is updated in place on every run.\n")
    return rollup + footer if len(rollup) + len(footer) <= GITHUB_TEXT_LIMIT else rollup


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
            seconds_between_requests: float | None = 0.25, seconds_between_writes: float | None = 1.0,
            timeout: int = 30) -> PublishOutcome:
    """Post the check run, the PR comment and the job summary (see the module docstring).

    Never raises for what GitHub answers or for an unreachable API: each part that could not be
    written is skipped and the reason recorded in `notes` (and in the job summary). The pacing
    arguments are PyGithub's (its defaults keep clear of GitHub's secondary rate limits).
    """
    verdict = conclusion(results, mode)
    outcome = PublishOutcome(conclusion=verdict, title=title(results))
    notes: list[str] = list(ctx.warnings)
    rollup = markdown.render(results, limit=ROLLUP_LIMIT)
    head = ctx.head_sha or ctx.sha

    reason = None
    if not token:
        reason = ("no GitHub token was given: no check run, no annotations and no PR comment were posted; "
                  "this job summary is the only report")
    elif not ctx.repository:
        reason = "GITHUB_REPOSITORY is not set (not running in GitHub Actions): nothing was posted to GitHub"
    elif ctx.read_only_token:
        reason = ("this pull request comes from a fork, whose workflow token is read-only: no check run, no "
                  "annotations and no PR comment were posted; this job summary is the only report")
    if reason:
        notes.append(reason)
    else:
        client = Github(base_url=ctx.api_url, auth=Auth.Token(token), per_page=100, lazy=True, timeout=timeout,
                        user_agent="skill-evals", seconds_between_requests=seconds_between_requests,
                        seconds_between_writes=seconds_between_writes)
        try:
            repo = client.get_repo(ctx.repository)
            if head:
                check_notes: list[str] = []
                try:
                    _check_run(repo, results, mode, verdict, head, rollup, outcome, check_notes)
                except (GithubException, requests.RequestException) as exc:
                    check_notes.append(_why(exc, "check run" if outcome.check_run_id is None
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
                    _comment(repo, ctx, _comment_body(rollup, verdict, mode), outcome)
                except (GithubException, requests.RequestException) as exc:
                    notes.append(_why(exc, "PR comment", "pull-requests"))
        finally:
            client.close()

    outcome.notes = [_scrub(n, token) for n in notes]
    posted = []
    if outcome.check_run_action != "skipped":
        posted.append(f"check run {outcome.check_run_action} ({verdict})")
    if outcome.comment_action != "skipped":
        posted.append(f"PR comment {outcome.comment_action}")
    if ctx.step_summary is None:
        outcome.notes.append("GITHUB_STEP_SUMMARY is not set: no job summary was written")
    else:
        try:
            _job_summary(ctx.step_summary, rollup, outcome, posted)
            outcome.summary_written = True
        except OSError as exc:
            outcome.notes.append(f"the job summary could not be written ({type(exc).__name__})")
    for note in outcome.notes:
        log.info("publish: %s", note)
    return outcome
