"""The run's report for a person at a terminal: `rich` tables, rendered from a results.json only.

The same information as the Markdown report (header, approximation, state counts, per-skill table,
failing / erroring / judge-erroring cases with reason and what fired instead, quarantine,
unjudgeable assertions, surface warnings, UNRUN by reason, the not-executed sentence), without a
size limit. Every piece of text from the corpus, the model, the judge or a file goes through
`rich.markup.escape` (`_e`), so `[bold]` or `[/]` in a case can never be taken as markup.

Width. A table is printed only in a form that keeps every word of it whole at the console's width (a
skill name or a case uid is never cut, folded or ellipsised): the whole table, else the table without the columns
that hold nothing (every cell 0 or —, said under it), else one line per row (`name: column value · ...`), which a
terminal wraps but never cuts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.markup import escape
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

from runner.core.states import RAN
from runner.report import host_table as hosts_mod
from runner.report import rollup as rollup_mod
from runner.report.markdown import (
    UPLIFT_HEAD,
    accuracy,
    arm_cell,
    badness,
    pairs_cell,
    percent_interval,
    refusal_cell,
    uplift_arm_cell,
    uplift_cell,
)
from runner.report.rollup import Rollup
from runner.report.versions import host_text
from runner.results.build import CaseResult, Results, floor_note, kill_note, not_started_note, sweep_note, wall_note

STATE_STYLE = {"PASS": "green", "FAIL": "bold red", "ERROR": "magenta", "JUDGE-ERROR": "yellow",
               "QUARANTINED": "cyan", "UNDECIDED": "bold blue", "UNRUN": "dim"}


def _e(text: object) -> str:
    """User text, made inert for rich markup (newlines kept: a terminal cell can wrap)."""
    return escape("" if text is None else str(text))


def _state(state: str | None) -> str:
    state = state or "—"
    style = STATE_STYLE.get(state)
    return f"[{style}]{state}[/]" if style else _e(state)


@dataclass
class Column:
    """One column of a table that must fit the console: its header and its cells (rich markup, escaped)."""

    header: str
    cells: list[str]
    justify: JustifyMethod = "left"
    name: bool = False  # the row's name (a skill, a case uid): never dropped, never wrapped
    options: dict[str, Any] = field(default_factory=dict[str, Any])

    @property
    def empty(self) -> bool:
        """Nothing in it: every cell 0 or —."""
        return not self.name and all(Text.from_markup(cell).plain.strip() in ("0", "—", "") for cell in self.cells)


_BORDERS = re.compile(r"[\s│┃]+")


def _plain(markup: str) -> str:
    return Text.from_markup(markup).plain


def _table(title: str, columns: list[Column], total_row: bool) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column.header, justify=column.justify, **{"no_wrap": column.name, **column.options})
    rows = len(columns[0].cells) if columns else 0
    for i in range(rows):
        if total_row and i == rows - 1:
            table.add_section()
        table.add_row(*[column.cells[i] for column in columns])
    return table


def _least_width(columns: list[Column]) -> int:
    """The narrowest the table could be with every word whole: a name column as wide as its longest name, any other
    as its longest word; one space of padding each side and a border between and around the columns."""
    needed = 0
    for column in columns:
        texts = [_plain(cell) for cell in (column.header, *column.cells)]
        if column.name or column.options.get("no_wrap"):
            needed += max(cell_len(line) for text in texts for line in (text.splitlines() or [""]))
        else:
            needed += max((cell_len(word) for text in texts for word in text.split()), default=0)
    return needed + 3 * len(columns) + 1


def _fitted(console: Console, table: Table, columns: list[Column]) -> list[Segment] | None:
    """The table rendered at the console's width when every word of every header and cell shows whole, else None."""
    if _least_width(columns) > console.width:
        return None
    segments = list(console.render(table, console.options))
    text = "".join(segment.text for segment in segments if not segment.control)
    if any(cell_len(line) > console.width for line in text.splitlines()):
        return None
    shown = {word for line in text.splitlines() for word in _BORDERS.split(line) if word}
    words = (word for column in columns for cell in (column.header, *column.cells) for word in _plain(cell).split())
    if not all(word in shown for word in words):
        return None
    out: list[Segment] = []
    for line in Segment.split_lines(segments):  # as console.print(table) shows it: no padding after a title
        while line and not line[-1].control and not line[-1].text.strip():
            line.pop()
        if line and not line[-1].control:
            line[-1] = Segment(line[-1].text.rstrip(), line[-1].style)
        out += [*line, Segment.line()]
    return out


def print_fitted(console: Console, title: str, columns: list[Column], total_row: bool = False) -> None:
    """The table in the first form that fits the console (module docstring), and what it left out."""
    informative = [c for c in columns if not c.empty]
    left_out = [c.header.replace("\n", " ") for c in columns if c.empty]
    for shown in (columns, informative):
        segments = _fitted(console, _table(title, shown, total_row), shown)
        if segments is not None:
            console.print(Segments(segments))
            if shown is informative and left_out:
                console.print(f"(Left out for width, nothing in them: {_e(', '.join(left_out))}.)", style="dim")
            return
    console.print(f"[italic]{title}[/]")
    name, rest = informative[0], informative[1:]
    for i, row_name in enumerate(name.cells):
        values = " · ".join(f"{_e(c.header.replace(chr(10), ' '))} {c.cells[i]}" for c in rest)
        line = f"  {row_name}: {values}" if values else f"  {row_name}"
        if cell_len(Text.from_markup(line).plain) <= console.width or not values:
            console.print(line)
        else:  # the name on a line of its own (a terminal may wrap it, never cut it), its values below
            console.print(f"  {row_name}")
            console.print(f"      {values}")
    if left_out:
        console.print(f"(Left out, nothing in them: {_e(', '.join(left_out))}.)", style="dim")


def header(results: Results, roll: Rollup, console: Console) -> None:
    h = roll.header
    host = _e(host_text(results.plan.host, results.plan.versions))
    console.print(f"[bold]Skill evals[/] · tier {_e(h['tier'])} · host {host} · model {_e(h['model'])} · "
                  f"judge {_e(h['judge_model'])} · {_e(rollup_mod.verdict_text(results))} · "
                  f"spend ${results.spend.usd:.2f} of ${results.spend.cap_usd:.2f} cap · "
                  f"coverage {roll.executed} run / {roll.not_executed} UNRUN")
    if results.plan.approximation:
        console.print(f"[bold yellow]Approximation:[/] {_e(results.plan.approximation)}")
    if roll.grade_line:
        console.print(f"[bold yellow]Activation grade:[/] {_e(roll.grade_line)}")
    facts = [f"plan {_e(results.plan.hash[:12])}", f"finished {_e(results.finished_at)}",
             f"{results.attempts_finished} attempts ({results.attempts_errored} errored)",
             f"judge: {results.spend.judge_calls} calls, ${results.spend.judge_usd:.2f}"]
    if roll.judge_error_rate is not None:
        facts.append(f"judge-error rate {roll.judge_error_rate * 100:.0f}%")
    console.print(" · ".join(facts))
    if roll.cost_line:
        console.print(f"Cost: {_e(roll.cost_line)}")
    if roll.first_turn_line:
        console.print(f"Host: {_e(roll.first_turn_line)}")
    if roll.records_line:
        console.print(f"[bold red]Attempt log:[/] {_e(roll.records_line)}")
    if (note := kill_note(results)) is not None:
        console.print(f"[bold yellow]Killed before:[/] {_e(note)}")
    if (note := floor_note(results)) is not None:
        console.print(f"[bold yellow]Floor:[/] {_e(note)}")
    if (note := wall_note(results)) is not None:
        console.print(f"[bold yellow]Sessions:[/] {_e(note)}")
    if (note := sweep_note(results)) is not None:
        console.print(f"[bold yellow]Routing sweep:[/] {_e(note)}")
    if (note := not_started_note(results)) is not None:
        console.print(f"[bold yellow]Not started:[/] {_e(note)}")
    if results.stop_reason:
        console.print(f"[bold]The run stopped early:[/] {_e(results.stop_reason)}")


def state_counts(roll: Rollup, console: Console) -> None:
    states = roll.shown_states
    counts = [roll.counts.get(state, 0) for state in states]
    columns = [Column(_state(state), [str(n)], justify="right") for state, n in zip(states, counts)]
    columns.append(Column("Total", [str(sum(counts))], justify="right"))
    segments = _fitted(console, _table("State counts", columns, total_row=False), columns)
    if segments is not None:
        console.print(Segments(segments))
        return
    console.print("[italic]State counts[/]: " + " · ".join(f"{c.header} {c.cells[0]}" for c in columns))


def skill_table(roll: Rollup, console: Console) -> None:
    skills = sorted(roll.skills, key=badness)
    names = [_e(s.skill) for s in skills] + [f"[bold]All {len(skills)} skills[/]"]
    columns = [Column("Skill", names, name=True)]
    for state in roll.shown_states:
        columns.append(Column(state, [str(s.states.get(state, 0)) for s in skills]
                              + [str(sum(s.states.get(state, 0) for s in skills))], justify="right"))
    columns.append(Column("Trigger accuracy (Wilson 95%" + (f", {rollup_mod.FILE_READ})" if roll.file_read else ")"),
                          [accuracy(s.trigger_wins, s.trigger_run) for s in skills]
                          + [accuracy(sum(s.trigger_wins for s in skills), sum(s.trigger_run for s in skills))]))
    columns.append(Column("Pairs won/lost", [pairs_cell(s.pairs_won, s.pairs_lost) for s in skills]
                          + [pairs_cell(sum(s.pairs_won for s in skills), sum(s.pairs_lost for s in skills))],
                          justify="right"))
    columns.append(Column("Refusal compliance", [refusal_cell(s.refusal_compliant, s.refusal_run) for s in skills]
                          + [refusal_cell(sum(s.refusal_compliant for s in skills),
                                          sum(s.refusal_run for s in skills))], justify="right"))
    if roll.baselined:  # run --baseline; the total row claims no uplift of all skills together
        columns.append(Column(UPLIFT_HEAD, [_e(uplift_cell(s.uplift)) for s in skills] + [""]))
    print_fitted(console, "Per skill (most problems first)", columns, total_row=True)
    console.print("Trigger accuracy, pairs and refusal compliance leave quarantined cases out; the state counts "
                  "do not.", style="dim")


def routing_tables(results: Results, console: Console) -> None:
    """The routing matrix's per-skill table (worst F1 first) and its worst confusions: what `report` and `run`'s own
    summary print. Nothing when the run has no routing case."""
    found = rollup_mod.shown_routing(results)
    if found is None:
        return
    order = rollup_mod.routing_order(found)
    if order:
        skills = [found.per_skill[name] for name in order]
        columns = [Column("Skill", [_e(name) for name in order], name=True),
                   Column("Precision (Wilson 95%)", [rollup_mod.rate_text(s.precision) for s in skills]),
                   Column("Recall (Wilson 95%)", [rollup_mod.rate_text(s.recall) for s in skills]),
                   Column("F1 (95%)", [rollup_mod.rate_text(s.f1, fraction=False) for s in skills]),
                   Column("tp/fp/fn", [f"{s.tp}/{s.fp}/{s.fn}" for s in skills], justify="right")]
        print_fitted(console, f"Routing per skill ({found.attempts} attempts, worst F1 first)", columns)
    for confusion in found.confusions[: rollup_mod.WORST_CONFUSIONS]:
        console.print(f"  {_e(rollup_mod.confusion_text(confusion))}: {_e(', '.join(confusion.cases))}")
    if len(found.confusions) > rollup_mod.WORST_CONFUSIONS:
        console.print(f"  …and {len(found.confusions) - rollup_mod.WORST_CONFUSIONS} more confusion(s) in results.json "
                      "`routing.confusions`")
    console.print(f"Routing matrix — {_e(rollup_mod.excluded_text(found))}.", style="dim")


def _details(case: CaseResult) -> str:
    parts = [f"{_e(k)} {_e(v)}" for k, v in case.parts.items()]
    parts += [f"vs {_e(p.neighbour)} {p.state} ({p.won}/{p.lost}{'; ' + _e(p.reason) if p.reason else ''})"
              for p in case.pairs if p.state != "PASS"]
    parts += [f"{_e(r.says)} {r.state} ({r.passes}/{r.fails})" for r in case.routing if r.state != "PASS"]
    parts += [f"assertion {a.index} ({_e(a.assertion_class)}) {a.state}" for a in case.assertions
              if a.state not in ("PASS", "UNJUDGEABLE")]
    if case.activation is not None and case.activation.observed_runs:
        act = case.activation
        parts.insert(0, f"fired {act.fired_runs}/{act.observed_runs} ({percent_interval(act.wilson_95)})")
    return "; ".join(parts)


def case_table(roll: Rollup, console: Console) -> None:
    cases = roll.failing + roll.erroring + roll.judge_erroring + roll.undecided
    if not cases:
        console.print("No failing, erroring or judge-erroring case.")
        return
    columns = [Column("Case", [_e(case.uid) for case in cases], name=True),
               Column("Kind", [_e(rollup_mod.kind_label(case)) for case in cases], options={"no_wrap": True}),
               Column("State", [rollup_mod.state_with_grade(case, _state(case.state)) for case in cases],
                      options={"no_wrap": True}),
               Column("W/L/run of N", [f"{case.wins}/{case.losses}/{case.repeats_run} of {case.repeats_planned}"
                                       for case in cases]),
               Column("Fired instead", [", ".join(f"{_e(name)} ×{n}" for name, n in case.fired_instead.items()) or "—"
                                        for case in cases]),
               Column("Reason; details", ["; ".join(part for part in (_e(case.reason), _sequential(case), _details(case))
                                                    if part) or "—" for case in cases])]
    title = ("Failing, erroring, judge-erroring and undecided cases (UNDECIDED: neither PASS nor FAIL is claimed)"
             if roll.undecided else "Failing, erroring and judge-erroring cases")
    print_fitted(console, title, columns)


def _sequential(case: CaseResult) -> str:
    text = rollup_mod.sequential_case_text(case)
    return f"sequential verdict: {_e(text)}" if text else ""


def sequential_section(results: Results, console: Console) -> None:
    """The run's sequential verdict (results.json `sequential`): nothing for a quorum run."""
    found = results.sequential
    if found is None:
        return
    console.print("[bold]Sequential verdict[/] — a case still open at the bound is UNDECIDED: neither PASS nor FAIL "
                  "is claimed.")
    console.print(f"  rule: {_e(found.rule)}")
    console.print(f"  error bounds: {_e(rollup_mod.sequential_bounds_text(found, results))}")
    console.print(f"  cases: {_e(rollup_mod.sequential_cases_text(found))}")
    console.print(f"  sessions: {_e(rollup_mod.sequential_sessions_text(found))}")
    console.print(f"  {_e(rollup_mod.flips_intro(found))}")
    for flip in found.flips[: rollup_mod.WORST_FLIPS]:
        console.print(f"    {_e(rollup_mod.flip_text(flip))}")
    if len(found.flips) > rollup_mod.WORST_FLIPS:
        console.print(f"    …and {len(found.flips) - rollup_mod.WORST_FLIPS} more in results.json `sequential.flips`")


def hosts_section(results: Results, console: Console) -> None:
    """`run --host a,b,...` (results.json `hosts`): each host's run, the host x skill table of trigger accuracy with
    the grade marked, and the cases whose state differs between hosts. Nothing for a run on one host."""
    found = results.hosts
    if found is None:
        return
    console.print("[bold]Hosts[/] — " + _e(hosts_mod.INTRO))
    for run in found.hosts:
        console.print(f"  {_e(hosts_mod.host_line(run))}")
    console.print(f"  {_e(hosts_mod.spend_line(found))}")
    if found.skills:
        columns = [Column("Skill", [_e(row.skill) for row in found.skills], name=True)]
        columns += [Column(_e(hosts_mod.column_head(run)), [_e(hosts_mod.cell(row.hosts[i])) for row in found.skills])
                    for i, run in enumerate(found.hosts)]
        print_fitted(console, "Trigger accuracy per skill per host (Wilson 95%)", columns)
    if not found.differences:
        console.print("Every case has the same state on every host.")
        return
    console.print(f"Cases whose state differs between hosts ({len(found.differences)}):")
    for difference in found.differences[: hosts_mod.SHOWN_DIFFERENCES]:
        console.print(f"  {_e(hosts_mod.difference_line(difference))}")
    if len(found.differences) > hosts_mod.SHOWN_DIFFERENCES:
        console.print(f"  …and {len(found.differences) - hosts_mod.SHOWN_DIFFERENCES} more in results.json "
                      "`hosts.differences`")


def quarantine_table(roll: Rollup, console: Console) -> None:
    if not roll.quarantined:
        return
    entries = [(case, case.quarantine) for case in roll.quarantined]
    unrun = sum(1 for case, _ in entries if case.underlying_state not in RAN)
    columns = [Column("Case", [_e(case.uid) for case, _ in entries], name=True),
               Column("State (underlying)", [f"{_state('QUARANTINED')} ({_state(case.underlying_state)})"
                                             if case.underlying_state in RAN else
                                             f"{_state('QUARANTINED')} ({_state('UNRUN')} {_e(case.reason or 'unknown')})"
                                             for case, _ in entries]),
               Column("Reason", [_e(entry.reason) if entry else "—" for _, entry in entries]),
               Column("Since", [entry.date.isoformat() if entry else "—" for _, entry in entries]),
               Column("Expires", [entry.expires.isoformat() if entry and entry.expires else "—"
                                  for _, entry in entries])]
    # A quarantined case that was not executed (no key, the cap, ...) is UNRUN under it: never said to have run.
    if not unrun:
        title = "Quarantine (still run; left out of health metrics)"
    elif unrun == len(entries):
        title = "Quarantine (not executed: UNRUN with its reason; left out of health metrics)"
    else:
        title = (f"Quarantine (left out of health metrics; {len(entries) - unrun} still run, {unrun} not executed: "
                 "UNRUN with its reason)")
    print_fitted(console, title, columns)


def notes(roll: Rollup, console: Console) -> None:
    if roll.unjudgeable:
        console.print(f"[bold]Unjudgeable assertions ({len(roll.unjudgeable)})[/] — not judged; for the author to "
                      "rewrite:")
        for note in roll.unjudgeable:
            console.print(f"  {_e(note.uid)}: {_e(note.text)}")
    if roll.surface_warnings:
        console.print(f"[bold]Surface warnings ({len(roll.surface_warnings)})[/]:")
        for note in roll.surface_warnings:
            console.print(f"  {_e(note.uid)}: {_e(note.text)}")
    if roll.held_back:
        console.print(f"[bold]Held back by the floor ({len(roll.held_back)})[/] — UNRUN, not failed; "
                      "`skill-evals validate` reports an error about each:")
        for note in roll.held_back:
            console.print(f"  {_e(note.uid)}: {_e(note.text)}")
    if roll.uncalibrated:
        console.print(f"[bold]Uncalibrated probes ({len(roll.uncalibrated)})[/] ([probes] allow_uncalibrated):")
        for note in roll.uncalibrated:
            console.print(f"  {_e(note.uid)}: {_e(note.text)}")


def unrun_table(roll: Rollup, console: Console) -> None:
    if not roll.unrun_by_reason:
        console.print("No case is UNRUN.")
        return
    reasons = list(roll.unrun_by_reason.items())
    columns = [Column("Reason", [_e(reason) for reason, _ in reasons] + ["[bold]Total[/]"], name=True),
               Column("Cases", [str(n) for _, n in reasons] + [str(sum(roll.unrun_by_reason.values()))],
                      justify="right")]
    print_fitted(console, "UNRUN by reason", columns, total_row=True)


def probe_table(results: Results, console: Console) -> None:
    probes = [c for c in results.cases if c.probe is not None]
    if not probes:
        return
    rows = [(case, case.probe) for case in probes if case.probe is not None]
    columns = [Column("Probe", [_e(case.uid) for case, _ in rows], name=True),
               Column("Invocation", ["explicit" if p.explicit_invocation else "routed" for _, p in rows]),
               Column("Control", [arm_cell(p.control) for _, p in rows]),
               Column("Treatment", [arm_cell(p.treatment) for _, p in rows]),
               Column("Difference", ["—" if p.difference is None else f"{p.difference * 100:+.0f} pts"
                                     for _, p in rows]),
               Column("Skill fired", [f"{p.treatment.skill_fired}/{p.treatment.attempts}" for _, p in rows]),
               Column("Cost", [f"${p.control.cost_usd + p.treatment.cost_usd:.4f}" for _, p in rows]),
               Column("State", [_state(case.state) for case, _ in rows])]
    print_fitted(console, "Tier-2 probes (control without the skill, treatment with it)", columns)


def uplift_table(results: Results, console: Console) -> None:
    """run --baseline: each baselined case with and without the skill, judged by the same rubric."""
    rows = [(case, case.uplift) for case in results.cases if case.uplift is not None]
    if not rows:
        return
    columns = [Column("Case", [_e(case.uid) for case, _ in rows], name=True),
               Column("With the skill", [_e(uplift_arm_cell(u.treatment)) for _, u in rows]),
               Column("Without the skill", [_e(uplift_arm_cell(u.control)) for _, u in rows]),
               Column("Difference (conservative 95%)", [_e(uplift_cell(u)) for _, u in rows])]
    print_fitted(console, "Uplift per case (rubric pass rate, Wilson 95%)", columns)


def render(results: Results, console: Console) -> None:
    """Print the report of `results` to `console`."""
    roll = rollup_mod.build(results)
    header(results, roll, console)
    state_counts(roll, console)
    skill_table(roll, console)
    routing_tables(results, console)
    sequential_section(results, console)
    hosts_section(results, console)
    case_table(roll, console)
    quarantine_table(roll, console)
    notes(roll, console)
    probe_table(results, console)
    uplift_table(results, console)
    unrun_table(roll, console)
    console.print(f"[bold]{_e(roll.not_executed_sentence)}[/]")
