"""The description suggestion of `skill-evals improve` on a pull request: one review comment with a GitHub
```suggestion block on the description line(s) of SKILL.md, so the author accepts it in one click.

Only a `better` verdict is suggested; skill-evals never commits. One comment per skill, found by its hidden marker
and edited in place; a suggestion the evidence no longer supports is withdrawn, never deleted.

Design notes: docs/design/publishing.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import requests
from github import GithubException
from pydantic import BaseModel

from runner.corpus import bounded, frontmatter, repopath
from runner.improve.model import Candidate, Improve, Score
from runner.improve.skillmd import description_line, description_span
from runner.publish import github as gh
from runner.publish import rules
from runner.report import markdown

MARKER_PREFIX = "<!-- skill-evals-improve:"
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)
_BACKTICKS = re.compile(r"`+")

Where = Literal["review-comment", "pr-comment", "nothing"]


class SuggestionOutcome(BaseModel):
    """What publishing one improve.json did. Never holds the token."""

    skill: str
    verdict: str | None = None
    posted: Where = "nothing"
    action: gh.Action = "skipped"
    comment_id: int | None = None
    comment_url: str | None = None
    path: str | None = None
    lines: tuple[int, int] | None = None
    withdrawn: list[str] = []  # URLs of earlier suggestions edited to say they are withdrawn
    notes: list[str] = []


class Target(BaseModel):
    """Where the suggestion belongs: SKILL.md from the repository root, the description's lines, the new line."""

    path: str
    first: int
    last: int
    replacement: str


def marker(skill: str) -> str:
    # The skill's name is a folder name; anything that could close the HTML comment is dropped.
    return f"{MARKER_PREFIX}{skill.replace('--', '-').replace('>', '')} -->"


def chosen_candidate(record: Improve) -> Candidate | None:
    wanted = record.outcome.chosen or (record.test_comparison.candidate if record.test_comparison else None)
    return next((c for c in record.candidates if c.id == wanted), None)


def why_not(record: Improve) -> str | None:
    """Why this improve.json is not suggested (None: it is): only a `better` held-out verdict is."""
    verdict = record.outcome.verdict
    if record.outcome.state != "DONE":
        return f"improve ended {record.outcome.state}" + (f" ({record.outcome.reason})" if record.outcome.reason
                                                          else "") + ": nothing to suggest"
    if verdict is None:
        return "no candidate reached the held-out test (none was better on train and safe for the neighbours)"
    if verdict != "better":
        return (f"the chosen candidate is {verdict!r} on the held-out test cases, not better: only a candidate whose "
                "95% Wilson interval lies wholly above the current description's is suggested")
    if chosen_candidate(record) is None:
        return "improve.json names no chosen candidate"
    return None


def right_hunks(patch: str) -> list[tuple[int, int]]:
    """(first, last) new-file lines of each hunk of a unified-diff patch: the RIGHT-side lines (added and context
    lines, contiguous in the new file) GitHub accepts a line comment on."""
    spans = []
    for found in _HUNK.finditer(patch):
        start, count = int(found.group(1)), int(found.group(2) or "1")
        if count:
            spans.append((start, start + count - 1))
    return spans


def in_one_hunk(patch: str | None, first: int, last: int) -> bool:
    return patch is not None and any(low <= first and last <= high for low, high in right_hunks(patch))


def locate(record: Improve, library_root: Path, path_prefix: str) -> Target:
    """The suggestion's target from the SKILL.md in the checkout (ValueError when it cannot be placed honestly)."""
    skill_md = library_root / record.skill_md
    text = bounded.read_text(skill_md, bounded.OPTION_FILE_MAX_BYTES)
    parsed, _ = frontmatter.parse(text, "SKILL.md")
    if parsed is None or parsed.fields.get("description") != record.current_description:
        raise ValueError(f"{record.skill_md} no longer carries the description improve started from (changed since): "
                         "the suggestion would replace other text")
    first, last = description_span(text)
    chosen = chosen_candidate(record)
    assert chosen is not None  # why_not() checked it
    return Target(path=repopath.join(path_prefix, record.skill_md), first=first, last=last,
                  replacement=description_line(chosen.description))


def _score(score: Score | None) -> str:
    if score is None or score.wilson_95 is None:
        return "—"
    low, high = score.wilson_95
    return f"{score.passed}/{score.decided} [{low:.2f}, {high:.2f}]"


def fence(text: str) -> str:
    """A code fence longer than any run of backticks in `text`, so the description cannot close the block."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


def body(record: Improve, target: Target, *, inline: bool) -> str:
    """The comment: what was measured (train and held-out test, Wilson 95%), then the suggestion block (inline) or
    the diff (a PR comment, when the line is not in the pull request's diff)."""
    chosen = chosen_candidate(record)
    comparison = record.test_comparison
    assert chosen is not None and comparison is not None  # why_not() checked both
    current = record.candidates[0] if record.candidates and record.candidates[0].id == "current" else None
    lines = [marker(record.skill),
             f"**skill-evals improve: a better description for {markdown.escape(record.skill)}** "
             f"(candidate {markdown.escape(chosen.id)}, better on the held-out test cases)", "",
             "| description | train: passed / decided [Wilson 95%] | held-out test: passed / decided [Wilson 95%] |",
             "| --- | --- | --- |",
             f"| current | {_score(current.train if current else None)} | {_score(comparison.current)} |",
             f"| {markdown.escape(chosen.id)} | {_score(chosen.train)} | {_score(comparison.proposed)} |", "",
             f"Chosen on {len(record.train)} train case(s), checked against {len(record.neighbour_cases)} neighbour "
             f"case(s), then scored once on {len(record.test)} held-out case(s) the proposer never saw: "
             f"{markdown.escape(comparison.why)}. N={record.repeats}, k={record.quorum}, host {record.host}, "
             f"model {markdown.escape(record.model)}; spent ${record.spend.usd:.2f} of ${record.spend.cap_usd:.2f}.",
             ""]
    if inline:
        mark = fence(target.replacement)
        lines += [f"{mark}suggestion", target.replacement, mark, "",
                  "Accepting the suggestion is your commit: skill-evals never commits or pushes."]
    else:
        diff = record.diff or ""
        mark = fence(diff)
        lines += [f"The description ({markdown.escape(target.path)} lines {target.first}–{target.last}) is not part of this pull request's diff, and GitHub takes a "
                  "suggestion only on a line of the diff, so here is the change as a diff to apply by hand:", "",
                  f"{mark}diff", diff.rstrip("\n"), mark, "", "skill-evals never commits or pushes."]
    return gh.clip_bytes("\n".join(lines) + "\n")


def _review_comment(pull: Any, head: str, target: Target, text: str, outcome: SuggestionOutcome) -> None:
    mine = marker(outcome.skill)
    ours = [c for c in pull.get_review_comments() if (c.body or "").startswith(mine)]
    same = next((c for c in ours if c.path == target.path and c.line == target.last
                 and (c.start_line or c.line) == target.first), None)
    if same is not None:
        same.edit(text)
        outcome.comment_id, outcome.comment_url, outcome.action = same.id, same.html_url, "updated"
        return
    if target.first == target.last:
        made = pull.create_review_comment(text, head, target.path, line=target.last, side="RIGHT")
    else:  # a multi-line comment: the suggestion replaces every line from start_line to line
        made = pull.create_review_comment(text, head, target.path, line=target.last, side="RIGHT",
                                          start_line=target.first, start_side="RIGHT")
    outcome.comment_id, outcome.comment_url, outcome.action = made.id, made.html_url, "created"
    for old in ours:  # on lines a later push moved: no longer found by the marker, pointed at the new one
        old.edit(f"Superseded by a newer skill-evals suggestion: {made.html_url}")
        outcome.notes.append(f"an earlier suggestion ({old.html_url}) sat on other lines: marked superseded")


def _pr_comment(repo: Any, number: int, text: str, outcome: SuggestionOutcome) -> None:
    comment, action = gh.upsert_comment(repo, number, marker(outcome.skill), text)
    outcome.comment_id, outcome.comment_url, outcome.action = comment.id, comment.html_url, action


def withdrawn_body(skill: str, reason: str) -> str:
    """An earlier suggestion, withdrawn: the marker (so a later `better` edits this comment again), what happened and
    why, and no suggestion block or diff, so nothing is left to accept in one click."""
    return gh.clip_bytes("\n".join([
        marker(skill),
        f"**skill-evals improve: the earlier suggestion for {markdown.escape(skill)} is withdrawn.**", "",
        f"A later improve run for this skill does not support it: {markdown.escape(reason)}.", "",
        "The suggested change was removed from this comment so it cannot be accepted by mistake; that run's "
        "improve.json (in the workflow run's run folder artifact) has the figures. skill-evals never commits or pushes.",
    ]) + "\n")


def _withdraw(client: Any, ctx: gh.Context, skill: str, reason: str, outcome: SuggestionOutcome) -> None:
    """Edit every comment of this pull request that carries the skill's marker (review comments and the PR-comment
    fallback) to the withdrawn text; one already saying exactly that is left alone, so a re-run writes nothing."""
    assert ctx.repository and ctx.pr_number is not None
    repo = client.get_repo(ctx.repository)
    mine, text = marker(skill), withdrawn_body(skill, reason)
    comments = [*repo.get_pull(ctx.pr_number).get_review_comments(), *repo.get_issue(ctx.pr_number).get_comments()]
    for comment in comments:
        if (comment.body or "").startswith(mine) and comment.body != text:
            comment.edit(text)
            outcome.withdrawn.append(comment.html_url)
    if outcome.withdrawn:
        outcome.action = "updated"


def _post(client: Any, ctx: gh.Context, record: Improve, target: Target, outcome: SuggestionOutcome) -> None:
    assert ctx.repository and ctx.pr_number is not None and ctx.head_sha
    repo = client.get_repo(ctx.repository)
    pull = repo.get_pull(ctx.pr_number)
    found = next((f for f in pull.get_files() if f.filename == target.path), None)
    if in_one_hunk(found.patch if found is not None else None, target.first, target.last):
        _review_comment(pull, ctx.head_sha, target, body(record, target, inline=True), outcome)
        outcome.posted = "review-comment"
        return
    outcome.notes.append(f"{target.path} lines {target.first}–{target.last} are not in one hunk of this pull "
                         "request's diff (GitHub takes a line comment only there): the suggestion went into a PR "
                         "comment, as a diff")
    _pr_comment(repo, ctx.pr_number, body(record, target, inline=False), outcome)
    outcome.posted = "pr-comment"


def _summary_line(outcome: SuggestionOutcome) -> str:
    if outcome.posted == "review-comment":
        said = f"a suggestion on {markdown.escape(outcome.path)} lines {outcome.lines[0]}–{outcome.lines[1]} was {outcome.action}" \
            if outcome.lines else f"a suggestion was {outcome.action}"
    elif outcome.posted == "pr-comment":
        said = f"the suggested change was {outcome.action} as a PR comment"
    else:
        said = "no suggestion was posted"
    if outcome.withdrawn:
        said += "; the earlier suggestion (" + ", ".join(outcome.withdrawn) + ") was withdrawn"
    why = "; ".join(markdown.escape(n) for n in outcome.notes)
    return f"> **skill-evals improve {markdown.escape(outcome.skill)}:** {said}" + (f". Why: {why}" if why else "")


def publish_suggestion(record: Improve, ctx: gh.Context, token: str | None, library_root: Path, *,
                       path_prefix: str = "", seconds_between_requests: float | None = 0.25,
                       seconds_between_writes: float | None = 1.0, timeout: int = 30) -> SuggestionOutcome:
    """Post the suggestion of one improve.json (docs/design/publishing.md) and add one line to the job summary.

    Never raises for what GitHub answers, an unreachable API, or a SKILL.md that moved on: the part not written is
    skipped and the reason is in `notes` and the job summary line."""
    outcome = SuggestionOutcome(skill=record.skill, verdict=record.outcome.verdict)
    notes: list[str] = list(ctx.warnings)
    reason = why_not(record)
    blocked = gh.why_blocked(ctx, token)
    target: Target | None = None
    if reason is None:
        try:
            target = locate(record, library_root, path_prefix)
            outcome.path, outcome.lines = target.path, (target.first, target.last)
        except (OSError, ValueError) as exc:
            reason = f"the description's line could not be placed, so nothing was posted: {exc}"
    if blocked is None and ctx.pr_number is not None and (reason is not None or target is None):
        # Nothing to suggest now: an earlier suggestion for this skill must not stay acceptable (the design notes).
        client = gh.make_client(ctx, token or "", seconds_between_requests, seconds_between_writes, timeout)
        try:
            _withdraw(client, ctx, record.skill, reason or "no target", outcome)
        except (GithubException, requests.RequestException) as exc:
            notes.append(gh.why_not_written(exc, "withdrawing the earlier suggestion", "pull-requests"))
        finally:
            client.close()
    if reason is not None or target is None:
        notes.append(reason or "no target")
    elif blocked is not None:
        notes.append({"no-token": "no GitHub token was given", "fork": "this pull request comes from a fork, whose "
                      "workflow token is read-only", "no-repository": "GITHUB_REPOSITORY is not set (not running in "
                      "GitHub Actions)"}[blocked] + ": nothing was posted")
    elif ctx.pr_number is None or not ctx.head_sha:
        notes.append(f"not a pull request event ({ctx.event_name or 'unknown'}): a suggestion needs a pull request")
    else:
        client = gh.make_client(ctx, token or "", seconds_between_requests, seconds_between_writes, timeout)
        try:
            _post(client, ctx, record, target, outcome)
        except (GithubException, requests.RequestException) as exc:
            notes.append(gh.why_not_written(exc, "the suggestion", "pull-requests"))
        finally:
            client.close()
    outcome.notes = [rules.scrub(n, token) for n in [*notes, *outcome.notes]]
    if ctx.step_summary is not None:
        try:
            with ctx.step_summary.open("a", encoding="utf-8") as handle:
                handle.write(_summary_line(outcome) + "\n\n")
        except OSError as exc:
            outcome.notes.append(f"the job summary could not be written ({type(exc).__name__})")
    for note in outcome.notes:
        gh.log.info("publish --improve: %s", note)
    return outcome
