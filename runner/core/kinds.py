"""Case kinds and assertion classes: what a case measures and how an assertion is decided, in one definition.

The corpus gives each case its kind (runner.corpus.classify), the plan costs by kind, results and every report
group by it, `[[case_override]]` sets it; all of them read these types. What a kind means to each rule is its row
of KIND_TRAITS: no rule outside this module lists kinds of its own, so a new kind decided like an existing one is a
name here, its row, and the rule that gives cases the kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Case kinds (semantics §2): what a case measures. The one definition: corpus, plan, results and overrides use it.
CaseKind = Literal["trigger", "refusal", "no_trigger", "discrimination", "routing", "probe"]
# A case the loader read but the runner cannot run: a type it does not know (`unknown`) or an item that breaks its
# format's schema (`invalid`). The floor holds these back (UNRUN floor-error); they never reach a host.
BrokenKind = Literal["unknown", "invalid"]
LoadedKind = Literal[CaseKind, BrokenKind]
AssertionClass = Literal["activation", "artifact_shape", "semantic", "unjudgeable"]

# What an attempt's activation part checks (runner.execute.grading): the target fires; the target stays silent; the
# target fires and every named neighbour stays silent; the case's routing assertions hold (must / must not / at most
# N / allow_extra / order: runner.corpus.library.RoutingSpec).
Expectation = Literal["target-fires", "target-silent", "target-fires-neighbours-silent", "routing-holds"]


@dataclass(frozen=True)
class KindTraits:
    """What a kind means to the rules that read it."""

    expects: Expectation
    # No verdict reads more than which skills fired (when its assertions read nothing else either): a host may end
    # the session once the activation decides it (runner.corpus.decide).
    activation_only: bool
    # `improve` trains and tests a description on it (runner.improve.split): it measures whether a description
    # makes the skill fire.
    improvable: bool
    # The case names a skill that must fire or must stay silent: its attempts are a row of the routing matrix, and
    # `route` (the library-wide routing sweep, runner.plan.select) runs it.
    routing: bool


KIND_TRAITS: dict[CaseKind, KindTraits] = {
    "trigger": KindTraits(expects="target-fires", activation_only=True, improvable=True, routing=True),
    # A refusal also has its answer judged (results.json `parts.refusal`), so its session runs to the end.
    "refusal": KindTraits(expects="target-fires", activation_only=False, improvable=True, routing=True),
    "no_trigger": KindTraits(expects="target-silent", activation_only=True, improvable=True, routing=True),
    "discrimination": KindTraits(expects="target-fires-neighbours-silent", activation_only=True, improvable=True,
                                 routing=True),
    # Routing assertions (`must_include`, `required_skills`, `max_skills`, ...): judged on which skills fired only.
    # Not improvable: its parts may be about several skills, so no one description is trained on it.
    "routing": KindTraits(expects="routing-holds", activation_only=True, improvable=False, routing=True),
    # The treatment arm of a tier-2 probe: the target must fire, and the act is graded (runner.probes.arms).
    "probe": KindTraits(expects="target-fires", activation_only=False, improvable=False, routing=False),
}


def expects(kind: str) -> Expectation:
    """What an attempt's activation part checks for a case of this kind. A kind the runner cannot run never reaches
    a host, so it is never graded: it reads as the plain rule."""
    traits = traits_of(kind)
    return traits.expects if traits is not None else "target-fires"


def traits_of(kind: str) -> KindTraits | None:
    """The kind's traits; None for a case the runner cannot run (BrokenKind), which no rule reads."""
    return next((traits for name, traits in KIND_TRAITS.items() if name == kind), None)
