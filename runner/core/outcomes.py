"""What grading one attempt gives: its state, what fired, and each assertion's outcome.

Written by runner.execute.grading while the run goes, stored in every attempt record (runner.execute.rundir) and
read by results, the judge and the probes; so it lives below all of them.
"""

from __future__ import annotations

from pydantic import BaseModel

from runner.core.states import AssertionState, AttemptState


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
