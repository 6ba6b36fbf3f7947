"""From observations to verdicts: one attempt's outcome, then a case's state over its repeats.

Semantics §2–§4. An attempt whose host could not observe a result is ERROR, whatever the kind:
a should-not-trigger case whose sessions all errored is ERROR, never PASS. A session that hit
its turn bound counts only for what is already certain (the target fired); otherwise it is
ERROR, since the skill might still have fired. Assertions the harness or a script can decide
are decided here; those that need the judge stay UNRUN (`not-judged`), and so does the attempt
until they are judged: an attempt is never PASS with an assertion nobody decided.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from typing import Literal, get_args

from pydantic import BaseModel

from runner.corpus.claims import activation_claims
from runner.corpus.library import ANY_SKILL, Assertion, Case, is_subagent
from runner.hosts.base import Observation
from runner.core.quorum import QuorumRule, Tally, decide, wilson_interval

# An attempt's combined outcome: its activation part and every assertion a script or the judge decided.
# JUDGE-ERROR here means the host observed fine but the judge could not decide: never PASS, never FAIL.
# UNRUN: every part it decided passed, but an assertion was never judged (no judge, the cap, no final answer).
AttemptState = Literal["PASS", "FAIL", "ERROR", "JUDGE-ERROR", "UNRUN"]
AssertionState = Literal["PASS", "FAIL", "ERROR", "UNRUN", "UNJUDGEABLE", "JUDGE-ERROR"]
CaseState = Literal["PASS", "FAIL", "ERROR", "JUDGE-ERROR", "QUARANTINED", "UNRUN"]
# Every case state, in the order reports count and list them (results.json `counts`, tables, filters).
CASE_STATES: tuple[CaseState, ...] = get_args(CaseState)
# Semantics §3: the first present wins.
ROLLUP_ORDER: tuple[CaseState, ...] = ("FAIL", "ERROR", "JUDGE-ERROR", "UNRUN", "PASS")


class AssertionOutcome(BaseModel):
    index: int
    state: AssertionState
    reason: str | None = None
    evidence: str | None = None


class AttemptOutcome(BaseModel):
    state: AttemptState
    activation: AttemptState
    fired: list[str]
    target_fired: bool | None
    fired_instead: list[str]
    pairs: dict[str, bool] = {}  # neighbour -> stayed silent (discrimination)
    assertions: list[AssertionOutcome] = []
    error: str | None = None


# ---- one attempt ------------------------------------------------------------------------------

def check_activation_assertion(assertion: Assertion, case: Case, fired: list[str], known: Collection[str]
                               ) -> AssertionOutcome:
    """`known`: the library's names; as a mapping (Library.names) it also turns an alias the assertion uses
    (a frontmatter name) into the folder name the host reports as fired."""
    canonical = known if isinstance(known, Mapping) else {}
    claims = [(canonical.get(name, name), must_fire) for name, must_fire in activation_claims(assertion.text, case, known)]
    if not claims:
        return AssertionOutcome(index=assertion.index, state="UNJUDGEABLE",
                                reason="activation assertion names no skill of the library")
    evidence, passed = [], True
    for name, must_fire in claims:
        did_fire = name in fired
        passed = passed and did_fire == must_fire
        evidence.append(f"{name} {'fired' if did_fire else 'did not fire'}")
    evidence_text = f"{'; '.join(evidence)} (fired: {', '.join(fired) or 'nothing'})"
    return AssertionOutcome(index=assertion.index, state="PASS" if passed else "FAIL", evidence=evidence_text)


def check_shape_assertion(assertion: Assertion, answer: str | None) -> AssertionOutcome:
    if answer is None:
        return AssertionOutcome(index=assertion.index, state="ERROR", reason="the session gave no final answer")
    missing = [literal for literal in assertion.hooks if literal not in answer]
    if missing:
        return AssertionOutcome(index=assertion.index, state="FAIL", evidence=f"missing: {', '.join(missing)}")
    if not assertion.shape_only:
        # The literal is there; whether the rest of the sentence holds is the judge's to say.
        return AssertionOutcome(index=assertion.index, state="UNRUN", reason="not-judged",
                                evidence=f"present: {', '.join(assertion.hooks)}")
    return AssertionOutcome(index=assertion.index, state="PASS", evidence=", ".join(assertion.hooks))


def check_assertion(assertion: Assertion, case: Case, obs: Observation, known: Collection[str]) -> AssertionOutcome:
    cls = assertion.assertion_class
    if cls == "activation":
        return check_activation_assertion(assertion, case, obs.fired(), known)
    if cls == "artifact_shape":
        return check_shape_assertion(assertion, obs.final_answer)
    if cls == "unjudgeable":
        return AssertionOutcome(index=assertion.index, state="UNJUDGEABLE", reason="no observable behaviour as written")
    return AssertionOutcome(index=assertion.index, state="UNRUN", reason="not-judged")


def attempt_outcome(case: Case, obs: Observation, known: Collection[str]) -> AttemptOutcome:
    fired = obs.fired()
    if case.target == ANY_SKILL:
        # A routing case that expects no skill: any of the library's skills firing is the loss (the host's own
        # skills and subagents are not the library's skills).
        target_fired = any(name in known and not is_subagent(name) for name in fired)
        instead = [name for name in fired if name in known]
    else:
        target_fired = case.target in fired
        instead = [name for name in fired if name != case.target]
    if not obs.ok:
        return AttemptOutcome(state="ERROR", activation="ERROR", fired=fired, target_fired=None,
                              fired_instead=instead, error=f"{obs.error_kind}: {obs.error_message or ''}".strip())
    cut_short = "max-turns" in obs.bounds_hit or "max-budget" in obs.bounds_hit
    pairs: dict[str, bool] = {}
    if case.kind == "no_trigger":
        activation: AttemptState = "FAIL" if target_fired else ("ERROR" if cut_short else "PASS")
    elif case.kind == "discrimination":
        pairs = {name: name not in fired for name in case.should_not_trigger}
        if not target_fired or not all(pairs.values()):
            # A neighbour that fired is a certain loss; a target not yet fired is certain only
            # when the session finished by itself.
            certain_loss = not all(pairs.values()) or not cut_short
            activation = "FAIL" if certain_loss else "ERROR"
        else:
            activation = "PASS"
    else:  # trigger, refusal, probe (treatment arm) — the target must fire
        activation = "PASS" if target_fired else ("ERROR" if cut_short else "FAIL")
    assertions = [check_assertion(a, case, obs, known) for a in case.assertions]
    error = "the session hit its turn bound before the result was certain" if activation == "ERROR" else None
    return AttemptOutcome(state=combine(activation, assertions), activation=activation, fired=fired,
                          target_fired=target_fired, fired_instead=instead, pairs=pairs, assertions=assertions,
                          error=error)


def combine(activation: AttemptState, assertions: list[AssertionOutcome]) -> AttemptState:
    """The semantics §3 precedence over the attempt's parts: FAIL if any decided part failed; ERROR or JUDGE-ERROR
    if a part could not be observed; UNRUN if an assertion is still not judged (it could yet fail); else PASS.
    UNJUDGEABLE assertions (flagged to the author, never judged) do not make an attempt pass or fail."""
    states = {a.state for a in assertions}
    if activation == "ERROR":
        return "ERROR"
    if activation == "FAIL" or "FAIL" in states:
        return "FAIL"
    if "ERROR" in states:
        return "ERROR"
    if "JUDGE-ERROR" in states:
        return "JUDGE-ERROR"
    if "UNRUN" in states:
        return "UNRUN"
    return "PASS"


def counts_as_win(state: str) -> bool:
    """For the quorum: an attempt UNRUN only because an assertion was not judged passed every part that was decided,
    so it is a win so far. The case still never passes on it: its unjudged assertion keeps the case UNRUN
    (`rollup`), as it always did; the attempt itself is never recorded PASS."""
    return state in ("PASS", "UNRUN")


def needs_judge(outcome: AttemptOutcome) -> list[int]:
    """Indexes of the assertions this attempt leaves to the judge."""
    return [a.index for a in outcome.assertions if a.state == "UNRUN" and a.reason == "not-judged"]


def apply_judgement(outcome: AttemptOutcome, judged: list[AssertionOutcome]) -> AttemptOutcome:
    by_index = {a.index: a for a in judged}
    assertions = [by_index.get(a.index, a) for a in outcome.assertions]
    return outcome.model_copy(update={"assertions": assertions, "state": combine(outcome.activation, assertions)})


def mark_unjudged(outcome: AttemptOutcome, reason: str) -> AttemptOutcome:
    """The judge was not called (cap reached, not calibrated, disabled): those assertions stay UNRUN."""
    assertions = [a.model_copy(update={"reason": reason}) if a.index in needs_judge(outcome) else a
                  for a in outcome.assertions]
    return outcome.model_copy(update={"assertions": assertions})


# ---- one case over its repeats ----------------------------------------------------------------

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


class ActivationResult(BaseModel):
    state: CaseState
    fired_runs: int
    observed_runs: int
    rate: float | None
    wilson_95: tuple[float, float] | None


def tally_of(outcomes: list[AttemptOutcome]) -> Tally:
    """Quorum counts: an attempt the judge could not decide counts for neither side, like an error."""
    counts = Counter(o.state for o in outcomes)
    return Tally(wins=sum(1 for o in outcomes if counts_as_win(o.state)), losses=counts["FAIL"],
                 errors=counts["ERROR"] + counts["JUDGE-ERROR"])


def _quorum_state(rule: QuorumRule, wins: int, losses: int, errors: int, finished_all: bool) -> CaseState:
    verdict = decide(rule, Tally(wins=wins, losses=losses, errors=errors))
    if verdict == "win":
        return "PASS"
    if verdict == "loss":
        return "FAIL"
    if verdict == "error" or finished_all:
        return "ERROR"
    return "UNRUN"


def rollup(states: Collection[str]) -> CaseState:
    for state in ROLLUP_ORDER:
        if state in states:
            return state
    return "UNRUN"


def assertion_results(case: Case, outcomes: list[AttemptOutcome], rule: QuorumRule) -> list[AssertionResult]:
    results = []
    for assertion in case.assertions:
        mine = [a for o in outcomes for a in o.assertions if a.index == assertion.index]
        passes = sum(1 for a in mine if a.state == "PASS")
        fails = sum(1 for a in mine if a.state == "FAIL")
        errors = sum(1 for a in mine if a.state in ("ERROR", "JUDGE-ERROR"))
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
            verdict = decide(rule, Tally(wins=passes, losses=fails, errors=errors))
            error_state: AssertionState = "JUDGE-ERROR" if judge_errors and judge_errors == errors else "ERROR"
            by_verdict: dict[str, tuple[AssertionState, str | None]] = {
                "win": ("PASS", None), "loss": ("FAIL", None),
                "error": (error_state, "errors left too few observations for a quorum")}
            # Not in it: the case was decided before this assertion was.
            state, reason = by_verdict.get(verdict, ("UNRUN", "decided"))
        results.append(AssertionResult(index=assertion.index, text=assertion.text,
                                       assertion_class=assertion.assertion_class, state=state, reason=reason,
                                       passes=passes, fails=fails, evidence=evidence))
    return results


def activation_result(outcomes: list[AttemptOutcome], rule: QuorumRule, finished_all: bool) -> ActivationResult:
    observed = [o for o in outcomes if o.activation != "ERROR"]
    fired = sum(1 for o in observed if o.target_fired)
    wins = sum(1 for o in observed if o.activation == "PASS")
    losses = sum(1 for o in observed if o.activation == "FAIL")
    errors = len(outcomes) - len(observed)
    return ActivationResult(
        state=_quorum_state(rule, wins, losses, errors, finished_all), fired_runs=fired, observed_runs=len(observed),
        rate=fired / len(observed) if observed else None, wilson_95=wilson_interval(fired, len(observed)))


def pair_results(case: Case, outcomes: list[AttemptOutcome], rule: QuorumRule, finished_all: bool,
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
        state = _quorum_state(rule, won, lost, len(outcomes) - len(observed), finished_all)
        results.append(PairResult(neighbour=neighbour, won=won, lost=lost, state=state))
    return results


def fired_instead(outcomes: list[AttemptOutcome]) -> dict[str, int]:
    return dict(Counter(name for o in outcomes for name in o.fired_instead).most_common())
