"""What grading one attempt gives: its state, what fired, and each assertion's outcome.

Written by runner.execute.grading while the run goes, stored in every attempt record (runner.execute.rundir) and
read by results, the judge and the probes; so it lives below all of them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from runner.core.states import AssertionState, AttemptState

# The parts of a routing case (runner.corpus.library.RoutingSpec), each checked on its own.
RoutingPartName = Literal["must", "must_not", "max_skills", "allow_extra", "order"]


class AssertionOutcome(BaseModel):
    index: int
    state: AssertionState
    reason: str | None = None
    evidence: str | None = None


class RoutingPart(BaseModel):
    """One routing assertion of one attempt: PASS, FAIL, or ERROR when a session cut short left it open."""

    part: RoutingPartName
    state: AttemptState
    evidence: str = Field(description="What fired, and what the part asked.")


class AttemptOutcome(BaseModel):
    state: AttemptState
    activation: AttemptState
    fired: list[str]
    target_fired: bool | None
    fired_instead: list[str]
    pairs: dict[str, bool] = {}  # neighbour -> stayed silent (discrimination)
    assertions: list[AssertionOutcome] = []
    routing: list[RoutingPart] = Field(default=[], description="A routing case: each of its routing assertions.")
    error: str | None = None
