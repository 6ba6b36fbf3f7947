"""Which cases a description is improved on, and the train / held-out test split of them.

The skill's own activation cases, split per kind so test has train's mix of "must fire" and "must stay silent".
Deterministic from the uids, seed and holdout (the seed is recorded in improve.json); a kind with two or more cases
has one on each side.

Design notes: docs/design/improve-loop.md.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from runner.core.kinds import traits_of
from runner.corpus.library import Case, Library
from runner.plan.select import neighbour_graph

DEFAULT_HOLDOUT = 0.4  # skill-creator's run_loop default, so results compare


@dataclass(frozen=True)
class Split:
    seed: int
    holdout: float
    train: tuple[str, ...]  # uids, sorted
    test: tuple[str, ...]
    by_kind: dict[str, tuple[int, int]]  # kind -> (train, test) counts


def _improvable(case: Case) -> bool:
    traits = traits_of(case.kind)
    return traits is not None and traits.improvable


def own_cases(library: Library, skill: str) -> list[Case]:
    """The skill's activation cases: from its own eval files, or targeting it from another file."""
    return [c for c in library.cases
            if _improvable(c) and (c.skill == skill or c.target == skill)]


def neighbours(library: Library, skill: str) -> list[str]:
    """The skills the library names as the skill's neighbours (runner.plan.select.neighbour_graph), sorted."""
    return sorted(n for n in neighbour_graph(library).get(skill, set()) if n in library.skills)


def neighbour_cases(library: Library, skill: str) -> list[Case]:
    """The neighbours' own activation cases, and any other case that says the skill must stay silent: the cases a
    new description could steal (the skill firing on a neighbour's prompt)."""
    mine = {c.uid for c in own_cases(library, skill)}
    near = set(neighbours(library, skill))
    return [c for c in library.cases
            if _improvable(c) and c.uid not in mine
            and (c.skill in near or c.target in near or skill in c.should_not_trigger)]


def split_cases(cases: Iterable[Case], seed: int, holdout: float = DEFAULT_HOLDOUT) -> Split:
    """Stratified by kind; see docs/design/improve-loop.md for the rule."""
    if not 0 < holdout < 1:
        raise ValueError(f"holdout must be between 0 and 1 (exclusive), got {holdout}")
    by_kind: dict[str, list[str]] = {}
    for case in cases:
        by_kind.setdefault(case.kind, []).append(case.uid)
    train: list[str] = []
    test: list[str] = []
    counts: dict[str, tuple[int, int]] = {}
    for kind in sorted(by_kind):
        uids = sorted(by_kind[kind])
        # A string seed is hashed by random's version-2 seeding (sha512): stable across processes and versions.
        random.Random(f"{seed}:{kind}").shuffle(uids)
        n_test = held_out_count(len(uids), holdout)
        test += uids[:n_test]
        train += uids[n_test:]
        counts[kind] = (len(uids) - n_test, n_test)
    return Split(seed=seed, holdout=holdout, train=tuple(sorted(train)), test=tuple(sorted(test)), by_kind=counts)


def held_out_count(n: int, holdout: float) -> int:
    """Cases of one kind held out: round(n × holdout), at least one and at most n − 1 when n ≥ 2, none when n < 2."""
    if n < 2:
        return 0
    return min(n - 1, max(1, round(n * holdout)))
