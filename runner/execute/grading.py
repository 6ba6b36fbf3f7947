"""Grading one attempt: from what the host observed to the attempt's outcome (semantics §2–§3).

An attempt whose host could not observe a result is ERROR, whatever the kind: a should-not-trigger case whose
sessions all errored is ERROR, never PASS. A session that hit its turn bound counts only for what is already
certain (the target fired); otherwise it is ERROR, since the skill might still have fired. Assertions the harness
or a script can decide are decided here; those that need the judge stay UNRUN (`not-judged`), and so does the
attempt until they are judged: an attempt is never PASS with an assertion nobody decided. A case's state over its
repeats is runner.results.verdicts'.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from runner.core.kinds import Expectation, expects
from runner.core.observation import Observation
from runner.core.outcomes import AssertionOutcome, AttemptOutcome, RoutingPart
from runner.core.states import AttemptState, RubricState
from runner.corpus.claims import activation_claims
from runner.corpus.library import ANY_SKILL, Assertion, Case, RoutingSpec, is_subagent


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


# ---- routing assertions (kind `routing`) ----------------------------------------------------------

def library_fired(fired: list[str], known: Collection[str]) -> list[str]:
    """What fired that counts towards `max_skills` and `allow_extra`: the library's skills, in order of first firing.
    The host's own skills (not the library's names) and subagents are not the library's skills."""
    return [name for name in fired if name in known and not is_subagent(name)]


def _open_or(failed: bool, cut_short: bool) -> AttemptState:
    """A part not failed is PASS when the session ended by itself, or ERROR when it was cut short: a skill could
    still have fired."""
    return "FAIL" if failed else ("ERROR" if cut_short else "PASS")


def _order_state(spec: RoutingSpec, fired: list[str], library: list[str], cut_short: bool) -> tuple[AttemptState, str]:
    """in_order: the must skills' first firings follow the order written; exact: the library skills that fired are the
    must skills in that order and nothing else. Out of order is certain at once; not all fired yet is certain only
    when the session ended by itself."""
    wanted = spec.must_fire
    if spec.order == "exact":
        seen = [name for name in fired if name in wanted or name in library]
        ok_so_far = seen == wanted[:len(seen)]  # an extra, or one out of place, is certain at once
        text = f"library skills fired in order: {', '.join(seen) or 'nothing'}; exactly {', '.join(wanted)} asked"
    else:
        seen = [name for name in fired if name in wanted]
        ok_so_far = seen == wanted[:len(seen)]  # a must skill skipped or come early can never be put back in order
        text = f"first fired in order: {', '.join(seen) or 'nothing'}; {' then '.join(wanted)} asked"
    if not ok_so_far:
        return "FAIL", text
    if len(seen) == len(wanted):
        return "PASS", text
    return ("ERROR" if cut_short else "FAIL"), text


def routing_parts(spec: RoutingSpec, fired: list[str], known: Collection[str], cut_short: bool) -> list[RoutingPart]:
    """Each routing assertion of the spec checked on what fired in the whole session, in any turn. `cut_short`: the
    session hit a bound, so only what already fired is certain."""
    library = library_fired(fired, known)
    shown = f"fired: {', '.join(fired) or 'nothing'}"
    parts: list[RoutingPart] = []
    if spec.must_fire:
        missing = [name for name in spec.must_fire if name not in fired]
        state: AttemptState = "PASS" if not missing else ("ERROR" if cut_short else "FAIL")
        said = f"did not fire: {', '.join(missing)}" if missing else f"all of {', '.join(spec.must_fire)} fired"
        parts.append(RoutingPart(part="must", state=state, evidence=f"{said} ({shown})"))
    if spec.must_not_fire:
        hit = [name for name in spec.must_not_fire if name in fired]
        said = f"fired though forbidden: {', '.join(hit)}" if hit else f"none of {', '.join(spec.must_not_fire)} fired"
        parts.append(RoutingPart(part="must_not", state=_open_or(bool(hit), cut_short), evidence=f"{said} ({shown})"))
    if spec.max_skills is not None:
        said = f"{len(library)} library skill(s) fired ({', '.join(library) or 'none'}); at most {spec.max_skills}"
        parts.append(RoutingPart(part="max_skills", state=_open_or(len(library) > spec.max_skills, cut_short),
                                 evidence=said))
    if not spec.allow_extra:
        extra = [name for name in library if name not in spec.must_fire]
        said = f"others fired: {', '.join(extra)}" if extra else "no library skill outside the must set fired"
        parts.append(RoutingPart(part="allow_extra", state=_open_or(bool(extra), cut_short),
                                 evidence=f"{said} ({shown})"))
    if spec.order != "any_order" and spec.must_fire:
        state, said = _order_state(spec, fired, library, cut_short)
        parts.append(RoutingPart(part="order", state=state, evidence=f"{spec.order}: {said}"))
    return parts


def routing_state(parts: list[RoutingPart]) -> AttemptState:
    """A routing case's activation part: FAIL when any assertion failed, ERROR when one was left open, else PASS."""
    states = {part.state for part in parts}
    return "FAIL" if "FAIL" in states else ("ERROR" if "ERROR" in states else "PASS")


def attempt_outcome(case: Case, obs: Observation, known: Collection[str]) -> AttemptOutcome:
    fired = obs.fired()
    target_fired: bool | None
    if expectation(case) == "routing-holds":
        # A routing case's rate is how often its routing held (set below, once the parts are checked): what fired is
        # in `fired`, and every skill outside the must set is "instead" (the host's own and subagents as recorded).
        target_fired = None
        must = case.routing.must_fire if case.routing else []
        # A routing case of the library (no must skill) speaks of the library's skills only, as below.
        instead = [name for name in fired if name not in must and (case.target != ANY_SKILL or name in known)]
    elif case.target == ANY_SKILL:
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
    routing: list[RoutingPart] = []
    activation: AttemptState
    expects = expectation(case)
    if expects == "routing-holds":
        # A routing case always has its assertions (the loader refuses a routing kind without them); were one
        # missing, nothing could fail, so nothing is claimed: ERROR, never a PASS by default.
        routing = routing_parts(case.routing, fired, known, cut_short) if case.routing is not None else []
        activation = routing_state(routing) if routing else "ERROR"
        target_fired = activation == "PASS"
    elif expects == "target-silent":
        activation = "FAIL" if target_fired else ("ERROR" if cut_short else "PASS")
    elif expects == "target-fires-neighbours-silent":
        pairs = {name: name not in fired for name in case.should_not_trigger}
        if not target_fired or not all(pairs.values()):
            # A neighbour that fired is a certain loss; a target not yet fired is certain only
            # when the session finished by itself.
            certain_loss = not all(pairs.values()) or not cut_short
            activation = "FAIL" if certain_loss else "ERROR"
        else:
            activation = "PASS"
    else:  # target-fires: trigger, refusal, probe (treatment arm)
        activation = "PASS" if target_fired else ("ERROR" if cut_short else "FAIL")
    assertions = [check_assertion(a, case, obs, known) for a in case.assertions]
    error = ("the session hit its turn bound before the result was certain" if routing or expects != "routing-holds"
             else "a routing case without routing assertions: nothing to check") if activation == "ERROR" else None
    return AttemptOutcome(state=combine(activation, assertions), activation=activation, fired=fired,
                          target_fired=target_fired, fired_instead=instead, pairs=pairs, assertions=assertions,
                          routing=routing, error=error)


def expectation(case: Case) -> Expectation:
    """What the case's activation part checks, from its kind's traits (runner.core.kinds.expects)."""
    return expects(case.kind)


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


# ---- an attempt of an uplift arm (runner.results.uplift compares the arms) -------------------------

CONTROL = "control"
TREATMENT = "main"  # the case's own attempts are the treatment arm


def rubric_state(outcome: AttemptOutcome, rubric: Iterable[int]) -> RubricState:
    """One attempt on the rubric alone. A host error is ERROR; any rubric FAIL is FAIL; an assertion not
    decided (not judged, cut short) leaves the attempt UNRUN: neither a pass nor a fail."""
    if outcome.state == "ERROR" and outcome.target_fired is None:
        return "ERROR"  # the host could not observe the session
    wanted = set(rubric)
    states = {a.state for a in outcome.assertions if a.index in wanted}
    if not states:
        return "UNRUN"
    against: tuple[RubricState, ...] = ("FAIL", "ERROR", "JUDGE-ERROR")  # AGAINST, as rubric states
    for state in against:
        if state in states:
            return state
    if states - {"PASS"}:
        return "UNRUN"
    return "PASS"


def rubric_failed(outcome: AttemptOutcome, rubric: Iterable[int]) -> bool:
    """A rubric assertion a script already failed: judging the rest could not make the attempt pass."""
    wanted = set(rubric)
    return any(a.state == "FAIL" and a.index in wanted for a in outcome.assertions)


def unobserved_outcome(outcome: AttemptOutcome, rubric: Iterable[int]) -> AttemptOutcome:
    """An output case's attempt on a host that shows no activation (grade `none`): which skills fired is unknown, so
    its activation part is UNRUN (never a PASS or a FAIL) and the attempt is graded on its answer's assertions alone.
    An attempt the host could not observe stays ERROR."""
    wanted = set(rubric)
    assertions = [a for a in outcome.assertions if a.index in wanted]
    if outcome.target_fired is None and outcome.activation == "ERROR" and outcome.error:
        return outcome.model_copy(update={"assertions": assertions})
    return AttemptOutcome(state=combine("UNRUN", assertions), activation="UNRUN", fired=[], target_fired=None,
                          fired_instead=[], assertions=assertions)


def control_outcome(outcome: AttemptOutcome, skill: str, rubric: Iterable[int]) -> AttemptOutcome:
    """A control attempt's outcome from `attempt_outcome`'s: its activation part is whether the skill under test
    stayed out (the arm's precondition), never whether the case's target fired (it cannot). A skill that fired
    anyway makes the attempt ERROR: it is no baseline. Only the rubric's assertions are kept."""
    wanted = set(rubric)
    assertions = [a for a in outcome.assertions if a.index in wanted]
    if outcome.target_fired is None:  # the host could not observe the session
        return outcome.model_copy(update={"assertions": assertions})
    if skill in outcome.fired:
        return outcome.model_copy(update={
            "state": "ERROR", "activation": "ERROR", "assertions": assertions,
            "error": f"{skill} fired in the control arm: the session is no baseline"})
    return outcome.model_copy(update={"activation": "PASS", "assertions": assertions, "error": None,
                                      "state": combine("PASS", assertions)})
