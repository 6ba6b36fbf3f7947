"""Findings: what validation and loading tell a library's authors, with a place to act on.

Every finding carries a level, a rule id, a file and line (1-based), and a message a person can
act on. Rendering is here too, because the three formats (text, json, github) are the contract
with people, tools and GitHub's workflow-command annotations respectively.
"""

from __future__ import annotations

import json
import re
import secrets
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

from runner.corpus import repopath

# A code point UTF-8 cannot encode: half of a surrogate pair. One comes from a JSON `\ud83d` escape with
# no partner, or from a file name's byte that is not UTF-8 (Python decodes byte 0xff as U+DCFF).
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    point = ord(match.group())
    # 0xDC80-0xDCFF: a byte that was not UTF-8 (os.fsdecode's surrogateescape): shown as that byte.
    return f"\\x{point - 0xDC00:02x}" if 0xDC80 <= point <= 0xDCFF else f"\\u{point:04x}"


def printable(text: str) -> str:
    """The text with every code point UTF-8 cannot encode written as an escape (`\\xff` for a byte of a name that
    is not UTF-8, `\\ud83d` for half a surrogate pair): what every file, report and terminal can hold."""
    return _SURROGATE.sub(_escaped, text) if _SURROGATE.search(text) else text


def printable_tree(value: Any) -> Any:
    """`printable` applied to every string (keys too) of a JSON-like value of dicts and lists."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_tree(k): printable_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable_tree(v) for v in value]
    return value


def is_unicode(text: str) -> bool:
    """True when UTF-8 can encode the text (no lone surrogate, no undecodable byte of a name)."""
    return _SURROGATE.search(text) is None


class Level(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Finding(BaseModel):
    level: Level
    rule: str
    file: str = Field(description="Path as shown to the user (relative to the repository root when inside it).")
    line: int = Field(ge=1, default=1)
    col: int | None = Field(default=None, ge=1)
    message: str
    detail: str | None = Field(default=None, description="Longer output, e.g. the library validator's own output.")
    skill: str | None = Field(default=None, description="The skill the finding is about, when it is about one: an "
                                                        "error here keeps that skill's cases from running.")
    uid: str | None = Field(default=None, description="The case the finding is about, when it is about one: an error "
                                                      "here keeps only that case from running.")

    @model_validator(mode="before")
    @classmethod
    def _printable(cls, data: Any) -> Any:
        """A finding is written to JSON, to GitHub and to a terminal: text UTF-8 cannot encode (a path whose name
        is not UTF-8, a lone surrogate the library wrote) is escaped here, once, for all of them."""
        if isinstance(data, dict):
            return {k: printable(v) if isinstance(v, str) else v for k, v in data.items()}
        return data

    def location(self) -> str:
        loc = f"{self.file}:{self.line}"
        return f"{loc}:{self.col}" if self.col else loc


def error(rule: str, file: str, line: int, message: str, col: int | None = None, detail: str | None = None,
          skill: str | None = None, uid: str | None = None) -> Finding:
    return Finding(level=Level.ERROR, rule=rule, file=file, line=max(1, line), col=col, message=message, detail=detail,
                   skill=skill, uid=uid)


def warning(rule: str, file: str, line: int, message: str, col: int | None = None, skill: str | None = None,
            uid: str | None = None) -> Finding:
    return Finding(level=Level.WARNING, rule=rule, file=file, line=max(1, line), col=col, message=message,
                   skill=skill, uid=uid)


def info(rule: str, file: str, line: int, message: str, skill: str | None = None) -> Finding:
    return Finding(level=Level.INFO, rule=rule, file=file, line=max(1, line), message=message, skill=skill)


def has_errors(findings: list[Finding]) -> bool:
    return any(f.level is Level.ERROR for f in findings)


def sort_key(f: Finding) -> tuple[str, int, int, str]:
    return (f.file, f.line, f.col or 0, f.rule)


def counts(findings: list[Finding]) -> dict[str, int]:
    return {level.value: sum(1 for f in findings if f.level is level) for level in Level}


def render_text(findings: list[Finding]) -> str:
    lines = []
    for f in sorted(findings, key=sort_key):
        lines.append(f"{f.location()}: {f.level.value}[{f.rule}] {f.message}")
        if f.detail:
            lines.extend("    | " + d for d in f.detail.rstrip().splitlines())
    c = counts(findings)
    lines.append(f"{c['error']} error(s), {c['warning']} warning(s), {c['info']} note(s)")
    return "\n".join(lines)


def render_json(findings: list[Finding], extra: dict[str, Any] | None = None) -> str:
    payload = {
        "schema_version": 1,
        "counts": counts(findings),
        "findings": [f.model_dump(mode="json") for f in sorted(findings, key=sort_key)],
    }
    if extra:
        payload.update(extra)
    return json.dumps(payload, indent=2, ensure_ascii=False)


_GITHUB_COMMAND = {Level.ERROR: "error", Level.WARNING: "warning", Level.INFO: "notice"}


def _escape_data(value: str) -> str:
    # GitHub workflow commands: %, CR and LF must be escaped in the message.
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


# Actions shows at most 10 error, 10 warning and 10 notice annotations per step and drops the rest in silence.
ANNOTATIONS_PER_LEVEL = 10


def _command(f: Finding, prefix: str) -> str:
    props = [f"file={_escape_property(repopath.join(prefix, f.file))}", f"line={f.line}"]
    if f.col:
        props.append(f"col={f.col}")
    props.append(f"title={_escape_property('skill-evals ' + f.rule)}")
    message = f.message if not f.detail else f.message + "\n" + f.detail
    return f"::{_GITHUB_COMMAND[f.level]} {','.join(props)}::{_escape_data(message)}"


def render_github(findings: list[Finding], prefix: str = "") -> str:
    """Workflow commands (`::error file=...,line=...::message`) that annotate the files in a PR, then every finding
    as plain text for the step's log.

    `prefix` is the library root's path inside the repository (runner.corpus.repopath): GitHub reads `file=` from the
    repository root. Only the first 10 findings of each level become annotations (what Actions shows per step);
    when some are left out, one notice says how many, and that notice counts against the 10 notices.
    """
    ordered = sorted(findings, key=sort_key)
    by_level = {level: [f for f in ordered if f.level is level] for level in Level}
    left = {level: max(0, len(items) - ANNOTATIONS_PER_LEVEL) for level, items in by_level.items()}
    if any(left.values()) and len(by_level[Level.INFO]) >= ANNOTATIONS_PER_LEVEL:
        left[Level.INFO] = len(by_level[Level.INFO]) - (ANNOTATIONS_PER_LEVEL - 1)  # room for the notice
    shown = {id(f) for level, items in by_level.items() for f in items[:len(items) - left[level]]}
    lines = [_command(f, prefix) for f in ordered if id(f) in shown]
    if any(left.values()):
        words = {Level.ERROR: "error(s)", Level.WARNING: "warning(s)", Level.INFO: "note(s)"}
        more = " and ".join(f"{left[level]} more {words[level]}" for level in Level if left[level])
        lines.append(f"::notice::skill-evals: {more} not annotated (GitHub shows at most {ANNOTATIONS_PER_LEVEL} "
                     "annotations of each level per step); every finding is listed in this step's log")
    lines.append("Every finding (paths from the repository root):" if prefix else "Every finding:")
    relocated = [f.model_copy(update={"file": repopath.join(prefix, f.file)}) for f in ordered]
    # The listing holds the library's own text (file names, its validator's output): the runner must not read a
    # line of it as a workflow command, so command processing is paused around it with an unguessable token.
    pause = secrets.token_hex(16)
    lines += [f"::stop-commands::{pause}", render_text(relocated), f"::{pause}::"]
    return "\n".join(lines)


def first_problem(exc: ValidationError) -> str:
    """`where: what` of the first error pydantic found, in the words users see everywhere."""
    problem = exc.errors()[0]
    return f"{'.'.join(str(p) for p in problem['loc'])}: {problem['msg']}"


def display_path(path: Path, base: Path) -> str:
    """A path relative to `base` when it is inside it (what annotations need), else absolute."""
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()
