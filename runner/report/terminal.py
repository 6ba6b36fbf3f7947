"""The run's report for a person at a terminal: `rich` tables, rendered from a results.json only.

The same information as the Markdown report (header, approximation, state counts, per-skill table,
failing / erroring / judge-erroring cases with reason and what fired instead, quarantine,
unjudgeable assertions, surface warnings, UNRUN by reason, the not-executed sentence), without a
size limit. Every piece of text from the corpus, the model, the judge or a file goes through
`rich.markup.escape` (`_e`), so `[bold]` or `[/]` in a case can never be taken as markup.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from runner.report import rollup as rollup_mod
from runner.report.markdown import accuracy, arm_cell, badness, pairs_cell, percent_interval, refusal_cell
from runner.report.rollup import STATES, Rollup
from runner.results import CaseResult, Results, kill_note

STATE_STYLE = {"PASS": "green", "FAIL": "bold red", "ERROR": "magenta", "JUDGE-ERROR": "yellow",
               "QUARANTINED": "cyan", "UNRUN": "dim"}


def _e(text: object) -> str:
    """User text, made inert for rich markup (newlines kept: a terminal cell can wrap)."""
    return escape("" if text is None else str(text))


def _state(state: str | None) -> str:
    state = state or "—"
    style = STATE_STYLE.get(state)
    return f"[{style}]{state}[/]" if style else _e(state)


def header(results: Results, roll: Rollup, console: Console) -> None:
    h = roll.header
    host = f"{_e(h['host'])} {_e(h['host_version'])}".strip()
    console.print(f"[bold]Skill evals[/] · tier {_e(h['tier'])} · host {host} · model {_e(h['model'])} · "
                  f"judge {_e(h['judge_model'])} · N={_e(h['repeats'])}, k={_e(h['quorum'])} · "
                  f"spend ${results.spend.usd:.2f} of ${results.spend.cap_usd:.2f} cap · "
                  f"coverage {roll.executed} run / {roll.not_executed} UNRUN")
    if results.plan.approximation:
        console.print(f"[bold yellow]Approximation:[/] {_e(results.plan.approximation)}")
    facts = [f"plan {_e(results.plan.hash[:12])}", f"finished {_e(results.finished_at)}",
             f"{results.attempts_finished} attempts ({results.attempts_errored} errored)",
             f"judge: {results.spend.judge_calls} calls, ${results.spend.judge_usd:.2f}"]
    if roll.judge_error_rate is not None:
        facts.append(f"judge-error rate {roll.judge_error_rate * 100:.0f}%")
    console.print(" · ".join(facts))
    if roll.cost_line:
        console.print(f"Cost: {_e(roll.cost_line)}")
    if (note := kill_note(results)) is not None:
        console.print(f"[bold yellow]Killed before:[/] {_e(note)}")
    if results.stop_reason:
        console.print(f"[bold]The run stopped early:[/] {_e(results.stop_reason)}")


def state_counts(roll: Rollup, console: Console) -> None:
    table = Table(title="State counts", title_justify="left")
    for state in (*STATES, "Total"):
        table.add_column(_state(state) if state != "Total" else "Total", justify="right")
    counts = [roll.counts.get(state, 0) for state in STATES]
    table.add_row(*[str(n) for n in counts], str(sum(counts)))
    console.print(table)


def skill_table(roll: Rollup, console: Console) -> None:
    table = Table(title="Per skill (most problems first)", title_justify="left")
    table.add_column("Skill")
    for state in STATES:
        table.add_column(state, justify="right")
    table.add_column("Trigger accuracy (Wilson 95%)", overflow="fold")
    table.add_column("Pairs won/lost", justify="right", overflow="fold")
    table.add_column("Refusal compliance", justify="right", overflow="fold")
    skills = sorted(roll.skills, key=badness)
    for s in skills:
        table.add_row(_e(s.skill), *[str(s.states[state]) for state in STATES], accuracy(s.trigger_wins, s.trigger_run),
                      pairs_cell(s.pairs_won, s.pairs_lost), refusal_cell(s.refusal_compliant, s.refusal_run))
    table.add_section()
    table.add_row(f"[bold]All {len(skills)} skills[/]",
                  *[str(sum(s.states[state] for s in skills)) for state in STATES],
                  accuracy(sum(s.trigger_wins for s in skills), sum(s.trigger_run for s in skills)),
                  pairs_cell(sum(s.pairs_won for s in skills), sum(s.pairs_lost for s in skills)),
                  refusal_cell(sum(s.refusal_compliant for s in skills), sum(s.refusal_run for s in skills)))
    console.print(table)
    console.print("Trigger accuracy, pairs and refusal compliance leave quarantined cases out; the state counts "
                  "do not.", style="dim")


def _details(case: CaseResult) -> str:
    parts = [f"{_e(k)} {_e(v)}" for k, v in case.parts.items()]
    parts += [f"vs {_e(p.neighbour)} {p.state} ({p.won}/{p.lost}{'; ' + _e(p.reason) if p.reason else ''})"
              for p in case.pairs if p.state != "PASS"]
    parts += [f"assertion {a.index} ({_e(a.assertion_class)}) {a.state}" for a in case.assertions
              if a.state not in ("PASS", "UNJUDGEABLE")]
    if case.activation is not None and case.activation.observed_runs:
        act = case.activation
        parts.insert(0, f"fired {act.fired_runs}/{act.observed_runs} ({percent_interval(act.wilson_95)})")
    return "; ".join(parts)


def case_table(roll: Rollup, console: Console) -> None:
    cases = roll.failing + roll.erroring + roll.judge_erroring
    if not cases:
        console.print("No failing, erroring or judge-erroring case.")
        return
    table = Table(title="Failing, erroring and judge-erroring cases", title_justify="left")
    table.add_column("Case", overflow="fold")
    for name in ("Kind", "State", "W/L/run of N"):
        table.add_column(name, no_wrap=True)
    table.add_column("Fired instead", overflow="fold")
    table.add_column("Reason; details", overflow="fold")
    for case in cases:
        fired = ", ".join(f"{_e(name)} ×{n}" for name, n in case.fired_instead.items()) or "—"
        why = "; ".join(part for part in (_e(case.reason), _details(case)) if part) or "—"
        table.add_row(_e(case.uid), _e(case.kind), _state(case.state),
                      f"{case.wins}/{case.losses}/{case.repeats_run} of {case.repeats_planned}", fired, why)
    console.print(table)


def quarantine_table(roll: Rollup, console: Console) -> None:
    if not roll.quarantined:
        return
    table = Table(title="Quarantine (still run; left out of health metrics)", title_justify="left")
    for name in ("Case", "State (underlying)", "Reason", "Since", "Expires"):
        table.add_column(name, overflow="fold")
    for case in roll.quarantined:
        entry = case.quarantine
        table.add_row(_e(case.uid), f"{_state('QUARANTINED')} ({_state(case.underlying_state)})",
                      _e(entry.reason) if entry else "—", entry.date.isoformat() if entry else "—",
                      entry.expires.isoformat() if entry and entry.expires else "—")
    console.print(table)


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


def unrun_table(roll: Rollup, console: Console) -> None:
    if not roll.unrun_by_reason:
        console.print("No case is UNRUN.")
        return
    table = Table(title="UNRUN by reason", title_justify="left")
    table.add_column("Reason")
    table.add_column("Cases", justify="right")
    for reason, n in roll.unrun_by_reason.items():
        table.add_row(_e(reason), str(n))
    table.add_section()
    table.add_row("[bold]Total[/]", str(sum(roll.unrun_by_reason.values())))
    console.print(table)


def probe_table(results: Results, console: Console) -> None:
    probes = [c for c in results.cases if c.probe is not None]
    if not probes:
        return
    table = Table(title="Tier-2 probes (control without the skill, treatment with it)", title_justify="left")
    for column in ("Probe", "Invocation", "Control", "Treatment", "Difference", "Skill fired", "Cost", "State"):
        table.add_column(column)
    for case in probes:
        p = case.probe
        assert p is not None
        difference = "—" if p.difference is None else f"{p.difference * 100:+.0f} pts"
        table.add_row(_e(case.uid), "explicit" if p.explicit_invocation else "routed", arm_cell(p.control),
                      arm_cell(p.treatment), difference, f"{p.treatment.skill_fired}/{p.treatment.attempts}",
                      f"${p.control.cost_usd + p.treatment.cost_usd:.4f}", _state(case.state))
    console.print(table)


def render(results: Results, console: Console) -> None:
    """Print the report of `results` to `console`."""
    roll = rollup_mod.build(results)
    header(results, roll, console)
    state_counts(roll, console)
    skill_table(roll, console)
    case_table(roll, console)
    quarantine_table(roll, console)
    notes(roll, console)
    probe_table(results, console)
    unrun_table(roll, console)
    console.print(f"[bold]{_e(roll.not_executed_sentence)}[/]")
