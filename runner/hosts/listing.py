"""An estimate of the skill listing Claude Code shows the model, from the library alone.

Which skills keep their description under the listing's character budget decides what a trigger eval can measure.
A model of the CLI's own rule (tests/test_listing_calibration.py checks it against captured listings), not a
measurement: the surface audit records that.

Design notes: docs/design/listing-and-surface.md.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, Field

from runner.core.host_traits import DEFAULT_HOST, traits
from runner.corpus.library import Library, Skill
from runner.corpus.settings import ListingSettings

CLAUDE_CODE_MODEL = "Claude Code's rule: host's bundled skills whole, every name charged, then descriptions greedily"
API_MODEL = "the api host's approximation: name order, greedy fit of `- name: description` lines within the budget"


class HostEntry(BaseModel):
    """One of the host's own skills, as the CLI lists it after the library's (measured, not copied)."""
    name: str
    always_full: bool = Field(description="A bundled skill: the CLI keeps its description whatever the budget.")
    full_chars: int = Field(description="Characters of `- name: description`.")
    full_width: int = Field(description="Its display width, what the budget counts.")
    name_chars: int
    name_width: int


class HostListing(BaseModel):
    host: str
    cli_version: str
    measured_on: str
    method: str
    wrapper_chars: int = Field(description="The system-reminder tags and the header around the entry lines.")
    entries: list[HostEntry]


@lru_cache(maxsize=1)
def host_listing() -> HostListing:
    """The host's own entries as measured (runner/data/host_listing.json; read once, immutable): the entries of the
    `claude-code-cli` listing model, the file's `host` (HostTraits.listing_model)."""
    raw = resources.files("runner").joinpath("data", "host_listing.json").read_text(encoding="utf-8")
    return HostListing.model_validate_json(raw)


class ListingEstimate(BaseModel):
    model: str = CLAUDE_CODE_MODEL
    host: str = Field(default="", description="The host version whose own entries are accounted for.")
    budget_chars: int
    max_description_chars: int
    listed: int
    not_listed_manual_only: list[str]
    total_chars_all_descriptions: int = Field(description="Width of the library's entries, every one with its "
                                                          "description.")
    estimated_listing_chars: int = Field(description="Characters of the whole listing (the host's entries and the "
                                                     "wrapper included), as the surface audit measures it.")
    host_entries: list[str] = Field(default=[], description="The host's own skills in the same listing.")
    host_fixed_chars: int = Field(default=0, description="Width of the host's bundled entries, always kept whole "
                                                         "and charged before any library description.")
    left_for_descriptions: int = Field(default=0, description="Budget left for descriptions once every entry's name "
                                                              "and the host's bundled entries are charged "
                                                              "(negative: not even the names fit).")
    host_with_description: list[str] = []
    host_name_only: list[str] = []
    with_description: list[str]
    name_only: list[str]
    unparsed_frontmatter: list[str] = Field(
        default=[], description="Listed skills whose frontmatter the runner's strict parser rejects: the estimate "
                                "takes their description from the body, the host may read one from the broken "
                                "frontmatter, so the listing's size (and, near the budget, who keeps a "
                                "description) can differ by up to those descriptions' length.")


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
    """The api host's rule, in name order: a skill keeps its description while the total still fits."""
    lines: list[str] = []
    with_description: list[str] = []
    name_only: list[str] = []
    spent = full_total = 0
    ordered = sorted(skills, key=lambda s: s.name)
    for skill in ordered:
        shown = listed_name(skill, ordered)  # `folder (name)`, as Claude Code lists it
        full = entry_line(shown, skill.description, max_description_chars)
        full_total += len(full) + 1
        if skill.description and spent + len(full) + 1 <= budget:
            line = full
            with_description.append(skill.name)
        else:
            line = entry_line(shown, None, max_description_chars)
            name_only.append(skill.name)
        spent += len(line) + 1
        lines.append(line)
    return Fitted(lines, with_description, name_only, spent, full_total)


# ---- Claude Code's rule -----------------------------------------------------------------------

def display_width(text: str) -> int:
    """Terminal columns, as Bun.stringWidth counts them (what the CLI's budget measures)."""
    width = 0
    for char in text:
        if unicodedata.category(char) in ("Mn", "Me", "Cf", "Cc") or "\u1160" <= char <= "\u11ff":
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _cut(text: str, limit: int) -> str:
    """JavaScript's `text.slice(0, limit - 1) + "…"` past `limit` UTF-16 units."""
    if _utf16_len(text) <= limit:
        return text
    kept = text.encode("utf-16-le")[: 2 * (limit - 1)].decode("utf-16-le", errors="ignore")
    return kept + "…"


_CONTROL_RUN = re.compile(r"[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]+")


def _sanitized(text: str) -> str:
    # The CLI turns each run of control or invisible characters into one space and escapes angle
    # brackets, so `<b>` costs eight characters of the budget, not three.
    return _CONTROL_RUN.sub(" ", text).replace("<", "&lt;").replace(">", "&gt;")


def _as_text(value: Any) -> str | None:
    """A frontmatter value as the CLI's String(value): strings, numbers and booleans only."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return value if isinstance(value, str) else None


_HEADING = re.compile(r"^#+\s+(\S.*)$")


def _body_summary(body: str) -> str:
    """The CLI's description when the frontmatter has none: the first non-empty body line."""
    for line in body.split("\n"):
        stripped = line.strip()
        if stripped:
            match = _HEADING.match(stripped)
            summary = match.group(1) if match else stripped
            return summary[:97] + "..." if len(summary) > 100 else summary
    return "Skill"


def listing_description(skill: Skill, max_description_chars: int) -> str:
    """The description the CLI shows for a skill, when it keeps it."""
    raw = skill.fields.get("description")
    text = _as_text(raw) if not isinstance(raw, str) else (raw.strip() or None)
    description = _sanitized(text if text is not None else _body_summary(skill.body))
    when = _as_text(skill.fields.get("when_to_use"))
    if when:
        description = f"{description} - {_sanitized(when)}"
    return _cut(description, max_description_chars)


_SHOWN_NAME = re.compile(r"^[\w:.-]+$")
_MAX_NAME = 256


def _facing_name(skill: Skill) -> str:
    shown = _as_text(skill.fields.get("name"))
    return shown if shown and len(shown) <= _MAX_NAME else skill.name


def listed_name(skill: Skill, ordered: list[Skill]) -> str:
    """`folder (name)` when the frontmatter names the skill otherwise and that name is unambiguous."""
    facing = _facing_name(skill)
    if facing == skill.name or skill.name.endswith(f":{facing}") or not _SHOWN_NAME.match(facing):
        return skill.name
    first = next((s for s in ordered if facing in (s.name, _facing_name(s))), None)
    return f"{skill.name} ({facing})" if first is skill else skill.name


# ICU's root collation puts punctuation before digits before letters, in this order; case is a
# tie-break (lower first) after the whole name compared equal without it.
_PUNCTUATION_ORDER = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"


def collation_key(name: str) -> tuple[tuple[tuple[int, str], ...], tuple[int, ...]]:
    primary: list[tuple[int, str]] = []
    for char in name:
        base = unicodedata.normalize("NFKD", char)[:1] or char
        if base.isspace():
            primary.append((0, base))
        elif base in _PUNCTUATION_ORDER:
            primary.append((1, f"{_PUNCTUATION_ORDER.index(base):02d}"))
        elif base.isdigit():
            primary.append((3, base))
        elif base.isalpha():
            primary.append((4, base.casefold()))
        else:
            primary.append((2, base))
    return tuple(primary), tuple(int(char.isupper()) for char in name)


def _manual_only(skill: Skill) -> bool:
    # The CLI reads the flag leniently ("true", "yes", 1 count); the validator warns when it is
    # not a boolean.
    value = skill.fields.get("disable-model-invocation")
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return value is True or (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 1)


@dataclass(frozen=True)
class Line:
    name: str
    full: str
    name_only: str
    full_width: int
    name_width: int
    fixed: bool
    library: bool


def library_lines(skills: list[Skill], max_description_chars: int) -> list[Line]:
    ordered = sorted(skills, key=lambda s: collation_key(s.name))
    lines = []
    for skill in ordered:
        head = f"- {listed_name(skill, ordered)}"
        full = f"{head}: {listing_description(skill, max_description_chars)}"
        lines.append(Line(skill.name, full, head, display_width(full), display_width(head), False, True))
    return lines


def host_lines(host: HostListing) -> list[Line]:
    # Only the counts of the host's entries are stored; the text is a placeholder of that length.
    return [Line(e.name, "x" * e.full_chars, "x" * e.name_chars, e.full_width, e.name_width, e.always_full, False)
            for e in host.entries]


@dataclass(frozen=True)
class Priority:
    kept: list[bool]
    left: int
    fixed_width: int


def priority_fit(lines: list[Line], budget: int) -> Priority:
    """Which entries keep their description under Claude Code's rule (see docs/design/listing-and-surface.md)."""
    separators = max(0, len(lines) - 1)
    fixed_width = sum(line.full_width for line in lines if line.fixed)
    if sum(line.full_width for line in lines) + separators <= budget:
        return Priority([True] * len(lines), budget - sum(line.full_width for line in lines) - separators, fixed_width)
    left = budget - separators - sum(line.full_width if line.fixed else line.name_width for line in lines)
    start = left
    kept = []
    for line in lines:
        extra = line.full_width - line.name_width
        keep = line.fixed or extra <= left
        if keep and not line.fixed:
            left -= extra
        kept.append(keep)
    return Priority(kept, start, fixed_width)


def listed_skills(library: Library) -> list[Skill]:
    """The skills Claude Code lists: a folder with SKILL.md that the model may invoke."""
    return [s for s in library.skills.values() if "SKILL.md" in s.files and not _manual_only(s)]


def estimate(library: Library, settings: ListingSettings, host: str = DEFAULT_HOST) -> ListingEstimate:
    """The listing `host` (a registered host's name) would show: its listing model (HostTraits.listing_model) is
    the rule, Claude Code's (above) or the name-order fit of the api host's approximation."""
    budget, cap = settings.effective_budget, settings.max_description_chars
    manual_only = sorted(s.name for s in library.skills.values() if _manual_only(s))
    if traits(host).listing_model == "name-order-fit":
        listed = [s for s in library.skills.values() if not s.manual_only]
        fitted = fit(listed, budget, cap)
        return ListingEstimate(
            model=API_MODEL, budget_chars=budget, max_description_chars=cap, listed=len(listed),
            not_listed_manual_only=manual_only, total_chars_all_descriptions=fitted.chars_all_descriptions,
            estimated_listing_chars=fitted.chars, with_description=fitted.with_description,
            name_only=fitted.name_only)
    measured = host_listing()
    mine = library_lines(listed_skills(library), cap)
    theirs = host_lines(measured)
    decided = priority_fit(mine + theirs, budget)
    shown = [line.full if keep else line.name_only for line, keep in zip(mine + theirs, decided.kept)]
    mine_kept, theirs_kept = decided.kept[: len(mine)], decided.kept[len(mine):]
    return ListingEstimate(
        host=f"{measured.host} {measured.cli_version} (its own entries measured {measured.measured_on})",
        budget_chars=budget, max_description_chars=cap, listed=len(mine), not_listed_manual_only=manual_only,
        total_chars_all_descriptions=sum(line.full_width + 1 for line in mine),
        estimated_listing_chars=measured.wrapper_chars + sum(len(text) for text in shown) + max(0, len(shown) - 1),
        host_entries=[line.name for line in theirs], host_fixed_chars=decided.fixed_width,
        left_for_descriptions=decided.left,
        host_with_description=[line.name for line, keep in zip(theirs, theirs_kept) if keep],
        host_name_only=[line.name for line, keep in zip(theirs, theirs_kept) if not keep],
        with_description=[line.name for line, keep in zip(mine, mine_kept) if keep],
        name_only=[line.name for line, keep in zip(mine, mine_kept) if not keep],
        unparsed_frontmatter=sorted(s.name for s in listed_skills(library) if not s.frontmatter_ok),
    )
