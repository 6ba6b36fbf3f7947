"""The repository's settings file, `.skill-evals.toml`: where the library is, how to classify it.

Every choice the semantics leave open is a setting here, with the default documented in the
README. The file is validated like any eval file: a typo is an error with its line, never
silently ignored (pydantic `extra="forbid"`).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.findings import Finding, display_path, error

SETTINGS_FILE = ".skill-evals.toml"

CaseKind = Literal["trigger", "refusal", "no_trigger", "discrimination", "probe"]
AssertionClass = Literal["activation", "artifact_shape", "semantic", "unjudgeable"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LibrarySettings(_Strict):
    skills: str | None = Field(default=None, description="Skills folder, relative to the repository root.")
    agents: str | None = Field(default=None, description="Subagents folder; default: `agents` beside the skills folder.")
    templates: list[str] = Field(
        default=["_*"],
        description="Glob patterns of skill folders that are templates: listed by the host, but their "
                    "eval cases are examples and are not run.")


class ValidatorSettings(_Strict):
    command: str | None = Field(
        default=None,
        description="The library's own structural validator, run from the repository root before our checks. "
                    "Default: `scripts/validate-skills.py` when that file exists.")
    enabled: bool = True
    timeout_s: float = Field(default=300, gt=0)


class LimitsSettings(_Strict):
    max_file_bytes: int = Field(default=1_048_576, gt=0, description="Larger files are reported and not read.")
    max_probe_lines: int = Field(default=40, gt=0, description="question.md must be shorter than this (seed 000 rule 5).")


class ListingSettings(_Strict):
    # Claude Code's skill listing budget: context tokens x 4 chars per token x 1%
    # (skillListingBudgetFraction 0.01 of a 200,000-token window = 8,000 characters), overridable
    # with SLASH_COMMAND_TOOL_CHAR_BUDGET; each description is also capped (1,536 characters).
    budget_chars: int = Field(default=8_000, gt=0)
    max_description_chars: int = Field(default=1_536, gt=0)


class ClassifySettings(_Strict):
    refusal_id_prefixes: list[str] = ["should-not-", "refusal-"]
    refusal_id_exclude_prefixes: list[str] = ["should-not-trigger-"]
    refusal_types: list[str] = ["should_not_do"]
    halt_id_prefixes: list[str] = Field(
        default=["stop-"],
        description="Ids of halt cases (the skill fires and stops to ask): run as trigger cases, listed in the census.")


class CaseOverride(_Strict):
    uid: str = Field(description="`<skill>/<source>/<id>`")
    kind: CaseKind
    reason: str = Field(min_length=1)


class AssertionOverride(_Strict):
    uid: str
    index: int = Field(ge=1, description="1-based position of the assertion in the case.")
    assertion_class: AssertionClass = Field(alias="class")
    reason: str = Field(min_length=1)


class TriggerSetSettings(_Strict):
    """A skill-creator trigger set: a JSON list of {query, should_trigger} for one skill."""

    skill: str = Field(min_length=1)
    path: str = Field(min_length=1, description="Relative to the repository root.")


class Settings(_Strict):
    library: LibrarySettings = LibrarySettings()
    validator: ValidatorSettings = ValidatorSettings()
    limits: LimitsSettings = LimitsSettings()
    listing: ListingSettings = ListingSettings()
    classify: ClassifySettings = ClassifySettings()
    case_override: list[CaseOverride] = []
    assertion_override: list[AssertionOverride] = []
    trigger_set: list[TriggerSetSettings] = []


_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def _line_of_key(text: str, loc: tuple) -> int:
    """Best line for a validation error: the last key of its location that the text names."""
    names = [part for part in loc if isinstance(part, str)]
    lines = text.splitlines()
    for name in reversed(names):
        pattern = re.compile(rf"^\s*(\[+\s*)?{re.escape(name)}\b")
        for number, line in enumerate(lines, start=1):
            if pattern.search(line):
                return number
    return 1


def load(path: Path | None, base: Path) -> tuple[Settings, list[Finding]]:
    """Settings from the file (defaults when there is none) and the findings of reading it."""
    if path is None or not path.exists():
        return Settings(), []
    shown = display_path(path, base)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return Settings(), [error("settings-unreadable", shown, 1, f"cannot read the settings file: {exc}")]
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_POSITION.search(str(exc))
        line, col = (int(match.group(1)), int(match.group(2))) if match else (1, None)
        return Settings(), [error("settings-syntax", shown, line, f"invalid TOML: {exc}", col=col)]
    except ValueError as exc:
        # tomllib raises a bare ValueError for an integer past Python's 4,300-digit limit.
        return Settings(), [error("settings-syntax", shown, 1, f"invalid TOML value: {exc}")]
    try:
        return Settings.model_validate(raw), []
    except ValidationError as exc:
        findings = []
        for problem in exc.errors():
            where = ".".join(str(p) for p in problem["loc"])
            findings.append(error("settings-invalid", shown, _line_of_key(text, problem["loc"]),
                                  f"{where}: {problem['msg']}"))
        return Settings(), findings
