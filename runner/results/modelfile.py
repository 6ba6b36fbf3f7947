"""A JSON file the runner wrote (results.json, plan.json, a selection), read back with one line of why not.

pydantic's own message for a file that is not JSON, or not the file expected, is a multi-line dump with a
URL ("1 validation error for Results ... For further information visit https://errors.pydantic.dev/...").
A user needs the file, and either where the JSON breaks (line and column) or the first key that is wrong.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from runner.core.errors import UsageError
from runner.corpus import bounded

M = TypeVar("M", bound=BaseModel)

_PYDANTIC_JSON = re.compile(r"^Invalid JSON: (?P<what>.*) at line (?P<line>\d+) column (?P<column>\d+)$")


class Unreadable(UsageError, ValueError):
    """The file cannot be read as the model: the message is one line that names the file."""


def not_json(text: str) -> str | None:
    """`not JSON at line L, column C (why)` when `text` is not JSON, else None."""
    if not text.strip():
        return "empty, not JSON"
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"not JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})"
    except (ValueError, RecursionError) as exc:
        return f"not JSON ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    return None


def explain(exc: BaseException, text: str | None = None, what: str = "the file expected") -> str:
    """One line for why a file could not be read as a model: the file is not named (the caller does that)."""
    if isinstance(exc, FileNotFoundError):
        return "does not exist"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 (byte {exc.start}: {exc.reason})"
    if isinstance(exc, bounded.Refused):
        return str(exc)
    if isinstance(exc, OSError):
        return f"cannot be read ({exc.strerror or type(exc).__name__})"
    if isinstance(exc, ValidationError):
        problems = exc.errors()
        first = problems[0] if problems else None
        if first is not None and first.get("type") == "json_invalid":
            # The standard library's position (1-based, also at the end of the text) when the text is at hand.
            if text is not None and (problem := not_json(text)):
                return problem
            found = _PYDANTIC_JSON.match(str(first.get("msg", "")))
            if found:
                return f"not JSON at line {found['line']}, column {found['column']} ({found['what']})"
            return "not JSON"
        if first is None:
            return f"not {what}"
        where = ".".join(str(part) for part in first.get("loc", ())) or "the top level"
        more = len(problems) - 1
        return (f"not {what}: {where}: {_message(first)}"
                + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""))
    first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return first_line


def _message(problem: object) -> str:
    message = str(problem.get("msg", "")) if isinstance(problem, dict) else str(problem)
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def read(path: Path, model: type[M], what: str, max_bytes: int = bounded.RUN_FILE_MAX_BYTES) -> M:
    """The model in the file; Unreadable (one line: the path and why) when it cannot be read as one. The file is
    read within runner.corpus.bounded's bounds: a regular file of at most `max_bytes`."""
    text: str | None = None
    try:
        text = bounded.read_text(path, max_bytes)
        return model.model_validate_json(text)
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        raise Unreadable(f"{path}: {explain(exc, text, what)}") from None
