"""Repeats and quorum (semantics §4): k wins of N decide, early stop, errors count for neither.

A case is decided PASS once it has k wins and FAIL once it has N−k+1 losses; the repeats that
can no longer change that are never started (UNRUN `decided`). An errored attempt is neither a
win nor a loss and is never replaced, so when errors leave too few repeats to reach either
threshold the case is ERROR. Nothing here retries anything.

`VerdictRule` is what the executor, the verdicts and the plan ask of a rule; the other one is the sequential
test of runner.core.sequential, whose verdict may stay `undecided` at its bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

# pending: more attempts may still decide it. undecided: every attempt the rule allows ran and the evidence stayed
# open (only a sequential rule ends so). error: errors used up the attempts that could have decided it.
Decision = Literal["win", "loss", "pending", "undecided", "error"]


class VerdictRule(Protocol):
    """A case's rule over its attempts' wins and losses: when it is decided, and how many attempts may start."""

    @property
    def repeats(self) -> int:
        """The most attempts a case may use (what the cap reserves)."""

    @property
    def fewest(self) -> int:
        """The fewest attempts that can decide a case."""

    def decide(self, tally: Tally) -> Decision: ...

    def starts_allowed(self, tally: Tally) -> int: ...

    def describe(self) -> str:
        """The rule in a few words for reports (`2 of 3`, `sequential: ...`)."""


@dataclass(frozen=True)
class QuorumRule:
    repeats: int  # N, odd
    quorum: int   # k, > N/2

    def __post_init__(self) -> None:
        if self.repeats < 1 or self.repeats % 2 == 0:
            raise ValueError(f"repeats must be odd and positive, got {self.repeats}")
        if not self.repeats / 2 < self.quorum <= self.repeats:
            raise ValueError(f"quorum must be more than half of {self.repeats} and at most it, got {self.quorum}")

    @property
    def losses_to_fail(self) -> int:
        return self.repeats - self.quorum + 1

    @property
    def fewest(self) -> int:
        return self.quorum

    def decide(self, tally: Tally) -> Decision:
        return decide(self, tally)

    def starts_allowed(self, tally: Tally) -> int:
        return starts_allowed(self, tally)

    def describe(self) -> str:
        return f"{self.quorum} of {self.repeats}"


@dataclass(frozen=True)
class Tally:
    wins: int = 0
    losses: int = 0
    errors: int = 0
    in_flight: int = 0

    @property
    def finished(self) -> int:
        return self.wins + self.losses + self.errors

    @property
    def started(self) -> int:
        return self.finished + self.in_flight


def decide(rule: QuorumRule, tally: Tally) -> Decision:
    """The quorum verdict of the finished attempts (in-flight ones not counted)."""
    if tally.wins >= rule.quorum:
        return "win"
    if tally.losses >= rule.losses_to_fail:
        return "loss"
    remaining = rule.repeats - tally.finished
    if tally.wins + remaining < rule.quorum and tally.losses + remaining < rule.losses_to_fail:
        return "error"  # errors used up the repeats: neither threshold is reachable any more
    return "pending"


def starts_allowed(rule: QuorumRule, tally: Tally) -> int:
    """How many more attempts may start now without ever starting one the verdict cannot need.

    The fewest further results that could decide the case is min(k − wins, N−k+1 − losses);
    in-flight attempts already count towards it. So when the first k attempts all win, exactly k
    sessions were started.
    """
    if decide(rule, tally) != "pending":
        return 0
    needed = min(rule.quorum - tally.wins, rule.losses_to_fail - tally.losses)
    return max(0, min(rule.repeats - tally.started, needed - tally.in_flight))


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float] | None:
    """95% Wilson score interval for a rate; None when nothing was observed."""
    if trials <= 0:
        return None
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
