"""improve.json: what `skill-evals improve` did, every figure from runs that really happened.

Nothing here is a verdict unless a run produced it: a candidate that was never evaluated has no score (its
`state` says why), a comparison whose runs errored is `undecided`, and the whole file says UNRUN with a reason when
no session started (no key, the kill switch). Its JSON Schema ships as runner/schemas/improve.schema.json.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

SCHEMA_VERSION = 1
DESCRIPTION_LIMIT = 1024  # the Agent Skills specification's limit on `description`

CandidateState = Literal["evaluated", "duplicate", "too-long", "empty", "listing-budget", "unrun", "error"]
NeighbourState = Literal["passed", "partial", "rejected", "error", "unrun", "no-cases"]
Verdict = Literal["better", "no better", "worse", "undecided"]
StopReason = Literal["round-limit", "no-improvement", "all-train-pass", "budget-cap", "proposer-error",
                     "evaluation-error", "no-proposals"]


class CaseScore(BaseModel):
    uid: str
    kind: str
    state: str = Field(description="The case's state in its run (PASS, FAIL, ERROR, UNRUN, ...), activation only.")
    reason: str | None = None
    wins: int = 0
    losses: int = 0
    errors: int = 0
    fired_instead: dict[str, int] = {}


class Score(BaseModel):
    """One description on one set of cases: one ordinary run (its folder is `run_dir`). Every count is of CASES,
    each decided by its k-of-N quorum; attempts (sessions) are in the run's results.json."""

    unit: Literal["cases"] = Field(default="cases", description="What passed / failed / errored / unrun and the "
                                                                "Wilson interval count: cases (one quorum verdict "
                                                                "each over N attempts), not attempts.")
    run_dir: str
    passed: int
    failed: int
    errored: int = Field(description="ERROR (or JUDGE-ERROR) cases: no result, counted for neither side.")
    unrun: int = Field(description="Cases the run did not execute (the cap, a stop); no result is claimed for them.")
    rate: float | None = Field(description="passed / (passed + failed); None when no case was decided.")
    wilson_95: tuple[float, float] | None = Field(description="95% Wilson interval of the rate, over decided cases.")
    spend_usd: float
    stop_reason: str | None = None
    cases: list[CaseScore]

    @property
    def decided(self) -> int:
        return self.passed + self.failed

    def key(self) -> tuple[int, int]:
        """The order candidates are ranked in on train: more cases passed, then fewer failed."""
        return self.passed, -self.failed


class NeighbourCheck(BaseModel):
    """The neighbours' cases with the candidate in place, against the same cases with the current description.
    passed: nothing that passed fails; partial: the same, but some cases had no result with the current description
    (`unchecked`), so the check did not cover them; rejected: a case that passed fails; error: a case that passed
    has no result with the candidate; unrun: the cap left nothing for the run; no-cases: the neighbours have none."""

    state: NeighbourState
    broke: list[str] = Field(default=[], description="Neighbour cases that PASSed with the current description and "
                                                     "FAIL with the candidate.")
    unsure: list[str] = Field(default=[], description="Cases that passed before and have no result now (error, "
                                                      "unrun): the check cannot pass with them.")
    unchecked: list[str] = Field(default=[], description="Cases with no result with the current description (error, "
                                                         "unrun): whether the candidate breaks them is not known.")
    score: Score | None = None


class Candidate(BaseModel):
    id: str = Field(description="`current` or r<round>c<n>.")
    round: int
    description: str
    chars: int
    rationale: str = ""
    state: CandidateState
    reason: str | None = None
    train: Score | None = None
    neighbours: NeighbourCheck | None = None


class ProposalCall(BaseModel):
    round: int
    model: str
    state: Literal["ok", "ERROR", "UNRUN"]
    error: str | None = None
    reserved_usd: float = 0.0
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    train_uids: list[str] = Field(default=[], description="The cases the prompt was built from (train only).")
    neighbour_uids: list[str] = Field(default=[], description="Neighbour cases (never this skill's) that an earlier "
                                                              "candidate broke, shown as the reason it was rejected.")
    proposed: int = 0


class Round(BaseModel):
    index: int
    proposal: ProposalCall
    candidates: list[str]
    best: str | None = Field(description="The best candidate on train after this round (`current` included).")
    improved: bool


class HeldOutComparison(BaseModel):
    """The chosen candidate and the current description on the held-out test cases, each scored once."""

    candidate: str
    current: Score
    proposed: Score
    verdict: Verdict
    why: str


class Spend(BaseModel):
    cap_usd: float
    usd: float = Field(description="Sessions and proposer calls, as settled (at most the cap).")
    sessions_usd: float = 0.0
    proposer_usd: float = 0.0
    refused: int = Field(default=0, description="Reservations the cap refused (proposer calls; sessions are "
                                                "counted in each run's results.json).")


class PlannedWork(BaseModel):
    """What the loop would run, before any key or spend: the arithmetic of one evaluation and the bounds."""

    train_cases: int
    test_cases: int
    neighbour_cases: int
    sessions_per_train_evaluation: tuple[int, int] = Field(description="(min, max): Σk, ΣN over the train cases.")
    worst_session_usd: float
    expected_session_usd: float
    train_evaluations_max: int = Field(description="The current description, then rounds × candidates.")
    neighbour_runs_max: int = Field(description="The current description once, then at most "
                                                "neighbour_checks_per_round candidates in each round.")
    test_runs: int
    proposer_calls_max: int
    proposer_worst_usd: float


class Outcome(BaseModel):
    state: Literal["DONE", "ERROR", "UNRUN"]
    reason: str | None = Field(default=None, description="UNRUN: no-credentials | kill-switch; ERROR: the cause.")
    verdict: Verdict | None = Field(default=None, description="The test comparison's verdict, when one was made.")
    chosen: str | None = Field(default=None, description="The candidate put to the test and suggested.")
    summary: str


class Improve(BaseModel):
    schema_version: int = SCHEMA_VERSION
    skill: str
    skill_md: str = Field(description="The skill's SKILL.md, relative to the repository root.")
    current_description: str
    host: str
    approximation: str | None = None
    model: str
    proposer_model: str
    repeats: int
    quorum: int
    rounds_max: int
    candidates_per_round: int
    description_limit: int = DESCRIPTION_LIMIT
    listing_budget_chars: int
    seed: int
    holdout: float
    train: list[str]
    test: list[str]
    split_by_kind: dict[str, tuple[int, int]] = Field(description="kind -> (train, test) case counts.")
    neighbours: list[str]
    neighbour_cases: list[str]
    neighbour_checks_per_round: int = Field(default=2, description="At most this many candidates per round, best "
                                                                   "on train first, get the neighbour check.")
    neighbour_unchecked: list[str] = Field(default=[], description="Neighbour cases with no result with the current "
                                                                   "description: no candidate was checked on them.")
    rounds: list[Round] = []
    candidates: list[Candidate] = []
    stop_reason: StopReason | None = None
    neighbour_baseline: Score | None = None
    test_comparison: HeldOutComparison | None = None
    planned: PlannedWork | None = None
    spend: Spend
    outcome: Outcome
    diff: str | None = Field(default=None, description="Unified diff of SKILL.md with the chosen candidate.")
    not_shown_to_proposer: str = ("The test cases, their prompts and their verdicts are never part of a proposer "
                                  "request; the test split is run only after the last round, once per description. "
                                  "A request holds the train cases and, for a rejected candidate, the neighbour "
                                  "cases it broke (never cases of this skill).")
    score_unit: str = ("Every score counts cases, not attempts: a case is one k-of-N quorum verdict over N attempts; "
                       "the Wilson intervals are over decided cases.")
