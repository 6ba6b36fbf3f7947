"""A case's state over its repeats (semantics §3–§4), from the outcomes runner.execute.grading gave its attempts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

from pydantic import BaseModel, Field

from runner.core.outcomes import AttemptOutcome, RoutingPartName
from runner.core.quorum import Tally, VerdictRule, wilson_interval
from runner.core.states import BROKEN, ROLLUP_ORDER, AssertionState, CaseState
from runner.corpus.library import Case
from runner.execute.grading import counts_as_win


class PairResult(BaseModel):
    neighbour: str
    won: int
    lost: int
    state: CaseState
    reason: str | None = None


class AssertionResult(BaseModel):
    index: int
    text: str
    assertion_class: str
    state: AssertionState
    reason: str | None = None
    passes: int = 0
    fails: int = 0
    evidence: list[str] = []


class RoutingAttempt(BaseModel):
    """One attempt's outcome of one routing assertion."""

    attempt: str
    state: str
    evidence: str


class RoutingPartResult(BaseModel):
    """One routing assertion of a case over its attempts: its own k-of-N state, and each attempt's outcome with what
    fired. An errored attempt (the host could not observe it) has no outcome here and counts for neither side."""

    part: RoutingPartName
    says: str = Field(description="The assertion in words, e.g. `must fire: pdf, xlsx`.")
    state: CaseState
    passes: int = 0
    fails: int = 0
    errors: int = Field(default=0, description="Attempts that left the part open (a session cut short).")
    attempts: list[RoutingAttempt] = []


class ActivationResult(BaseModel):
    state: CaseState
    fired_runs: int
    observed_runs: int
    rate: float | None
    wilson_95: tuple[float, float] | None


def routing_says(case: Case, part: RoutingPartName) -> str:
    spec = case.routing
    if spec is None:
        return part
    return {"must": f"must fire: {', '.join(spec.must_fire)}",
            "must_not": f"must not fire: {', '.join(spec.must_not_fire)}",
            "max_skills": f"at most {spec.max_skills} library skill(s) fire",
            "allow_extra": (f"no library skill but {', '.join(spec.must_fire)} fires" if spec.must_fire else
                            "no library skill fires"),
            "order": f"{spec.order.replace('_', ' ')}: {', '.join(spec.must_fire)}"}[part]


def routing_results(case: Case, attempts: list[tuple[str, AttemptOutcome]], rule: VerdictRule,
                    finished_all: bool) -> list[RoutingPartResult]:
    """Each routing assertion of a routing case over its attempts (attempt id, outcome), in the order checked."""
    parts: dict[RoutingPartName, list[RoutingAttempt]] = {}
    for attempt_id, outcome in attempts:
        for part in outcome.routing:
            parts.setdefault(part.part, []).append(RoutingAttempt(attempt=attempt_id, state=part.state,
                                                                  evidence=part.evidence))
    results = []
    for name, seen in parts.items():
        passes = sum(1 for a in seen if a.state == "PASS")
        fails = sum(1 for a in seen if a.state == "FAIL")
        errors = len(seen) - passes - fails
        results.append(RoutingPartResult(part=name, says=routing_says(case, name),
                                         state=_rule_state(rule, passes, fails, errors, finished_all),
                                         passes=passes, fails=fails, errors=errors, attempts=seen))
    return results


def tally_of(outcomes: list[AttemptOutcome]) -> Tally:
    """Quorum counts: an attempt the judge could not decide counts for neither side, like an error."""
    counts = Counter(o.state for o in outcomes)
    return Tally(wins=sum(1 for o in outcomes if counts_as_win(o.state)), losses=counts["FAIL"],
                 errors=counts["ERROR"] + counts["JUDGE-ERROR"])


def _rule_state(rule: VerdictRule, wins: int, losses: int, errors: int, finished_all: bool) -> CaseState:
    verdict = rule.decide(Tally(wins=wins, losses=losses, errors=errors))
    if verdict == "win":
        return "PASS"
    if verdict == "loss":
        return "FAIL"
    if verdict == "undecided":
        return "UNDECIDED"
    if verdict == "error" or finished_all:
        return "ERROR"
    return "UNRUN"


def rollup(states: Collection[str]) -> CaseState:
    for state in ROLLUP_ORDER:
        if state in states:
            return state
    return "UNRUN"


def assertion_results(case: Case, outcomes: list[AttemptOutcome], rule: VerdictRule) -> list[AssertionResult]:
    results = []
    for assertion in case.assertions:
        mine = [a for o in outcomes for a in o.assertions if a.index == assertion.index]
        passes = sum(1 for a in mine if a.state == "PASS")
        fails = sum(1 for a in mine if a.state == "FAIL")
        errors = sum(1 for a in mine if a.state in BROKEN)
        judge_errors = sum(1 for a in mine if a.state == "JUDGE-ERROR")
        evidence = [a.evidence for a in mine if a.evidence][:3]
        state: AssertionState
        reason: str | None
        if not mine:
            state, reason = "UNRUN", "no attempt observed it"
        elif all(a.state == "UNRUN" for a in mine):
            state, reason = "UNRUN", mine[0].reason
        elif passes + fails == 0 and judge_errors:
            state, reason = "JUDGE-ERROR", next(a.reason for a in mine if a.state == "JUDGE-ERROR")
        elif all(a.state == "UNJUDGEABLE" for a in mine):
            state, reason = "UNJUDGEABLE", mine[0].reason
        else:
            verdict = rule.decide(Tally(wins=passes, losses=fails, errors=errors))
            error_state: AssertionState = "JUDGE-ERROR" if judge_errors and judge_errors == errors else "ERROR"
            by_verdict: dict[str, tuple[AssertionState, str | None]] = {
                "win": ("PASS", None), "loss": ("FAIL", None),
                "undecided": ("UNDECIDED", "the sequential verdict left it open"),
                "error": (error_state, "errors left too few observations for a quorum")}
            # Not in it: the case was decided before this assertion was.
            state, reason = by_verdict.get(verdict, ("UNRUN", "decided"))
        results.append(AssertionResult(index=assertion.index, text=assertion.text,
                                       assertion_class=assertion.assertion_class, state=state, reason=reason,
                                       passes=passes, fails=fails, evidence=evidence))
    return results


def activation_result(outcomes: list[AttemptOutcome], rule: VerdictRule, finished_all: bool) -> ActivationResult:
    observed = [o for o in outcomes if o.activation != "ERROR"]
    fired = sum(1 for o in observed if o.target_fired)
    wins = sum(1 for o in observed if o.activation == "PASS")
    losses = sum(1 for o in observed if o.activation == "FAIL")
    errors = len(outcomes) - len(observed)
    return ActivationResult(
        state=_rule_state(rule, wins, losses, errors, finished_all), fired_runs=fired, observed_runs=len(observed),
        rate=fired / len(observed) if observed else None, wilson_95=wilson_interval(fired, len(observed)))


def pair_results(case: Case, outcomes: list[AttemptOutcome], rule: VerdictRule, finished_all: bool,
                 manual_only: set[str]) -> list[PairResult]:
    results = []
    for neighbour in case.should_not_trigger:
        if neighbour in manual_only:
            # It cannot auto-fire, so its silence is no evidence of discrimination.
            results.append(PairResult(neighbour=neighbour, won=0, lost=0, state="UNRUN", reason="manual-only-target"))
            continue
        observed = [o for o in outcomes if o.activation != "ERROR"]
        won = sum(1 for o in observed if o.target_fired and o.pairs.get(neighbour, False))
        lost = len(observed) - won
        state = _rule_state(rule, won, lost, len(outcomes) - len(observed), finished_all)
        results.append(PairResult(neighbour=neighbour, won=won, lost=lost, state=state))
    return results


def fired_instead(outcomes: list[AttemptOutcome]) -> dict[str, int]:
    return dict(Counter(name for o in outcomes for name in o.fired_instead).most_common())
