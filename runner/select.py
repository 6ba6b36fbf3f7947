"""Which cases a run executes, and why each one was chosen.

Neighbours are the skills a library names next to each other, in both directions:
`expected_skill` and `should_not_trigger` of every discrimination case, and `overlaps_with`.
Selecting a skill with its neighbours selects the cases owned by all of them.
"""

from __future__ import annotations

import fnmatch
from collections import defaultdict

from runner.corpus import Case, Library, is_subagent


def neighbour_graph(library: Library) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)

    def link(a: str, b: str) -> None:
        if a != b and not is_subagent(a) and not is_subagent(b):
            graph[a].add(b)
            graph[b].add(a)

    for skill in library.skills.values():
        for name in skill.overlaps_with:
            link(skill.name, name)
    for case in library.cases:
        if case.source != "trigger":
            continue
        for name in [case.target, *case.should_not_trigger]:
            link(case.skill, name)
        for name in case.should_not_trigger:
            link(case.target, name)
    return graph


def select(library: Library, skills: list[str], case_patterns: list[str], with_neighbours: bool
           ) -> tuple[list[tuple[Case, str]], list[str]]:
    """(selected cases with the reason, names asked for that are not skills of the library)."""
    unknown = [name for name in skills if name not in library.skills]
    chosen: dict[str, str] = {}
    if skills:
        for name in skills:
            if name in library.skills:
                chosen.setdefault(name, "named")
        if with_neighbours:
            graph = neighbour_graph(library)
            for name in list(chosen):
                for neighbour in sorted(graph.get(name, ())):
                    if neighbour in library.skills:
                        chosen.setdefault(neighbour, f"neighbour of {name}")
    out = []
    for case in library.cases:
        if skills and case.skill not in chosen:
            continue
        if case_patterns and not any(fnmatch.fnmatchcase(case.uid, p) for p in case_patterns):
            continue
        why = f"skill {case.skill} ({chosen[case.skill]})" if skills else "full tier: every case"
        if case_patterns:
            why += f"; uid matches {' or '.join(case_patterns)}"
        out.append((case, why))
    return out, unknown
