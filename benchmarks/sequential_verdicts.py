"""Sequential verdicts against k-of-N with early stop: sessions, wrong verdicts and undecided cases (issue 35).

Simulated and computed, no model and no sessions: a case's attempts win (meet the case's expectation) with a true
rate p, independently. Four rules, each the runner's own object:

- `sequential`: runner.core.sequential.SequentialRule() at its defaults (θ 0.5, δ 0.25 so p0 0.25 and p1 0.75,
  α = β = 0.1, at most 6 attempts in rounds of 2);
- `sequential-strict`: the same with α = β = 0.05 (the knob);
- `N3/Q2` and `N5/Q3`: runner.core.quorum.QuorumRule(3, 2) and QuorumRule(5, 3), today's k of N with early stop.

For each rule and each p on the 0.05 grid (0, 0.05, ..., 1) and the 0.01 grid, the benchmark reports the expected
sessions per case, P(PASS), P(FAIL), P(undecided), the expected rounds (waves of sessions started together) and
the wrong-verdict rate: PASS when p ≤ p0, FAIL when p ≥ p1, nothing inside the band (p0, p1), where either verdict
is acceptable by design.

1. Exact figures. For the sequential rules runner.core.sequential.characteristics. For the quorum rules `walk`
   below: the same walk over the executor's starts, from each state between rounds `starts_allowed` attempts, all
   of them finished, binomially many wins, `decide` asked again (it is checked to give `characteristics`' figures
   for the sequential rules too). For a quorum rule the sessions started do not depend on timing (an attempt starts
   only when the ones before it cannot decide the case whatever they give), so its expected sessions are the
   executor's; its rounds are those of this round-at-a-time model.
2. Monte Carlo (seeded, `--cases` cases per rate on the 0.05 grid, default 20,000): every rule sees the same
   attempt outcomes for case c at rate p (common random numbers from a seed of its own per rate). Each case
   replays the executor's start policy with the rule's own `starts_allowed` and `decide` (memoised per tally,
   nothing else): start what starts_allowed allows, let all of the round finish, count the wins and losses, ask
   again. Each simulated figure is compared with the exact one in standard errors.
3. The issue's target: the saving in expected sessions of `sequential` against N5/Q3, averaged over the rates
   outside the band (as the ratio of the averages, and the average of the per-rate savings), on both grids, and per
   rate whether its wrong-verdict rate is at most N5/Q3's.
4. Why no rule meets both halves: (a) the bound — a rule that may PASS after two attempts passes a p = 0.1 case
   with probability ≥ 0.1² = 0.01, above N5/Q3's P(PASS) at 0.1, so a rule within N5/Q3's wrong-verdict rate
   at every rate uses at least 3 attempts for every decision, and 3 / (N5/Q3's average) caps the saving; (b) an
   exhaustive search over the rules that decide on wins − losses after each attempt n = 3..9 with symmetric
   boundaries b(n) (PASS when wins − losses ≥ b(n), FAIL when ≤ −b(n); b(n) in 1..5 of n's parity, or none;
   nothing decided at n ≤ 2; an attempt that cannot be needed never started; undecided after 9), exact, checked
   on the 0.01 grid outside the band.
5. Optional stopping: P(PASS) at p0 and P(FAIL) at p1 of the sequential rules looking after every round, exact
   and simulated (`--stop-cases`, default 100,000), against Wald's α/(1−β) and β/(1−α); and a naive rule that
   reads a fixed-N one-sided exact binomial test at level 0.1 (PASS when P(Bin(n, p0) ≥ wins) ≤ 0.1, FAIL when
   P(Bin(n, p1) ≤ wins) ≤ 0.1, the test a fixed n = 7 would use) again after every round of 2 (and after every
   attempt), up to 7 attempts, against its nominal 0.1.

    python -m benchmarks.sequential_verdicts [--short] [--out FILE]

`--out FILE` writes the JSON report, and the printed tables next to it (FILE with .txt). `--short`: 1,000 cases per
rate, 5,000 for the optional-stopping check, the search on the 0.05 grid.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from runner.core.quorum import Decision, QuorumRule, Tally
from runner.core.sequential import SequentialRule, characteristics

P0, P1 = 0.25, 0.75  # the default band; the rules below are checked to use it
GRID_05 = [i / 20 for i in range(21)]
GRID_01 = [i / 100 for i in range(101)]
_TOL = 1e-12


class Rule(Protocol):
    @property
    def repeats(self) -> int: ...

    def decide(self, tally: Tally) -> Decision: ...

    def starts_allowed(self, tally: Tally) -> int: ...


def rules() -> dict[str, Rule]:
    return {
        "sequential": SequentialRule(),
        "sequential-strict": SequentialRule(alpha=0.05, beta=0.05),
        "N3/Q2": QuorumRule(3, 2),
        "N5/Q3": QuorumRule(5, 3),
    }


def outside_band(p: float) -> bool:
    return p <= P0 + _TOL or p >= P1 - _TOL


def wrong_of(p: float, passed: float, failed: float) -> float:
    """PASS is wrong at p ≤ p0, FAIL at p ≥ p1; inside the band no verdict is."""
    if p <= P0 + _TOL:
        return passed
    if p >= P1 - _TOL:
        return failed
    return 0.0


# ---- exact -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Exact:
    sessions: float
    passed: float
    failed: float
    undecided: float
    rounds: float


def walk(rule: Rule, rate: float) -> Exact:
    """The rule's exact figures at `rate`: from each state between rounds, starts_allowed attempts, all finished."""

    @lru_cache(maxsize=None)
    def step(wins: int, losses: int) -> tuple[float, float, float, float, float]:
        tally = Tally(wins=wins, losses=losses)
        verdict = rule.decide(tally)
        if verdict != "pending":
            return 0.0, float(verdict == "win"), float(verdict == "loss"), float(verdict == "undecided"), 0.0
        starts = rule.starts_allowed(tally)
        if starts <= 0:
            raise RuntimeError(f"{rule}: pending at {tally} but nothing may start")
        out = [float(starts), 0.0, 0.0, 0.0, 1.0]
        for won in range(starts + 1):
            chance = math.comb(starts, won) * rate ** won * (1 - rate) ** (starts - won)
            if chance == 0:
                continue
            after = step(wins + won, losses + starts - won)
            for i in range(5):
                out[i] += chance * after[i]
        return out[0], out[1], out[2], out[3], out[4]

    return Exact(*step(0, 0))


def exact(rule: Rule, rate: float) -> Exact:
    if isinstance(rule, SequentialRule):
        c = characteristics(rule, rate)
        return Exact(c.expected_attempts, c.passed, c.failed, c.undecided, c.expected_rounds)
    return walk(rule, rate)


# ---- Monte Carlo -----------------------------------------------------------------------------------

class Memo:
    """The rule's own decide and starts_allowed, remembered per (wins, losses): nothing else."""

    def __init__(self, rule: Rule):
        self.rule = rule
        self._decide: dict[tuple[int, int], Decision] = {}
        self._starts: dict[tuple[int, int], int] = {}

    def decide(self, wins: int, losses: int) -> Decision:
        key = (wins, losses)
        if key not in self._decide:
            self._decide[key] = self.rule.decide(Tally(wins=wins, losses=losses))
        return self._decide[key]

    def starts_allowed(self, wins: int, losses: int) -> int:
        key = (wins, losses)
        if key not in self._starts:
            self._starts[key] = self.rule.starts_allowed(Tally(wins=wins, losses=losses))
        return self._starts[key]


def replay(rule: Memo, outcomes: Sequence[bool]) -> tuple[int, Decision, int]:
    """One case as the executor runs it, a round at a time: (sessions started, verdict, rounds)."""
    wins = losses = started = rounds = 0
    while True:
        verdict = rule.decide(wins, losses)
        if verdict != "pending":
            return started, verdict, rounds
        starts = rule.starts_allowed(wins, losses)
        if starts <= 0:
            raise RuntimeError(f"{rule.rule}: pending at {wins}/{losses} but nothing may start")
        for outcome in outcomes[started:started + starts]:
            wins += outcome
            losses += not outcome
        started += starts
        rounds += 1


class Simulated(BaseModel):
    cases: int
    sessions: float
    sessions_sd: float
    passed: float
    failed: float
    undecided: float
    rounds: float
    rounds_sd: float


def simulate(rate_index: int, rate: float, memos: dict[str, Memo], cases: int, salt: str = "grid"
             ) -> dict[str, Simulated]:
    rng = random.Random(f"sequential-verdicts/{salt}/{rate_index}")
    longest = max(m.rule.repeats for m in memos.values())
    sums: dict[str, list[float]] = {name: [0.0] * 7 for name in memos}
    for _ in range(cases):
        outcomes = [rng.random() < rate for _ in range(longest)]
        for name, memo in memos.items():
            sessions, verdict, rounds = replay(memo, outcomes)
            s = sums[name]
            s[0] += sessions
            s[1] += sessions * sessions
            s[2] += verdict == "win"
            s[3] += verdict == "loss"
            s[4] += verdict == "undecided"
            s[5] += rounds
            s[6] += rounds * rounds
    out = {}
    for name, s in sums.items():
        mean, rmean = s[0] / cases, s[5] / cases
        out[name] = Simulated(cases=cases, sessions=mean, sessions_sd=math.sqrt(max(0.0, s[1] / cases - mean ** 2)),
                              passed=s[2] / cases, failed=s[3] / cases, undecided=s[4] / cases, rounds=rmean,
                              rounds_sd=math.sqrt(max(0.0, s[6] / cases - rmean ** 2)))
    return out


def z_scores(e: Exact, s: Simulated) -> dict[str, float]:
    """(simulated − exact) in standard errors; a proportion's from the exact rate, a mean's from the sample."""
    def z(diff: float, se: float) -> float:
        if se <= 0:
            return 0.0 if abs(diff) < 1e-9 else math.inf
        return diff / se

    n = s.cases
    return {
        "sessions": z(s.sessions - e.sessions, s.sessions_sd / math.sqrt(n)),
        "passed": z(s.passed - e.passed, math.sqrt(e.passed * (1 - e.passed) / n)),
        "failed": z(s.failed - e.failed, math.sqrt(e.failed * (1 - e.failed) / n)),
        "undecided": z(s.undecided - e.undecided, math.sqrt(e.undecided * (1 - e.undecided) / n)),
        "rounds": z(s.rounds - e.rounds, s.rounds_sd / math.sqrt(n)),
    }


# ---- the report's rows -----------------------------------------------------------------------------

class RuleAtRate(BaseModel):
    sessions: float
    passed: float
    failed: float
    undecided: float
    wrong: float
    rounds: float
    simulated: Simulated | None = None
    z: dict[str, float] | None = None


class RateRow(BaseModel):
    p: float
    outside_band: bool
    rules: dict[str, RuleAtRate]


def rows_for(grid: list[float], named: dict[str, Rule], memos: dict[str, Memo] | None, cases: int) -> list[RateRow]:
    rows = []
    for index, p in enumerate(grid):
        sims = simulate(index, p, memos, cases) if memos else {}
        per: dict[str, RuleAtRate] = {}
        for name, rule in named.items():
            e = exact(rule, p)
            per[name] = RuleAtRate(sessions=e.sessions, passed=e.passed, failed=e.failed, undecided=e.undecided,
                                   wrong=wrong_of(p, e.passed, e.failed), rounds=e.rounds,
                                   simulated=sims.get(name), z=z_scores(e, sims[name]) if name in sims else None)
        rows.append(RateRow(p=p, outside_band=outside_band(p), rules=per))
    return rows


class Saving(BaseModel):
    grid: str
    rates_outside: int
    sessions_outside: dict[str, float]   # each rule's average expected sessions over the rates outside the band
    saving_pct: dict[str, float]         # 1 − its average / N5/Q3's average
    mean_per_rate_saving_pct: dict[str, float]
    undecided_inside: dict[str, float]   # average P(undecided) over the rates inside the band
    undecided_outside_max: dict[str, float]
    wrong_at_most_n5q3: dict[str, list[float]]   # the rates outside the band where it is (within 1e-12)
    wrong_above_n5q3: dict[str, list[float]]


def saving(grid_name: str, rows: list[RateRow], base: str = "N5/Q3") -> Saving:
    out = [r for r in rows if r.outside_band]
    inside = [r for r in rows if not r.outside_band]
    names = list(rows[0].rules)
    avg = {n: sum(r.rules[n].sessions for r in out) / len(out) for n in names}
    return Saving(
        grid=grid_name, rates_outside=len(out), sessions_outside=avg,
        saving_pct={n: 100 * (1 - avg[n] / avg[base]) for n in names},
        mean_per_rate_saving_pct={n: 100 * sum(1 - r.rules[n].sessions / r.rules[base].sessions for r in out) / len(out)
                                  for n in names},
        undecided_inside={n: sum(r.rules[n].undecided for r in inside) / len(inside) for n in names},
        undecided_outside_max={n: max(r.rules[n].undecided for r in out) for n in names},
        wrong_at_most_n5q3={n: [r.p for r in out if r.rules[n].wrong <= r.rules[base].wrong + _TOL] for n in names},
        wrong_above_n5q3={n: [r.p for r in out if r.rules[n].wrong > r.rules[base].wrong + _TOL] for n in names},
    )


# ---- why no rule meets both halves -----------------------------------------------------------------

class Bound(BaseModel):
    n5q3_pass_at_0_1: float
    two_attempt_pass_at_0_1: float
    n5q3_sessions_outside: dict[str, float]   # per grid
    max_saving_pct: dict[str, float]           # 1 − 3 / that, per grid


def boundary_rule_figures(bounds: Sequence[int | None], rates: Sequence[float], first: int = 3
                          ) -> tuple[list[float], list[float], list[float], list[float]]:
    """Exact (sessions, P(PASS), P(FAIL), P(undecided)) per rate of the rule deciding on d = wins − losses after
    attempt n = first .. first+len(bounds)−1 (PASS at d ≥ b(n), FAIL at d ≤ −b(n), b None: no decision at n),
    one attempt at a time, never starting an attempt when no later boundary can be reached, undecided at the end."""
    last = first + len(bounds) - 1

    def bound(n: int) -> int | None:
        return bounds[n - first] if first <= n <= last else None

    def reachable(n: int, d: int) -> bool:  # some later boundary can still be crossed from d after n attempts
        for m in range(n + 1, last + 1):
            b = bound(m)
            if b is not None and (d + (m - n) >= b or d - (m - n) <= -b):
                return True
        return False

    sessions, passed, failed, undecided = [], [], [], []
    for p in rates:
        q = 1 - p
        open_: dict[int, float] = {0: 1.0}
        s = pa = fa = un = 0.0
        for n in range(1, last + 1):
            still: dict[int, float] = {}
            for d, mass in open_.items():
                if not reachable(n - 1, d):
                    un += mass
                    continue
                s += mass
                for dd, chance in ((d + 1, p), (d - 1, q)):
                    if chance:
                        still[dd] = still.get(dd, 0.0) + mass * chance
            b = bound(n)
            open_ = {}
            for d, mass in still.items():
                if b is not None and d >= b:
                    pa += mass
                elif b is not None and d <= -b:
                    fa += mass
                else:
                    open_[d] = mass
        un += sum(open_.values())
        sessions.append(s)
        passed.append(pa)
        failed.append(fa)
        undecided.append(un)
    return sessions, passed, failed, undecided


class Search(BaseModel):
    grid: str
    rules_searched: int
    # A rule is feasible when at every rate outside the band it gives a correct verdict at least as often as N5/Q3:
    # wrong + undecided ≤ N5/Q3's wrong (N5/Q3 is never undecided). Counting only the wrong verdicts would admit the
    # rule that decides nothing (0 sessions, every case undecided).
    feasible: int
    best_feasible_bounds: list[int | None]
    best_feasible_sessions_outside: float
    best_feasible_saving_pct: float
    # Stricter: wrong ≤ N5/Q3's and never undecided outside the band.
    feasible_decisive: int
    best_decisive_saving_pct: float
    n5q3_sessions_outside: float
    n5q3_in_family_bounds: list[int | None]
    n5q3_family_matches_quorum_rule: bool
    # The cheapest rule that is never undecided outside the band, whatever its wrong verdicts, and its worst excess.
    cheapest_decisive_bounds: list[int | None]
    cheapest_decisive_saving_pct: float
    cheapest_decisive_wrong_at_0_1: float
    only_wrong_counted_feasible: int   # wrong ≤ N5/Q3's, undecided not counted (degenerate, for the record)
    seconds: float


def search(grid: list[float], name: str) -> Search:
    started = time.monotonic()
    rates = [p for p in grid if outside_band(p)]
    n5q3 = QuorumRule(5, 3)
    base = [exact(n5q3, p) for p in rates]
    base_wrong = [wrong_of(p, e.passed, e.failed) for p, e in zip(rates, base, strict=True)]
    base_avg = sum(e.sessions for e in base) / len(rates)
    # N5/Q3 in this family: 3 wins first at n = 3 (d = 3), 4 (d = 2) or 5 (d = 1); FAIL the same way.
    family_n5q3: list[int | None] = [3, 2, 1, None, None, None, None]
    fs, fp, ff, _ = boundary_rule_figures(family_n5q3, rates)
    matches = all(abs(a - e.sessions) < 1e-9 and abs(b - e.passed) < 1e-9 and abs(c - e.failed) < 1e-9
                  for a, b, c, e in zip(fs, fp, ff, base, strict=True))
    index_01 = min(range(len(rates)), key=lambda i: abs(rates[i] - 0.1))
    choices = [[None, 1, 3, 5] if n % 2 else [None, 2, 4] for n in range(3, 10)]
    count = feasible = decisive_feasible = only_wrong = 0
    best: tuple[float, list[int | None]] = (math.inf, [])
    best_decisive: float = math.inf
    cheapest: tuple[float, list[int | None], float] = (math.inf, [], 0.0)
    for combo in itertools.product(*choices):
        bounds = list(combo)
        count += 1
        s, pa, fa, un = boundary_rule_figures(bounds, rates)
        avg = sum(s) / len(rates)
        wrong = [wrong_of(p, a, b) for p, a, b in zip(rates, pa, fa, strict=True)]
        decisive = all(u <= _TOL for u in un)
        if decisive and avg < cheapest[0] - _TOL:
            cheapest = (avg, bounds, wrong[index_01])
        wrong_ok = all(w <= bw + _TOL for w, bw in zip(wrong, base_wrong, strict=True))
        only_wrong += wrong_ok
        if all(w + u <= bw + _TOL for w, u, bw in zip(wrong, un, base_wrong, strict=True)):
            feasible += 1
            if avg < best[0] - _TOL:
                best = (avg, bounds)
        if wrong_ok and decisive:
            decisive_feasible += 1
            best_decisive = min(best_decisive, avg)
    return Search(grid=name, rules_searched=count, feasible=feasible, best_feasible_bounds=best[1],
                  best_feasible_sessions_outside=best[0], best_feasible_saving_pct=100 * (1 - best[0] / base_avg),
                  feasible_decisive=decisive_feasible, best_decisive_saving_pct=100 * (1 - best_decisive / base_avg),
                  n5q3_sessions_outside=base_avg, n5q3_in_family_bounds=family_n5q3,
                  n5q3_family_matches_quorum_rule=matches, cheapest_decisive_bounds=cheapest[1],
                  cheapest_decisive_saving_pct=100 * (1 - cheapest[0] / base_avg),
                  cheapest_decisive_wrong_at_0_1=cheapest[2], only_wrong_counted_feasible=only_wrong,
                  seconds=round(time.monotonic() - started, 2))


# ---- optional stopping -------------------------------------------------------------------------------

def binom_tail_ge(n: int, k: int, p: float) -> float:
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(max(0, k), n + 1))


def binom_tail_le(n: int, k: int, p: float) -> float:
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(0, min(n, k) + 1))


@dataclass(frozen=True)
class NaiveRule:
    """A fixed-N one-sided exact binomial test at `level` read again after every round: PASS when
    P(Bin(n, p0) ≥ wins) ≤ level, FAIL when P(Bin(n, p1) ≤ wins) ≤ level; undecided after `max_repeats`."""

    level: float = 0.1
    max_repeats: int = 7
    round_size: int = 2

    @property
    def repeats(self) -> int:
        return self.max_repeats

    def decide(self, tally: Tally) -> Decision:
        n, wins = tally.wins + tally.losses, tally.wins
        if n and binom_tail_ge(n, wins, P0) <= self.level:
            return "win"
        if n and binom_tail_le(n, wins, P1) <= self.level:
            return "loss"
        return "undecided" if n >= self.max_repeats else "pending"

    def starts_allowed(self, tally: Tally) -> int:
        if tally.in_flight or self.decide(tally) != "pending":
            return 0
        return min(self.round_size, self.max_repeats - tally.started)


class StopRow(BaseModel):
    rule: str
    looks: str
    pass_at_p0_exact: float
    pass_at_p0_simulated: float
    fail_at_p1_exact: float
    fail_at_p1_simulated: float
    cases: int
    pass_bound: float       # Wald's α/(1−β), or the naive test's nominal level
    fail_bound: float
    bound_name: str
    within: bool            # both exact figures within their bound


def optional_stopping(cases: int) -> tuple[list[StopRow], dict[str, float]]:
    candidates: list[tuple[str, str, Rule, float, float, str]] = []
    for name, rule in (("sequential", SequentialRule()), ("sequential-strict", SequentialRule(alpha=0.05, beta=0.05))):
        candidates.append((name, "after every round of 2", rule, rule.alpha / (1 - rule.beta),
                           rule.beta / (1 - rule.alpha), "Wald α/(1−β), β/(1−α)"))
    candidates.append(("naive exact test, level 0.1", "after every round of 2", NaiveRule(), 0.1, 0.1, "nominal 0.1"))
    candidates.append(("naive exact test, level 0.1", "after every attempt", NaiveRule(round_size=1), 0.1, 0.1,
                       "nominal 0.1"))
    rows = []
    for index, (name, looks, rule, pb, fb, bname) in enumerate(candidates):
        e0, e1 = walk(rule, P0), walk(rule, P1)
        memo = {name: Memo(rule)}
        s0 = simulate(index, P0, memo, cases, salt="stop-p0")[name]
        s1 = simulate(index, P1, memo, cases, salt="stop-p1")[name]
        rows.append(StopRow(rule=name, looks=looks, pass_at_p0_exact=e0.passed, pass_at_p0_simulated=s0.passed,
                            fail_at_p1_exact=e1.failed, fail_at_p1_simulated=s1.failed, cases=cases, pass_bound=pb,
                            fail_bound=fb, bound_name=bname,
                            within=e0.passed <= pb + _TOL and e1.failed <= fb + _TOL))
    # What the naive rule's test has at a fixed n = 7, read once: the smallest wins that pass, and its real level.
    k = next(w for w in range(8) if binom_tail_ge(7, w, P0) <= 0.1)
    fixed = {"fixed_n7_pass_min_wins": float(k), "fixed_n7_level": binom_tail_ge(7, k, P0)}
    return rows, fixed


# ---- printing ----------------------------------------------------------------------------------------

NAMES = ("sequential", "sequential-strict", "N3/Q2", "N5/Q3")


def fmt_table(rows: list[RateRow], field: str, title: str, digits: int, pct: bool = False) -> list[str]:
    lines = [title, "  p     " + "".join(f"{n:>19}" for n in NAMES)]
    for r in rows:
        cells = []
        for n in NAMES:
            value = getattr(r.rules[n], field)
            cells.append(f"{100 * value:>18.{digits}f}%" if pct else f"{value:>19.{digits}f}")
        lines.append(f"  {r.p:<5.2f}{' ' if r.outside_band else '*'}" + "".join(cells))
    return lines


def render(report: Report) -> str:
    out: list[str] = []
    add = out.append
    add(f"Sequential verdicts (issue 35), {report.cases} seeded cases per rate, band ({P0}, {P1}) marked *")
    for r in report.rules_described:
        add(f"  {r}")
    add("")
    out += fmt_table(report.rows, "sessions", "Expected sessions per case (exact)", 3)
    add("")
    out += fmt_table(report.rows, "wrong", "Wrong-verdict rate (exact; PASS at p ≤ 0.25, FAIL at p ≥ 0.75)", 3, True)
    add("")
    out += fmt_table(report.rows, "undecided", "Undecided rate (exact)", 3, True)
    add("")
    out += fmt_table(report.rows, "rounds", "Expected rounds (waves of sessions started together; exact)", 3)
    add("")
    add(f"Monte Carlo against exact ({report.cases} cases per rate and rule, same outcomes for every rule): "
        f"max |z| {report.max_abs_z:.2f} over {report.z_count} figures; the worst: {report.worst_z}")
    add("  p     rule                simulated sessions (exact)   P(PASS) sim (exact)     P(undecided) sim (exact)")
    for r in report.rows:
        for n in NAMES:
            x = r.rules[n]
            if x.simulated is None:
                continue
            s = x.simulated
            add(f"  {r.p:<5.2f} {n:<19} {s.sessions:>8.4f} ({x.sessions:.4f})    {s.passed:>7.4f} ({x.passed:.4f})"
                f"      {s.undecided:>7.4f} ({x.undecided:.4f})")
    add("")
    add("Against N5/Q3, over the rates outside the band:")
    for sv in report.savings:
        add(f"  {sv.grid} grid ({sv.rates_outside} rates):")
        for n in NAMES:
            add(f"    {n:<19} sessions {sv.sessions_outside[n]:.4f}  saving {sv.saving_pct[n]:6.2f}% "
                f"(mean of per-rate savings {sv.mean_per_rate_saving_pct[n]:6.2f}%)  "
                f"undecided inside the band {100 * sv.undecided_inside[n]:.2f}% (outside, max "
                f"{100 * sv.undecided_outside_max[n]:.2f}%)")
            add(f"    {'':<19} wrong-verdict rate ≤ N5/Q3's at {len(sv.wrong_at_most_n5q3[n])} of "
                f"{sv.rates_outside} rates; above it at: {', '.join(f'{p:g}' for p in sv.wrong_above_n5q3[n]) or '-'}")
    add("")
    add("Per rate outside the band, wrong-verdict rate: sequential against N5/Q3 (0.05 grid)")
    for r in report.rows:
        if r.outside_band:
            a, b = r.rules["sequential"].wrong, r.rules["N5/Q3"].wrong
            add(f"  p {r.p:<5.2f} sequential {100 * a:7.3f}%   N5/Q3 {100 * b:7.3f}%   "
                f"{'at most' if a <= b + _TOL else 'ABOVE'}")
    add("")
    bd = report.bound
    add("Why no rule meets both halves of the target:")
    add(f"  (a) at p = 0.1 N5/Q3 passes with probability {bd.n5q3_pass_at_0_1:.5f}; a rule that may PASS after two "
        f"attempts passes a p = 0.1 case with probability ≥ 0.1² = {bd.two_attempt_pass_at_0_1:.5f} (FAIL at 0.9 the "
        f"same way), so a rule within N5/Q3's wrong-verdict rate at every rate uses ≥ 3 attempts for every decision:")
    for g in bd.n5q3_sessions_outside:
        add(f"      {g} grid: N5/Q3 averages {bd.n5q3_sessions_outside[g]:.4f} sessions outside the band -> at most "
            f"{bd.max_saving_pct[g]:.2f}% saving")
    for sr in report.searches:
        add(f"  (b) exhaustive search, {sr.grid} grid outside the band ({sr.seconds} s): {sr.rules_searched} rules with "
            f"symmetric boundaries b(n) on wins − losses after attempt n = 3..9 (b in 1..5 of n's parity, or none).")
        add(f"      {sr.feasible} give a correct verdict at least as often as N5/Q3 at every rate outside the band "
            f"(wrong + undecided ≤ N5/Q3's wrong); the cheapest of them, b = {sr.best_feasible_bounds}, averages "
            f"{sr.best_feasible_sessions_outside:.4f} sessions against N5/Q3's {sr.n5q3_sessions_outside:.4f}: saving "
            f"{sr.best_feasible_saving_pct:.2f}%.")
        add(f"      {sr.feasible_decisive} keep wrong ≤ N5/Q3's and are never undecided outside the band; best saving "
            f"{sr.best_decisive_saving_pct:.2f}%. N5/Q3 is b = {sr.n5q3_in_family_bounds} in this family (same "
            f"figures as QuorumRule(5, 3): {sr.n5q3_family_matches_quorum_rule}).")
        add(f"      The cheapest rule never undecided outside the band, whatever its wrong verdicts: b = "
            f"{sr.cheapest_decisive_bounds}, saving {sr.cheapest_decisive_saving_pct:.2f}% (the bound in (a)), "
            f"wrong at p = 0.1 {100 * sr.cheapest_decisive_wrong_at_0_1:.2f}%.")
        add(f"      (Counting wrong verdicts only, {sr.only_wrong_counted_feasible} rules pass, among them the rule "
            f"that decides nothing: undecided must count.)")
    add("")
    add("Optional stopping (P(PASS) at p0 = 0.25, P(FAIL) at p1 = 0.75; exact, and simulated):")
    for s in report.stopping:
        add(f"  {s.rule:<28} {s.looks:<23} PASS@p0 {s.pass_at_p0_exact:.4f} (sim {s.pass_at_p0_simulated:.4f})  "
            f"FAIL@p1 {s.fail_at_p1_exact:.4f} (sim {s.fail_at_p1_simulated:.4f})  bound {s.pass_bound:.4f} / "
            f"{s.fail_bound:.4f} ({s.bound_name}): {'within' if s.within else 'EXCEEDED'}")
    add(f"  the same test at a fixed n = 7, read once: PASS at ≥ {report.fixed_n7['fixed_n7_pass_min_wins']:.0f} wins, "
        f"real level {report.fixed_n7['fixed_n7_level']:.4f}")
    add("")
    add(f"Seconds: {report.seconds}")
    return "\n".join(out)


class Report(BaseModel):
    benchmark: str
    command: str
    python: str
    cases: int
    stop_cases: int
    rules_described: list[str]
    rows: list[RateRow]            # the 0.05 grid, exact and simulated
    rows_01: list[RateRow]         # the 0.01 grid, exact
    max_abs_z: float
    worst_z: str
    z_count: int
    savings: list[Saving]
    bound: Bound
    searches: list[Search]
    stopping: list[StopRow]
    fixed_n7: dict[str, float]
    seconds: dict[str, float]


def main(argv: list[str] | None = None) -> Report:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--short", action="store_true",
                        help="1,000 cases per rate, 5,000 for optional stopping, the search on the 0.05 grid")
    parser.add_argument("--cases", type=int, default=None, help="Seeded cases per rate (default 20,000).")
    parser.add_argument("--stop-cases", type=int, default=None, help="Cases for optional stopping (default 100,000).")
    parser.add_argument("--out", type=Path, default=None, help="JSON report; the tables go to the same name .txt")
    args = parser.parse_args(argv)
    cases = args.cases or (1000 if args.short else 20000)
    stop_cases = args.stop_cases or (5000 if args.short else 100000)
    named = rules()
    for rule in named.values():
        if isinstance(rule, SequentialRule) and (abs(rule.p0 - P0) > _TOL or abs(rule.p1 - P1) > _TOL):
            raise AssertionError(f"{rule}: band is not ({P0}, {P1})")
    # The generic walk gives characteristics' figures for the sequential rules (the same walk, checked).
    for rule in named.values():
        if isinstance(rule, SequentialRule):
            for p in GRID_05:
                c, w = characteristics(rule, p), walk(rule, p)
                if max(abs(c.expected_attempts - w.sessions), abs(c.passed - w.passed), abs(c.failed - w.failed),
                       abs(c.undecided - w.undecided), abs(c.expected_rounds - w.rounds)) > 1e-12:
                    raise AssertionError(f"walk and characteristics disagree at {p}")
    seconds: dict[str, float] = {}
    t = time.monotonic()
    memos = {name: Memo(rule) for name, rule in named.items()}
    rows = rows_for(GRID_05, named, memos, cases)
    seconds["grid_05_exact_and_simulated"] = round(time.monotonic() - t, 2)
    rows_01 = rows_for(GRID_01, named, None, 0)
    zs = [(abs(v), f"{n} p={r.p:g} {k} z={v:+.2f}") for r in rows for n in NAMES
          for k, v in (r.rules[n].z or {}).items()]
    worst = max(zs)
    savings = [saving("0.05", rows), saving("0.01", rows_01)]
    n5q3 = QuorumRule(5, 3)
    bound = Bound(n5q3_pass_at_0_1=exact(n5q3, 0.1).passed, two_attempt_pass_at_0_1=0.1 ** 2,
                  n5q3_sessions_outside={s.grid: s.sessions_outside["N5/Q3"] for s in savings},
                  max_saving_pct={s.grid: 100 * (1 - 3 / s.sessions_outside["N5/Q3"]) for s in savings})
    t = time.monotonic()
    searches = [search(GRID_05, "0.05")] if args.short else [search(GRID_05, "0.05"), search(GRID_01, "0.01")]
    seconds["search"] = round(time.monotonic() - t, 2)
    t = time.monotonic()
    stopping, fixed = optional_stopping(stop_cases)
    seconds["optional_stopping"] = round(time.monotonic() - t, 2)
    described = [f"{n}: {getattr(r, 'describe')()}" for n, r in named.items()]
    report = Report(benchmark="sequential_verdicts",
                    command="python -m benchmarks.sequential_verdicts " + " ".join(
                        argv if argv is not None else sys.argv[1:]),
                    python=sys.version.split()[0], cases=cases, stop_cases=stop_cases, rules_described=described,
                    rows=rows, rows_01=rows_01, max_abs_z=worst[0], worst_z=worst[1], z_count=len(zs),
                    savings=savings, bound=bound, searches=searches, stopping=stopping, fixed_n7=fixed,
                    seconds=seconds)
    text = render(report)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report.model_dump_json(indent=1), encoding="utf-8")
        args.out.with_suffix(".txt").write_text(text + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
