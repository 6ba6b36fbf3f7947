"""The routing matrix: which skill the library's prompts really fire, over every attempt that ran.

Rows are what a case expects to fire, columns what fired; counts are attempts, never cases. Two matrices: every
skill an attempt fired (`matrix`) and only the first (`first_fired`). Per skill, precision, recall and F1 with their
intervals and the attempts behind them; the confusions ("B's prompts fire A, 7 of 9 attempts") ranked, with the
cases. Attempts that could not be observed (ERROR), that never ran (UNRUN, by reason) or that belong to a
quarantined case are counted apart in `excluded` and never enter a rate (semantics §3).

What a case claims about routing is `claim_of`'s one answer; a later routing spec on Case plugs in there and
nothing else here changes. How each kind maps, and why: docs/semantics-and-reports.md#the-routing-matrix.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel, Field

from runner.core.kinds import traits_of
from runner.core.outcomes import AttemptOutcome
from runner.core.quorum import wilson_interval
from runner.corpus.library import ANY_SKILL, Case, RoutingSpec, is_subagent
from runner.results.vetting import REFUSED

NONE = "none"  # the row of prompts that expect no skill, the column of attempts where none fired
# F1's interval is read off the corners of the precision and recall intervals (f1_interval); each of those is taken at
# 97.5% so that both hold together with at least 95% (Bonferroni), and F1 rises with both.
Z_95 = 1.96
Z_F1_CORNERS = 2.2414
EXCLUDED_STATES = ("ERROR", "QUARANTINED", "UNRUN")


@dataclass(frozen=True)
class Claim:
    """What one case says about routing. `expects`: the rows (no name: the `none` row). `scope`: the fired names the
    case speaks about (None: every skill). `library_only`: only the library's own skills count as fired, as
    grading counts them for a case that expects no skill of the library."""

    expects: tuple[str, ...]
    scope: frozenset[str] | None = None
    library_only: bool = False


def in_matrix(kind: str, target: str) -> bool:
    """Whether a case of this kind and target is counted at all: a routing kind, and a skill (a subagent's routing
    is the Task tool's choice, not the skill listing's)."""
    traits = traits_of(kind)  # the kinds whose cases name a skill that should fire or stay silent (not a probe)
    return traits is not None and traits.routing and not is_subagent(target)


def claim_of(case: Case) -> Claim | None:
    """The case's routing claim, or None when it makes none. The one place a routing spec on Case plugs in.

    - trigger, refusal, discrimination: a prompt written for the target, so the target's row, and every other skill
      that fires on it is a confusion;
    - a routing case that expects no skill (target ANY_SKILL): the `none` row, any library skill firing is one;
    - no_trigger of X: the `none` row, but it speaks of X only: X firing is X's false positive, another skill firing
      is no claim of the case (its `fired_instead` still shows it), so the attempt is in column `none` then;
    - a routing case (routing assertions): `routing_claim`.
    """
    if not in_matrix(case.kind, case.target):
        return None
    if case.kind == "routing" and case.routing is not None:
        return routing_claim(case.routing, case.target == ANY_SKILL)
    if case.target == ANY_SKILL:
        return Claim(expects=(), library_only=True)
    if case.kind == "no_trigger":
        return Claim(expects=(), scope=frozenset({case.target}))
    return Claim(expects=(case.target,))


def routing_claim(spec: RoutingSpec, library_case: bool = False) -> Claim:
    """A routing case's claim: the rows of its must skills (none: the `none` row). It speaks about every skill that
    fires when it bounds what else may fire (allow_extra false, exact order, at most N), else only about the skills
    it names. `library_case`: the case belongs to the library (no must skill, target ANY_SKILL), whose grading
    counts only the library's own skills as fired."""
    must = tuple(name for name in spec.must_fire if not is_subagent(name))
    bounded = not spec.allow_extra or spec.order == "exact" or spec.max_skills is not None
    if not must:
        if bounded:
            return Claim(expects=(), library_only=library_case)
        return Claim(expects=(), scope=frozenset(n for n in spec.must_not_fire if not is_subagent(n)))
    if bounded:
        return Claim(expects=must)
    return Claim(expects=must, scope=frozenset(n for n in spec.names() if not is_subagent(n)))


def observed(claim: Claim, outcome: AttemptOutcome) -> list[str]:
    """The names an attempt fired that the claim speaks about, in the order they fired."""
    names = outcome.fired_instead if claim.library_only else outcome.fired
    return [n for n in names if not is_subagent(n) and (claim.scope is None or n in claim.scope)]


class Rate(BaseModel):
    value: float | None = Field(description="successes / trials; None when there were no trials.")
    interval: tuple[float, float] | None = Field(description="95% interval (Wilson for precision and recall; F1: "
                                                             "see SkillRouting.f1); None when nothing was measured.")
    successes: int
    trials: int


class SkillRouting(BaseModel):
    tp: int = Field(description="Attempts that expected the skill and fired it.")
    fp: int = Field(description="Attempts that fired it where their case did not expect it.")
    fn: int = Field(description="Attempts that expected it and did not fire it.")
    precision: Rate = Field(description="tp / (tp + fp), Wilson 95%.")
    recall: Rate = Field(description="tp / (tp + fn), Wilson 95%.")
    f1: Rate = Field(description="2tp / (2tp + fp + fn) (successes 2tp of trials 2tp+fp+fn). Interval: the harmonic "
                                 "mean at the low corners and at the high corners of the precision and recall "
                                 "Wilson intervals taken at 97.5% each, so it holds with at least 95%; a rate with "
                                 "no trials spans 0-1 there.")


class Confusion(BaseModel):
    expected: str = Field(description="The row: the skill the prompts were written for (`none`: no skill).")
    fired: str = Field(description="The skill that fired on them instead of, or beside, the expected one.")
    attempts: int = Field(description="Attempts of the row in which it fired.")
    of: int = Field(description="Every counted attempt of the row.")
    first: int = Field(description="Of `attempts`, those in which it fired first.")
    cases: list[str] = Field(description="The uids of the cases those attempts belong to.")


class Routing(BaseModel):
    skills: list[str] = Field(description="Every name in a row or column, the matrix order: skills by name, `none` "
                                          "last.")
    rows: dict[str, int] = Field(description="Counted attempts per expected name.")
    matrix: dict[str, dict[str, int]] = Field(description="expected -> fired -> attempts, every skill an attempt "
                                                          "fired (an attempt that fired two skills is in two "
                                                          "cells); `none`: it fired none. Cells with no attempt "
                                                          "are left out.")
    first_fired: dict[str, dict[str, int]] = Field(description="The same, the first skill fired only: one cell per "
                                                               "attempt.")
    per_skill: dict[str, SkillRouting]
    confusions: list[Confusion] = Field(description="Every off-diagonal cell with attempts, worst first: most "
                                                    "attempts, then the larger share of the row, then by name.")
    attempts: int = Field(description="Attempts counted in the matrix (one expecting two skills is in two rows, "
                                      "counted once here).")
    excluded: dict[str, int] = Field(description="Attempts of routing cases left out, by state: ERROR (the host "
                                                 "could not observe the activation, or the case's records were "
                                                 "refused), QUARANTINED (a quarantined case's), UNRUN (never ran).")
    unrun_by_reason: dict[str, int] = Field(description="The UNRUN attempts by reason (`decided`: not needed after "
                                                        "the quorum).")


@dataclass(frozen=True)
class CaseAttempts:
    """One planned case as the matrix reads it: its claim, its state (under a quarantine, the underlying one), and its
    finished main-arm outcomes."""

    uid: str
    claim: Claim
    state: str
    reason: str | None
    quarantined: bool
    planned: int
    outcomes: tuple[AttemptOutcome, ...]


class _Tally:
    """The additive counts a Routing is made of (build and merge both end in `routing`)."""

    def __init__(self) -> None:
        self.rows: Counter[str] = Counter()
        self.attempts = 0
        self.cells: dict[str, Counter[str]] = {}
        self.firsts: dict[str, Counter[str]] = {}
        self.tp: Counter[str] = Counter()
        self.fp: Counter[str] = Counter()
        self.fn: Counter[str] = Counter()
        self.cases: dict[tuple[str, str], set[str]] = {}
        self.first_off: Counter[tuple[str, str]] = Counter()
        self.excluded: Counter[str] = Counter({state: 0 for state in EXCLUDED_STATES})
        self.unrun: Counter[str] = Counter()

    def add_attempt(self, uid: str, claim: Claim, fired: list[str]) -> None:
        first = fired[0] if fired else NONE
        self.attempts += 1
        for row in claim.expects or (NONE,):
            self.rows[row] += 1
            for column in fired or [NONE]:
                self.cells.setdefault(row, Counter())[column] += 1
            self.firsts.setdefault(row, Counter())[first] += 1
            for column in fired:
                if column not in claim.expects:
                    self.cases.setdefault((row, column), set()).add(uid)
                    self.first_off[(row, column)] += column == first
        for name in claim.expects:
            (self.tp if name in fired else self.fn)[name] += 1
        for name in fired:
            if name not in claim.expects:
                self.fp[name] += 1

    def add_case(self, case: CaseAttempts) -> None:
        for outcome in case.outcomes:
            if case.quarantined:
                self.excluded["QUARANTINED"] += 1
            elif outcome.activation == "ERROR" or (case.reason or "").startswith(REFUSED):
                self.excluded["ERROR"] += 1  # not observed, or its log cannot be trusted: neither side
            else:
                self.add_attempt(case.uid, case.claim, observed(case.claim, outcome))
        missing = max(0, case.planned - len(case.outcomes))
        if missing:
            self.excluded["UNRUN"] += missing
            self.unrun[unrun_reason(case.state, case.reason)] += missing


def unrun_reason(state: str, reason: str | None) -> str:
    """Why a case's planned attempt never ran: its own UNRUN reason, or `decided` when the case reached a state and
    the quorum needed no more."""
    if state == "UNRUN":
        return reason or "not-started"
    if reason and reason.startswith(REFUSED):
        return REFUSED
    return "decided"


def rate(successes: int, trials: int, z: float = Z_95) -> Rate:
    return Rate(value=round(successes / trials, 4) if trials else None,
                interval=_rounded(wilson_interval(successes, trials, z)), successes=successes, trials=trials)


def harmonic(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def f1_rate(tp: int, fp: int, fn: int) -> Rate:
    """F1 as 2tp/(2tp+fp+fn), its interval from the corners of the 97.5% precision and recall intervals (a rate with
    no trials is anywhere in 0-1). None when the skill was neither expected nor fired."""
    trials = 2 * tp + fp + fn
    if not trials:
        return Rate(value=None, interval=None, successes=0, trials=0)
    p = wilson_interval(tp, tp + fp, Z_F1_CORNERS) or (0.0, 1.0)
    r = wilson_interval(tp, tp + fn, Z_F1_CORNERS) or (0.0, 1.0)
    return Rate(value=round(2 * tp / trials, 4), interval=_rounded((harmonic(p[0], r[0]), harmonic(p[1], r[1]))),
                successes=2 * tp, trials=trials)


def _rounded(interval: tuple[float, float] | None) -> tuple[float, float] | None:
    # Outwards, so that rounding never narrows what the interval claims.
    if interval is None:
        return None
    low, high = interval
    return (max(0.0, math.floor(low * 10_000) / 10_000), min(1.0, math.ceil(high * 10_000) / 10_000))


def skill_routing(tp: int, fp: int, fn: int) -> SkillRouting:
    return SkillRouting(tp=tp, fp=fp, fn=fn, precision=rate(tp, tp + fp), recall=rate(tp, tp + fn),
                        f1=f1_rate(tp, fp, fn))


def _order(names: Iterable[str]) -> list[str]:
    named = sorted({n for n in names if n != NONE})
    return [*named, NONE]


def _routing(tally: _Tally) -> Routing:
    names = set(tally.rows) | {c for cells in tally.cells.values() for c in cells}
    skills = _order(names) if names else []
    per_skill = {name: skill_routing(tally.tp[name], tally.fp[name], tally.fn[name]) for name in skills if name != NONE}
    confusions = [Confusion(expected=row, fired=column, attempts=tally.cells[row][column], of=tally.rows[row],
                            first=tally.first_off[(row, column)], cases=sorted(uids))
                  for (row, column), uids in tally.cases.items()]
    confusions.sort(key=lambda c: (-c.attempts, -c.attempts / c.of, c.expected, c.fired))
    return Routing(
        skills=skills, rows={row: tally.rows[row] for row in skills if tally.rows[row]},
        matrix={row: {c: n for c, n in sorted(tally.cells[row].items(), key=lambda i: skills.index(i[0]))}
                for row in skills if row in tally.cells},
        first_fired={row: {c: n for c, n in sorted(tally.firsts[row].items(), key=lambda i: skills.index(i[0]))}
                     for row in skills if row in tally.firsts},
        per_skill=per_skill, confusions=confusions, attempts=tally.attempts,
        excluded={state: tally.excluded[state] for state in EXCLUDED_STATES},
        unrun_by_reason=dict(tally.unrun.most_common()))


def build(cases: Iterable[CaseAttempts]) -> Routing:
    tally = _Tally()
    for case in cases:
        tally.add_case(case)
    return _routing(tally)


def merge(parts: list[Routing], unrun_elsewhere: Mapping[str, int]) -> Routing:
    """One matrix from the shards' (their cases are disjoint, so every count adds up). A shard's attempts of another
    shard's cases are UNRUN `other-shard` there and left out here; `unrun_elsewhere`: the UNRUN attempts of the cases
    no shard in the merge ran, by reason."""
    tally = _Tally()
    for part in parts:
        tally.attempts += part.attempts
        tally.rows.update(part.rows)
        for row, cells in part.matrix.items():
            tally.cells.setdefault(row, Counter()).update(cells)
        for row, cells in part.first_fired.items():
            tally.firsts.setdefault(row, Counter()).update(cells)
        for name, one in part.per_skill.items():
            tally.tp[name] += one.tp
            tally.fp[name] += one.fp
            tally.fn[name] += one.fn
        for confusion in part.confusions:
            key = (confusion.expected, confusion.fired)
            tally.cases.setdefault(key, set()).update(confusion.cases)
            tally.first_off[key] += confusion.first
        for state in ("ERROR", "QUARANTINED"):
            tally.excluded[state] += part.excluded.get(state, 0)
        for reason, n in part.unrun_by_reason.items():
            if reason != "other-shard":
                tally.unrun[reason] += n
    tally.unrun.update(unrun_elsewhere)
    tally.excluded["UNRUN"] = sum(tally.unrun.values())
    return _routing(tally)
