"""What an activation assertion claims: which skills must fire and which must not.

Read by the verdict (runner.execute.grading.check_activation_assertion) and by the plan, which needs to know
which names decide an activation-only case early (runner.corpus.decide).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from runner.corpus import classify
from runner.corpus.library import Case

_NEGATIVE = re.compile(r"(?i)\b(does\s+not|doesn't|must\s+not|should\s+not|never|not)\b")
_SELF = re.compile(r"(?i)\b(this|the)\s+skill\b")


def _named_targets(text: str, case: Case, known: Collection[str]) -> list[str]:
    """Skills an activation assertion names, in order: known names (found exactly as the classifier
    finds them), or 'this skill' / 'the skill' = the target."""
    names = classify.skill_mentions(text, frozenset(known))
    if not names and _SELF.search(text):
        names.append(case.target)
    return names


def activation_claims(text: str, case: Case, known: Collection[str]) -> list[tuple[str, bool]]:
    """(skill, must fire) for each clause of an activation assertion that makes a claim (names as written: the
    verdict turns an alias into its folder name)."""
    claims = classify.activation_claims(text, classify.packaged_rules(), frozenset(known))
    if claims:
        return [(claim.name or case.target, claim.must_fire) for claim in claims]
    # Classed activation by an override, in words no rule reads: the first named skill, negative
    # when a negation comes before it.
    names = _named_targets(text, case, known)
    if not names:
        return []
    before = text.split(names[0])[0] if names[0] in text else text
    return [(names[0], not _NEGATIVE.search(before))]


# The assertions an uplift arm and an output case are graded on: those about the answer (runner.results.uplift).
RUBRIC_CLASSES = ("artifact_shape", "semantic")


def rubric_indexes(case: Case) -> list[int]:
    """The assertions both arms are graded on: those about the answer."""
    return [a.index for a in case.assertions if a.assertion_class in RUBRIC_CLASSES]


def is_output_case(case: Case) -> bool:
    """An output case: not a tier-2 probe (it has arms of its own), with at least one assertion about the answer."""
    return case.kind != "probe" and bool(rubric_indexes(case))
