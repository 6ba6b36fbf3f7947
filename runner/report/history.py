"""`skill-evals report --previous DIR...`: what changed since the last run, which cases flip, and
the stability record a person reads before promoting the lane to a required gate.

In: previous results ordered by `finished_at`, then the current run. Out: changes, flips (PASS ↔ FAIL between
consecutive verdicts), quarantine candidates (never quarantined automatically: a case with enough flips, or one the
sequential verdict left UNDECIDED in the current run, a flake seen within one run), trends and the stability record.

Design notes: docs/design/reports.md.
"""

from __future__ import annotations

import html
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from runner.core.errors import UsageError
from runner.core.states import OPEN, VERDICTS
from runner.execute.rundir import RESULTS
from runner.results.build import CaseResult, Results, moment

ABSENT = "absent"
NEVER_AUTOMATIC = ("Candidates are never quarantined automatically: a person decides, and adds a case to "
                   ".skill-evals/quarantine.json with a dated reason.")
MAX_CHANGE_ROWS = 50


class HistoryError(UsageError):
    """A previous run folder cannot be read (a usage error: folder and problem)."""


class RunRecord(BaseModel):
    position: int = Field(description="0 = the oldest run of the window; the current run is the last.")
    label: str
    current: bool
    finished_at: str
    plan_hash: str
    library_hash: str
    plan_hash_differs: bool = Field(description="Planned differently from the current run.")
    library_hash_differs: bool = Field(description="Run against another library content than the current run.")
    executed: int
    unrun: int
    judge_errors: int
    judged_semantic: int
    judge_error_rate: float | None = Field(description="judge_errors / judged_semantic; None when nothing was judged.")
    spend_usd: float
    cap_usd: float
    spend_of_cap: float | None = Field(description="spend_usd / cap_usd; None when the cap is 0.")
    stop_reason: str | None = None

    @property
    def flagged(self) -> bool:
        return self.plan_hash_differs or self.library_hash_differs


class StateChange(BaseModel):
    uid: str
    before: str = Field(description="State in the newest previous run (`absent` when not in it).")
    after: str = Field(description="State in the current run (`absent` when not in it).")
    before_reason: str | None = None
    after_reason: str | None = None


class Candidate(BaseModel):
    uid: str
    flips: int
    states: list[str] = Field(description="The case's state in each run, oldest → newest.")
    flips_involving_flagged_runs: int = Field(description="Flips to or from a run whose plan or library differs "
                                                          "from the current run.")
    quarantined_now: bool = Field(description="Already on the quarantine list in the current run.")
    undecided_now: bool = Field(default=False, description="UNDECIDED in the current run (the sequential verdict "
                                                            "ran every attempt it allows and the rate stayed open): "
                                                            "a flake seen within one run, a candidate even without "
                                                            "flips.")


class Stability(BaseModel):
    runs_in_window: int
    total_flips: int
    flipping_cases: int
    flips_by_case: dict[str, int] = Field(description="Every case with at least one flip.")
    runs: list[RunRecord]
    flagged_runs: list[str] = Field(description="Labels of runs whose plan hash or library hash differs from the "
                                                "current run's; comparisons across them are flagged, not hidden.")


class TrendPoint(BaseModel):
    run: str = Field(description="The run's label (its folder).")
    finished_at: str
    current: bool
    present: bool = Field(description="The skill had cases in this run.")
    trigger_wins: int = 0
    trigger_run: int = 0
    trigger_accuracy: float | None = Field(default=None, description="trigger_wins / trigger_run; None when 0.")
    passed: int = 0
    decided: int = 0
    pass_rate: float | None = Field(default=None, description="passed / decided; None when nothing was decided.")


class SkillTrend(BaseModel):
    skill: str
    points: list[TrendPoint] = Field(description="One per run of the window, oldest → newest (the current last).")


class RoutingMove(BaseModel):
    """One cell of the routing matrix (results.json `routing.matrix`) that moved since the newest previous run."""

    expected: str
    fired: str
    before: int = Field(description="Attempts in the cell then (0: none, or the row was not measured).")
    before_of: int = Field(description="The row's attempts then (0: not measured).")
    after: int
    after_of: int


class History(BaseModel):
    current: str
    compared_with: str | None = Field(description="The newest previous run (None when there is none).")
    comparable: bool = Field(description="The newest previous run had the current run's plan and library hash.")
    changes: list[StateChange]
    flip_threshold: int
    candidates: list[Candidate]
    stability: Stability
    trends: list[SkillTrend] = []
    routing_moves: list[RoutingMove] = Field(default=[], description="The routing matrix's cells whose count or row "
                                                                     "moved since the newest previous run, the "
                                                                     "largest change of share first. Empty when "
                                                                     "either run has no matrix.")
    note: str = NEVER_AUTOMATIC


def shown_state(case: CaseResult | None) -> str:
    if case is None:
        return ABSENT
    if case.state == "QUARANTINED" and case.underlying_state:
        return f"QUARANTINED ({case.underlying_state})"
    return case.state


def verdict(case: CaseResult | None) -> str | None:
    """PASS or FAIL when the case was executed to a verdict in that run; None otherwise (skipped)."""
    if case is None:
        return None
    state = case.underlying_state if case.state == "QUARANTINED" else case.state
    return state if state in VERDICTS else None


def judge_error_counts(results: Results) -> tuple[int, int]:
    """(JUDGE-ERROR, judged) semantic assertions of the cases that are not quarantined (as the rollup counts)."""
    judged = [a for c in results.cases if c.state != "QUARANTINED" for a in c.assertions
              if a.assertion_class == "semantic" and a.state in ("PASS", "FAIL", "JUDGE-ERROR")]
    return sum(1 for a in judged if a.state == "JUDGE-ERROR"), len(judged)


def _record(position: int, label: str, results: Results, current: Results, is_current: bool) -> RunRecord:
    errors, judged = judge_error_counts(results)
    unrun = sum(results.unrun_by_reason.values())
    cap = results.spend.cap_usd
    return RunRecord(
        position=position, label=label, current=is_current, finished_at=results.finished_at,
        plan_hash=results.plan.hash, library_hash=results.plan.library_hash,
        plan_hash_differs=results.plan.hash != current.plan.hash,
        library_hash_differs=results.plan.library_hash != current.plan.library_hash,
        executed=len(results.cases) - unrun, unrun=unrun, judge_errors=errors, judged_semantic=judged,
        judge_error_rate=round(errors / judged, 4) if judged else None,
        spend_usd=results.spend.usd, cap_usd=cap, spend_of_cap=round(results.spend.usd / cap, 4) if cap else None,
        stop_reason=results.stop_reason)


def _ratio(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def trends(window: list[tuple[str, Results]]) -> list[SkillTrend]:
    """Per skill, its trigger accuracy and pass rate in each run of `window` (oldest → newest)."""
    from runner.report.rollup import skill_rollups  # the per-skill table's definition, not a second one

    skills = sorted({c.skill for _, run in window for c in run.cases})
    points: dict[str, list[TrendPoint]] = {skill: [] for skill in skills}
    for position, (label, run) in enumerate(window):
        rolled = {r.skill: r for r in skill_rollups(run.cases)}
        for skill in skills:
            roll = rolled.get(skill)
            healthy = [c for c in run.cases if c.skill == skill and c.state != "QUARANTINED"]
            decided = [c for c in healthy if c.state in VERDICTS]
            passed = sum(1 for c in decided if c.state == "PASS")
            wins, run_n = (roll.trigger_wins, roll.trigger_run) if roll else (0, 0)
            points[skill].append(TrendPoint(
                run=label, finished_at=run.finished_at, current=position == len(window) - 1, present=roll is not None,
                trigger_wins=wins, trigger_run=run_n, trigger_accuracy=_ratio(wins, run_n), passed=passed,
                decided=len(decided), pass_rate=_ratio(passed, len(decided))))
    return [SkillTrend(skill=skill, points=points[skill]) for skill in skills]


def _share(count: int, of: int) -> float:
    return count / of if of else 0.0


def routing_moves(before: Results, after: Results) -> list[RoutingMove]:
    """Every cell of the all-fired matrix whose (attempts, row attempts) differ between the two runs."""
    if before.routing is None or after.routing is None:
        return []
    then, now = before.routing, after.routing
    keys = {(row, col) for found in (then, now) for row, cells in found.matrix.items() for col in cells}
    moves = [RoutingMove(expected=row, fired=col, before=then.matrix.get(row, {}).get(col, 0),
                         before_of=then.rows.get(row, 0), after=now.matrix.get(row, {}).get(col, 0),
                         after_of=now.rows.get(row, 0)) for row, col in keys]
    moved = [m for m in moves if (m.before, m.before_of) != (m.after, m.after_of)]
    return sorted(moved, key=lambda m: (-abs(_share(m.after, m.after_of) - _share(m.before, m.before_of)),
                                        m.expected, m.fired))


def candidate_why(candidate: Candidate, flip_threshold: int | None = None) -> str:
    """Why a case is a quarantine candidate, in one line: its flips, UNDECIDED now, or both."""
    why = []
    if flip_threshold is None or candidate.flips >= flip_threshold:
        why.append(f"{candidate.flips} PASS↔FAIL flip(s) ({' → '.join(candidate.states)})")
    if candidate.undecided_now:
        why.append("UNDECIDED in this run: its rate stayed open after every attempt the sequential verdict allows (a "
                   "flake seen within one run)")
    if candidate.quarantined_now:
        why.append("already quarantined")
    return "; ".join(why)


def move_text(move: RoutingMove) -> str:
    """"A now takes 3 of B's 9 attempts, was 0 of 9"."""
    attempts = (f"the {move.after_of} attempts of prompts that expect no skill" if move.expected == "none"
                else f"{move.expected}'s {move.after_of} attempts")
    what = "nothing fires on" if move.fired == "none" else f"{move.fired} now takes"
    was = f"was {move.before} of {move.before_of}" if move.before_of else "not measured then"
    return f"{what} {move.after} of {attempts}, {was}"


def compare(current: Results, previous: list[Results], flip_threshold: int = 2, *,
            labels: list[str] | None = None, current_label: str = "current") -> History:
    """History of `current` against `previous` runs (any order; see docs/design/reports.md).

    `labels` name the previous runs (the report passes their folders; default: their finished_at).
    """
    if flip_threshold < 1:
        raise ValueError("flip_threshold must be at least 1")
    labels = list(labels) if labels is not None else [r.finished_at for r in previous]
    if len(labels) != len(previous):
        raise ValueError(f"{len(previous)} previous runs but {len(labels)} labels")
    ordered = sorted(zip(labels, previous), key=lambda pair: moment(pair[1].finished_at))
    window: list[tuple[str, Results]] = [*ordered, (current_label, current)]
    records = [_record(i, label, run, current, i == len(window) - 1) for i, (label, run) in enumerate(window)]
    by_run = [{c.uid: c for c in run.cases} for _, run in window]

    uids: list[str] = []
    seen: set[str] = set()
    for _, run in reversed(window):  # current run's order first, then cases only older runs had
        for case in run.cases:
            if case.uid not in seen:
                seen.add(case.uid)
                uids.append(case.uid)

    changes: list[StateChange] = []
    if ordered:
        before_run, after_run = by_run[-2], by_run[-1]
        for uid in uids:
            before, after = before_run.get(uid), after_run.get(uid)
            if shown_state(before) != shown_state(after):
                changes.append(StateChange(uid=uid, before=shown_state(before), after=shown_state(after),
                                           before_reason=before.reason if before else None,
                                           after_reason=after.reason if after else None))

    flips_by_case: dict[str, int] = {}
    candidates: list[Candidate] = []
    for uid in uids:
        flips = flagged = 0
        last: tuple[int, str] | None = None
        for position, cases in enumerate(by_run):
            now = verdict(cases.get(uid))
            if now is None:
                continue
            if last is not None and last[1] != now:
                flips += 1
                flagged += records[last[0]].flagged or records[position].flagged
            last = (position, now)
        if flips:
            flips_by_case[uid] = flips
        now_case = by_run[-1].get(uid)
        undecided = now_case is not None and (now_case.state in OPEN or (now_case.state == "QUARANTINED"
                                                                         and now_case.underlying_state in OPEN))
        if flips >= flip_threshold or undecided:
            candidates.append(Candidate(uid=uid, flips=flips, states=[shown_state(c.get(uid)) for c in by_run],
                                        flips_involving_flagged_runs=flagged,
                                        quarantined_now=bool(now_case and now_case.state == "QUARANTINED"),
                                        undecided_now=undecided))
    candidates.sort(key=lambda c: (-c.flips, c.uid))

    newest_previous = records[-2] if ordered else None
    return History(
        current=current_label, compared_with=newest_previous.label if newest_previous else None,
        comparable=bool(newest_previous and not newest_previous.flagged), changes=changes,
        flip_threshold=flip_threshold, candidates=candidates,
        stability=Stability(runs_in_window=len(window), total_flips=sum(flips_by_case.values()),
                            flipping_cases=len(flips_by_case), flips_by_case=flips_by_case, runs=records,
                            flagged_runs=[r.label for r in records if r.flagged]),
        trends=trends(window), routing_moves=routing_moves(ordered[-1][1], current) if ordered else [])


def read_run(folder: Path) -> Results:
    path = Path(folder) / RESULTS
    try:
        return Results.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise HistoryError(f"{folder}: no {RESULTS} (is this a finished run folder?)") from exc
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        raise HistoryError(f"{path}: not a results file of this runner: {str(exc).splitlines()[0]}") from exc


def compare_dirs(current: Path, previous: list[Path], flip_threshold: int = 2) -> History:
    """compare() over run folders; each run is labelled by its folder."""
    return compare(read_run(current), [read_run(p) for p in previous], flip_threshold,
                   labels=[str(p) for p in previous], current_label=str(current))


def escape(text: str) -> str:
    """Markdown/HTML-safe text for a table cell: no markup, no table breaks, no @-mentions."""
    out = html.escape(text, quote=False).replace("|", "&#124;").replace("@", "@\u200b")
    return " ".join(out.split())


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _state(state: str, reason: str | None) -> str:
    return escape(f"{state} ({reason})" if reason and state.startswith("UNRUN") else state)


def _fraction(wins: int, total: int) -> str:
    return f"{wins}/{total}" if total else "–"


def changed_since_lines(history: History, max_items: int = 20) -> list[str]:
    """The rollup's "Changed since last run" list: each case whose state changed, then each skill whose trigger
    accuracy or pass rate changed, against the newest previous run. Empty when there is no previous run."""
    if history.compared_with is None:
        return []
    lines = [f"#### Changed since last run ({escape(history.compared_with)})", ""]
    if not history.comparable:
        lines += ["Flagged: that run had another plan or library hash; a change may come from them.", ""]
    items = [f"- {escape(c.uid)}: {_state(c.before, c.before_reason)} → {_state(c.after, c.after_reason)}"
             for c in history.changes]
    for trend in history.trends:
        before, now = trend.points[-2], trend.points[-1]
        moved = []
        if (before.trigger_wins, before.trigger_run) != (now.trigger_wins, now.trigger_run):
            moved.append(f"trigger accuracy {_fraction(before.trigger_wins, before.trigger_run)} → "
                         f"{_fraction(now.trigger_wins, now.trigger_run)}")
        if (before.passed, before.decided) != (now.passed, now.decided):
            moved.append(f"pass rate {_fraction(before.passed, before.decided)} → {_fraction(now.passed, now.decided)}")
        if moved:
            items.append(f"- skill {escape(trend.skill)}: {'; '.join(moved)}")
    items += [f"- routing: {escape(move_text(move))}" for move in history.routing_moves]
    if not items:
        return lines + ["Nothing changed: no case changed state, no skill's trigger accuracy or pass rate moved, no "
                        "cell of the routing matrix moved.", ""]
    shown = items[:max_items]
    if len(items) > max_items:
        shown.append(f"- …and {len(items) - max_items} more (the history section and JSON have each).")
    return lines + shown + [""]


def render_markdown(history: History, max_rows: int = MAX_CHANGE_ROWS) -> str:
    """A short Markdown section: changes since the newest previous run, candidates, stability record."""
    stability = history.stability
    lines = [f"### History: {stability.runs_in_window} run(s)", ""]
    if history.compared_with is None:
        lines += ["No previous run was given; there is nothing to compare with.", ""]
    else:
        lines += [f"#### Changes since {escape(history.compared_with)}", ""]
        if not history.comparable:
            lines += ["> **Flagged:** that run had another plan or library hash than this one; the comparison is "
                      "shown, but a change may come from the plan or the library, not from the model.", ""]
        if history.changes:
            lines += ["| Case | Before | Now |", "| --- | --- | --- |"]
            lines += [f"| {escape(c.uid)} | {_state(c.before, c.before_reason)} | {_state(c.after, c.after_reason)} |"
                      for c in history.changes[:max_rows]]
            if len(history.changes) > max_rows:
                lines.append(f"\n…and {len(history.changes) - max_rows} more change(s) (see the history JSON).")
        else:
            lines.append("No case changed state.")
        lines.append("")

    if history.routing_moves:
        lines += ["#### Routing cells that moved", ""]
        lines += [f"- {escape(move_text(m))}" for m in history.routing_moves[:max_rows]]
        if len(history.routing_moves) > max_rows:
            lines.append(f"- …and {len(history.routing_moves) - max_rows} more (see the history JSON).")
        lines.append("")

    undecided = any(c.undecided_now for c in history.candidates)
    lines += [f"#### Quarantine candidates (≥ {history.flip_threshold} PASS↔FAIL flips"
              + (", or UNDECIDED in this run)" if undecided else ")"), ""]
    if history.candidates:
        lines += ["| Case | Flips | States, oldest → newest | Flips across a flagged run |",
                  "| --- | --- | --- | --- |"]
        for c in history.candidates:
            states = " → ".join(escape(s) for s in c.states)
            mark = (" (quarantined)" if c.quarantined_now else "") + (
                " (UNDECIDED now: a flake seen within this run)" if c.undecided_now else "")
            lines.append(f"| {escape(c.uid)}{mark} | {c.flips} | {states} | {c.flips_involving_flagged_runs} |")
    else:
        lines.append("None.")
    lines += ["", escape(history.note), ""]

    lines += ["#### Stability record", "",
              f"- Runs in window: {stability.runs_in_window}",
              f"- Flips: {stability.total_flips} in {stability.flipping_cases} case(s)",
              f"- Runs with another plan or library than the current one: "
              f"{', '.join(escape(r) for r in stability.flagged_runs) or 'none'}", "",
              "| Run | Finished | Judge errors | Spend / cap | Stopped | Plan / library |",
              "| --- | --- | --- | --- | --- | --- |"]
    for r in stability.runs:
        differs = [name for name, flag in (("plan differs", r.plan_hash_differs),
                                           ("library differs", r.library_hash_differs)) if flag]
        judge = f"{r.judge_errors}/{r.judged_semantic} ({_pct(r.judge_error_rate)})"
        spend = f"${r.spend_usd:.2f} / ${r.cap_usd:.2f} ({_pct(r.spend_of_cap)})"
        label = escape(r.label) + (" (current)" if r.current and r.label != "current" else "")
        lines.append(f"| {label} | {escape(r.finished_at)} | {judge} | {spend} | {escape(r.stop_reason or '—')} | "
                     f"{'**' + ', '.join(differs) + '**' if differs else 'same'} |")
    return "\n".join(lines) + "\n"
