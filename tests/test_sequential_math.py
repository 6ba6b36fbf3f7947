"""The sequential verdict's arithmetic (issue 35): exact operating characteristics against hand-computed values and
against a seeded replay of the executor's starts, Wald's bounds under optional stopping, and
benchmarks/sequential_verdicts.py in its short mode. Fast: no sessions, no model."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchmarks import sequential_verdicts as sv
from runner.core.quorum import QuorumRule
from runner.core.sequential import SequentialRule, characteristics

# ---- benchmarks/sequential_verdicts.py: exact figures, simulation, optional stopping -------------------------------


def test_default_rule_at_certain_rates() -> None:
    """Default: LLR = (wins − losses)·ln 3, boundaries ±ln 9, so wins − losses = ±2 decides. p = 1: the first round
    of 2 wins twice, PASS; p = 0: FAIL after the same round."""
    rule = SequentialRule()
    one = characteristics(rule, 1.0)
    assert (one.expected_attempts, one.passed, one.failed, one.undecided, one.expected_rounds) == (2, 1, 0, 0, 1)
    zero = characteristics(rule, 0.0)
    assert (zero.expected_attempts, zero.passed, zero.failed, zero.undecided, zero.expected_rounds) == (2, 0, 1, 0, 1)


def test_default_rule_at_one_half() -> None:
    """By hand: each round of 2 moves wins − losses by +2, 0 or −2 with chances 1/4, 1/2, 1/4, so a round decides
    with chance 1/2. After three rounds (6 attempts) a case still at 0 cannot reach ±2 with the one attempt left of 7:
    undecided, chance (1/2)³ = 0.125. Attempts 2 + 2·1/2 + 2·1/4 = 3.5; rounds 1 + 1/2 + 1/4 = 1.75; PASS = FAIL =
    (1 − 0.125)/2 = 0.4375."""
    c = characteristics(SequentialRule(), 0.5)
    assert c.undecided == pytest.approx(0.125, abs=1e-12)
    assert c.expected_attempts == pytest.approx(3.5, abs=1e-12)
    assert c.expected_rounds == pytest.approx(1.75, abs=1e-12)
    assert c.passed == pytest.approx(0.4375, abs=1e-12) and c.failed == pytest.approx(0.4375, abs=1e-12)


def test_quorum_walk_by_hand() -> None:
    """N5/Q3 with early stop: at p = 0.1 it passes with P(Bin(5, 0.1) ≥ 3) = 0.00856; at p = 0.5 it stops at 3, 4,
    5 attempts with chances 1/4, 3/8, 3/8: 4.125 sessions. N3/Q2: 2 + 2p(1 − p) sessions."""
    n5q3 = QuorumRule(5, 3)
    assert sv.walk(n5q3, 0.1).passed == pytest.approx(10 * 0.001 * 0.81 + 5 * 0.0001 * 0.9 + 0.00001, abs=1e-12)
    assert sv.walk(n5q3, 0.5).sessions == pytest.approx(4.125, abs=1e-12)
    assert sv.walk(n5q3, 0.0).sessions == 3 and sv.walk(n5q3, 0.0).failed == 1
    for p in (0.1, 0.3, 0.5, 0.8):
        assert sv.walk(QuorumRule(3, 2), p).sessions == pytest.approx(2 + 2 * p * (1 - p), abs=1e-12)


@pytest.mark.parametrize("rule", [SequentialRule(), SequentialRule(alpha=0.05, beta=0.05)])
def test_walk_is_characteristics(rule: SequentialRule) -> None:
    for p in (0.0, 0.1, 0.37, 0.5, 0.9, 1.0):
        c, w = characteristics(rule, p), sv.walk(rule, p)
        assert (w.sessions, w.passed, w.failed, w.undecided, w.rounds) == pytest.approx(
            (c.expected_attempts, c.passed, c.failed, c.undecided, c.expected_rounds), abs=1e-12)
        assert w.passed + w.failed + w.undecided == pytest.approx(1, abs=1e-12)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_exact_figures_match_a_seeded_replay(p: float) -> None:
    """The replay of the executor's starts (the rules' own starts_allowed and decide) agrees with the exact walk
    within Monte Carlo error at every figure, for all four rules."""
    named = sv.rules()
    sims = sv.simulate(7, p, {name: sv.Memo(rule) for name, rule in named.items()}, 4000, salt="test")
    for name, rule in named.items():
        z = sv.z_scores(sv.exact(rule, p), sims[name])
        assert max(abs(v) for v in z.values()) < 4.5, (name, p, z)


def test_replay_counts_the_starts() -> None:
    """One scripted case: W L W W under the default rule: round 1 (W L, d = 0), round 2 (W W, d = 2): PASS after 4
    sessions and 2 rounds; under N5/Q3: 3 (W L W), then 1 more (W): PASS after 4 sessions and 2 rounds."""
    outcomes = [True, False, True, True, False, False, False]
    assert sv.replay(sv.Memo(SequentialRule()), outcomes) == (4, "win", 2)
    assert sv.replay(sv.Memo(QuorumRule(5, 3)), outcomes) == (4, "win", 2)
    assert sv.replay(sv.Memo(SequentialRule()), [True, False] * 4) == (6, "undecided", 3)


@pytest.mark.parametrize("rule", [SequentialRule(), SequentialRule(alpha=0.05, beta=0.05),
                                  SequentialRule(alpha=0.2, beta=0.1, max_repeats=11, round_size=3)])
def test_wald_bounds_hold_looking_after_every_round(rule: SequentialRule) -> None:
    assert characteristics(rule, rule.p0).passed <= rule.alpha / (1 - rule.beta) + 1e-12
    assert characteristics(rule, rule.p1).failed <= rule.beta / (1 - rule.alpha) + 1e-12
    # Below p0 PASS is rarer still, above p1 FAIL.
    assert characteristics(rule, rule.p0 / 2).passed <= characteristics(rule, rule.p0).passed
    assert characteristics(rule, (1 + rule.p1) / 2).failed <= characteristics(rule, rule.p1).failed


def test_naive_rereading_exceeds_its_level() -> None:
    """The exact one-sided test at level 0.1, read once at n = 7, has real level P(Bin(7, 0.25) ≥ 4) = 0.0706; read
    again after every round of 2 it passes a p0 case more often than 0.1."""
    assert sv.binom_tail_ge(7, 4, 0.25) == pytest.approx(0.0706, abs=1e-4)
    assert sv.binom_tail_ge(7, 3, 0.25) > 0.1
    assert sv.walk(sv.NaiveRule(), 0.25).passed > 0.1


def test_boundary_family_holds_n5q3() -> None:
    """The search's family written as wins − losses boundaries gives QuorumRule(5, 3)'s exact figures."""
    rates = [0.0, 0.1, 0.25, 0.6, 0.9]
    s, pa, fa, un = sv.boundary_rule_figures([3, 2, 1], rates)
    for i, p in enumerate(rates):
        e = sv.walk(QuorumRule(5, 3), p)
        assert (s[i], pa[i], fa[i], un[i]) == pytest.approx((e.sessions, e.passed, e.failed, 0.0), abs=1e-12)


def test_short_mode_runs_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "sv.json"
    sv.main(["--short", "--out", str(out)])
    data = json.loads(out.read_text())
    assert out.with_suffix(".txt").read_text().startswith("Sequential verdicts")
    assert [r["p"] for r in data["rows"]] == [i / 20 for i in range(21)] and len(data["rows_01"]) == 101
    assert data["max_abs_z"] < 4.5
    by_grid = {s["grid"]: s for s in data["savings"]}
    assert set(by_grid) == {"0.05", "0.01"} and by_grid["0.05"]["rates_outside"] == 12
    assert by_grid["0.01"]["rates_outside"] == 52
    for s in by_grid.values():
        assert 25 <= s["saving_pct"]["sequential"] <= 26.5
        assert s["wrong_above_n5q3"]["sequential-strict"] == [] and s["wrong_above_n5q3"]["N5/Q3"] == []
    assert 0.1 in by_grid["0.05"]["wrong_above_n5q3"]["sequential"]
    assert 0.25 not in by_grid["0.05"]["wrong_above_n5q3"]["sequential"]
    assert data["bound"]["n5q3_pass_at_0_1"] == pytest.approx(0.00856, abs=1e-9)
    assert math.isclose(data["bound"]["max_saving_pct"]["0.05"], 100 * (1 - 3 / by_grid["0.05"]["sessions_outside"]
                                                                        ["N5/Q3"]))
    (search,) = data["searches"]
    assert search["rules_searched"] == 4 ** 4 * 3 ** 3 and search["n5q3_family_matches_quorum_rule"]
    assert search["best_feasible_saving_pct"] == pytest.approx(0.0, abs=1e-9)
    assert search["best_decisive_saving_pct"] == pytest.approx(0.0, abs=1e-9)
    stops = {(s["rule"], s["looks"]): s for s in data["stopping"]}
    assert stops[("sequential", "after every round of 2")]["within"]
    assert not stops[("naive exact test, level 0.1", "after every round of 2")]["within"]
