"""The forge-neutral rules of publishing a run: what every forge posts, decided once, with no forge's SDK.

The conclusion (advisory or required mode; UNRUN and UNDECIDED are never success; quarantined cases never count), the title
with the counts and the spend, the rollup fitted to a forge's byte limit, clipping on a character boundary, the
hidden marker that finds the one comment, the links line and the comment's footer. A forge (runner.publish.forges)
receives these as one `Publication` and only posts them; runner.publish.github is the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from runner.core.states import AGAINST, CASE_STATES, OPEN, RAN, CaseState
from runner.corpus import repopath
from runner.report import markdown
from runner.report.rollup import kind_label, rule_words, sequential_case_text
from runner.results import host_comparison as hosts_mod
from runner.results.build import CaseResult, Results
from runner.results.host_comparison import HostComparison, HostRun

CHECK_NAME = "skill-evals"
MARKER = markdown.MARKER  # starts the one comment's body: how a later publish finds it to edit in place
ROLLUP_ROOM = 535  # bytes a forge's text limit keeps free of the rollup, for the links line and the footer

Mode = Literal["advisory", "required"]
Conclusion = Literal["success", "neutral", "failure"]

ALWAYS_IN_TITLE: tuple[CaseState, ...] = ("PASS", "FAIL", "UNRUN")
_URL = re.compile(r"https?://[^\s()<>\[\]\"'`]+")


# ---- conclusion and title -----------------------------------------------------------------------------

def ran(results: Results) -> tuple[list[CaseResult], list[CaseResult]]:
    """(cases that count for the conclusion, quarantined cases that ran)."""
    counted = [c for c in results.cases if c.state in RAN]
    quarantined = [c for c in results.cases if c.state == "QUARANTINED" and c.underlying_state in RAN]
    return counted, quarantined


def conclusion(results: Results, mode: Mode = "advisory") -> Conclusion:
    """The check's (or status's) conclusion.

    - "advisory" (default): "neutral" when any case is FAIL, ERROR or JUDGE-ERROR, "success" when
      every executed case passed. Never "failure": eval results do not fail the job.
    - "required" (set by a human): "failure" when any case is FAIL, ERROR or JUDGE-ERROR, else "success".
    - In both modes UNRUN is never success by default: when no case executed (all UNRUN, or only
      quarantined cases ran) the conclusion is "neutral", and the title says nothing ran.
    - In both modes UNDECIDED (the sequential verdict ran every attempt it allows and the rate stayed open) is never
      success: with no FAIL, ERROR or JUDGE-ERROR and at least one UNDECIDED case the conclusion is "neutral" — a
      flake neither passes nor fails a gate — and the title counts the undecided cases.
    Quarantined cases never count: they are excluded from health metrics (semantics §3).
    - Attempt records refused as not written by the runner (results.json `refused_records`) are an error of the
      run, never a success, even when none of them names a case (runner.results.vetting).
    - With several hosts (results.json `hosts`, whose other fields are the first host's), the worst of every host's
      conclusion by the same rule: a comparison never hides a failure on any host.
    """
    if mode not in ("advisory", "required"):
        raise ValueError(f"unknown mode {mode!r}: use 'advisory' or 'required'")
    own = _own_conclusion(results, mode)
    if results.hosts is None:
        return own
    return worst([own, *(host_conclusion(run, mode) for run in results.hosts.hosts)])


CONCLUSION_ORDER: tuple[Conclusion, ...] = ("success", "neutral", "failure")


def worst(conclusions: Sequence[Conclusion]) -> Conclusion:
    return max(conclusions, key=CONCLUSION_ORDER.index)


def host_conclusion(run: HostRun, mode: Mode) -> Conclusion:
    """One host's conclusion from its counts (the comparison's record of its results.json), by conclusion's rule."""
    bad: Conclusion = "failure" if mode == "required" else "neutral"
    if run.refused_records:
        return bad
    if not hosts_mod.counted(run):
        return "neutral"
    if hosts_mod.against(run):
        return bad
    return "neutral" if hosts_mod.open_cases(run) else "success"


def _own_conclusion(results: Results, mode: Mode) -> Conclusion:
    """conclusion's rule for the cases of `results` itself."""
    if results.refused_records:
        return "failure" if mode == "required" else "neutral"
    counted, _ = ran(results)
    if not counted:
        return "neutral"
    if any(c.state in AGAINST for c in counted):
        return "failure" if mode == "required" else "neutral"
    if any(c.state in OPEN for c in counted):
        return "neutral"
    return "success"


def no_results_conclusion(mode: Mode) -> Conclusion:
    """A run that left no readable results.json claims nothing: neutral in advisory mode, failure in required."""
    return "failure" if mode == "required" else "neutral"


def dollars(value: float) -> str:
    return f"${value:,.2f}"


def title(results: Results) -> str:
    """e.g. "PASS 3 · FAIL 1 · UNRUN 10 · $0.42 of $10.00" ("PASS 3 · FAIL 0 · UNDECIDED 1 · UNRUN 10 · ..." when the
    sequential verdict left cases open: a state other than PASS, FAIL and UNRUN is counted only when some case is in
    it); says so first when nothing ran."""
    if results.hosts is not None:
        return hosts_title(results.hosts)
    counts = {state: sum(1 for c in results.cases if c.state == state) for state in CASE_STATES}
    parts = [f"{state} {counts[state]}" for state in CASE_STATES if counts[state] or state in ALWAYS_IN_TITLE]
    counted, quarantined = ran(results)
    spend = f"{dollars(results.spend.usd)} of {dollars(results.spend.cap_usd)}"
    if not counted:
        lead = ("Nothing ran but quarantined cases, no result claimed" if quarantined
                else "Nothing ran, no result claimed")
        return " · ".join([lead, *parts, spend])
    return " · ".join([*parts, spend])


def hosts_title(comparison: HostComparison) -> str:
    """e.g. "claude-code PASS 3 · FAIL 0 · UNRUN 1 | api PASS 2 · FAIL 1 · UNRUN 1 · $0.42 of $10.00": every host's
    counts, the spend across hosts; says so first when nothing ran anywhere."""
    def parts(counts: Mapping[str, int]) -> str:
        return " · ".join(f"{state} {counts.get(state, 0)}" for state in CASE_STATES
                          if counts.get(state, 0) or state in ALWAYS_IN_TITLE)

    shown = " | ".join(f"{run.name} {parts(run.counts)}" for run in comparison.hosts)
    spend = f"{dollars(comparison.spend_usd)} of {dollars(comparison.cap_usd)}"
    lead = [] if any(hosts_mod.counted(run) for run in comparison.hosts) else ["Nothing ran, no result claimed"]
    return " · ".join([*lead, shown, spend])


def case_details(case: CaseResult) -> list[str]:
    """What is said of one FAIL, ERROR, JUDGE-ERROR or UNDECIDED case at its eval file (GitHub: the annotation's
    message)."""
    details = [f"{case.state}: {case.uid} ({kind_label(case)}, target {case.target})"]
    if case.reason:
        details.append(f"reason: {case.reason}")
    if (sequential := sequential_case_text(case)) is not None:
        details.append(f"sequential verdict: {sequential}")
    details.append(f"{case.wins} wins / {case.losses} losses / {case.errors} errors; "
                   f"{case.repeats_run} run of {case.repeats_planned} ({rule_words(case)})")
    if case.fired_instead:
        details.append("fired instead: " + ", ".join(f"{k} x{v}" for k, v in case.fired_instead.items()))
    lost = [p.neighbour for p in case.pairs if p.state == "FAIL"]
    if lost:
        details.append("pairs lost: " + ", ".join(lost))
    for item in case.assertions:
        if item.state in AGAINST:
            details.append(f"assertion {item.index} {item.state}: {item.text}")
    return details


# ---- sizes ----------------------------------------------------------------------------------------------

def utf8_bytes(text: str) -> int:
    """What forges count: the text's size in UTF-8 (a report in Cyrillic or CJK is twice as many bytes)."""
    return len(text.encode("utf-8", "surrogatepass"))


def truncated_note(forge: str, limit: int) -> str:
    """What follows a text cut to fit `forge`'s limit of `limit` bytes."""
    return (f"\n\n**Truncated here to fit {forge}'s limit of {limit:,} bytes.** The full report is in the run's "
            "artifacts (results.json, report.html).\n")


def clip_bytes(text: str, limit: int, note: str) -> str:
    """`text` whole when it fits `limit` UTF-8 bytes, else cut on a character boundary with `note` after it."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    room = max(0, limit - utf8_bytes(note))
    return data[:room].decode("utf-8", "ignore") + note


def fitted_rollup(results: Results, limit: int, note: str) -> str:
    """The Markdown report in at most `limit` UTF-8 bytes.

    markdown.render fits a number of characters, giving up detail step by step and saying what it left out.
    Non-ASCII text takes 2 to 4 bytes a character, so the report is rendered again with proportionally fewer
    characters until its bytes fit. If not even its counts fit that way, it is cut with `note`.
    """
    chars, text = limit, None
    for _ in range(12):
        try:
            text = markdown.render(results, limit=chars)
        except ValueError:  # not even the counts fit this many characters
            break
        size = utf8_bytes(text)
        if size <= limit:
            return text
        chars = min(chars - 1, chars * limit // size)
    if text is None:
        text = markdown.render(results, limit=max(limit, 1_000_000))
    return clip_bytes(text, limit, note)


# ---- links, footer, the publication --------------------------------------------------------------------

def links_line(links: Mapping[str, str], run_url: str | None, notes: list[str]) -> str:
    """One Markdown line linking the reports (artifacts) and the CI run; "" when there is nothing to link.
    A link whose URL is not a plain http(s) URL is left out, and `notes` says so."""
    items = []
    for label, url in links.items():
        if _URL.fullmatch(url or ""):
            items.append(f"[{markdown.escape(label)}]({url})")
        else:
            notes.append(f"the link {label!r} was left out: its URL is not a plain http(s) URL")
    if run_url:
        items.append(f"[workflow run]({run_url})")
    return "**Reports:** " + " · ".join(items) + "\n" if items else ""


def footer(verdict: Conclusion, mode: Mode) -> str:
    """The comment's last lines: the check's conclusion and mode, and that the comment is edited in place."""
    return (f"\n---\nCheck `{CHECK_NAME}`: **{verdict}** ({mode} mode"
            + ("; eval results never fail the job" if mode == "advisory" else "") + "). "
            "This comment is updated in place on every run.\n")


@dataclass(frozen=True)
class Publication:
    """What every forge posts for one results.json, decided here: a forge only writes it where it belongs."""

    mode: Mode
    conclusion: Conclusion
    title: str
    report: str  # the fitted rollup and the links line: the check's summary, the job summary
    comment: str  # the one comment's body: starts with MARKER, the report and the footer, clipped to the limit
    notes: tuple[str, ...] = ()  # what the rules left out (a link that is not a plain URL), said by the forge


def publication(results: Results, mode: Mode = "advisory", *, forge: str, text_limit: int,
                links: Mapping[str, str] | None = None, run_url: str | None = None,
                notes: Sequence[str] = ()) -> Publication:
    """The publication of `results` for a forge that takes `text_limit` UTF-8 bytes in a summary or a comment
    (`forge` names it in the note of a cut text); `run_url` is the CI run's page, linked beside `links`. `notes`:
    what the caller has to say already (the forge says them before the rules' own)."""
    verdict = conclusion(results, mode)
    notes = list(notes)
    linked = links_line(links or {}, run_url, notes)
    closing = footer(verdict, mode)
    note = truncated_note(forge, text_limit)
    rollup = fitted_rollup(results, min(text_limit - ROLLUP_ROOM, text_limit - utf8_bytes(linked + "\n" + closing)),
                           note)
    report = rollup + ("\n" + linked if linked else "")
    return Publication(mode=mode, conclusion=verdict, title=title(results), report=report,
                       comment=clip_bytes(report + closing, text_limit, note), notes=tuple(notes))


# ---- secrets and paths -----------------------------------------------------------------------------------

def scrub(text: str, token: str | None) -> str:
    """`text` with the token replaced: no note a forge writes or prints ever holds it."""
    return text.replace(token, "[token]") if token else text


def library_prefix(library: Path | None, run_dir: Path, environ: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """(the library root's path inside its repository, a note when it could not be known).

    From `--library` when given (the folder it resolves to, as every command resolves it), else from the run
    folder's plan.json when the library root it names exists here (a run on this machine; a container's /repo
    does not)."""
    from runner.corpus import layout

    root: Path | None = None
    if library is not None:
        try:
            root = layout.locate(library).root
        except layout.LibraryError as exc:
            return "", f"annotation paths are relative to the library, not the repository ({exc})"
    else:
        try:
            plan = run_dir / "plan.json"
            if not plan.exists():  # a comparison of hosts: every host's plan names the same library
                plan = next(iter(sorted(run_dir.glob("hosts/*/plan.json"))), plan)
            named = json.loads(plan.read_text(encoding="utf-8"))["library"]["root"]
            root = Path(named) if isinstance(named, str) and Path(named).is_dir() else None
        except (OSError, ValueError, KeyError, TypeError):
            root = None
    return (repopath.prefix(root, environ) if root is not None else ""), None
