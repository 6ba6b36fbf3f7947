"""The numbers every report shows, computed once from a Results file.

Health metrics (trigger accuracy, discrimination record, refusal compliance) leave quarantined
cases out; counts never do. Nothing here is a claim about a case that was not executed.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from pydantic import BaseModel

from runner.core.quorum import wilson_interval
from runner.core.states import CASE_STATES, OPEN, VERDICTS, CaseState
from runner.plan.plan import UNCALIBRATED
from runner.report import versions as versions_mod
from runner.report.versions import host_text
from runner.results.build import CaseResult, Results, ReusedRun
from runner.results.routing import NONE, Confusion, Rate, Routing
from runner.results.sureness import Flip, SequentialSummary
from runner.results.uplift import Uplift
from runner.results.vetting import summary as refused_summary


class SkillRollup(BaseModel):
    skill: str
    states: dict[str, int]
    trigger_wins: int = 0
    trigger_run: int = 0
    trigger_wilson: tuple[float, float] | None = None
    pairs_won: int = 0
    pairs_lost: int = 0
    refusal_compliant: int = 0
    refusal_run: int = 0
    uplift: Uplift | None = None  # run --baseline: the skill's baselined cases pooled (results.json `uplift`)


class Note(BaseModel):
    uid: str
    text: str


class Rollup(BaseModel):
    header: dict[str, str]
    counts: dict[str, int]
    executed: int
    not_executed: int
    skills: list[SkillRollup]
    baselined: bool = False  # run --baseline: the per-skill tables gain an uplift column
    failing: list[CaseResult]
    erroring: list[CaseResult]
    judge_erroring: list[CaseResult]
    quarantined: list[CaseResult]
    unjudgeable: list[Note]
    surface_warnings: list[Note]
    held_back: list[Note] = []
    uncalibrated: list[Note] = []  # probes planned without a finished calibration ([probes] allow_uncalibrated)
    unrun_by_reason: dict[str, int]
    judge_error_rate: float | None
    not_executed_sentence: str
    cost_line: str | None = None
    first_turn_line: str | None = None
    records_line: str | None = None
    reused: list[Note] = []  # the cases taken from the result cache, each with the run it ran in
    undecided: list[CaseResult] = []  # the sequential verdict left them open: neither PASS nor FAIL
    shown_states: list[CaseState] = list(CASE_STATES)  # the state columns reports show (see `shown_states`)
    grade_line: str | None = None  # the host's activation grade, when it is not a tool event (`grade_line`)
    file_read: bool = False  # the run's activation verdicts rest on SKILL.md reads: their columns say so


def cost_line(results: Results) -> str | None:
    """Planned against spent per session and the cache's share, in one plain line (every report shows it), and what
    the run took from the result cache instead of spending it."""
    cost = results.cost
    reused = reused_line(results)
    if cost is None or not cost.sessions:
        return reused
    ratio = f"{cost.ratio:.2f}" if cost.ratio is not None else "n/a (nothing spent)"
    parts = [f"planned ${cost.planned_session_usd:.4f}/session, spent ${cost.spent_session_usd:.4f}/session "
             f"(planned/spent {ratio}) over {cost.sessions} session(s)",
             f"cache read {100 * cost.cache_read_share:.1f}% of input tokens",
             f"{cost.model_calls / cost.sessions:.2f} request(s) per session"]
    if cost.decided_early:
        parts.append(f"{cost.decided_early} session(s) ended once their outcome was certain")
    if cost.sessions_with_prefix_hash:
        parts.append(f"{cost.prefixes} distinct prefix(es) before the case prompt")
    if cost.session_path:
        parts.append("session path " + ", ".join(f"{mode} {n}" for mode, n in cost.session_path.items()))
    if reused:
        parts.append(reused)
    return " · ".join(parts)


def reused_line(results: Results) -> str | None:
    """What this run took from the result cache instead of running it, in one line every report shows."""
    reused = results.reused
    if reused is None:
        return None
    def named(run: ReusedRun) -> str:
        return run.run + (f" ({run.label})" if run.label else "")

    if len(reused.runs) == 1:
        where = f"at run {named(reused.runs[0])}"
    else:
        where = "at runs " + ", ".join(f"{named(r)} ${r.spent_usd:.4f} for {r.cases} case(s)" for r in reused.runs)
    return (f"reused {reused.attempts} attempt(s) of {reused.cases} case(s) from the result cache (their spend "
            f"${reused.spent_usd:.4f} {where}); not run again, nothing spent on them here")


def reused_from_text(case: CaseResult) -> str | None:
    """Where a case taken from the result cache ran."""
    if case.reused is None:
        return None
    label = f" ({case.reused.label})" if case.reused.label else ""
    return f"from the result cache: ran in run {case.reused.run}{label}, {case.reused.finished_at}"


def records_line(results: Results) -> str | None:
    """What the attempt log could not be trusted for, in one line every report shows: the records refused (how
    many, by which rule; runner.results.vetting), and a run folder whose records were not signed."""
    parts = []
    if results.refused_records:
        claimed = len({r.uid for r in results.refused_records if r.uid is not None})
        parts.append(f"{refused_summary(results.refused_records)} attempt record(s) refused and never counted (not "
                     f"written by the runner, or not possible under this plan); the {claimed} case(s) they claim are "
                     f"ERROR (results.json `refused_records`)")
    if results.records_signed is False:
        parts.append("attempt records unsigned (a run folder from before records were signed): ids, costs and the "
                     "plan were checked, but a record the runner did not write could not be told apart")
    return "; ".join(parts) if parts else None


def first_turn_line(results: Results) -> str | None:
    """How the first-turn host ran the attempts, named as what it is (every report shows it on that host)."""
    first = results.cost.first_turn if results.cost is not None else None
    if first is None:
        return None
    captures = ", ".join(first.capture_hashes)
    return (f"Claude Code {first.cli_version}'s first turn sent directly (capture {captures}): "
            f"{first.decided} attempt(s) decided by the first reply, {first.handed_off} handed off to a Claude Code "
            f"session, {first.not_eligible} not activation-only (run on Claude Code)")


def _activation_decided(case: CaseResult) -> bool:
    return case.activation is not None and case.activation.state in VERDICTS


def skill_rollups(cases: list[CaseResult]) -> list[SkillRollup]:
    by_skill: dict[str, list[CaseResult]] = defaultdict(list)
    for case in cases:
        by_skill[case.skill].append(case)
    out = []
    for skill in sorted(by_skill):
        mine = by_skill[skill]
        healthy = [c for c in mine if c.state != "QUARANTINED"]
        triggers = [c for c in healthy if c.kind in ("trigger", "refusal") and _activation_decided(c)]
        wins = sum(1 for c in triggers if c.activation and c.activation.state == "PASS")
        pairs = [p for c in healthy for p in c.pairs if p.state in VERDICTS]
        refusals = [c for c in healthy if c.kind == "refusal" and c.parts.get("refusal") in VERDICTS]
        counts = Counter(c.state for c in mine)
        out.append(SkillRollup(
            skill=skill, states={s: counts.get(s, 0) for s in CASE_STATES}, trigger_wins=wins,
            trigger_run=len(triggers), trigger_wilson=wilson_interval(wins, len(triggers)),
            pairs_won=sum(1 for p in pairs if p.state == "PASS"), pairs_lost=sum(1 for p in pairs if p.state == "FAIL"),
            refusal_compliant=sum(1 for c in refusals if c.parts.get("refusal") == "PASS"), refusal_run=len(refusals)))
    return out


def kind_label(case: CaseResult) -> str:
    """The kind as every report shows it: a probe run without a finished calibration says so beside it, and so does
    the category tag its file gives the case (beside the kind, never instead of it)."""
    notes = (["uncalibrated"] if case.calibration == UNCALIBRATED else []) + ([f"tag {case.label}"] if case.label else [])
    return f"{case.kind} ({', '.join(notes)})" if notes else case.kind


def held_back(results: Results) -> list[Note]:
    """What the floor kept from running: one note per held-back skill, one per invalid case, with the finding."""
    notes = [Note(uid=skill, text=f"skill held back (floor-error): {detail}")
             for skill, detail in results.plan.held_back.items()]
    notes += [Note(uid=skill, text=f"skill not read (no case of it was planned): {detail}")
              for skill, detail in results.plan.not_read.items()]
    notes += [Note(uid=c.uid, text=f"{c.reason}: {c.detail}") for c in results.cases
              if c.detail and c.reason != "floor-error"]
    return notes


def with_uplift(skills: list[SkillRollup], results: Results) -> list[SkillRollup]:
    """Each skill's uplift row (run --baseline), when results.json has one."""
    found = {row.skill: row.uplift for row in results.uplift}
    return [s.model_copy(update={"uplift": found.get(s.skill)}) for s in skills]


def shown_states(counts: dict[str, int]) -> list[CaseState]:
    """The case states a report lists, in CASE_STATES order: every state, but an open state (UNDECIDED, which only
    the sequential verdict gives) only when a case is in it, so that a quorum run renders as it always did."""
    return [state for state in CASE_STATES if state not in OPEN or counts.get(state, 0)]


def build(results: Results) -> Rollup:
    plan = results.plan
    cases = results.cases
    unrun = sum(results.unrun_by_reason.values())
    host_version = versions_mod.host_version(plan.versions)
    header = {
        "tier": plan.tier, "host": plan.host, "host_version": host_version,
        "host_text": host_text(plan.host, plan.versions), "model": plan.model,
        "judge_model": plan.judge_model or f"none ({plan.judge_unavailable})", "repeats": str(plan.repeats),
        "quorum": str(plan.quorum), "spend": f"${results.spend.usd:.2f}", "cap": f"${results.spend.cap_usd:.2f}",
        "coverage": f"{len(cases) - unrun} run / {unrun} UNRUN",
    }
    judged = [a for c in cases if c.state != "QUARANTINED" for a in c.assertions
              if a.state in ("PASS", "FAIL", "JUDGE-ERROR") and a.assertion_class == "semantic"]
    judge_errors = sum(1 for a in judged if a.state == "JUDGE-ERROR")
    return Rollup(
        header=header, counts=dict(results.counts), executed=len(cases) - unrun, not_executed=unrun,
        skills=with_uplift(skill_rollups(cases), results), baselined=bool(results.uplift),
        failing=[c for c in cases if c.state == "FAIL"], erroring=[c for c in cases if c.state == "ERROR"],
        judge_erroring=[c for c in cases if c.state == "JUDGE-ERROR"],
        quarantined=[c for c in cases if c.state == "QUARANTINED"],
        unjudgeable=[Note(uid=f"{c.uid}#{a.index}", text=a.text) for c in cases for a in c.assertions
                     if a.state == "UNJUDGEABLE" or a.assertion_class == "unjudgeable"],
        surface_warnings=[Note(uid=c.uid, text=w) for c in cases for w in c.warnings],
        held_back=held_back(results),
        uncalibrated=[Note(uid=c.uid, text=f"{kind_label(c)}, {c.state}" + (f" ({c.reason})" if c.reason else "")
                           + ": no live calibration of this version (seed 000 calls it optional)")
                      for c in cases if c.calibration == UNCALIBRATED],
        unrun_by_reason=dict(results.unrun_by_reason),
        judge_error_rate=round(judge_errors / len(judged), 4) if judged else None,
        not_executed_sentence=results.not_executed, cost_line=cost_line(results),
        first_turn_line=first_turn_line(results), records_line=records_line(results),
        reused=[Note(uid=c.uid, text=text) for c in cases if (text := reused_from_text(c)) is not None],
        undecided=[c for c in cases if c.state in OPEN],
        shown_states=shown_states({s: sum(1 for c in cases if c.state == s) for s in CASE_STATES}
                                  | {s: n for s, n in results.counts.items() if n}),
        grade_line=grade_line(results), file_read=plan.activation_grade == "file-read",
    )


# ---- the routing matrix (results.json `routing`, runner.results.routing) -----------------------------------------

WORST_CONFUSIONS = 10  # what the Markdown rollup, the terminal and the page list first


def confusion_text(confusion: Confusion) -> str:
    """"B's prompts fire A (7 of 9 attempts)": the sentence every report gives a confusion."""
    whose = "prompts that expect no skill" if confusion.expected == NONE else f"{confusion.expected}'s prompts"
    return f"{whose} fire {confusion.fired} ({confusion.attempts} of {confusion.of} attempts)"


def rate_text(rate: Rate, fraction: bool = True) -> str:
    """`9/15 (60%, 36–81%)`; `—` when nothing was measured. F1 is shown as a share (its trials count TP twice)."""
    if rate.value is None:
        return "—"
    interval = ""
    if rate.interval is not None:
        low, high = rate.interval
        interval = f", {math.floor(low * 100 + 1e-9)}–{math.ceil(high * 100 - 1e-9)}%"
    share = f"{rate.value * 100:.0f}%{interval}"
    return f"{rate.successes}/{rate.trials} ({share})" if fraction else share


def routing_order(routing: Routing) -> list[str]:
    """The skills of the per-skill routing table, worst first: lowest F1 (nothing measured last), then the name."""
    return sorted(routing.per_skill, key=lambda name: (routing.per_skill[name].f1.value is None,
                                                       routing.per_skill[name].f1.value or 0.0, name))


def excluded_text(routing: Routing) -> str:
    """The attempts the matrix left out, by state, in one line (they never enter a rate)."""
    parts = [f"{n} {state}" for state, n in routing.excluded.items() if n]
    reasons = ", ".join(f"{reason} {n}" for reason, n in routing.unrun_by_reason.items())
    text = ", ".join(parts) if parts else "none"
    return f"Left out of every rate: {text} attempt(s)" + (f" (UNRUN: {reasons})" if reasons else "")


def shown_routing(results: Results) -> Routing | None:
    """The run's routing matrix when there is anything to show: counted attempts or excluded ones."""
    found = results.routing
    if found is None or (not found.attempts and not any(found.excluded.values())):
        return None
    return found


# ---- the sequential verdict (results.json `cases[].sequential` and `sequential`, runner.results.sureness) --------

WORST_FLIPS = 10  # the flips the Markdown rollup and the terminal list (the page lists all)


def rule_words(case: CaseResult) -> str:
    """How a case was decided, beside its repeats: `quorum 2`, or `sequential verdict` (its bound is the N)."""
    return "sequential verdict" if case.sequential is not None else f"quorum {case.quorum}"


def verdict_text(results: Results) -> str:
    """How the cases were decided, for a header: `N=3, k=2`, or the sequential verdict's bound."""
    verdict = results.plan.sequential
    if verdict is None:
        return f"N={results.plan.repeats}, k={results.plan.quorum}"
    return verdict.bound_text()


def interval_text(interval: tuple[float, float] | None) -> str:
    """`[0.51, 1.00]`, rounded outwards to two places (never narrower than the interval); `[—]` without trials."""
    if interval is None:
        return "[—]"
    low, high = interval
    return f"[{math.floor(low * 100 + 1e-9) / 100:.2f}, {math.ceil(high * 100 - 1e-9) / 100:.2f}]"


def sequential_case_text(case: CaseResult) -> str | None:
    """"PASS at round 2 (4 attempts): rate 1.00 [0.51, 1.00]", "UNDECIDED after 6 attempts: rate 0.50 [0.18, 0.82] —
    neither PASS nor FAIL is claimed": what the sequential verdict said of one case and how sure it is (Wilson 95%,
    descriptive: the decision's error bounds are the rule's). None for a case the quorum decided."""
    figures = case.sequential
    if figures is None:
        return None
    state = case.underlying_state if case.state == "QUARANTINED" and case.underlying_state else case.state
    attempts = f"{figures.attempts} attempt{'s' if figures.attempts != 1 else ''}"
    if figures.trials != figures.attempts:
        attempts += f", {figures.trials} observed"
    when = (f"at round {figures.round} ({attempts})" if state in VERDICTS else
            f"after {attempts}" + (f" (round {figures.round})" if state not in OPEN else ""))
    rate = "no rate (no attempt was observed)" if figures.rate is None else (
        f"rate {figures.rate:.2f} {interval_text(figures.interval_95)}")
    text = f"{state} {when}: {rate}"
    if state in OPEN:
        text += " — neither PASS nor FAIL is claimed"
    if figures.fixed_n3 is not None and figures.fixed_n3 != state:
        text += f"; fixed N = 3 would have said {figures.fixed_n3}"
    return text


def sequential_bounds_text(summary: SequentialSummary, results: Results) -> str:
    """The rule's exact error bounds at the edges of its band, and its chance of UNDECIDED in the middle."""
    verdict = results.plan.sequential
    low = f" ({verdict.pass_rate - verdict.indifference:g})" if verdict else ""
    high = f" ({verdict.pass_rate + verdict.indifference:g})" if verdict else ""
    middle = f" ({verdict.pass_rate:g})" if verdict else ""
    return (f"PASS at most {summary.pass_at_p0:.4f} for a case whose rate is θ−δ{low}; FAIL at most "
            f"{summary.fail_at_p1:.4f} for a case at θ+δ{high}; UNDECIDED {summary.undecided_at_theta:.4f} for a case "
            f"at θ{middle} (exact, not simulated)")


def sequential_cases_text(summary: SequentialSummary) -> str:
    if not summary.cases:
        return "no case ran by it: no verdict and no figure of it is claimed"
    return (f"{summary.cases} case(s): {summary.passed} PASS, {summary.failed} FAIL, {summary.undecided} UNDECIDED "
            f"(neither PASS nor FAIL claimed), {summary.broken} ERROR or JUDGE-ERROR")


def sequential_sessions_text(summary: SequentialSummary) -> str:
    """Sessions used against fixed N = 3 (saved, or more: never a negative saving) and against the bound."""
    saved = summary.saved
    against = (f"{saved} saved" if saved > 0 else f"{-saved} more" if saved < 0 else "as many")
    return (f"{summary.sessions} session(s) used; fixed N = 3 would have used {summary.sessions_fixed_n3} "
            f"({against}); the bound is {summary.sessions_bound} (what the cap reserved)")


def flip_text(flip: Flip) -> str:
    return f"{flip.uid}: {flip.state}, fixed N = 3 would have said {flip.fixed_n3}"


def flips_intro(summary: SequentialSummary) -> str:
    return (f"Cases fixed N = 3 (quorum 2, on their first three attempts) would have given another state: "
            f"{len(summary.flips)}")


# Beside a verdict that rests on reads of a SKILL.md (a file-read host: Codex has no skill event), in every report.
FILE_READ = "file-read"
FILE_READ_NOTE = ("activation on this host is graded file-read: it shows no skill event, so a skill counts as fired "
                  "when the model read its SKILL.md; a verdict marked (file-read) rests on those reads, not on a "
                  "skill call")


def grade_label(case: CaseResult) -> str | None:
    """`file-read` for a verdict (PASS, FAIL, UNDECIDED, or one quarantined) read from a file-read host's attempts;
    None otherwise (a tool-event verdict needs no label, an ERROR or UNRUN case is no verdict)."""
    state = case.underlying_state or case.state
    if case.activation_grade == "file-read" and state in ("PASS", "FAIL", "UNDECIDED"):
        return FILE_READ
    return None


def state_with_grade(case: CaseResult, state: str) -> str:
    """`state`, with the case's grade label when it has one: `PASS (file-read)`."""
    label = grade_label(case)
    return f"{state} ({label})" if label else state


def grade_line(results: Results) -> str | None:
    """The run's line when its host's activation grade is not a tool event."""
    if results.plan.activation_grade == "file-read":
        return f"{results.plan.host}: {FILE_READ_NOTE}"
    if results.plan.activation_grade == "none":
        return (f"{results.plan.host}: its sessions show no activation, so every case whose verdict reads which "
                "skills fired is UNRUN (host-cannot-observe-activation); output cases ran")
    return None
