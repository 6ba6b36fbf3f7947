"""The sequential verdict (`[run] verdict = "sequential"`): a truncated sequential probability ratio test.

A trial is an attempt the host observed: a win when it met the case's expectation, a loss when not; an errored
attempt is no trial. After w wins and l losses the log likelihood ratio of "win rate ≥ θ+δ" against "≤ θ−δ" is
compared with Wald's boundaries ln((1−β)/α) (PASS) and ln(β/(1−α)) (FAIL); Wald's inequality bounds both errors
however often the rule looks, so looking after every round is valid. At `max_repeats`, or once no boundary is
reachable in the attempts left, the case is `undecided`: shown as such, never rounded to PASS or FAIL.

Attempts start in rounds of `round_size`, never one the verdict cannot need. `characteristics` gives the rule's
exact operating characteristics at a true rate by walking the executor's own starts.

Design notes: docs/design/sequential-verdict.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from runner.core.quorum import Decision, Tally

# Floating point: ln(9) is 2·ln(3) on paper but not always in binary.
_EPSILON = 1e-9


@dataclass(frozen=True)
class SequentialRule:
    pass_rate: float = 0.5      # θ: the win rate a case must exceed to pass
    indifference: float = 0.25  # δ: the test decides between ≤ θ−δ and ≥ θ+δ
    alpha: float = 0.1          # the chance of PASS for a case at θ−δ, at most
    beta: float = 0.1           # the chance of FAIL for a case at θ+δ, at most
    max_repeats: int = 6        # the bound: attempts per case, errors included (what the cap reserves)
    round_size: int = 2         # attempts started together

    def __post_init__(self) -> None:
        if not 0 < self.pass_rate - self.indifference < self.pass_rate + self.indifference < 1:
            raise ValueError(f"pass_rate ± indifference must lie inside (0, 1), got {self.pass_rate} ± "
                             f"{self.indifference}")
        if not (0 < self.alpha < 0.5 and 0 < self.beta < 0.5):
            raise ValueError(f"alpha and beta must lie in (0, 0.5), got {self.alpha} and {self.beta}")
        if self.max_repeats < 1 or self.round_size < 1:
            raise ValueError("max_repeats and round_size must be at least 1")

    @property
    def repeats(self) -> int:
        return self.max_repeats

    @property
    def p0(self) -> float:
        return self.pass_rate - self.indifference

    @property
    def p1(self) -> float:
        return self.pass_rate + self.indifference

    @property
    def upper(self) -> float:
        return math.log((1 - self.beta) / self.alpha)

    @property
    def lower(self) -> float:
        return math.log(self.beta / (1 - self.alpha))

    def llr(self, wins: int, losses: int) -> float:
        return wins * math.log(self.p1 / self.p0) + losses * math.log((1 - self.p1) / (1 - self.p0))

    def crossed(self, wins: int, losses: int) -> Decision | None:
        llr = self.llr(wins, losses)
        if llr >= self.upper - _EPSILON:
            return "win"
        if llr <= self.lower + _EPSILON:
            return "loss"
        return None

    def _reachable(self, wins: int, losses: int, more: int) -> bool:
        """Whether `more` further trials could still cross either boundary."""
        return self.crossed(wins + more, losses) == "win" or self.crossed(wins, losses + more) == "loss"

    def _needed(self, wins: int, losses: int) -> int:
        """The fewest further trials that could cross a boundary (0 when none within the bound could)."""
        for more in range(1, self.max_repeats + 1):
            if self._reachable(wins, losses, more):
                return more
        return 0

    @property
    def fewest(self) -> int:
        return self._needed(0, 0) or self.max_repeats

    def decide(self, tally: Tally) -> Decision:
        crossed = self.crossed(tally.wins, tally.losses)
        if crossed is not None:
            return crossed
        left = max(0, self.max_repeats - tally.finished)
        if self._reachable(tally.wins, tally.losses, left):
            return "pending"
        # No boundary is reachable in the attempts left: the errors decide whether that is the evidence's doing
        # (undecided) or the host's (error: had the errored attempts been trials, a boundary was reachable).
        if tally.errors and self._reachable(tally.wins, tally.losses, left + tally.errors):
            return "error"
        return "undecided"

    def starts_allowed(self, tally: Tally) -> int:
        """A round at a time: nothing while one is in flight; then up to the next multiple of round_size, never
        more than the fewest further trials that could decide, never past the bound."""
        if tally.in_flight or self.decide(tally) != "pending":
            return 0
        to_round_end = self.round_size - tally.started % self.round_size
        needed = self._needed(tally.wins, tally.losses)
        return max(0, min(to_round_end, needed, self.max_repeats - tally.started))

    def describe(self) -> str:
        return (f"sequential: pass rate above {self.pass_rate:g} (decides ≤ {self.p0:g} against ≥ {self.p1:g}, "
                f"α {self.alpha:g}, β {self.beta:g}), at most {self.max_repeats} attempts in rounds of "
                f"{self.round_size}")


@dataclass(frozen=True)
class Characteristics:
    """What the rule does to a case whose attempts win at `rate`, no errors: exact, not simulated."""

    rate: float
    expected_attempts: float
    passed: float
    failed: float
    undecided: float
    expected_rounds: float


def characteristics(rule: SequentialRule, rate: float) -> Characteristics:
    """The rule's operating characteristics at one true rate, walking the starts the executor makes: from each
    state between rounds, `starts_allowed` attempts, all finished, binomially many wins."""

    @lru_cache(maxsize=None)
    def walk(wins: int, losses: int) -> tuple[float, float, float, float, float]:
        tally = Tally(wins=wins, losses=losses)
        verdict = rule.decide(tally)
        if verdict != "pending":
            return (0.0, float(verdict == "win"), float(verdict == "loss"), float(verdict == "undecided"), 0.0)
        starts = rule.starts_allowed(tally)
        attempts, passed, failed, undecided, rounds = float(starts), 0.0, 0.0, 0.0, 1.0
        for won in range(starts + 1):
            chance = math.comb(starts, won) * rate ** won * (1 - rate) ** (starts - won)
            if chance == 0:
                continue
            after = walk(wins + won, losses + starts - won)
            attempts += chance * after[0]
            passed += chance * after[1]
            failed += chance * after[2]
            undecided += chance * after[3]
            rounds += chance * after[4]
        return attempts, passed, failed, undecided, rounds

    attempts, passed, failed, undecided, rounds = walk(0, 0)
    return Characteristics(rate, attempts, passed, failed, undecided, rounds)


# Nothing known of a case: the expected attempts averaged over win rates spread evenly over [0, 1].
PRIOR_POINTS = 101


@lru_cache(maxsize=4096)
def expected_attempts(rule: SequentialRule, wins: int = 0, losses: int = 0) -> float:
    """The expected attempts of a case, averaged over what its rate may be: Beta(1 + wins, 1 + losses) — uniform
    when nothing is known, else what an earlier run's wins and losses say of it."""
    grid = [(i + 0.5) / PRIOR_POINTS for i in range(PRIOR_POINTS)]
    weights = [rate ** wins * (1 - rate) ** losses for rate in grid]
    total = sum(weights)
    if total <= 0:
        return float(rule.max_repeats)
    return sum(w * _asn(rule, rate) for w, rate in zip(weights, grid, strict=True)) / total


@lru_cache(maxsize=8192)
def _asn(rule: SequentialRule, rate: float) -> float:
    return characteristics(rule, rate).expected_attempts
