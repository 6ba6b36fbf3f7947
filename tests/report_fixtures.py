"""Results files for report tests: every state and reason, hostile text, and a 2,000-case run.

Built with the real pydantic models (runner.results.build), so a fixture can never hold a shape the
runner cannot produce.
"""

from __future__ import annotations

from datetime import date

from runner.core.quorum import wilson_interval
from runner.core.states import CASE_STATES, CaseState
from runner.plan.plan import SequentialVerdict
from runner.plan.quarantine import QuarantineEntry
from runner.results import sureness as sequential_mod
from runner.results.build import CaseResult, PlanSummary, Results, Spend
from runner.results.verdicts import ActivationResult, AssertionResult, PairResult

HOSTILE = "@someone <script>alert(1)</script> </details> `tick` | pipe | **bold** <!-- x --> &amp;"


def plan_summary() -> PlanSummary:
    return PlanSummary(hash="0123456789abcdef", tier="pr", host="claude-code", approximation=None,
                       versions={"claude-agent-sdk": "0.2.189", "claude-code-cli": "2.1.332"},
                       model="claude-sonnet-4-6", judge_model="claude-sonnet-4-6", judge_prompt_version="abc123def456",
                       repeats=3, quorum=2, cap_usd=10.0, library_hash="f" * 64, listing_budget_chars=None,
                       surface=None)


def activation(state: str, fired: int, observed: int) -> ActivationResult:
    return ActivationResult(state=state, fired_runs=fired, observed_runs=observed,
                            rate=fired / observed if observed else None, wilson_95=wilson_interval(fired, observed))


def assertion(index: int, state: str, cls: str = "semantic", text: str = "States the verdict first.",
              reason: str | None = None, evidence: list[str] | None = None) -> AssertionResult:
    return AssertionResult(index=index, text=text, assertion_class=cls, state=state, reason=reason,
                           passes=2 if state == "PASS" else 0, fails=2 if state == "FAIL" else 0,
                           evidence=evidence or [])


def every_state() -> Results:
    """One case in each state, with each common UNRUN reason, pairs, refusal parts and hostile text."""
    cases = [
        CaseResult(uid="alpha/evals/positive-ok", skill="alpha", kind="trigger", target="alpha", state="PASS",
                   wins=2, repeats_run=2, repeats_planned=3, quorum=2, activation=activation("PASS", 2, 2),
                   assertions=[assertion(1, "PASS", evidence=["Verdict: GREEN"])],
                   attempts=["alpha/evals/positive-ok#main#1", "alpha/evals/positive-ok#main#2"], cost_usd=0.12),
        CaseResult(uid="alpha/evals/should-not-merge", skill="alpha", kind="refusal", target="alpha", state="FAIL",
                   losses=2, repeats_run=2, repeats_planned=3, quorum=2, parts={"activation": "PASS", "refusal": "FAIL"},
                   activation=activation("PASS", 2, 2),
                   assertions=[assertion(1, "FAIL", text="Refuses to merge " + HOSTILE, evidence=["Merged. " + HOSTILE])],
                   attempts=["alpha/evals/should-not-merge#main#1", "alpha/evals/should-not-merge#main#2"],
                   cost_usd=0.2),
        CaseResult(uid="alpha/trigger/alpha-wins", skill="alpha", kind="discrimination", target="alpha", state="FAIL",
                   losses=2, repeats_run=2, repeats_planned=3, quorum=2, activation=activation("FAIL", 2, 2),
                   fired_instead={"beta": 2},
                   pairs=[PairResult(neighbour="beta", won=0, lost=2, state="FAIL"),
                          PairResult(neighbour="gamma", won=2, lost=0, state="PASS"),
                          PairResult(neighbour="manual-one", won=0, lost=0, state="UNRUN", reason="manual-only-target")],
                   attempts=["alpha/trigger/alpha-wins#main#1", "alpha/trigger/alpha-wins#main#2"], cost_usd=0.1),
        CaseResult(uid="beta/evals/negative-api-down", skill="beta", kind="no_trigger", target="beta", state="ERROR",
                   reason="api-error: HTTP 500 (server_error)", errors=3, repeats_run=3, repeats_planned=3, quorum=2,
                   activation=activation("ERROR", 0, 0), attempts=[f"beta/evals/negative-api-down#main#{i}" for i in (1, 2, 3)]),
        CaseResult(uid="beta/evals/positive-judge-down", skill="beta", kind="trigger", target="beta", state="JUDGE-ERROR",
                   reason="errors left too few attempts to decide the quorum", errors=3, repeats_run=3,
                   repeats_planned=3, quorum=2, activation=activation("PASS", 3, 3),
                   assertions=[assertion(1, "JUDGE-ERROR", reason="HTTP 500 after the SDK's retries")],
                   attempts=[f"beta/evals/positive-judge-down#main#{i}" for i in (1, 2, 3)]),
        CaseResult(uid="beta/evals/positive-flaky", skill="beta", kind="trigger", target="beta", state="QUARANTINED",
                   underlying_state="FAIL", losses=2, repeats_run=2, repeats_planned=3, quorum=2,
                   activation=activation("FAIL", 0, 2),
                   quarantine=QuarantineEntry(uid="beta/evals/positive-flaky", reason="flips weekly " + HOSTILE,
                                              date=date(2026, 11, 1), expires=date(2027, 1, 31)),
                   attempts=["beta/evals/positive-flaky#main#1", "beta/evals/positive-flaky#main#2"]),
        CaseResult(uid="beta/evals/edge-vague", skill="beta", kind="trigger", target="beta", state="UNRUN",
                   reason="not-judged", wins=2, repeats_run=2, repeats_planned=3, quorum=2,
                   activation=activation("PASS", 2, 2),
                   assertions=[assertion(1, "UNJUDGEABLE", cls="unjudgeable", text="Handles it well.",
                                         reason="no observable behaviour as written"),
                               assertion(2, "UNRUN", reason="judge-disabled")],
                   warnings=["target beta was listed without its description"],
                   attempts=["beta/evals/edge-vague#main#1", "beta/evals/edge-vague#main#2"]),
    ]
    for reason in ("budget-cap", "kill-switch", "cancelled", "no-credentials", "manual-only-target",
                   "unknown-case-type", "not-selected"):
        cases.append(CaseResult(uid=f"gamma/evals/unrun-{reason}", skill="gamma", kind="trigger", target="gamma",
                                state="UNRUN", reason=reason, repeats_planned=3, quorum=2))
    return assemble(cases)


def assemble(cases: list[CaseResult], spend: float = 1.23) -> Results:
    counts = {s: sum(1 for c in cases if c.state == s) for s in CASE_STATES}
    unrun: dict[str, int] = {}
    for case in cases:
        if case.state == "UNRUN" or case.underlying_state == "UNRUN":
            unrun[case.reason or "unknown"] = unrun.get(case.reason or "unknown", 0) + 1
    return Results(
        finished_at="2026-11-30T12:00:00+00:00", plan=plan_summary(), stop_reason=None, counts=counts,
        unrun_by_reason=unrun, attempts_finished=sum(c.repeats_run for c in cases),
        attempts_errored=sum(c.errors for c in cases), cases=cases,
        spend=Spend(usd=spend, judge_usd=0.2, judge_calls=4, cap_usd=10.0),
        not_executed=f"{sum(unrun.values())} case(s) were not executed (UNRUN); no result is claimed for them.")


def large(n: int = 2000) -> Results:
    """n cases over 200 skills, a mix of states with long assertion texts: the comment-limit test."""
    cases = []
    states = ("PASS", "FAIL", "ERROR", "JUDGE-ERROR", "UNRUN")
    for i in range(n):
        state = states[i % len(states)]
        skill = f"skill-{i % 200:03d}"
        cases.append(CaseResult(
            uid=f"{skill}/evals/case-{i:04d}", skill=skill, kind="trigger", target=skill, state=state,
            reason="budget-cap" if state == "UNRUN" else None, repeats_run=0 if state == "UNRUN" else 2,
            repeats_planned=3, quorum=2, activation=None if state == "UNRUN" else activation("PASS", 2, 2),
            fired_instead={"other-skill": 1} if state == "FAIL" else {},
            assertions=[assertion(1, "FAIL" if state == "FAIL" else "PASS",
                                  text="Explains, step by step and with the evidence, why " + "x" * 200,
                                  evidence=["quoted evidence " + "y" * 150])]))
    return assemble(cases, spend=9.87)


# The sequential verdict of `sequential()`: θ 0.5, δ 0.25, α = β = 0.1, at most 6 attempts in rounds of 2. A win is
# worth ln 3 and a loss −ln 3; PASS at +ln 9 (two wins more than losses), FAIL at −ln 9.
SEQUENTIAL = SequentialVerdict(pass_rate=0.5, indifference=0.25, alpha=0.1, beta=0.1, max_repeats=6, round_size=2)
UNDECIDED_UID = "seq/evals/undecided-flaky"


def _figures(order: str, fixed_n3: CaseState | None) -> sequential_mod.SequentialCase:
    """The figures of a case whose attempts, in repeat order, were `order`: W win, L loss, E error."""
    wins, losses = order.count("W"), order.count("L")
    trials = wins + losses
    interval = wilson_interval(wins, trials)
    return sequential_mod.SequentialCase(
        attempts=len(order), trials=trials, rate=round(wins / trials, 4) if trials else None,
        interval_95=None if interval is None else (round(interval[0], 4), round(interval[1], 4)),
        llr=round(SEQUENTIAL.rule().llr(wins, losses), 4), round=-(-len(order) // SEQUENTIAL.round_size),
        fixed_n3=fixed_n3)


def sequential() -> Results:
    """A run by the sequential verdict: two cases PASS at round 1, one PASS at round 2, one PASS at round 3 that fixed
    N = 3 would have failed (a flip), one FAIL, one UNDECIDED with its reason (also a flip: N = 3 would have passed
    it), one ERROR, and one UNRUN case that never started."""
    def case(uid: str, state: CaseState, order: str, fixed: CaseState | None, reason: str | None = None,
             **extra: object) -> CaseResult:
        wins, losses, errors = order.count("W"), order.count("L"), order.count("E")
        observed = wins + losses
        kind = "no_trigger" if "negative" in uid else "trigger"
        return CaseResult(
            uid=uid, skill=uid.split("/")[0], kind=kind, target=uid.split("/")[0], state=state, reason=reason,
            wins=wins, losses=losses, errors=errors, repeats_run=len(order), repeats_planned=SEQUENTIAL.max_repeats,
            quorum=2, activation=activation(state, wins, observed),
            attempts=[f"{uid}#main#{i}" for i in range(1, len(order) + 1)], cost_usd=0.01 * len(order),
            sequential=_figures(order, fixed), line=3, file=f"{uid.split('/')[0]}/evals/evals.json", **extra)

    cases = [
        case("seq/evals/positive-one", "PASS", "WW", None),
        case("seq/evals/positive-two", "PASS", "WW", None),
        case("seq/evals/positive-round-two", "PASS", "WLWW", "PASS"),
        case("seq/evals/positive-late", "PASS", "LWLWWW", "FAIL"),
        case("other/evals/negative-fails", "FAIL", "LL", None),
        case(UNDECIDED_UID, "UNDECIDED", "WLWLLW", "PASS",
             reason="the rate stayed open after 6 attempt(s): neither PASS nor FAIL is claimed"),
        case("other/evals/positive-api-down", "ERROR", "EEEEEE", "ERROR", reason="api-error: HTTP 500 (server_error)"),
        CaseResult(uid="other/evals/unrun-cap", skill="other", kind="trigger", target="other", state="UNRUN",
                   reason="budget-cap", repeats_planned=SEQUENTIAL.max_repeats, quorum=2),
    ]
    results = assemble(cases, spend=0.42)
    ran = [(c.uid, c.state, c.sequential) for c in cases if c.sequential is not None]
    plan = results.plan.model_copy(update={"sequential": SEQUENTIAL, "repeats": SEQUENTIAL.max_repeats})
    return results.model_copy(update={"plan": plan, "sequential": sequential_mod.summary(SEQUENTIAL, ran)})


def quorum() -> Results:
    """The same cases decided by the quorum (N = 3, k = 2): no sequential figures, no UNDECIDED anywhere."""
    def decided(c: CaseResult) -> CaseResult:
        if c.state != "UNDECIDED":
            return c
        assert c.activation is not None
        return c.model_copy(update={"state": "FAIL", "reason": None,
                                    "activation": c.activation.model_copy(update={"state": "FAIL"})})

    cases = [decided(c).model_copy(update={"sequential": None, "repeats_planned": 3,
                                           "repeats_run": min(c.repeats_run, 3)}) for c in sequential().cases]
    return assemble(cases, spend=0.42)
