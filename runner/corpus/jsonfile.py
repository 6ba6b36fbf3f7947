"""JSON files with positions: the value, and the line of every JSON pointer inside it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.corpus import bounded
from runner.corpus.files import ReadPolicy, read_text
from runner.corpus.findings import Finding, error, is_unicode, printable

LONE_SURROGATE = "lone-surrogate"


@dataclass
class JsonDocument:
    data: Any
    text: str
    lines: dict[str, int] = field(default_factory=dict)
    # The findings of strings that held half a surrogate pair, with the path of each (the loader tells which case
    # a path is in). The data holds those strings escaped (`\ud83d` as six characters): printable everywhere.
    escaped: list[tuple[tuple[str | int, ...], Finding]] = field(default_factory=list)

    def line(self, *pointer: str | int) -> int:
        """1-based line of the value at the pointer; falls back to the nearest known parent."""
        parts = [str(p).replace("~", "~0").replace("/", "~1") for p in pointer]
        while True:
            key = "".join("/" + p for p in parts)
            if key in self.lines:
                return self.lines[key]
            if not parts:
                return 1
            parts.pop()


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _positions(text: str) -> dict[str, int]:
    """Line (1-based) of every JSON pointer: the key's line for members, the value's for items.

    Runs only on text that json.loads accepted, so a flat tokenizer and a stack suffice (no
    recursion, so no depth limit); about ten times faster than a general source-map library.
    """
    lines: dict[str, int] = {"": 1}
    # Each frame: [pointer, is_object, next array index, pending member key]
    stack: list[list[Any]] = []
    line = 1
    last = 0
    expect_key = False
    for match in _TOKEN.finditer(text):
        start = match.start()
        line += text.count("\n", last, start)
        last = start
        token = match.group()
        frame = stack[-1] if stack else None
        if token in ",:":
            expect_key = token == "," and frame is not None and frame[1]
            continue
        if token in "}]":
            stack.pop()
            expect_key = False
            continue
        if frame is not None and frame[1] and expect_key:
            key = printable(json.loads(token))  # as the data holds it (see _escape_lone_surrogates)
            frame[3] = frame[0] + "/" + _escape(key)
            lines[frame[3]] = line
            expect_key = False
            continue
        if frame is None:
            pointer = ""
        elif frame[1]:
            pointer = frame[3]
        else:
            pointer = frame[0] + "/" + str(frame[2])
            frame[2] += 1
            lines[pointer] = line
        if token in "{[":
            stack.append([pointer, token == "{", 0, ""])
            expect_key = token == "{"
    return lines


_TRAILING_COMMA = re.compile(r",\s*$")


def _syntax_message(exc: json.JSONDecodeError) -> tuple[str, int, int]:
    """A message that says what is wrong in words an author recognises (trailing commas first)."""
    before = exc.doc[: exc.pos]
    after = exc.doc[exc.pos: exc.pos + 1]
    if after in ("}", "]") and _TRAILING_COMMA.search(before):
        comma = before.rstrip().rfind(",")
        line = exc.doc.count("\n", 0, comma) + 1
        col = comma - (exc.doc.rfind("\n", 0, comma) + 1) + 1
        return f"trailing comma before '{after}' (JSON allows none): remove it", line, col
    return f"invalid JSON: {exc.msg}", exc.lineno, exc.colno


# Only a \u escape can put half a surrogate pair into parsed JSON: the file itself is UTF-8, which cannot hold one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _escape_lone_surrogates(data: Any) -> tuple[Any, list[tuple[tuple[str | int, ...], str]]]:
    """The data with every string (key or value) that holds half a surrogate pair escaped, and the path and
    escaped text of each. Iterative: the data may nest as deep as json.loads allows."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    if isinstance(data, str):
        return (data, found) if is_unicode(data) else (printable(data), [((), printable(data))])
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        container, path = stack.pop()
        if isinstance(container, dict):
            if not all(is_unicode(key) for key in container):
                items = list(container.items())
                container.clear()
                for key, value in items:
                    if not is_unicode(key):
                        key = printable(key)
                        found.append(((*path, key), key))
                    container.setdefault(key, value)
            entries: list[tuple[str | int, Any]] = list(container.items())
        elif isinstance(container, list):
            entries = list(enumerate(container))
        else:
            continue
        for key, value in entries:
            if isinstance(value, str) and not is_unicode(value):
                container[key] = printable(value)
                found.append(((*path, key), container[key]))
            elif isinstance(value, (dict, list)):
                stack.append((value, (*path, key)))
    return data, sorted(found, key=lambda item: [str(p) for p in item[0]])


def _where(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _deep_line(text: str) -> int:
    """The line where the brackets first nest past the bound (strings skipped): where the finding points."""
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > bounded.MAX_NESTING:
                return text.count("\n", 0, match.start()) + 1
        elif token in "]}":
            depth -= 1
    return 1


def parse(text: str, shown: str) -> tuple[JsonDocument | None, Finding | None]:
    """Parse JSON text; a syntax error is a finding at its line and column, never an exception.

    A `\\ud83d` escape with no partner parses to half a surrogate pair, which no UTF-8 file, report or terminal can
    hold: the string is kept escaped (six characters, printable everywhere) and `doc.escaped` holds an error for
    each such string (`read` returns them), for the loader to scope to the case it is in."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        message, line, col = _syntax_message(exc)
        return None, error("json-syntax", shown, line, message, col=col)
    except RecursionError:
        return None, error("json-syntax", shown, _deep_line(text), bounded.nesting_message("the JSON"))
    except ValueError as exc:
        # Not a syntax error: e.g. an integer longer than Python's 4,300-digit conversion limit.
        return None, error("json-syntax", shown, 1, f"JSON value cannot be read: {exc}")
    # Everything after the parser (the schema check, the loader, pydantic) walks the value recursively. Counting the
    # brackets first skips the walk for the files that cannot be that deep (almost all).
    if text.count("[") + text.count("{") > bounded.MAX_NESTING and bounded.too_deep(data):
        return None, error("json-syntax", shown, _deep_line(text), bounded.nesting_message("the JSON"))
    doc = JsonDocument(data=data, text=text, lines=_positions(text))
    if _SURROGATE_ESCAPE.search(text):
        doc.data, found = _escape_lone_surrogates(data)
        doc.escaped = [(path, error(
            LONE_SURROGATE, shown, doc.line(*path),
            f"{_where(path)}: {escaped if len(escaped) <= 80 else escaped[:77] + '...'} holds half of a surrogate pair "
            "(a \\uD800-\\uDFFF escape with no partner): not a character, so no UTF-8 file, report or session can "
            "hold it as written. It is shown escaped; write the whole character (both halves, or the character "
            "itself)")) for path, escaped in found]
    return doc, None


def read(path: Path, policy: ReadPolicy) -> tuple[JsonDocument | None, list[Finding]]:
    """A JSON file of the library read under `policy` (runner.corpus.files): the document, or the findings that
    say why there is none (unsafe, too large, not UTF-8, not JSON); and the document's lone-surrogate errors."""
    text, problem = read_text(path, policy)
    if problem:
        return None, [problem]
    doc, problem = parse(text or "", policy.show(path))
    if problem:
        return doc, [problem]
    return doc, [finding for _, finding in doc.escaped] if doc else []
