"""An estimate of the skill listing Claude Code shows the model, from the library alone.

Claude Code lists skills in a system message, one line each, `- name: description`, and keeps a
description only while the listing fits a character budget; past it a skill is listed by name
only (host-surface.md). Which skills keep their description decides what a trigger eval can
measure, so the census estimates it before anything is spent. This is a model of the host, not
a measurement: the surface audit (`skill-evals surface`) records what a real session received.

The model: manual-only skills are not listed; the others are taken in name order, each
description cut to `max_description_chars`, and a skill keeps its description while the running
total of full entries stays within `budget_chars`; every later skill costs its name line only.
"""

from __future__ import annotations

from pydantic import BaseModel

from runner.corpus import Library
from runner.settings import ListingSettings


class ListingEntry(BaseModel):
    name: str
    chars_full: int
    with_description: bool


class ListingEstimate(BaseModel):
    model: str = "estimate: name order, greedy fit of `- name: description` lines within the budget"
    budget_chars: int
    max_description_chars: int
    listed: int
    not_listed_manual_only: list[str]
    total_chars_all_descriptions: int
    estimated_listing_chars: int
    with_description: list[str]
    name_only: list[str]


def entry_line(name: str, description: str | None, max_description_chars: int) -> str:
    if not description:
        return f"- {name}"
    return f"- {name}: {description[:max_description_chars]}"


def estimate(library: Library, settings: ListingSettings) -> ListingEstimate:
    # A skill whose frontmatter does not parse loses all its fields in Claude Code: name only.
    listed = [s for s in library.skills.values() if not s.manual_only]
    spent = 0
    full_total = 0
    with_description: list[str] = []
    name_only: list[str] = []
    for skill in sorted(listed, key=lambda s: s.name):
        full = len(entry_line(skill.name, skill.description, settings.max_description_chars)) + 1
        full_total += full
        if spent + full <= settings.effective_budget:
            spent += full
            with_description.append(skill.name)
        else:
            spent += len(entry_line(skill.name, None, settings.max_description_chars)) + 1
            name_only.append(skill.name)
    return ListingEstimate(
        budget_chars=settings.effective_budget, max_description_chars=settings.max_description_chars,
        listed=len(listed), not_listed_manual_only=sorted(s.name for s in library.skills.values() if s.manual_only),
        total_chars_all_descriptions=full_total, estimated_listing_chars=spent,
        with_description=with_description, name_only=name_only,
    )
