"""Which skills an earlier run saw confused with each other: the ranked confusions of its routing matrix, read from
its results.json, and the skills a pull request's description change puts at risk through them (the pr tier,
runner.plan.select).

The earlier run's results.json is data another version of the runner may have written: it is read as JSON, not as
this version's Results model, and only `routing.confusions` is used. An entry that does not have the expected shape is
skipped and counted, never guessed at; a file with no routing matrix follows nothing and says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.core.errors import UsageError
from runner.corpus import bounded

RESULTS = "results.json"
# The matrix's row and column for "no skill" (a case that expects none; an attempt where none fired).
NO_SKILL = "none"


class ConfusionsError(UsageError):
    """The earlier run named for its routing matrix cannot be read (a usage error, exit 2)."""


@dataclass(frozen=True)
class Confusion:
    """One ranked confusion: prompts that expect `expected` fired `fired` in `attempts` of their `of` attempts."""

    expected: str  # a skill, or NO_SKILL for prompts that expect no skill
    fired: str
    attempts: int
    of: int
    cases: tuple[str, ...]

    def said(self) -> str:
        """`B's prompts fired A (7 of 9 attempts)`, as the reports word it."""
        whose = "prompts that expect no skill" if self.expected == NO_SKILL else f"{self.expected}'s prompts"
        return f"{whose} fired {self.fired} ({self.attempts} of {self.of} attempts)"


@dataclass(frozen=True)
class Recorded:
    """What an earlier run's routing matrix recorded: its confusions, where they were read, what was skipped."""

    confusions: tuple[Confusion, ...]
    source: str  # the file, as given
    note: str  # "" when the matrix was read whole; else why nothing (or not everything) is followed


def results_file(path: Path) -> Path:
    """A run folder names its results.json; a file is taken as it is."""
    return path / RESULTS if path.is_dir() else path


def read(path: Path) -> Recorded:
    """The confusions recorded in `path` (a run folder or its results.json). A file that cannot be read as JSON is
    a ConfusionsError naming it; a readable file without a routing matrix records none."""
    file = results_file(path)
    try:
        raw = json.loads(bounded.read_text(file, bounded.RUN_FILE_MAX_BYTES))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        raise ConfusionsError(f"--previous {path}: {file} cannot be read as an earlier run's results.json ({why}); "
                              "give a run folder or the results.json a run wrote") from None
    return of_results(raw, str(file))


def of_results(raw: Any, source: str) -> Recorded:
    """The confusions of a parsed results.json, keeping only entries of the expected shape."""
    routing = raw.get("routing") if isinstance(raw, dict) else None
    entries = routing.get("confusions") if isinstance(routing, dict) else None
    if not isinstance(entries, list):
        return Recorded((), source, f"{source} records no routing matrix (no routing.confusions): no confusion "
                                    "is followed")
    found = [c for c in (_entry(e) for e in entries) if c is not None]
    skipped = len(entries) - len(found)
    note = f"{skipped} of {len(entries)} confusion(s) in {source} are not of the expected shape, skipped" \
        if skipped else ""
    return Recorded(tuple(found), source, note)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _entry(entry: Any) -> Confusion | None:
    """One entry, or None when it lacks a field or a field is of the wrong type (never coerced)."""
    if not isinstance(entry, dict):
        return None
    expected, fired = entry.get("expected"), entry.get("fired")
    attempts, of, cases = _count(entry.get("attempts")), _count(entry.get("of")), entry.get("cases", [])
    if not (isinstance(expected, str) and expected and isinstance(fired, str) and fired):
        return None
    if attempts is None or of is None or not isinstance(cases, list) or not all(isinstance(c, str) for c in cases):
        return None
    return Confusion(expected=expected, fired=fired, attempts=attempts, of=of, cases=tuple(cases))


def partners(confusions: tuple[Confusion, ...], changed: str) -> dict[str, list[Confusion]]:
    """Skill -> the confusions that tie it to `changed`, in both directions: its prompts fired `changed`, or
    `changed`'s prompts fired it. A confusion with no attempt behind it, or one with the "no skill" row or column on
    the other side, ties no skill (its cases are followed by `cases_of`)."""
    tied: dict[str, list[Confusion]] = {}
    for confusion in confusions:
        if confusion.attempts == 0 or confusion.expected == confusion.fired:
            continue
        other = confusion.expected if confusion.fired == changed else (
            confusion.fired if confusion.expected == changed else None)
        if other is not None and other != NO_SKILL:
            tied.setdefault(other, []).append(confusion)
    return tied


def from_no_skill(confusions: tuple[Confusion, ...], changed: str) -> list[Confusion]:
    """The confusions where prompts that expect no skill fired `changed`: their cases are selected by uid."""
    return [c for c in confusions if c.attempts and c.expected == NO_SKILL and c.fired == changed]
