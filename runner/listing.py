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

from dataclasses import dataclass

from runner.corpus import Library, Skill
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


@dataclass(frozen=True)
class Fitted:
    lines: list[str]
    with_description: list[str]
    name_only: list[str]
    chars: int
    chars_all_descriptions: int


def fit(skills: list[Skill], budget: int, max_description_chars: int) -> Fitted:
    """The greedy rule, in name order: a skill keeps its description while the total still fits."""
    lines: list[str] = []
    with_description: list[str] = []
    name_only: list[str] = []
    spent = full_total = 0
    for skill in sorted(skills, key=lambda s: s.name):
        full = entry_line(skill.name, skill.description, max_description_chars)
        full_total += len(full) + 1
        if skill.description and spent + len(full) + 1 <= budget:
            line = full
            with_description.append(skill.name)
        else:
            line = entry_line(skill.name, None, max_description_chars)
            name_only.append(skill.name)
        spent += len(line) + 1
        lines.append(line)
    return Fitted(lines, with_description, name_only, spent, full_total)


def estimate(library: Library, settings: ListingSettings) -> ListingEstimate:
    # A skill whose frontmatter does not parse loses all its fields in Claude Code: name only.
    listed = [s for s in library.skills.values() if not s.manual_only]
    fitted = fit(listed, settings.effective_budget, settings.max_description_chars)
    return ListingEstimate(
        budget_chars=settings.effective_budget, max_description_chars=settings.max_description_chars,
        listed=len(listed), not_listed_manual_only=sorted(s.name for s in library.skills.values() if s.manual_only),
        total_chars_all_descriptions=fitted.chars_all_descriptions, estimated_listing_chars=fitted.chars,
        with_description=fitted.with_description, name_only=fitted.name_only,
    )
