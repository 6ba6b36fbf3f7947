"""The GitHub-flavoured Markdown rollup of one results.json: a PR comment that also reads raw in a terminal.

Rendered from a `Results` only (semantics §9), through `rollup.build`. Order: the hidden marker, the
header (and the approximation warning), state counts, the per-skill table, the routing matrix's worst confusions
and per-skill table, failing / erroring /
judge-erroring cases in `<details>` blocks, quarantine, unjudgeable assertions, surface warnings,
what the floor held back, UNRUN by reason and, last, the sentence that the UNRUN cases were not executed.

Safety: every piece of text that comes from the corpus, the model, the judge or a file passes
through `escape()` (see its docstring); nothing else is user text.

Size: the whole comment fits `limit` characters. Detail is given up step by step (see `render`);
the header, state counts, per-skill counts, UNRUN by reason and the not-executed sentence are
never dropped.

Why one long module: the step-by-step shortening of `render` needs every section's renderer in reach.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runner.core.quorum import wilson_interval
from runner.core.states import RAN
from runner.probes.arms import ArmResult
from runner.report import host_table as hosts_mod
from runner.report import rollup as rollup_mod
from runner.report.rollup import Note, Rollup, SkillRollup
from runner.results.build import CaseResult, Results, floor_note, kill_note, not_started_note, sweep_note, wall_note
from runner.results.uplift import Uplift, UpliftArm
from runner.results.uplift import describe as uplift_text

MARKER = "<!-- skill-evals-report -->"
DEFAULT_LIMIT = 65_000  # GitHub refuses comments over 65,535 characters; this leaves room for a note.

ZWSP = "&#8203;"  # zero-width space as a character reference: invisible, but breaks @mentions and #refs
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SPACE = re.compile(r"\s+")
_SPECIAL = re.compile(r"[&<>|`*~\[\]\\$@]|#(?=\d)|_+")
_REFS = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "&#124;", "`": "&#96;", "*": "&#42;", "~": "&#126;",
         "[": "&#91;", "]": "&#93;", "\\": "&#92;", "$": "&#36;", "@": "@" + ZWSP, "#": "#" + ZWSP}


def escape(text: object) -> str:
    """Make one piece of text from the corpus, the model, the judge or a file inert in the report.

    The result is safe both in Markdown (paragraphs, list items, table cells) and inside the raw
    HTML of a `<summary>` line, where Markdown backslash escapes are not processed — so it uses
    HTML character references only, never backslashes, and user text is never put in a code span:

    - control and bidi-override characters are dropped; every run of whitespace, newlines
      included, becomes one space: user text can never start a block, end a table row, or end
      the HTML block of a `<details>` line;
    - `&` `<` `>` become `&amp;` `&lt;` `&gt;`: no tag (`<script>`, `</details>`, `<summary>`),
      no comment (`<!--`), no autolink and no entity of the text's own can form;
    - `|` becomes `&#124;`: GFM splits table rows on the literal character only, so user text
      never adds a cell;
    - `` ` `` becomes `&#96;`: user text never opens or closes a code span;
    - `*` `~` `[` `]` `\\` `$`, and `_` unless it sits between two letters or digits (where GFM
      cannot use it for emphasis), become references: no emphasis, strikethrough, link, image,
      backslash escape or math can start in user text and spill into the report's own text;
    - `@` becomes `@&#8203;` and `#` before a digit `#&#8203;` (a zero-width space; the approach
      Renovate's `sanitizeMarkdown` uses for PR bodies): GitHub shows the text as written but
      does not mention the user or team, nor link or cross-reference an issue.
    """
    if text is None:
        return ""
    raw = _SPACE.sub(" ", _CONTROL.sub("", str(text))).strip()

    def replace(match: re.Match[str]) -> str:
        found = match.group(0)
        if found[0] == "_":
            before = raw[match.start() - 1] if match.start() > 0 else " "
            after = raw[match.end()] if match.end() < len(raw) else " "
            if before.isalnum() and after.isalnum():
                return found
            return "&#95;" * len(found)
        return _REFS[found]

    return _SPECIAL.sub(replace, raw)


def clip(text: object, size: int | None) -> str:
    """Shorten raw text (before escaping, so no character reference is ever cut in half)."""
    value = _SPACE.sub(" ", "" if text is None else str(text)).strip()
    if size is None or len(value) <= size:
        return value
    return value[: max(0, size - 1)].rstrip() + "…"


# ---- small formatters (report's own text; every user value goes through escape) -----------------

def percent_interval(interval: tuple[float, float] | None) -> str:
    """Whole percents rounded outwards (never narrower than the interval): 1600/1600 is 99–100%, not 100–100%."""
    if interval is None:
        return ""
    low, high = interval
    return f"{math.floor(low * 100 + 1e-9)}–{math.ceil(high * 100 - 1e-9)}%"


def accuracy(wins: int, run: int) -> str:
    """`wins/run (low–high%)` with the Wilson 95% interval; `—` when no trigger case ran."""
    if run == 0:
        return "—"
    return f"{wins}/{run} ({percent_interval(wilson_interval(wins, run))})"


def pairs_cell(won: int, lost: int) -> str:
    return "—" if won == 0 and lost == 0 else f"{won}/{lost}"


def refusal_cell(compliant: int, run: int) -> str:
    return "—" if run == 0 else f"{compliant}/{run}"


def usd(value: float) -> str:
    # Written as "1.23 USD", never "$1.23": two dollar signs in a paragraph can render as math on GitHub.
    return f"{value:.2f} USD"


def state_with_reason(case: CaseResult, bold: bool = False) -> str:
    state = f"{case.state} (underlying {case.underlying_state})" if case.underlying_state else case.state
    state = rollup_mod.state_with_grade(case, state)
    if bold:
        state = f"**{state}**"
    return f"{state} — {escape(case.reason)}" if case.reason else state


def repeats_line(case: CaseResult) -> str:
    return (f"{case.wins} wins / {case.losses} losses / {case.errors} errors; "
            f"{case.repeats_run} run of {case.repeats_planned} ({rollup_mod.rule_words(case)})")


def fired_instead(case: CaseResult) -> str:
    return ", ".join(f"{escape(name)} ×{count}" for name, count in case.fired_instead.items())


def pairs_line(case: CaseResult) -> str:
    parts = []
    for pair in case.pairs:
        detail = f"won {pair.won} / lost {pair.lost}"
        if pair.reason:
            detail += f"; {escape(pair.reason)}"
        parts.append(f"vs {escape(pair.neighbour)} {pair.state} ({detail})")
    return " · ".join(parts)


def table(head: list[str], rows: list[list[str]], align: list[str] | None = None) -> list[str]:
    align = align or ["---"] * len(head)
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


# ---- shape: how much detail this rendering keeps ---------------------------------------------------

@dataclass(frozen=True)
class Shape:
    """Detail level 0 = everything; 1 = texts cut, passing assertions and extra evidence left out;
    2 = one line per case, no assertions; 3 = uid only. From level 1 on, user text in the kept
    sections (header values, skill names, UNRUN reasons) is cut to NOTE_CUT characters too; numbers
    never are. `items` caps listed cases and notes (None = all); `skills` caps per-skill rows."""
    level: int = 0
    items: int | None = None
    skills: int | None = None


TEXT_CUT = 200  # characters of an assertion text or a piece of evidence at level 1
NOTE_CUT = 120  # characters of a note or quarantine reason at level 3


class Budget:
    """How many cases and notes may still be listed (across sections, in report order)."""

    def __init__(self, items: int | None) -> None:
        self.left = items
        self.omitted = 0

    def take(self, n: int) -> int:
        if self.left is None:
            return n
        shown = min(n, self.left)
        self.left -= shown
        self.omitted += n - shown
        return shown


# ---- sections ----------------------------------------------------------------------------------------

def header(results: Results, roll: Rollup, shape: Shape) -> list[str]:
    cut = None if shape.level == 0 else NOTE_CUT
    h = {key: escape(clip(value, cut)) for key, value in roll.header.items()}
    host = h["host_text"]
    lines = [MARKER,
             f"**Skill evals** · tier {h['tier']} · host {host} · model {h['model']} · "
             f"judge {h['judge_model']} · {escape(rollup_mod.verdict_text(results))} · "
             f"spend {usd(results.spend.usd)} of {usd(results.spend.cap_usd)} cap · "
             f"coverage {roll.executed} run / {roll.not_executed} UNRUN", ""]
    if results.plan.approximation:
        lines += [f"> **Approximation:** {escape(clip(results.plan.approximation, cut and TEXT_CUT))}", ""]
    graded = rollup_mod.grade_line(results)
    if graded:
        lines += [f"> **Activation grade:** {escape(graded)}", ""]
    facts = [f"plan {escape(results.plan.hash[:12])}", f"finished {escape(clip(results.finished_at, 40))}",
             f"{results.attempts_finished} attempts ({results.attempts_errored} errored)",
             f"judge: {results.spend.judge_calls} calls, {usd(results.spend.judge_usd)}"]
    if results.plan.batch:
        facts.append("Message Batches (half price)")
    if roll.judge_error_rate is not None:
        facts.append(f"judge-error rate {roll.judge_error_rate * 100:.0f}%")
    if results.plan.judge_prompt_version:
        facts.append(f"judge prompt {escape(clip(results.plan.judge_prompt_version, cut))}")
    lines.append(" · ".join(facts))
    if roll.cost_line:
        lines += ["", f"Cost: {escape(roll.cost_line)}"]
    if roll.first_turn_line:
        lines += ["", f"Host: {escape(roll.first_turn_line)}"]
    if roll.records_line:
        lines += ["", f"> **Attempt log:** {escape(roll.records_line)}."]
    if (note := kill_note(results)) is not None:
        lines += ["", f"> **Killed before:** {escape(note)}."]
    if (note := floor_note(results)) is not None:
        lines += ["", f"> **Floor:** {escape(clip(note, cut))}"]
    if (note := wall_note(results)) is not None:
        lines += ["", f"> **Sessions:** {escape(clip(note, cut))}"]
    if (note := sweep_note(results)) is not None:
        lines += ["", f"> **Routing sweep:** {escape(note)}."]
    if (note := not_started_note(results)) is not None:
        lines += ["", f"> **Not started:** {escape(note)}."]
    if results.stop_reason:
        lines += ["", f"The run stopped early: {escape(clip(results.stop_reason, cut))}."]
    return lines + [""]


def state_counts(roll: Rollup) -> list[str]:
    states = roll.shown_states
    counts = [str(roll.counts.get(state, 0)) for state in states]
    total = sum(roll.counts.get(state, 0) for state in states)
    return ["### State counts", ""] + table([*states, "Total"], [[*counts, str(total)]],
                                             ["---:"] * (len(states) + 1)) + [""]


def badness(skill: SkillRollup) -> tuple[Any, ...]:
    """Sort key, worst first: FAIL+ERROR+JUDGE-ERROR cases, then FAILs, ERRORs, UNDECIDED cases, trigger losses,
    pairs lost, refusals not complied with, then the name."""
    problems = skill.states["FAIL"] + skill.states["ERROR"] + skill.states["JUDGE-ERROR"]
    return (-problems, -skill.states["FAIL"], -skill.states["ERROR"], -skill.states.get("UNDECIDED", 0),
            -(skill.trigger_run - skill.trigger_wins),
            -skill.pairs_lost, -(skill.refusal_run - skill.refusal_compliant), skill.skill)


def skill_row(name: str, skills: list[SkillRollup], states_shown: Sequence[str], baselined: bool = False) -> list[str]:
    states = [str(sum(s.states.get(state, 0) for s in skills)) for state in states_shown]
    wins, run = sum(s.trigger_wins for s in skills), sum(s.trigger_run for s in skills)
    row = [name, *states, accuracy(wins, run),
           pairs_cell(sum(s.pairs_won for s in skills), sum(s.pairs_lost for s in skills)),
           refusal_cell(sum(s.refusal_compliant for s in skills), sum(s.refusal_run for s in skills))]
    if baselined:  # one skill's uplift; rows that sum several skills claim none
        row.append(escape(uplift_cell(skills[0].uplift)) if len(skills) == 1 else "")
    return row


def skill_table(roll: Rollup, shape: Shape) -> list[str]:
    ordered = sorted(roll.skills, key=badness)
    shown = ordered if shape.skills is None else ordered[: shape.skills]
    rest = ordered[len(shown):]
    cut = None if shape.level == 0 else NOTE_CUT
    up = roll.baselined
    states = roll.shown_states
    rows = [skill_row(escape(clip(s.skill, cut)), [s], states, up) for s in shown]
    if rest:
        rows.append(skill_row(f"*{len(rest)} other skills (totals)*", rest, states, up))
    rows.append(skill_row(f"**All {len(ordered)} skills**", ordered, states, up))
    title = "### Per skill (most problems first)"
    lines = [title, ""]
    # A file-read run's verdicts and accuracy rest on SKILL.md reads: its state and accuracy columns say so.
    graded = f" ({rollup_mod.FILE_READ})" if roll.file_read else ""
    heads = [f"{state}{graded}" if state in ("PASS", "FAIL", "UNDECIDED") else state for state in states]
    lines += table(["Skill", *heads, f"Trigger accuracy (Wilson 95%{', ' + rollup_mod.FILE_READ if graded else ''})",
                    "Pairs won/lost", "Refusal compliance",
                    *([UPLIFT_HEAD] if up else [])],
                   rows, ["---", *["---:"] * len(states), "---", "---:", "---:", *(["---"] if up else [])])
    lines += ["", "Trigger accuracy, pairs and refusal compliance leave quarantined cases out; the state "
                  "counts do not."]
    if up:
        lines.append(UPLIFT_NOTE)
    if rest:
        lines.append(f"The {len(rest)} skills with the fewest problems are summed in one row to fit the comment "
                     "limit; results.json has each of them.")
    return lines + [""]


ROUTING_INTRO = ("Which skill fired on the prompts of every trigger, refusal, no_trigger and discrimination case, over "
                 "the attempts that ran (results.json `routing`: both matrices, every confusion with its cases). "
                 "Precision and recall with Wilson 95% intervals; F1 = 2tp/(2tp+fp+fn), its interval from the "
                 "97.5% corners of the two.")


def routing_section(results: Results, shape: Shape) -> list[str]:
    """The worst confusions and the per-skill routing table. It shrinks as the per-skill table does: at the last
    steps of `render` it keeps as many rows (and confusions) as the skill table keeps."""
    found = rollup_mod.shown_routing(results)
    if found is None:
        return []
    keep = shape.skills
    cut = None if shape.level == 0 else NOTE_CUT
    lines = [f"### Routing ({found.attempts} attempts)", "", ROUTING_INTRO + " " + escape(rollup_mod.excluded_text(found))
             + ".", ""]
    worst = found.confusions[: rollup_mod.WORST_CONFUSIONS if keep is None else min(keep, rollup_mod.WORST_CONFUSIONS)]
    if worst:
        lines += [f"Worst confusions ({len(worst)} of {len(found.confusions)}):", ""]
        for confusion in worst:
            cases = "" if shape.level >= 2 else " — " + ", ".join(escape(clip(uid, cut)) for uid in confusion.cases)
            lines.append(f"1. {escape(rollup_mod.confusion_text(confusion))}; first in {confusion.first}{cases}")
        lines.append("")
    elif found.attempts:
        lines += ["No confusion: no skill fired on another skill's prompts.", ""]
    order = rollup_mod.routing_order(found)
    shown = order if keep is None else order[:keep]
    rows = [[escape(clip(name, cut)), rollup_mod.rate_text(found.per_skill[name].precision),
             rollup_mod.rate_text(found.per_skill[name].recall),
             rollup_mod.rate_text(found.per_skill[name].f1, fraction=False),
             f"{found.per_skill[name].tp} / {found.per_skill[name].fp} / {found.per_skill[name].fn}"] for name in shown]
    if rows:
        lines += table(["Skill", "Precision (Wilson 95%)", "Recall (Wilson 95%)", "F1 (95%)", "tp / fp / fn"], rows,
                       ["---", "---", "---", "---", "---:"])
        if len(shown) < len(order):
            lines += ["", f"{len(order) - len(shown)} more skill(s) not listed to fit the comment limit: see "
                          "results.json `routing.per_skill`."]
        lines.append("")
    return lines


SEQUENTIAL_INTRO = ("Each case runs in rounds until its rate was decided above or below the band, or until the bound; a "
                    "case still open then is UNDECIDED: neither PASS nor FAIL is claimed (results.json `sequential`, "
                    "`cases[].sequential`).")


def sequential_section(results: Results, shape: Shape) -> list[str]:
    """The run's sequential verdict: the rule, its exact error bounds, the cases by state, the sessions against
    fixed N = 3 and the bound, and the cases fixed N = 3 would have given another state. It shrinks as the routing
    section does: at the last steps of `render` it lists as many flips as the skill table keeps rows."""
    found = results.sequential
    if found is None:
        return []
    cut = None if shape.level == 0 else NOTE_CUT
    lines = ["### Sequential verdict", "", SEQUENTIAL_INTRO, "",
             f"- rule: {escape(clip(found.rule, cut))}",
             f"- error bounds: {escape(rollup_mod.sequential_bounds_text(found, results))}",
             f"- cases: {escape(rollup_mod.sequential_cases_text(found))}",
             f"- sessions: {escape(rollup_mod.sequential_sessions_text(found))}",
             f"- {escape(rollup_mod.flips_intro(found))}", ""]
    keep = rollup_mod.WORST_FLIPS if shape.skills is None else min(shape.skills, rollup_mod.WORST_FLIPS)
    shown = found.flips[:keep]
    if shown:
        lines += [f"1. {escape(clip(flip.uid, cut))}: {flip.state}, fixed N = 3 would have said {flip.fixed_n3}"
                  for flip in shown]
        if len(shown) < len(found.flips):
            lines.append(f"{len(found.flips) - len(shown)} more not listed: see results.json `sequential.flips`.")
        lines.append("")
    return lines


def hosts_section(results: Results, shape: Shape) -> list[str]:
    """`run --host a,b,...`: each host's run, trigger accuracy per skill per host (the grade marked) and the cases
    whose state differs between hosts. It shrinks as the skill table does; every host's line always stays."""
    found = results.hosts
    if found is None:
        return []
    lines = ["### Hosts", "", escape(hosts_mod.INTRO), ""]
    lines += [f"- {escape(hosts_mod.host_line(run))}" for run in found.hosts]
    lines += [f"- {escape(hosts_mod.spend_line(found))}", ""]
    shown = found.skills if shape.skills is None else found.skills[: shape.skills]
    if shown:
        lines += table(["Skill", *(escape(hosts_mod.column_head(run)) for run in found.hosts)],
                       [[escape(row.skill), *(escape(hosts_mod.cell(a)) for a in row.hosts)] for row in shown])
        if len(shown) < len(found.skills):
            lines += ["", f"{len(found.skills) - len(shown)} more skill(s) not listed to fit the comment limit: see "
                          "results.json `hosts.skills`."]
        lines.append("")
    keep = hosts_mod.SHOWN_DIFFERENCES if shape.skills is None else min(shape.skills, hosts_mod.SHOWN_DIFFERENCES)
    if found.differences:
        lines += [f"Cases whose state differs between hosts ({len(found.differences)}):", ""]
        lines += [f"1. {escape(hosts_mod.difference_line(d))}" for d in found.differences[:keep]]
        if len(found.differences) > keep:
            lines.append(f"{len(found.differences) - keep} more not listed: see results.json `hosts.differences`.")
    else:
        lines.append("Every case has the same state on every host.")
    return lines + [""]


UPLIFT_HEAD = "Uplift (rubric pass rate with - without the skill)"
UPLIFT_NOTE = ("Uplift (`run --baseline`): each output case also ran without the skill under test, judged by the same "
               "rubric; the difference of pass rates in points with a conservative 95% interval (treatment Wilson "
               "low - control Wilson high, treatment high - control low); an interval that spans 0 is no "
               "measurable uplift. results.json `uplift` has each arm's tokens, turns and duration.")


def uplift_cell(uplift: Uplift | None) -> str:
    return uplift_text(uplift) if uplift is not None else ""


def assertion_lines(case: CaseResult, level: int) -> list[str]:
    shown = case.assertions if level == 0 else [a for a in case.assertions if a.state != "PASS"]
    cut = None if level == 0 else TEXT_CUT
    lines = []
    for a in shown:
        # "assertion 1", never "#1": GitHub would turn #1 into a link to an issue.
        reason = f" ({escape(a.reason)})" if a.reason else ""
        lines.append(f"  - assertion {a.index} ({escape(a.assertion_class)}): **{a.state}**{reason}, "
                     f"{a.passes} pass / {a.fails} fail — {escape(clip(a.text, cut))}")
        for evidence in (a.evidence if level == 0 else a.evidence[:1]):
            lines.append(f"    - evidence: “{escape(clip(evidence, cut))}”")
    hidden = len(case.assertions) - len(shown)
    if hidden:
        lines.append(f"  - {hidden} passing assertion(s) not listed")
    return lines


def routing_lines(case: CaseResult, level: int) -> list[str]:
    """A routing case's assertions, each with what fired in its attempts (at level 1 only the first attempt's)."""
    cut = None if level == 0 else TEXT_CUT
    lines = []
    for part in case.routing:
        lines.append(f"  - {escape(part.says)}: **{part.state}**, {part.passes} pass / {part.fails} fail"
                     + (f" / {part.errors} open" if part.errors else ""))
        for attempt in (part.attempts if level == 0 else part.attempts[:1]):
            lines.append(f"    - {escape(attempt.attempt)} {attempt.state}: “{escape(clip(attempt.evidence, cut))}”")
    return lines


def case_details(case: CaseResult, level: int) -> list[str]:
    lines = [f"<details><summary>{rollup_mod.state_with_grade(case, case.state)} · {escape(case.uid)} · {escape(rollup_mod.kind_label(case))}</summary>", "",
             f"- **{escape(case.uid)}** · skill {escape(case.skill)} · kind {escape(rollup_mod.kind_label(case))} · "
             f"target {escape(case.target)}",
             f"- state: {state_with_reason(case, bold=True)}"]
    if case.parts:
        lines.append("- parts: " + " · ".join(f"{escape(k)} {escape(v)}" for k, v in case.parts.items()))
    lines.append(f"- repeats: {repeats_line(case)}")
    if (sequential := rollup_mod.sequential_case_text(case)) is not None:
        lines.append(f"- sequential verdict: {sequential}")  # the runner's own text: states and numbers
    if case.activation is not None:
        act = case.activation
        if act.observed_runs:
            interval = f" ({percent_interval(act.wilson_95)})" if act.wilson_95 else ""
            lines.append(f"- activation {act.state}: target fired in {act.fired_runs} of {act.observed_runs} "
                         f"observed runs{interval}")
        else:
            lines.append(f"- activation {act.state}: no run was observed")
    if case.fired_instead:
        lines.append(f"- fired instead: {fired_instead(case)}")
    if case.pairs:
        lines.append(f"- pairs: {pairs_line(case)}")
    if case.routing:
        lines.append("- routing:")
        lines += routing_lines(case, level)
    if case.assertions:
        lines.append("- assertions:")
        lines += assertion_lines(case, level)
    for warning in case.warnings:
        lines.append(f"- warning: {escape(clip(warning, None if level == 0 else TEXT_CUT))}")
    if case.attempts:
        lines.append("- attempts: " + ", ".join(escape(a) for a in case.attempts))
    lines.append(f"- cost: {usd(case.cost_usd)}")
    return lines + ["", "</details>", ""]


def case_line(case: CaseResult, level: int) -> str:
    if level >= 3:
        return f"- {escape(case.uid)}"
    parts = [escape(case.uid), escape(rollup_mod.kind_label(case)), state_with_reason(case),
             f"{case.wins}/{case.losses}/{case.repeats_run} of {case.repeats_planned}"]
    if case.parts:
        parts.append(", ".join(f"{escape(k)} {escape(v)}" for k, v in case.parts.items()))
    if (sequential := rollup_mod.sequential_case_text(case)) is not None:
        parts.append(sequential)  # the runner's own text: states and numbers
    if case.fired_instead:
        parts.append(f"fired instead: {fired_instead(case)}")
    lost = [p for p in case.pairs if p.state == "FAIL"]
    if lost:
        parts.append("pairs lost: " + ", ".join(escape(p.neighbour) for p in lost))
    return "- " + " · ".join(parts)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def more_line(hidden: int, what: str) -> str:
    return f"- {hidden} more {what} not listed: see results.json"


def none_listed(n: int, what: str) -> list[str]:
    return [f"{plural(n, what)} not listed here: see results.json.", ""]


def case_section(title: str, intro: str, cases: list[CaseResult], shape: Shape, budget: Budget) -> list[str]:
    if not cases:
        return []
    shown = cases[: budget.take(len(cases))]
    lines = [f"### {title} ({len(cases)})", ""] + ([intro, ""] if intro else [])
    if shape.level <= 1 and len(shown) == len(cases):
        for case in shown:
            lines += case_details(case, shape.level)
        return lines
    if not shown:
        return lines + none_listed(len(cases), "case")
    how = "uid only" if shape.level >= 3 else "one line each: uid · kind · state · wins/losses/run of N"
    lines += [f"<details><summary>{len(cases)} case(s), {how}</summary>", ""]
    lines += [case_line(case, shape.level) for case in shown]
    if len(shown) < len(cases):
        lines.append(more_line(len(cases) - len(shown), "cases"))
    return lines + ["", "</details>", ""]


QUARANTINE_RAN = ("Quarantined cases still ran; their state is shown with the underlying state, and they are left "
                  "out of the health metrics.")


def quarantine_section(cases: list[CaseResult], shape: Shape, budget: Budget) -> list[str]:
    """The quarantined cases: those that ran with their underlying state, those that did not (no key, the cap, ...)
    as UNRUN with its reason, never said to have run."""
    if not cases:
        return []
    ran = [c for c in cases if c.underlying_state in RAN]
    unrun = [c for c in cases if c.underlying_state not in RAN]
    shown = [*ran, *unrun][: budget.take(len(cases))]
    cut = None if shape.level == 0 else (TEXT_CUT if shape.level < 3 else NOTE_CUT)
    rows = []
    for case in shown:
        entry = case.quarantine
        state = (f"QUARANTINED ({case.underlying_state})" if case.underlying_state in RAN
                 else f"QUARANTINED (UNRUN {escape(case.reason or 'unknown')})")
        rows.append([escape(case.uid), state,
                     escape(clip(entry.reason, cut)) if entry else "—",
                     escape(entry.date.isoformat()) if entry else "—",
                     escape(entry.expires.isoformat()) if entry and entry.expires else "—"])
    if not unrun:
        intro = QUARANTINE_RAN
    else:
        intro = "Quarantined cases are left out of the health metrics."
        if ran:
            intro += f" {len(ran)} still ran; their state is shown with the underlying state."
        intro += (f" {len(unrun)} {'was' if len(unrun) == 1 else 'were'} not executed: UNRUN with its reason, "
                  "counted under UNRUN by reason; no result is claimed for them.")
    lines = [f"### Quarantine ({len(cases)})", "", intro, ""]
    if not shown:
        return lines + none_listed(len(cases), "quarantined case")
    lines += table(["Case", "State (underlying)", "Reason", "Since", "Expires"], rows)
    if len(shown) < len(cases):
        lines += ["", more_line(len(cases) - len(shown), "quarantined cases")]
    return lines + [""]


def note_section(title: str, intro: str, notes: list[Note], shape: Shape, budget: Budget) -> list[str]:
    if not notes:
        return []
    shown = notes[: budget.take(len(notes))]
    cut = None if shape.level == 0 else (TEXT_CUT if shape.level < 3 else NOTE_CUT)
    lines = [f"### {title} ({len(notes)})", "", intro, ""]
    if not shown:
        return lines + none_listed(len(notes), "note")
    lines += [f"- {escape(n.uid)}: {escape(clip(n.text, cut))}" for n in shown]
    if len(shown) < len(notes):
        lines.append(more_line(len(notes) - len(shown), "notes"))
    return lines + [""]


def arm_cell(arm: ArmResult) -> str:
    decided = arm.caught + arm.missed
    if not arm.attempts:
        return "—"
    errors = f", {arm.errors} error" + ("s" if arm.errors != 1 else "") if arm.errors else ""
    interval = f" ({percent_interval(arm.interval)})" if arm.interval else ""
    return f"{arm.caught}/{decided} caught{interval}{errors}"


def probe_section(results: Results) -> list[str]:
    """Tier-2 probes that ran: both arms' catch rates, the difference, band scores, cost per arm."""
    probes = [c for c in results.cases if c.probe is not None]
    if not probes:
        return []
    rows = []
    for case in probes:
        p = case.probe
        assert p is not None
        difference = "—" if p.difference is None else f"{p.difference * 100:+.0f} pts" + (
            f" [{p.difference_interval[0] * 100:+.0f}, {p.difference_interval[1] * 100:+.0f}]"
            if p.difference_interval else "")
        band = "—" if p.treatment.band_score is None and p.control.band_score is None else (
            f"{_share(p.control.band_score)} / {_share(p.treatment.band_score)}")
        rows.append([escape(case.uid), escape(p.calibration or "—"), "explicit" if p.explicit_invocation else "routed",
                     arm_cell(p.control), arm_cell(p.treatment), difference, band,
                     f"{p.treatment.skill_fired}/{p.treatment.attempts}",
                     f"{usd(p.control.cost_usd)} / {usd(p.treatment.cost_usd)}", state_with_reason(case)])
    head = ["Probe", "Calibration", "Invocation", "Control", "Treatment", "Difference", "Band (control / treatment)",
            "Skill fired (treatment)", "Cost (control / treatment)", "State"]
    intro = ("Control runs without the skill under test, treatment with it; a catch is the act the discriminator "
             "grades. Rates with 95% Wilson intervals; errors are neither catches nor misses.")
    return ["### Tier-2 probes", "", intro, ""] + table(head, rows) + [""]


def uplift_arm_cell(arm: UpliftArm) -> str:
    rate = "n/a" if arm.pass_rate is None else f"{100 * arm.pass_rate:.0f}% ({percent_interval(arm.wilson_95)})"
    extra = f"; {arm.undecided} undecided" if arm.undecided else ""
    return (f"{arm.passes}/{arm.passes + arm.fails} {rate}{extra} · {arm.mean_tokens or 0:,.0f} tok, "
            f"{arm.mean_turns or 0:.1f} turns, {arm.mean_duration_s or 0:.1f}s per attempt · {usd(arm.cost_usd)}")


def uplift_section(results: Results, shape: Shape) -> list[str]:
    """run --baseline: each baselined case's two arms (a short report keeps the per-skill column only)."""
    cases = [c for c in results.cases if c.uplift is not None]
    if not cases:
        return []
    if shape.level >= 3:
        return ["### Uplift per case", "", f"{len(cases)} baselined case(s): left out to fit the comment limit; "
                "results.json `cases[].uplift` has each.", ""]
    rows = [[escape(clip(c.uid, None if shape.level == 0 else NOTE_CUT)), uplift_arm_cell(c.uplift.treatment),
             uplift_arm_cell(c.uplift.control), escape(uplift_text(c.uplift))] for c in cases if c.uplift]
    return (["### Uplift per case", "", "Rubric pass rate with the skill (the case's own attempts) and without it "
             "(the control arm), Wilson 95%; tokens, turns and duration per attempt; cost per arm.", ""]
            + table(["Case", "With the skill", "Without the skill", "Difference (conservative 95%)"], rows) + [""])


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.0f}%"


def unrun_section(roll: Rollup, shape: Shape) -> list[str]:
    lines = ["### UNRUN by reason", ""]
    if not roll.unrun_by_reason:
        return lines + ["No case is UNRUN.", ""]
    cut = None if shape.level == 0 else NOTE_CUT
    rows = [[escape(clip(reason, cut)), str(n)] for reason, n in roll.unrun_by_reason.items()]
    rows.append(["**Total**", str(sum(roll.unrun_by_reason.values()))])
    return lines + table(["Reason", "Cases"], rows, ["---", "---:"]) + [""]


def truncation_note(shape: Shape, omitted: int, limit: int) -> list[str]:
    if shape == Shape():
        return []
    what = {1: "assertion texts and evidence are cut to 200 characters, only the first piece of evidence is "
               "quoted and passing assertions are not listed",
            2: "per-assertion verdicts, evidence and attempt ids are left out (one line per case)",
            3: "cases are listed by uid only"}[shape.level]
    if omitted:
        what += f", and {omitted} of the cases and notes below are not listed at all"
    if shape.skills is not None:
        what += "; the per-skill table shows the skills with the most problems and sums the rest in one row"
    return [f"**This report was shortened to fit {limit:,} characters:** {what}. Every count above and below is "
            "complete; results.json has every case in full.", ""]


def compose(results: Results, roll: Rollup, shape: Shape, limit: int, changed: tuple[str, ...] = ()) -> str:
    budget = Budget(shape.items)
    body: list[str] = []
    body += case_section("Failing cases", "", roll.failing, shape, budget)
    body += case_section("Erroring cases", "The harness could not observe a result: neither a PASS nor a FAIL.",
                         roll.erroring, shape, budget)
    body += case_section("Judge-erroring cases", "The judge call failed or gave no valid verdict: neither a PASS "
                         "nor a FAIL.", roll.judge_erroring, shape, budget)
    body += case_section("Undecided cases", "The sequential verdict ran every attempt it allows (or no boundary "
                         "was reachable any more) and the rate stayed open: neither a PASS nor a FAIL.",
                         roll.undecided, shape, budget)
    body += quarantine_section(roll.quarantined, shape, budget)
    body += note_section("Unjudgeable assertions", "Not judged: as written they name no observable behaviour. "
                         "For the author to rewrite.", roll.unjudgeable, shape, budget)
    body += note_section("Surface warnings", "What the host listed to the model can explain a miss.",
                         roll.surface_warnings, shape, budget)
    body += note_section("From the result cache", "Not run again: nothing their attempts depend on changed since "
                         "the run named (runner.cache).", roll.reused, shape, budget)
    body += note_section("Held back by the floor", "UNRUN, not failed: `skill-evals validate` reports an error "
                         "about these skills or cases (the first finding is shown). The floor held back nothing "
                         "else.", roll.held_back, shape, budget)
    body += note_section("Uncalibrated probes", "Run without a finished calibration of their current version "
                         "([probes] allow_uncalibrated): whether a probe sits in the usable window is not known.",
                         roll.uncalibrated, shape, budget)
    lines = header(results, roll, shape) + truncation_note(shape, budget.omitted, limit) + state_counts(roll)
    lines += list(changed)  # "Changed since last run" (runner.report.history), read right after the counts
    lines += skill_table(roll, shape) + routing_section(results, shape) + sequential_section(results, shape)
    lines += hosts_section(results, shape)
    lines += body + probe_section(results)
    lines += uplift_section(results, shape)
    lines += unrun_section(roll, shape)
    lines.append(escape(roll.not_executed_sentence))
    return "\n".join(lines) + "\n"


def _largest(fits: Callable[[int], bool], high: int) -> int | None:
    """The largest n in 0..high with fits(n), assuming fits is monotone; None when even 0 does not fit."""
    if not fits(0):
        return None
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def render(results: Results, limit: int = DEFAULT_LIMIT, changed: tuple[str, ...] = ()) -> str:
    """The Markdown report of `results`, at most `limit` characters. `changed`: the "Changed since last run"
    lines (runner.report.history.changed_since_lines, already escaped and capped), kept at every step.

    Truncation, in order, stopping at the first rendering that fits:
    1. everything (all assertions, all evidence quoted in full);
    2. texts and evidence cut to 200 characters, one piece of evidence, passing assertions left out;
    3. one line per case (uid, kind, state and reason, wins/losses/run, what fired instead);
    4. cases and notes by uid only;
    5. as many uids as fit, then "N more cases not listed: see results.json";
    6. no case listed, and the per-skill table keeps the skills with the most problems plus one row
       with the totals of the rest (the all-skills total row always stays).
    The header, state counts, per-skill totals, UNRUN by reason and the not-executed sentence are in
    every step. A plain note under the header says what was left out. If even step 6 with no skill
    row does not fit, `limit` is too small for honest counts and ValueError is raised.
    """
    roll = rollup_mod.build(results)
    for level in range(4):
        text = compose(results, roll, Shape(level=level), limit, changed)
        if len(text) <= limit:
            return text
    total = (len(roll.failing) + len(roll.erroring) + len(roll.judge_erroring) + len(roll.undecided)
             + len(roll.quarantined)
             + len(roll.unjudgeable) + len(roll.surface_warnings) + len(roll.held_back) + len(roll.uncalibrated))
    items = _largest(lambda n: len(compose(results, roll, Shape(3, n), limit, changed)) <= limit, total)
    if items is not None:
        return compose(results, roll, Shape(3, items), limit, changed)
    skills = _largest(lambda n: len(compose(results, roll, Shape(3, 0, n), limit, changed)) <= limit,
                      len(roll.skills))
    if skills is None:
        raise ValueError(f"a limit of {limit} characters cannot hold even the counts of this run")
    return compose(results, roll, Shape(3, 0, skills), limit, changed)
