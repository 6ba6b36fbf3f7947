"""A `type` / `kind` field of an eval item: a case kind, a typo of one, or a category tag.

A kind spelt any way is that kind; a near miss is an unknown kind (an error: a guess could run the case wrongly);
anything else is a category tag, kept as the case's label.

Design notes: docs/design/library-layouts.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Words that mark a value as meant for a case kind even inside a longer value.
KIND_WORDS = ("trigger", "negative", "positive")
# A value longer than this is prose, not a kind or a typo of one: a tag, kept to this length (it is shown in every
# report), and no distance is computed for it.
MAX_KIND_CHARS = 64


@dataclass(frozen=True)
class TypeReading:
    kind: str | None = None  # "trigger" or "no_trigger" when the value names a kind the runner reads
    near: str | None = None  # the known kind a misspelt value is closest to
    label: str | None = None  # a category tag


def normalise(value: str) -> str:
    """`Should-Not Trigger`, `shouldNotTrigger` and `should_not_trigger` are one spelling."""
    split = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", value.strip())
    return re.sub(r"[^a-z0-9]+", "_", split.lower()).strip("_")


def distance(a: str, b: str) -> int:
    """Edit distance counting a swap of two neighbours as one edit (the common typo `postiive`). Three rows are
    kept, never the whole table: a value is the file's, of any length."""
    before: list[int] = []
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        row = [i] + [0] * len(b)
        for j, char_b in enumerate(b, start=1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            if i > 1 and j > 1 and char_a == b[j - 2] and a[i - 2] == char_b:
                row[j] = min(row[j], before[j - 2] + 1)
        before, previous = previous, row
    return previous[-1]


def allowed_edits(word: str) -> int:
    """Short kind names (`edge`, `core`, `anti`) are real words of their own: only an exact match counts."""
    return 0 if len(word) < 6 else 1 if len(word) < 8 else 2


def _nearest(value: str, known: list[str]) -> str | None:
    # Lengths further apart than the edits allowed cannot match: a long value costs nothing.
    near = [word for word in known if abs(len(value) - len(word)) <= allowed_edits(word)]
    scored = sorted((distance(value, word), word) for word in near)
    return next((word for score, word in scored if score <= allowed_edits(word)), None)


def read_type(value: str, trigger: frozenset[str], negative: frozenset[str]) -> TypeReading:
    """What a `type` / `kind` value says (see docs/design/library-layouts.md for the rule)."""
    if len(value) > MAX_KIND_CHARS:
        return TypeReading(label=value.strip()[:MAX_KIND_CHARS] + "…")
    spelt = normalise(value)
    kinds = {normalise(word): "trigger" for word in trigger} | {normalise(word): "no_trigger" for word in negative}
    if spelt in kinds:
        return TypeReading(kind=kinds[spelt])
    known = sorted(kinds)
    near = _nearest(spelt, known)
    if near is None:
        for word in dict.fromkeys(spelt.split("_")):
            near = _nearest(word, list(KIND_WORDS))
            if near is not None:
                break
    if near is not None:
        return TypeReading(near=near)
    return TypeReading(label=value.strip() or None)
