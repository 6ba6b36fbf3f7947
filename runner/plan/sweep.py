"""What a routing sweep (`route`, `plan --routing`) measures of a case: its activation part, nothing else.

A sweep asks which skills fire. Its cases are copies (Case.activation_part_only) that keep only the assertions the
harness decides from the activations (and those unjudgeable as written, which nothing decides); the assertions that
read the answer (judged prose, a shape a script checks) are left out of the copy, so the planner, the hosts, the
grading and the result cache see activation-only cases: decide-early applies, the first-turn host takes every one
its first request can settle, and no judge call is planned. The plan lists what was left out
(Plan.routing_sweep), and results.json shows each of those assertions UNRUN (routing-sweep): never judged, never
counted for or against the case, whose state is its activation verdict. `run` measures them.

The copies are made from the library again wherever a plan is read back (a resume, `judge`), from plan.json's
`routing_sweep`, so every stage of one run sees the same cases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from runner.corpus.decide import READS_NOTHING_ELSE
from runner.corpus.library import Case, Library
from runner.plan.plan import LeftOut, Plan, RoutingSweep
from runner.plan.select import is_routing

REASON = "routing-sweep"  # the UNRUN reason of an assertion a sweep leaves out


def left_out(case: Case) -> list[LeftOut]:
    """The case's assertions a sweep does not measure: those that read more than which skills fired."""
    return [LeftOut(index=a.index, assertion_class=a.assertion_class, text=a.text) for a in case.assertions
            if a.assertion_class not in READS_NOTHING_ELSE]


def measured(case: Case) -> Case:
    """The sweep's copy of a routing case: its activation part only (another kind of case is returned as it is)."""
    if not is_routing(case):
        return case
    kept = [a for a in case.assertions if a.assertion_class in READS_NOTHING_ELSE]
    return case.model_copy(update={"assertions": kept, "activation_part_only": True})


def measured_library(library: Library) -> Library:
    """The library whose routing cases are the sweep's copies (the skills, probes and content hash unchanged)."""
    return library.model_copy(update={"cases": [measured(case) for case in library.cases]})


def record(cases: Iterable[Case]) -> RoutingSweep:
    """plan.json's `routing_sweep` for the planned cases: what each leaves out."""
    return RoutingSweep(left_out={case.uid: found for case in cases if is_routing(case) and (found := left_out(case))})


def applied(plan: Plan, cases: Mapping[str, Case]) -> dict[str, Case]:
    """The cases a plan read back measures: the sweep's copies when it is a routing sweep, else `cases` as they are."""
    if plan.routing_sweep is None:
        return dict(cases)
    return {uid: measured(case) for uid, case in cases.items()}


def note(sweep: RoutingSweep) -> str:
    """What the plan says of it, in words."""
    if not sweep.left_out:
        return ("route measures which skills fire; no selected case has an assertion that reads the answer, so "
                "nothing is left out")
    return (f"route measures which skills fire; {sweep.assertions} prose/shape assertion(s) of "
            f"{len(sweep.left_out)} case(s) are not judged in a routing sweep (UNRUN routing-sweep; each case's "
            "state is its activation verdict) — `run` judges them")
