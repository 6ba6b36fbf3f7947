"""What an eval item's words say about its kind when no field of it does.

An item with no kind-naming field is a trigger case of its skill, unless its own words make it a negative control
(`no_trigger`) or a deferral to another library skill (`discrimination`). These are fallbacks only: a field or any
earlier rule is never overridden.

Design notes: docs/design/library-layouts.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.corpus import classify, dialects

# The rules of runner.corpus.dialects that decided only because nothing was written: what this module may refine.
DEFAULT_RULES = ("format:skill-creator", "format:scenario")
# Words of an item that may say what it expects, beside its assertions.
TEXT_KEYS = ("name", "eval_name", "description", "expected_output", "expected")
# A negation just before the phrase ("does not defer to", "never hands off to"); one word may sit between.
_NEGATED = re.compile(r"(?i)(\b(not|never|without)|n't)\s+(\w+\s+)?$")


@dataclass(frozen=True)
class Deferral:
    to: str
    rule: str


def item_texts(raw: dict[str, Any], item: dialects.Item) -> list[str]:
    """The item's own words about what should happen, in the order written."""
    texts = [raw[key] for key in TEXT_KEYS if isinstance(raw.get(key), str) and raw[key].strip()]
    return texts + [text for text, _ in item.assertions]


def deferral(texts: list[str], own: str, rules: classify.Rules, names: Mapping[str, str]) -> Deferral | None:
    """The first other skill of the library the texts hand the request to, unless the phrase is negated."""
    known = frozenset(names)
    for text in texts:
        for _, clause in classify.clauses(text):
            for rule in classify.deferral_rules(rules, known):
                match = rule.search(clause)
                if match is None or _NEGATED.search(clause[:match.start()]):
                    continue
                named = [names.get(m.name, m.name) for m in classify.mentions(clause[match.start():match.end()], known)]
                other = next((name for name in named if name != own), None)
                if other is not None:
                    return Deferral(other, rule.id)
    return None


def refine(item: dialects.Item, raw: dict[str, Any], owner: str, rules: classify.Rules, names: Mapping[str, str]) -> None:
    """Set the item's kind from its words when only a default decided it (see docs/design/library-layouts.md)."""
    if item.kind_rule not in DEFAULT_RULES:
        return
    own = item.target or owner
    texts = item_texts(raw, item)
    claims = [claim for text in texts for claim in classify.activation_claims(text, rules, frozenset(names))]
    about_own = [claim for claim in claims if names.get(claim.name or own, claim.name or own) == own]
    if any(claim.must_fire for claim in about_own):
        return  # the author says its own skill fires: a trigger case, as the default has it
    if about_own:
        item.kind, item.kind_rule = "no_trigger", f"negative-control:{about_own[0].rule}"
        return
    found = deferral(texts, own, rules, names)
    if found is not None:
        item.kind, item.kind_rule = "discrimination", f"deferral:{found.rule}"
        item.target, item.should_not_trigger = found.to, [own, *item.should_not_trigger]


# ---- which rule decided ------------------------------------------------------------------------

# A kind_rule starting so says what a field of the file (or the settings' override) wrote: the author's own words.
EXPLICIT_RULES = ("type:", "field:", "source:", "format:trigger-set", "format:routing", "override")
# Rules that decided no kind: the case cannot run, and validate says why.
UNREADABLE_RULES = ("schema-invalid", "unknown-case-type", "type-triggers-conflict", "routing-several-expected")


def by_heuristic(kind_rule: str) -> bool:
    """Whether a rule of the runner, not a field of the file, decided the case's kind (an id prefix, the words of its
    expectations, a format's default): the census and the plan list such cases for the author to check."""
    return not kind_rule.startswith(EXPLICIT_RULES + UNREADABLE_RULES)
