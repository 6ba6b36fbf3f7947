"""What the floor's findings keep from running.

`validate` is all-or-nothing; `plan` and `run` scope each error-level finding to what it is about (the library, a
skill, an eval file, a case), so one broken skill does not hide the rest. A finding that cannot be placed is the
library's: an error is never dropped.

Design notes: docs/design/floor-and-trust.md.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import get_args

from pydantic import BaseModel, Field

from runner.core.kinds import BrokenKind
from runner.corpus.files import relative_shown
from runner.corpus.findings import Finding, Level, sort_key
from runner.corpus.library import FILE_UNREADABLE, Case, Library

FLOOR_ERROR = "floor-error"
INVALID_CASE = "invalid-case"
# An eval file of which no case could be read: its entry (runner.corpus.library.FILE_UNREADABLE) is UNRUN for this
# reason, with the file's own first error, so the report names the file and says its cases were not run.
EVAL_FILE_UNREADABLE = "eval-file-unreadable"
# The settings decide how every case is read and the library's validator speaks for the whole library:
# an error in either leaves nothing to trust.
LIBRARY_RULES = frozenset({"library-validator", "settings-syntax", "settings-invalid", "settings-unreadable"})
# Findings every report repeats, not only `validate`: a floor that changed shape must never pass for a full one
# (the library's validator switched off by the settings is a floor of our checks only).
ANNOUNCED_RULES = frozenset({"validator-disabled"})
# Kinds the loader gives a case it could not read as written: a finding inside such a case is about it.
BROKEN_KINDS: frozenset[str] = frozenset(get_args(BrokenKind))


class Hold(BaseModel):
    """Why one case does not run, from the floor."""

    reason: str = Field(description="floor-error, eval-file-unreadable or invalid-case")
    detail: str = Field(description="The first finding, `file:line: [rule] message`, and how many more.")
    skill: str | None = Field(default=None, description="floor-error: the skill whose errors hold the case back.")


class FloorGate(BaseModel):
    """The floor's errors, by what they keep from running."""

    strict: bool = Field(default=False, description="Any error stops everything (all-or-nothing).")
    library: list[Finding] = Field(default=[], description="Errors that stop everything.")
    skills: dict[str, list[Finding]] = Field(default={}, description="Errors that hold back one skill's cases.")
    cases: dict[str, list[Finding]] = Field(default={}, description="Errors that hold back one case (by uid).")
    absent: dict[str, list[Finding]] = Field(default={}, description="Errors about skills that were not read "
                                                                     "(no SKILL.md, a link out of the repository, "
                                                                     "a missing plugin path): nothing to hold back.")
    announced: list[Finding] = Field(default=[], description="Findings every report repeats, whatever their level "
                                                             "(ANNOUNCED_RULES: validator-disabled).")

    def errors(self) -> list[Finding]:
        scoped = [*self.skills.values(), *self.cases.values(), *self.absent.values()]
        return sorted(self.library + [f for found in scoped for f in found], key=sort_key)

    @property
    def stops_everything(self) -> bool:
        return bool(self.library) or (self.strict and bool(self.skills or self.cases or self.absent))

    def skill_detail(self, skill: str) -> str:
        return describe(self.skills[skill])

    def hold(self, uid: str, skill: str) -> Hold | None:
        """Why the case `uid`, held in `skill`'s eval files, must not run, or None. A case of another skill
        that targets a held-back skill still runs: the library as it stands is what it measures."""
        if skill in self.skills:
            return Hold(reason=FLOOR_ERROR, detail=self.skill_detail(skill), skill=skill)
        if uid in self.cases:
            return Hold(reason=INVALID_CASE, detail=describe(self.cases[uid]))
        return None

    def hold_case(self, case: Case) -> Hold | None:
        held = self.hold(case.uid, case.skill)
        if held is not None and held.reason == FLOOR_ERROR and case.kind_rule == FILE_UNREADABLE:
            own = [f for f in self.skills[case.skill] if f.file == case.file]
            return Hold(reason=EVAL_FILE_UNREADABLE, detail=describe(own or self.skills[case.skill]), skill=case.skill)
        return held


def describe(findings: list[Finding]) -> str:
    """`file:line: [rule] message` of the first finding, and how many more there are."""
    ordered = sorted(findings, key=sort_key)
    first = ordered[0]
    text = f"{first.location()}: [{first.rule}] {first.message}"
    if len(ordered) > 1:
        text += f" (and {len(ordered) - 1} more error(s): see `skill-evals validate`)"
    return text


def skill_of_file(file: str, library: Library) -> str | None:
    for name, skill in library.skills.items():
        if file == skill.skill_md or relative_shown(file, skill.dir) is not None:
            return name
    return None


class _CaseIndex:
    """The cases of each eval file by their first line, to place a finding that names no case."""

    def __init__(self, cases: list[Case]):
        by_file: dict[str, list[tuple[int, Case]]] = defaultdict(list)
        for case in cases:
            by_file[case.file].append((case.line, case))
        self.lines = {file: sorted(e[0] for e in entries) for file, entries in by_file.items()}
        self.cases = {file: [c for _, c in sorted(entries, key=lambda e: e[0])] for file, entries in by_file.items()}

    def broken_case_at(self, file: str, line: int) -> Case | None:
        """The case whose text holds `line`, when the loader already found that case broken. A finding
        in a valid case's lines may be about something else (a duplicate id, a key after the cases), so
        only a broken case is trusted to own it."""
        lines = self.lines.get(file)
        if not lines:
            return None
        position = bisect.bisect_right(lines, line) - 1
        if position < 0:
            return None
        case = self.cases[file][position]
        return case if case.kind in BROKEN_KINDS else None


def gate(findings: list[Finding], library: Library, strict: bool = False) -> FloorGate:
    """Scope every error-level finding; warnings and notes never hold anything back."""
    uids = {case.uid for case in library.cases}
    index = _CaseIndex(library.cases)
    out = FloorGate(strict=strict)
    for finding in findings:
        if finding.rule in ANNOUNCED_RULES:
            out.announced.append(finding)
        if finding.level is not Level.ERROR:
            continue
        if finding.rule in LIBRARY_RULES:
            out.library.append(finding)
        elif finding.uid and finding.uid in uids:
            out.cases.setdefault(finding.uid, []).append(finding)
        elif finding.skill and finding.skill in library.skills:
            out.skills.setdefault(finding.skill, []).append(finding)
        elif (case := index.broken_case_at(finding.file, finding.line)) is not None:
            out.cases.setdefault(case.uid, []).append(finding)
        elif (skill := skill_of_file(finding.file, library)) is not None:
            out.skills.setdefault(skill, []).append(finding)
        elif finding.skill:
            out.absent.setdefault(finding.skill, []).append(finding)
        else:
            out.library.append(finding)
    return out


class FloorSummary(BaseModel):
    """What `validate --floor-summary` writes: what the floor's errors keep `run` from running."""

    scope: str = Field(description="none: no error; skills: errors hold back skills or cases, the rest runs; "
                                   "library: an error stops everything.")
    library_errors: int
    held_back_skills: list[str]
    invalid_cases: list[str]
    not_read: list[str]


def summary(gate: FloorGate) -> FloorSummary:
    scope = "library" if gate.library else ("skills" if gate.skills or gate.cases or gate.absent else "none")
    return FloorSummary(scope=scope, library_errors=len(gate.library), held_back_skills=sorted(gate.skills),
                        invalid_cases=sorted(gate.cases), not_read=sorted(gate.absent))
