"""What the commands print for a person: the plan before a run, the surface, the results after one.

Each line says what it counts and stays true when nothing ran or nothing cost anything; JSON output is the models
themselves and is never printed from here.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from runner.core.host_traits import traits

if TYPE_CHECKING:
    from runner.hosts.surface import Surface
    from runner.pipeline import run as runs_mod
    from runner.pipeline.run import CacheUse
    from runner.plan.plan import Plan
    from runner.results import build as results_mod

# How to go on after a run stopped early (runner.execute.executor's STOP_* reasons): the folder keeps every finished
# attempt, and a resume runs only what is left.
CONTINUE_AFTER = {
    "cancelled": "Continue it with `skill-evals run --resume {folder}`: finished attempts are kept, the cancelled "
                 "ones start again.",
    "budget-cap": "Continue it with `skill-evals run --resume {folder} --max-usd <cap>`: the cap is for the whole "
                  "folder, the spend so far included.",
}


def print_selection_note(prepared: runs_mod.Prepared, console: Console) -> None:
    selection = prepared.selection
    if selection is not None and (selection.tier != "full" or selection.routing) and selection.note:
        console.print(f"Selection: {selection.note}", markup=False)


MAX_INVALID_SHOWN = 10  # a corpus with hundreds of broken cases would bury the plan; validate lists them all


def print_held_back(plan: Plan, console: Console) -> None:
    """Which skills and cases the floor held back, and the finding that did it; what changed the floor itself."""
    for note in plan.floor_notes:
        console.print(f"Floor: {note}", markup=False)
    if plan.held_back:
        console.print(f"[yellow]Held back by the floor: {len(plan.held_back)} skill(s), their selected cases UNRUN "
                      "(floor-error; an eval file of which no case could be read: eval-file-unreadable); see "
                      "`skill-evals validate`[/yellow]")
        for skill, detail in plan.held_back.items():
            console.print(f"  {skill}: {detail}", markup=False)
    if plan.not_read:
        console.print(f"[yellow]Not read: {len(plan.not_read)} skill folder(s) the floor could not read; no case of "
                      "theirs is planned[/yellow]")
        for skill, detail in plan.not_read.items():
            console.print(f"  {skill}: {detail}", markup=False)
    invalid = [c for c in plan.cases if c.unrun_detail and c.unrun_reason != "floor-error"]
    if invalid:
        console.print(f"[yellow]Cases (and unreadable eval files) the floor found invalid: {len(invalid)}[/yellow]")
        for case in invalid[:MAX_INVALID_SHOWN]:
            console.print(f"  {case.uid} ({case.unrun_reason}): {case.unrun_detail}", markup=False)
        if len(invalid) > MAX_INVALID_SHOWN:
            console.print(f"  … and {len(invalid) - MAX_INVALID_SHOWN} more (`skill-evals validate` lists them)")


def print_kind_rules(plan: Plan, console: Console, examples: int = 3) -> None:
    """Cases whose kind a rule of the runner decided, not a field of the file: per rule, a count and a few uids."""
    guessed = [c for c in plan.cases if c.kind_rule]
    if not guessed:
        return
    console.print(f"Kinds decided by a rule, not a field of the file: {len(guessed)} case(s) (check them; "
                  "[[case_override]] corrects one)", markup=False)
    for rule, count in Counter(c.kind_rule for c in guessed).most_common():
        refs = [c for c in guessed if c.kind_rule == rule]
        shown = ", ".join(f"{c.uid} ({c.kind})" for c in refs[:examples])
        more = f" … and {count - examples} more (plan.json lists each)" if count > examples else ""
        console.print(f"  {rule}: {count}: {shown}{more}", markup=False)


def cap_line(cap_usd: float, worst_session_usd: float, sessions: int) -> str:
    """What the cap means for this plan, in words that stay true when nothing runs or costs nothing."""
    if sessions == 0:
        return f"Cap: ${cap_usd:.2f}; no session to reserve (nothing is runnable)"
    if worst_session_usd <= 0:
        return (f"Cap: ${cap_usd:.2f}; the price table gives a session no cost, so the cap limits none of the "
                f"{sessions} session(s)")
    affordable = int(cap_usd // worst_session_usd)
    if affordable == 0:
        return (f"Cap: ${cap_usd:.2f} is below one session's worst case (${worst_session_usd:.4f}): no session can "
                "start; raise --max-usd")
    return (f"Cap: ${cap_usd:.2f} admits {min(affordable, sessions)} concurrent worst-case reservations; spend is "
            "reconciled from the host's usage after each session")


def verdict_words(plan: Plan) -> str:
    """N and k, or the sequential verdict's bound, for the plan's first line."""
    if plan.sequential is None:
        return f"N={plan.repeats} k={plan.quorum}"
    return plan.sequential.bound_text()


def print_plan(plan: Plan, console: Console) -> None:
    from runner.report.versions import host_text

    e = plan.estimate
    runnable = e.runnable_cases
    unrun = Counter(c.unrun_reason for c in plan.cases if c.unrun_reason)
    console.print(f"[bold]Plan[/bold] tier {plan.tier}; host {host_text(plan.host, plan.versions)}; "
                  f"model {plan.model}; {verdict_words(plan)}; cap ${plan.cap_usd:.2f}")
    if plan.approximation:
        console.print(f"[yellow]{plan.approximation}[/yellow]")
    console.print(f"Cases selected: {len(plan.cases)}; runnable: {runnable}; not runnable: "
                  + (", ".join(f"{k} {v}" for k, v in unrun.items()) or "none"))
    if plan.routing_sweep is not None:
        from runner.plan.sweep import note
        console.print(f"Routing sweep: {note(plan.routing_sweep)}", markup=False)
    print_held_back(plan, console)
    print_kind_rules(plan, console)
    if plan.sequential is None:
        console.print(f"Sessions: {e.sessions_min}–{e.sessions_max} (every case decided by its first k attempts … "
                      f"every repeat runs) = runnable cases × N")
    else:
        rule = plan.sequential.rule()
        basis = (f"at the rate the earlier run observed for {e.sessions_expected_from_history} case(s), over any "
                 "rate for the rest" if e.sessions_expected_from_history else "over any rate: no earlier run")
        console.print(f"Verdict: {rule.describe()}; a case still open at the bound is UNDECIDED, never PASS or FAIL",
                      markup=False)
        console.print(f"Sessions: expected ≈ {e.sessions_expected:,.0f} (the rule's expected attempts per case, "
                      f"{basis}); {e.sessions_min}–{e.sessions_max} (every case decided by its first round … every "
                      f"case at the bound, reserved under the cap)", markup=False)
    left_min, left_max = sessions_left(plan)
    if e.cached_cases:
        runs = sorted({c.cached.run for c in plan.cases if c.cached is not None})
        console.print(f"From the result cache: {e.cached_cases} case(s), {e.cached_attempts} attempt(s) that ran in "
                      f"{', '.join(runs)} (their spend there ${e.cached_spend_usd:.4f}); none of their sessions "
                      f"starts. Sessions left: {left_min}–{left_max}", markup=False)
    if e.baseline_cases:
        console.print(f"Baseline (uplift): {e.baseline_cases} output case(s) also run a control arm, the same session "
                      f"without the skill under test: {e.baseline_sessions} more session(s), worst case "
                      f"+${e.baseline_worst_usd:.2f}; both arms run every repeat (no early stop: the pass rates are "
                      "the result), so these cases' sessions double; the cap covers both arms", markup=False)
    console.print(f"Tokens: first turn ≈ {e.first_turn_input_tokens:,} input tokens ({e.token_basis})")
    console.print(f"Prices ({e.price_read_on}): {e.model} ${e.price_input_per_mtok}/M input, "
                  f"${e.price_output_per_mtok}/M output, cache ${e.price_cache_write_per_mtok}/M write, "
                  f"${e.price_cache_read_per_mtok}/M read")
    console.print(f"Cache: {e.cache_layout}; shared prefix {e.cached_prefix_tokens:,} tokens, written by "
                  f"{e.cold_sessions} session(s) of the first wave"
                  + ("; a case's later sessions read its first turn" if e.repeats_read_first_turn else "")
                  # The basis names a path or a setting (`[cost] basis ...`): text, never rich markup.
                  + f"; turns, growth and output per turn: {escape(e.cost_basis)}")
    console.print(f"Cost: expected ${e.expected_session_usd:.4f}/session (uncached ${e.expected_uncached_session_usd:.4f})"
                  f" → ${e.expected_usd:.2f} for "
                  + (f"{left_max}" if plan.sequential is None else f"≈{e.sessions_expected:,.0f} expected")
                  + f" sessions; worst case ${e.worst_session_usd:.4f}/"
                  f"session (no cache; reserved before each start) → "
                  f"${e.worst_usd if not e.cached_cases else e.worst_session_usd * left_max:.2f}")
    console.print(cap_line(plan.cap_usd, e.worst_session_usd, e.sessions_max))
    print_hosts(plan, console)
    if plan.session_path is not None:
        console.print(f"Session path: {plan.session_path.describe()}", markup=False)
    if plan.session_wall is not None:
        console.print(f"Session wall: {plan.session_wall.describe()}", markup=False)
    if e.expected_usd > plan.cap_usd:
        console.print(f"[yellow]The expected cost (${e.expected_usd:.2f}) is above the cap: the run will stop at "
                      f"${plan.cap_usd:.2f} and the rest will be UNRUN (budget-cap). Narrow the selection or raise "
                      "--max-usd.[/yellow]")
    # What the plan's work would judge, whether or not a judge will run (the note says which): the same with a key
    # and without. A plan written before judge_calls_planned existed has only judge_calls.
    console.print(f"Judge calls: {max(e.judge_calls_planned, e.judge_calls):,} ({e.judge_note})", markup=False)
    if plan.surface is not None:
        print_surface(plan.surface, console, brief=True)
    warned = [c for c in plan.cases if c.warnings]
    if warned:
        console.print(f"[yellow]Surface warnings: {len(warned)} case(s) whose target or neighbours were listed "
                      "without a description[/yellow]")
    if plan.unrun_all:
        own = len(plan.cases) - runnable
        console.print(f"[bold]Nothing will start: the {runnable} runnable case(s) are UNRUN ({plan.unrun_all})"
                      + (f"; the other {own} keep their own reason (not runnable, above)" if own else "")
                      + ".[/bold]")


def sessions_left(plan: Plan) -> tuple[int, int]:
    """(min, max) sessions that may start: the plan's, without the cases it takes from the result cache."""
    e = plan.estimate
    return (e.sessions_left_min if e.sessions_left_min is not None else e.sessions_min,
            e.sessions_left_max if e.sessions_left_max is not None else e.sessions_max)


def print_cache(cache: CacheUse | None, plan: Plan, console: Console) -> None:
    """Which result cache the run reads, what it found, and why it took nothing when it could not."""
    if cache is None:
        return
    mode = "read-only" if not cache.store.writable else "read and written"
    found = (f"{len(cache.hits)} of {len(cache.keys)} runnable case(s) found" if cache.why_not is None
             else f"nothing taken: {cache.why_not}")
    surface = {"reused": "; the surface audit's result reused from it", "stored": "; the surface audit stored in it"}
    console.print(f"Result cache: {cache.store.root} ({mode}); {found}{surface.get(cache.surface, '')}",
                  markup=False)


def print_hosts(plan: Plan, console: Console) -> None:
    """The same work on claude-code and on first-turn, and which cases the first-turn host would decide."""
    rows = plan.estimate.by_host
    if not rows:
        return
    console.print("Hosts (the same sessions):", markup=False)
    for row in rows:
        mark = " (this run)" if row.host == plan.host else ""
        console.print(f"  {row.host}{mark}: {row.sessions_max} sessions, ≈{row.requests_per_session:.2f} "
                      f"request(s)/session, expected ${row.expected_usd:.2f}; {row.note}", markup=False)
    # The host that sends Claude Code's first request itself (HostTraits.extra_first_request: first-turn).
    first = next((row for row in rows if traits(row.host).extra_first_request), None)
    decided = [c.uid for c in plan.cases if c.first_turn and c.unrun_reason is None]
    if first is not None and first.decided_cases:
        shown = ", ".join(decided[:8]) + (f" and {len(decided) - 8} more" if len(decided) > 8 else "")
        console.print(f"  {first.host} would decide from Claude Code's first request, when the first reply settles "
                      f"them: {shown}", markup=False)


def print_surface(surface: Surface, console: Console, brief: bool = False) -> None:
    if surface.error:
        console.print(f"[red]Surface audit failed: {surface.error}[/red]")
        return
    budget = surface.listing_budget_chars or "host default"
    cut = f" ({len(surface.cut)} of them shortened)" if surface.cut else ""
    console.print(f"Surface ({surface.host}, listing budget {budget}): {len(surface.with_description)} library "
                  f"skill(s) listed with their description{cut}, {len(surface.name_only)} by name only, "
                  f"{len(surface.missing)} missing; {len(surface.not_from_library)} of the host's own; listing "
                  f"{surface.listing_chars:,} characters, first request {surface.request_chars:,}")
    if not brief:
        console.print("With description: " + (", ".join(surface.with_description) or "none"), markup=False)
        console.print("Name only: " + (", ".join(surface.name_only) or "none"), markup=False)
        if surface.cut:
            console.print("Description shortened: " + ", ".join(surface.cut), markup=False)
        if surface.missing:
            console.print("Missing: " + ", ".join(surface.missing), markup=False)
        console.print("Host's own: " + (", ".join(surface.not_from_library) or "none"), markup=False)


def print_results(results: results_mod.Results, run_dir: Path, console: Console) -> None:
    from runner.report.rollup import records_line, reused_line
    from runner.results.build import floor_note, kill_note, sweep_note, wall_note

    counts = ", ".join(f"{k} {v}" for k, v in results.counts.items() if v)
    console.print(f"[bold]Results[/bold] ({results.plan.host}, {results.plan.model}): {counts}; "
                  f"attempts {results.attempts_finished} ({results.attempts_errored} errored); spend "
                  f"${results.spend.usd:.4f} of ${results.spend.cap_usd:.2f}")
    if results.plan.approximation:
        console.print(f"[yellow]{results.plan.approximation}[/yellow]")
    if (reused := reused_line(results)) is not None:
        console.print(f"Reused: {reused}", markup=False)
    if (log := records_line(results)) is not None:  # records refused, or an unsigned log, are never hidden
        console.print(f"Attempt log: {log}", markup=False)
    if (killed := kill_note(results)) is not None:  # spend no record shows is never hidden
        console.print(f"Killed before: {killed}", markup=False)
    if (changed := floor_note(results)) is not None:
        console.print(f"Floor: {changed}", markup=False)
    if (open_wall := wall_note(results)) is not None:
        console.print(f"Sessions: {open_wall}", markup=False)
    if (swept := sweep_note(results)) is not None:
        console.print(f"Routing sweep: {swept}", markup=False)
    if results.stop_reason:
        console.print(f"Stopped early: {results.stop_reason}", markup=False)
        if (how := CONTINUE_AFTER.get(results.stop_reason)) is not None:
            console.print(how.format(folder=run_dir), markup=False)
    if results.unrun_by_reason:
        console.print("UNRUN by reason: " + ", ".join(f"{k} {v}" for k, v in results.unrun_by_reason.items()))
    if results.assertion_counts:
        console.print("Assertions of executed cases: " + ", ".join(
            f"{k.replace('_', ' ')} {v}" for k, v in results.assertion_counts.items()))
    judge = results.plan.judge_model or f"none ({results.plan.judge_unavailable})"
    console.print(f"Judge: {judge}; {results.spend.judge_calls} call(s), ${results.spend.judge_usd:.4f}")
    from runner.report.terminal import routing_tables  # rich tables: imported when a run has finished
    routing_tables(results, console)
    console.print(results.not_executed)
    console.print(f"Results: {run_dir / 'results.json'}", markup=False)
    console.print(f"Read them: `skill-evals report {run_dir}` (`--format html --out report.html` for a page with "
                  "every transcript)", markup=False)
