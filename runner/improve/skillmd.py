"""The one edit `improve` makes to a SKILL.md (in a copy, or as a suggested diff): its `description` value.

The key's lines (from its line to the line before the next top-level key, or to the closing `---`) become one line,
`description: "<JSON string>"`: a JSON string is a YAML double-quoted scalar, so any text (colons, quotes, `#`,
newlines) survives, and one line is what a GitHub suggestion replaces. Comment or blank lines after the value are
kept. The result is parsed back with the strict frontmatter reader: the description must read as the candidate and
every other field must be unchanged, or the edit is refused (ValueError) — nothing is run on a file the edit broke.
"""

from __future__ import annotations

import json

from runner.corpus import frontmatter


def description_span(text: str) -> tuple[int, int]:
    """(first, last) 1-based lines of the description's key and value in SKILL.md (ValueError: none)."""
    parsed, finding = frontmatter.parse(text, "SKILL.md")
    if parsed is None or "description" not in parsed.key_lines:
        raise ValueError(finding.message if finding is not None else "SKILL.md has no `description` to improve")
    first = parsed.key_lines["description"]
    later = [line for line in parsed.key_lines.values() if line > first]
    end = min(later) - 1 if later else parsed.end_line - 1
    lines = text.splitlines()
    while end > first and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1  # a comment or blank line before the next key is not part of the value
    return first, end


def description_line(description: str) -> str:
    return "description: " + json.dumps(description, ensure_ascii=False)


def rewrite_description(text: str, description: str) -> str:
    """SKILL.md with `description` replaced (module docstring); ValueError when the edit would change more."""
    before, _ = frontmatter.parse(text, "SKILL.md")
    first, last = description_span(text)
    lines = text.splitlines(keepends=True)
    ending = "\r\n" if lines[last - 1].endswith("\r\n") else "\n"
    rewritten = "".join(lines[: first - 1]) + description_line(description) + ending + "".join(lines[last:])
    after, finding = frontmatter.parse(rewritten, "SKILL.md")
    if before is None or after is None:
        raise ValueError(f"the edited SKILL.md does not parse: {finding.message if finding else 'unknown'}")
    if after.fields.get("description") != description:
        raise ValueError("the edited SKILL.md does not read back the candidate description")
    others_before = {k: v for k, v in before.fields.items() if k != "description"}
    others_after = {k: v for k, v in after.fields.items() if k != "description"}
    if others_before != others_after or after.body != before.body:
        raise ValueError("the edit would change more than the description")
    return rewritten
