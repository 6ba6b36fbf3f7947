"""When an attempt's outcome can no longer change: the sets of names whose activation decides it.

`decide_when(case, known)` gives the sets (PlannedCase.decide_when, handed to a host as SessionSpec.decide_when);
once every name of one set fired, the outcome is certain, because activations only add to what fired. Only
activation-only cases get sets; every other case runs to its end.

Design notes: docs/design/first-turn-and-early-end.md.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from runner.core.kinds import expects, traits_of
from runner.corpus.claims import activation_claims
from runner.corpus.library import ANY_SKILL, Case, is_subagent

READS_NOTHING_ELSE = ("activation", "unjudgeable")


def activation_only(case: Case) -> bool:
    """True when no verdict of the case reads more than which skills fired. A routing sweep's copy of a case
    (Case.activation_part_only) measures only its activation part, so a refusal's judged part is not in it: what
    decides its activation part early decides all it measures."""
    traits = traits_of(case.kind)
    return traits is not None and (traits.activation_only or case.activation_part_only) and all(
        a.assertion_class in READS_NOTHING_ELSE for a in case.assertions)


def decide_when(case: Case, known: Collection[str]) -> list[list[str]]:
    """The sets of names whose activation decides the case's attempt; [] when none does (run to the end)."""
    if not activation_only(case):
        return []
    canonical = known if isinstance(known, Mapping) else {}
    claimed: list[str] = []
    for assertion in case.assertions:
        if assertion.assertion_class == "activation":
            for name, _ in activation_claims(assertion.text, case, known):
                name = canonical.get(name, name)
                if name not in claimed:
                    claimed.append(name)
    if expects(case.kind) == "routing-holds":
        bases = routing_sets(case, canonical or {name: name for name in known})
    elif expects(case.kind) == "target-fires-neighbours-silent":
        bases = [[case.target, *case.should_not_trigger]]
    elif case.target == ANY_SKILL:
        bases = [[name] for name in sorted(set(canonical.values() if canonical else known))
                 if not is_subagent(name)]
    else:
        bases = [[case.target]]
    sets = []
    for base in bases:
        names = list(dict.fromkeys([*base, *claimed]))
        if names not in sets:
            sets.append(names)
    return sets


def routing_sets(case: Case, canonical: Mapping[str, str]) -> list[list[str]]:
    """A routing case's deciding sets, conservatively: a loss is certain once one skill fired that must not (or, without
    `allow_extra` or in `exact` order, one library skill outside the must set); a pass is certain once every must skill
    fired only when nothing may still break it (no must-not skills, no `max_skills`, extras allowed, and an order that
    is fixed once they all fired: any or in_order — `exact` could still see an extra). `max_skills` alone never ends a
    session early (the N+1 skills that would decide it are too many sets to list), nor does an order broken by two
    must skills (the sets are unordered): those sessions run to their end."""
    spec = case.routing
    if spec is None:
        return []
    library = sorted({name for name in canonical.values() if not is_subagent(name)})
    losses = list(spec.must_not_fire)
    if not spec.allow_extra or spec.order == "exact":
        losses += [name for name in library if name not in spec.must_fire and name not in losses]
    bases = [[name] for name in losses]
    if spec.must_fire and not spec.must_not_fire and spec.max_skills is None and spec.allow_extra \
            and spec.order != "exact":
        bases.append(list(spec.must_fire))
    return bases


# Prompts the CLI does not send as written (measured on CLI 2.1.332 against the fake Messages API).
MENTION = re.compile(r"(^|\s)@\S")
ULTRATHINK = re.compile(r"\bultrathink\b", re.IGNORECASE)


def first_turn_ineligible(decide_when: list[list[str]], exclude_skills: list[str], case_files: list[str],
                          prompt: str) -> str | None:
    """Why the first-turn host (runner.hosts.first_turn) runs an attempt on Claude Code from the start, or
    None: it sends Claude Code's captured first request with only the prompt put in, so the attempt must be
    activation-only, its session the captured one, its prompt sent as written, and its first reply able to decide
    it — a set of one name (a discrimination case with neighbours is certain only once they all fired, which a first
    reply that calls the target never shows: every passing attempt would be handed off, paying a first turn more)."""
    if not decide_when:
        return "not activation-only: the outcome depends on more than the activations"
    if not any(len(names) == 1 for names in decide_when):
        return ("no first reply can settle it: the outcome is certain only once several skills fired (a "
                "discrimination case's neighbours)")
    if exclude_skills:
        return "skills are left out of the session (a control arm): its listing is not the captured one"
    if case_files:
        return "the case copies files into the session folder"
    if prompt.startswith("/"):
        return "a slash command: the CLI expands it before its first request"
    if not prompt.strip():
        return "an empty prompt: the CLI sends its own placeholder"
    if MENTION.search(prompt):
        return "an @ mention: the CLI attaches the file it names"
    if ULTRATHINK.search(prompt):
        return "the keyword ultrathink: the CLI adds a reminder for it"
    return None
