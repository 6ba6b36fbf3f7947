"""The routing matrix's arithmetic (runner.results.routing), fast: rates and intervals at 0 and at n, the F1 bound, the
claims per kind, the tally of attempts and the merge of shards. The end-to-end run is tests/test_routing_matrix.py."""

from __future__ import annotations

import math

from runner.core.outcomes import AttemptOutcome
from runner.core.quorum import wilson_interval
from runner.results import routing
from runner.results.routing import NONE, CaseAttempts, Claim


def outcome(*fired: str, activation: str = "PASS", instead: tuple[str, ...] | None = None) -> AttemptOutcome:
    return AttemptOutcome(state=activation, activation=activation, fired=list(fired), target_fired=None,  # type: ignore[arg-type]
                          fired_instead=list(instead if instead is not None else fired))


def test_rates_at_zero_and_at_n() -> None:
    none = routing.rate(0, 10)
    assert none.value == 0.0 and none.interval is not None and none.interval[0] == 0.0 and 0.27 < none.interval[1] < 0.31
    every = routing.rate(10, 10)
    assert every.value == 1.0 and every.interval is not None and every.interval[1] == 1.0 and 0.69 < every.interval[0] < 0.73
    nothing = routing.rate(0, 0)
    assert nothing.value is None and nothing.interval is None


def test_intervals_are_rounded_outwards() -> None:
    low, high = wilson_interval(3, 7) or (0.0, 0.0)
    shown = routing.rate(3, 7).interval
    assert shown is not None and shown[0] <= low and shown[1] >= high and shown[1] - high < 1e-4


def test_f1_is_the_dice_form_and_its_interval_the_corners() -> None:
    f1 = routing.f1_rate(tp=9, fp=6, fn=0)
    assert f1.value == round(18 / 24, 4) and (f1.successes, f1.trials) == (18, 24)
    p = wilson_interval(9, 15, routing.Z_F1_CORNERS)
    r = wilson_interval(9, 9, routing.Z_F1_CORNERS)
    assert p is not None and r is not None
    low, high = f1.interval or (0.0, 0.0)
    assert math.isclose(low, routing.harmonic(p[0], r[0]), abs_tol=1e-4)
    assert math.isclose(high, routing.harmonic(p[1], r[1]), abs_tol=1e-4)
    assert low <= (f1.value or 0) <= high
    # Wider than the 95% corners: each side was taken at 97.5%.
    p95, r95 = wilson_interval(9, 15), wilson_interval(9, 9)
    assert p95 is not None and r95 is not None and low < routing.harmonic(p95[0], r95[0])


def test_f1_of_a_skill_that_never_fires_is_zero_with_an_upper_bound() -> None:
    f1 = routing.f1_rate(tp=0, fp=0, fn=6)
    assert f1.value == 0.0 and f1.interval is not None and f1.interval[0] == 0.0
    r = wilson_interval(0, 6, routing.Z_F1_CORNERS)
    assert r is not None and math.isclose(f1.interval[1], routing.harmonic(1.0, r[1]), abs_tol=1e-4)
    assert routing.f1_rate(0, 0, 0).value is None and routing.f1_rate(0, 0, 0).interval is None
    assert routing.f1_rate(4, 0, 0).value == 1.0 and (routing.f1_rate(4, 0, 0).interval or (0, 0))[1] == 1.0


def case(uid: str, claim: Claim, *outcomes: AttemptOutcome, planned: int = 3, state: str = "PASS",
         reason: str | None = None, quarantined: bool = False) -> CaseAttempts:
    return CaseAttempts(uid=uid, claim=claim, state=state, reason=reason, quarantined=quarantined, planned=planned,
                        outcomes=tuple(outcomes))


def test_tally_rows_columns_scope_and_exclusions() -> None:
    b = Claim(expects=("b",))
    no_c = Claim(expects=(), scope=frozenset({"c"}))
    nobody = Claim(expects=(), library_only=True)
    found = routing.build([
        case("b/1", b, outcome("a"), outcome("a", "b"), outcome("b")),
        case("c/no", no_c, outcome("d"), outcome("c"), outcome(activation="ERROR"), state="FAIL"),
        case("lib/none", nobody, outcome("host-skill", instead=()), outcome("a", instead=("a",)), planned=3),
        case("q/1", b, outcome("a"), quarantined=True, state="PASS", planned=1),
        case("u/1", b, planned=3, state="UNRUN", reason="manual-only-target"),
    ])
    assert found.skills == ["a", "b", "c", NONE]
    assert found.rows == {"b": 3, NONE: 4}
    assert found.matrix == {"b": {"a": 2, "b": 2}, NONE: {"a": 1, "c": 1, NONE: 2}}
    assert found.first_fired == {"b": {"a": 2, "b": 1}, NONE: {"a": 1, "c": 1, NONE: 2}}
    assert (found.per_skill["a"].tp, found.per_skill["a"].fp, found.per_skill["a"].fn) == (0, 3, 0)
    assert (found.per_skill["b"].tp, found.per_skill["b"].fp, found.per_skill["b"].fn) == (2, 0, 1)
    assert (found.per_skill["c"].tp, found.per_skill["c"].fp, found.per_skill["c"].fn) == (0, 1, 0)
    assert [(c.expected, c.fired, c.attempts, c.of, c.first, c.cases) for c in found.confusions] == [
        ("b", "a", 2, 3, 2, ["b/1"]), (NONE, "a", 1, 4, 1, ["lib/none"]), (NONE, "c", 1, 4, 1, ["c/no"])]
    assert found.attempts == 7
    assert found.excluded == {"ERROR": 1, "QUARANTINED": 1, "UNRUN": 3 + 1}
    assert found.unrun_by_reason == {"manual-only-target": 3, "decided": 1}


def test_merging_shards_adds_every_count() -> None:
    b = Claim(expects=("b",))
    one = routing.build([case("b/1", b, outcome("a"), outcome("a")), case("b/2", b, state="UNRUN", reason="other-shard")])
    two = routing.build([case("b/1", b, state="UNRUN", reason="other-shard"), case("b/2", b, outcome("a"), outcome("b"))])
    whole = routing.build([case("b/1", b, outcome("a"), outcome("a")), case("b/2", b, outcome("a"), outcome("b"))])
    merged = routing.merge([one, two], {})
    assert merged == whole
    assert merged.confusions[0].cases == ["b/1", "b/2"] and merged.excluded["UNRUN"] == 2


def test_moved_cells_read_as_sentences() -> None:
    from runner.report.history import RoutingMove, move_text
    assert move_text(RoutingMove(expected="b", fired="a", before=0, before_of=9, after=3, after_of=9)) == \
        "a now takes 3 of b's 9 attempts, was 0 of 9"
    assert move_text(RoutingMove(expected=NONE, fired="c", before=0, before_of=0, after=2, after_of=4)) == \
        "c now takes 2 of the 4 attempts of prompts that expect no skill, not measured then"
    assert move_text(RoutingMove(expected="e", fired=NONE, before=1, before_of=3, after=3, after_of=3)) == \
        "nothing fires on 3 of e's 3 attempts, was 1 of 3"


def test_a_claim_expecting_two_skills_plugs_in() -> None:
    """What a routing spec with several must-fire skills becomes: one attempt in each expected row, counted once."""
    both = Claim(expects=("a", "b"))
    found = routing.build([case("r/1", both, outcome("a", "c"), planned=1)])
    assert found.attempts == 1 and found.rows == {"a": 1, "b": 1}
    assert found.matrix == {"a": {"a": 1, "c": 1}, "b": {"a": 1, "c": 1}}
    assert {n: (s.tp, s.fp, s.fn) for n, s in found.per_skill.items()} == {"a": (1, 0, 0), "b": (0, 0, 1),
                                                                           "c": (0, 1, 0)}
    assert [(c.expected, c.fired) for c in found.confusions] == [("a", "c"), ("b", "c")]


def test_a_routing_spec_claims_its_must_rows_and_speaks_of_what_it_bounds() -> None:
    """Routing assertions (Case.routing) plug in at claim_of: the must skills are the rows; a spec that allows
    extras speaks only of the skills it names, one that bounds them (no extras, exact, at most N) of every skill."""
    from runner.corpus.library import RoutingSpec
    from runner.results.routing import routing_claim

    loose = routing_claim(RoutingSpec(must_fire=["a"], must_not_fire=["b"]))
    assert loose == Claim(expects=("a",), scope=frozenset({"a", "b"}))
    found = routing.build([case("r/1", loose, outcome("a", "c"), planned=1)])
    assert found.matrix == {"a": {"a": 1}}  # c is allowed beside a: no confusion
    for bounded in (RoutingSpec(must_fire=["a"], allow_extra=False), RoutingSpec(must_fire=["a"], order="exact"),
                    RoutingSpec(must_fire=["a"], max_skills=1)):
        claim = routing_claim(bounded)
        assert claim == Claim(expects=("a",))
        assert [(c.expected, c.fired) for c in routing.build([case("r/1", claim, outcome("a", "c"),
                                                                      planned=1)]).confusions] == [("a", "c")]
    assert routing_claim(RoutingSpec(must_not_fire=["b"])) == Claim(expects=(), scope=frozenset({"b"}))
    assert routing_claim(RoutingSpec(must_not_fire=["b"], allow_extra=False), library_case=True) == \
        Claim(expects=(), library_only=True)
