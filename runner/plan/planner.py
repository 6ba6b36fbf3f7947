"""Making the plan: which selected cases run, which are held back and why, and the plan with its estimate.

runner.plan.plan is what the plan holds; runner.plan.cost is how its cost is estimated. Judge calls:
`judge_calls_planned` is what the plan's work would judge, the same with and without a key; `judge_calls` is what
this run will make (0 without a key, a judge, or a session that starts).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from runner.core.host_traits import traits
from runner.core.kinds import traits_of
from runner.core.quorum import VerdictRule
from runner.corpus import decide, kind_words
from runner.corpus.claims import is_output_case
from runner.corpus.layout import FOLDER_LAYOUTS
from runner.corpus.library import Case, Library, is_subagent
from runner.corpus.settings import Settings, TierSettings
from runner.floor.gate import INVALID_CASE, FloorGate, Hold, describe
from runner.hosts.prices import PriceTable
from runner.hosts.sessionpath import SessionPath
from runner.hosts.surface import Surface
from runner.hosts.wall import SessionWall
from runner.judge.prose import prompt_version
from runner.plan.cost import (
    CHARS_PER_TOKEN,
    cache_prices,
    estimate_expected,
    first_request,
    first_turn_eligible,
    host_estimates,
    request_tokens,
    worst_session_usd,
)
from runner.plan.plan import (
    UNCALIBRATED,
    UNCALIBRATED_STATES,
    CachedFrom,
    CostEstimate,
    Plan,
    PlanLibrary,
    PlannedCase,
    ProbeGate,
    RoutingSweep,
    RuleOf,
    SequentialVerdict,
    early_rule,
)
from runner.plan.quarantine import QuarantineEntry

# Which of the planned cases the result cache holds (runner.cache.reuse.lookup).
Reuse = Callable[[list[PlannedCase], RuleOf], dict[str, CachedFrom]]


def is_uncalibrated(gate: ProbeGate | None, settings: Settings) -> bool:
    """The probe runs uncalibrated: the settings allow it and no finished calibration of this content exists."""
    return settings.probes.allow_uncalibrated and (gate is None or gate.state in UNCALIBRATED_STATES)


def probe_unrun_reason(gate: ProbeGate | None, settings: Settings, judge_unavailable: str | None) -> str | None:
    """A probe runs only on a finished calibration of its current content, with a verdict the settings run,
    and with a judge to grade the act."""
    if is_uncalibrated(gate, settings):
        return f"probe-needs-judge ({judge_unavailable})" if judge_unavailable else None
    if gate is None or gate.state == "not-calibrated":
        return "probe-not-calibrated"
    if gate.state == "new-version":
        return "probe-new-version"  # edited since its calibration: the old record is not reused
    if gate.state == "in-progress":
        return "probe-calibration-unfinished"
    if gate.state == "unreadable":
        return "probe-calibration-unreadable"
    if gate.verdict not in settings.probes.run_verdicts:
        return f"probe-{gate.verdict}"
    if judge_unavailable:
        return f"probe-needs-judge ({judge_unavailable})"
    return None


def judge_note(planned: int, model: str, judge_unavailable: str | None, unrun_all: str | None) -> str:
    """What the judge calls are and whether they will be made, in words (CostEstimate.judge_note)."""
    what = f"at most one call per attempt of a case with prose assertions, {model}"
    if planned == 0:
        return f"no attempt has prose assertions to judge ({model})"
    if unrun_all == "no-credentials" or judge_unavailable == "no-credentials":
        return (f"{what}; none will be made: no ANTHROPIC_API_KEY, so no session starts and prose assertions stay "
                "UNRUN (no-credentials)")
    if unrun_all is not None:
        return f"{what}; none will be made: nothing starts ({unrun_all})"
    if judge_unavailable is not None:
        return f"{what}; none will be made: prose assertions stay UNRUN ({judge_unavailable})"
    return f"{what}, reserved against the same cap before each call"


def subagents_callable(host: str, allowed_tools: list[str]) -> bool:
    """Whether a session can start a subagent at all: only Claude Code has subagents (HostTraits.runs_claude_code),
    and only with the Agent (or Task) tool allowed; otherwise the model is not even offered the tool."""
    known = traits(host)
    return known.runs_claude_code and any(tool in allowed_tools for tool in known.activation.subagent_tools)


# A case whose verdict reads which skills fired, on a host whose sessions show no activation (grade `none`).
NO_ACTIVATION = "host-cannot-observe-activation"


def unrun_reason(case: Case, library: Library, subagents: bool = True, observable: bool = True,
                 hides_manual_only: bool = True) -> str | None:
    """The case's own reason not to run, or None. `subagents`: whether the host can start one (see
    subagents_callable). `observable`: whether the host shows an activation at all (its grade is not `none`):
    where it does not, a case decided by which skills fired could only be guessed, so it is UNRUN, while an output
    case runs on its answer's assertions alone (its activation part UNRUN: runner.execute.grading).
    `hides_manual_only`: whether the host keeps a manual-only skill from the model (HostTraits)."""
    if case.kind == "unknown":
        return "unknown-case-type"
    if case.kind == "invalid":
        return "invalid-case"
    if not observable and traits_of(case.kind) is not None and not is_output_case(case):
        return NO_ACTIVATION
    if case.routing is not None:
        return routing_unrun_reason(case, library, subagents, hides_manual_only)
    target = library.skills.get(case.target)
    # A manual-only skill cannot be picked by the model, but a prompt that invokes it by hand (`/name ...`) is
    # expanded by the host: such a case runs (runner.corpus.slash). A host that ignores the field lets the model
    # pick it: the case runs there.
    if target is not None and target.manual_only and hides_manual_only and not library.invoked_by_hand(case):
        return "manual-only-target"
    # Like a manual-only target (semantics §2): a subagent the host cannot start can neither activate (a trigger
    # case would FAIL for the harness's configuration, not the skill) nor fail to (a no-trigger case would pass
    # proving nothing). Since a refused call is no activation (runner.hosts.activation), it is UNRUN, never FAIL.
    if is_subagent(case.target) and not subagents:
        return "subagent-not-callable"
    if not case.prompt.strip():
        return "invalid-case"
    return None


def routing_unrun_reason(case: Case, library: Library, subagents: bool, hides_manual_only: bool = True) -> str | None:
    """A routing case as the rule above has it, for each skill that must fire (only those: a must-not skill that
    cannot fire still leaves the case's other parts to measure). A must skill the model cannot pick (manual-only,
    unless the prompt invokes it by hand) or a subagent the host cannot start would make the case FAIL for the
    harness's configuration, not the routing: UNRUN."""
    for name in case.routing.must_fire if case.routing else []:
        skill = library.skills.get(name)
        if skill is not None and skill.manual_only and hides_manual_only and not library.invoked_by_hand(case, name):
            return "manual-only-target"
        if is_subagent(name) and not subagents:
            return "subagent-not-callable"
    return "invalid-case" if not case.prompt.strip() else None


def apply_hold(planned: PlannedCase, held: Hold) -> None:
    """The floor's reason wins over the case's own, except that a case the loader already could not read
    keeps saying so (unknown-case-type is more precise than invalid-case); the finding is the detail."""
    already_broken = planned.unrun_reason in ("unknown-case-type", INVALID_CASE)
    if not (held.reason == INVALID_CASE and already_broken):
        planned.unrun_reason = held.reason
    planned.unrun_detail = held.detail


def surface_warnings(case: Case, surface: Surface | None) -> list[str]:
    if surface is None or surface.error:
        return []
    dropped = set(surface.name_only)
    out = []
    if case.target in dropped:
        out.append(f"target {case.target} was listed without its description")
    for name in case.should_not_trigger:
        if name in dropped:
            out.append(f"neighbour {name} was listed without its description")
    return out




def build(library: Library, selected: list[tuple[Case, str]], settings: Settings, tier: str, tier_rule: TierSettings,
          host: str, versions: dict[str, str], prices: PriceTable, surface: Surface | None,
          unrun_all: str | None, judge_unavailable: str | None = None,
          quarantine: list[QuarantineEntry] | None = None, probe_gates: dict[str, ProbeGate] | None = None,
          batch: bool = False, floor: FloorGate | None = None, session_path: SessionPath | None = None,
          session_wall: SessionWall | None = None,
          runs_folder: Path | None = None, reuse: Reuse | None = None,
          routing_sweep: RoutingSweep | None = None) -> Plan:
    """The plan of the selected cases. `reuse`: given the planned cases, those whose attempts the result cache
    holds (runner.cache.reuse); they are planned with no session, and the estimate counts only the rest.
    `routing_sweep`: a routing sweep's (runner.plan.sweep), whose `selected` are already the sweep's copies."""
    run = settings.run
    sequential = sequential_of(settings, tier_rule)
    known = traits(host)
    subagents = subagents_callable(host, run.allowed_tools)
    names = library.names()
    cases = []
    held_back: dict[str, str] = {}
    for case, why in selected:
        planned = PlannedCase(
            uid=case.uid, skill=case.skill, file=case.file, line=case.line, kind=case.kind, target=case.target,
            kind_rule=case.kind_rule if kind_words.by_heuristic(case.kind_rule) else None, label=case.label,
            should_not_trigger=case.should_not_trigger, repeats=tier_rule.repeats, quorum=tier_rule.quorum,
            unrun_reason=unrun_reason(case, library, subagents, known.activation_grade != "none",
                                      known.hides_manual_only), why=why, warnings=surface_warnings(case, surface))
        if case.kind == "probe":
            gate = (probe_gates or {}).get(case.uid)
            planned.arms = ["control", "treatment"]
            planned.explicit_invocation = settings.probes.explicit_invocation
            # No key holds every case already (unrun_all): a probe's own reason is about the probe, so the plan of
            # work is the same with and without a key.
            planned.unrun_reason = probe_unrun_reason(gate, settings, None if judge_unavailable == "no-credentials"
                                                      else judge_unavailable)
            if planned.unrun_reason is None and known.activation_grade == "none":
                planned.unrun_reason = NO_ACTIVATION  # its treatment arm's target must fire
            planned.calibration = UNCALIBRATED if is_uncalibrated(gate, settings) else (
                f"{gate.verdict} (version {gate.content_hash[:12]})" if gate and gate.verdict else None)
        elif tier_rule.baseline and is_output_case(case):
            planned.arms = ["main", "control"]  # both arms every repeat: their pass rates are the result
        if sequential is not None and not planned.arms:
            planned.repeats, planned.quorum = sequential.max_repeats, sequential.max_repeats // 2 + 1
        if run.decide_early and not planned.arms:
            planned.decide_when = decide.decide_when(case, names)
            planned.first_turn = first_turn_eligible(planned, case)
        if floor is not None and (held := floor.hold_case(case)) is not None:
            apply_hold(planned, held)
            if held.skill is not None:
                held_back.setdefault(held.skill, floor.skill_detail(held.skill))
        cases.append(planned)
    # Each case's early rule (Plan.early_rule, before there is a plan): None when every repeat runs.
    rules = {c.uid: early_rule(c, run.early_stop, sequential) for c in cases}
    cached = reuse(cases, lambda p: rules[p.uid]) if reuse is not None else {}
    for planned in cases:
        planned.cached = cached.get(planned.uid)
    runnable = [c for c in cases if c.unrun_reason is None]
    # What the plan hashes is the same whatever the cache holds (two shards that found different entries still
    # merge): the cases from the cache change only the sessions left and the expected cost, which are not hashed.
    from_cache = [c.cached for c in runnable if c.cached is not None]
    left = [c for c in runnable if c.cached is None]
    by_uid = {case.uid: case for case, _ in selected}
    longest_prompt = max((len(by_uid[c.uid].prompt) for c in runnable), default=0)
    mean_prompt = sum(len(by_uid[c.uid].prompt) for c in runnable) // len(runnable) if runnable else 0
    request = first_request(library, settings, host, surface, versions)
    first_turn, basis = request_tokens(request, longest_prompt), request.basis
    typical_first_turn = request_tokens(request, mean_prompt)
    price = prices.price(run.model)
    price_in, price_out = (price.input, price.output) if price else (0.0, 0.0)
    write_price, read_price, minimum = cache_prices(price) if price else (0.0, 0.0, 1024)
    # The first-turn host may send a case's first request itself and then hand the attempt to a whole session.
    turns_at_most = run.max_turns + (1 if known.extra_first_request else 0)
    output_bound = known.fixed_max_output_tokens or run.max_output_tokens
    worst = worst_session_usd(first_turn, turns_at_most, output_bound, price_in, price_out)
    layout, shared = request.layout, request.shared_chars // CHARS_PER_TOKEN
    one_path = known.runs_claude_code and session_path is not None and session_path.case_shares_path
    found = estimate_expected(runnable, library, settings, price, typical_first_turn, shared, layout, one_path,
                              rules, runs_folder)
    expected_left = sum(found.per_case.get(c.uid, 0.0) for c in left)
    sessions_max = sum(c.sessions for c in runnable)
    expected = found.session_usd
    judged = sum(c.sessions for c in runnable if c.kind == "probe" or by_uid[c.uid].judged)
    baseline_sessions = sum(c.repeats for c in runnable if c.baselined)
    estimate = CostEstimate(
        model=run.model, price_input_per_mtok=price_in, price_output_per_mtok=price_out,
        price_cache_write_per_mtok=write_price, price_cache_read_per_mtok=read_price, cache_min_tokens=minimum,
        price_read_on=prices.read_on, runnable_cases=len(runnable), sessions_max=sessions_max,
        sessions_min=sum(fewest_sessions(c, rules[c.uid]) for c in runnable),
        first_turn_input_tokens=first_turn, token_basis=basis, cache_layout=layout,
        cached_prefix_tokens=round(shared * found.token_scale) if shared * found.token_scale >= minimum else 0,
        cold_sessions=found.cold, cost_basis=found.basis, token_scale=round(found.token_scale, 4),
        typical_first_turn_input_tokens=typical_first_turn, repeats_read_first_turn=found.repeats_read,
        by_kind=found.by_kind, expected_session_usd=round(expected, 6),
        expected_uncached_session_usd=round(found.uncached_session_usd, 6),
        worst_session_usd=round(worst, 6),
        # The sequential verdict's bound is far above what a case uses: its expected cost is at its expected sessions.
        expected_usd=round(expected * (expected_left if sequential is not None else sum(c.sessions for c in left)), 4),
        worst_usd=round(worst * sessions_max, 4),
        judge_calls=judged if judge_unavailable is None and unrun_all is None else 0, judge_calls_planned=judged,
        judge_note=judge_note(judged, settings.judge.model, judge_unavailable, unrun_all),
        baseline_cases=sum(1 for c in runnable if c.baselined), baseline_sessions=baseline_sessions,
        baseline_worst_usd=round(worst * baseline_sessions, 4),
        cached_cases=len(from_cache), cached_attempts=sum(c.attempts for c in from_cache),
        cached_spend_usd=round(sum(c.spent_usd for c in from_cache), 6),
        sessions_left_max=sum(c.sessions for c in left),
        sessions_left_min=sum(fewest_sessions(c, rules[c.uid]) for c in left),
        sessions_expected=round(expected_left, 2),
        sessions_expected_from_history=found.from_history,
    )
    if known.runs_claude_code:
        estimate.by_host = host_estimates(runnable, found, estimate, price, typical_first_turn, shared,
                                          layout, run.decide_early)
    return Plan(
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), tier=tier, host=host,
        approximation=known.approximation, versions=versions, model=run.model,
        judge_model=settings.judge.model if judge_unavailable is None else None,
        judge_prompt_version=prompt_version() if judge_unavailable is None else None,
        judge_unavailable=judge_unavailable,
        library=PlanLibrary(root=library.root, skills_dir=library.skills_dir, content_hash=library.content_hash,
                            root_in_hash=False, read_from="skills_dir" if library.layout is None
                            or library.layout.kind in FOLDER_LAYOUTS else "root"),
        repeats=tier_rule.repeats, quorum=tier_rule.quorum, max_turns=run.max_turns, timeout_s=run.timeout_s,
        max_output_tokens=run.max_output_tokens, concurrency=run.concurrency, early_stop=run.early_stop,
        decide_early=run.decide_early, batch=batch,
        rate_limit_pause_s=run.rate_limit_pause_s, cap_usd=run.max_usd,
        listing_budget_chars=settings.listing.budget_chars, allowed_tools=run.allowed_tools,
        manual_only=sorted(name for name, skill in library.skills.items() if skill.manual_only)
        if known.hides_manual_only else [], surface=surface,
        session_path=session_path if known.runs_claude_code else None,
        session_wall=session_wall if known.runs_claude_code else None,
        cases=cases, estimate=estimate, unrun_all=unrun_all, quarantine=quarantine or [],
        # Every skill the floor holds back, selected or not: "held back: listed below" lists what it counts.
        held_back=dict(sorted((held_back | ({name: floor.skill_detail(name) for name in floor.skills}
                                            if floor else {})).items())),
        not_read={name: describe(found) for name, found in sorted(floor.absent.items())} if floor else {},
        record_mac="hmac-sha256",
        floor_notes=[describe([found]) for found in floor.announced] if floor else [],
        routing_sweep=routing_sweep, sequential=sequential,
    )


def sequential_of(settings: Settings, tier_rule: TierSettings) -> SequentialVerdict | None:
    """The plan's sequential verdict when the tier's verdict (else [run] verdict) is sequential."""
    if (tier_rule.verdict or settings.run.verdict) != "sequential":
        return None
    return SequentialVerdict.model_validate(settings.sequential.model_dump())


def fewest_sessions(planned: PlannedCase, rule: VerdictRule | None) -> int:
    """The fewest sessions a case can use: every one when every repeat runs (`rule` None), else its rule's fewest."""
    return planned.sessions if rule is None else rule.fewest
