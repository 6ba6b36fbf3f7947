"""What a prompt that starts with `/` invokes, read the way Claude Code reads it.

`parse` and `invoked_skill` are the one parse the api host, the classifier and the plan share, so the three cannot
disagree about what a prompt invokes. The rule (its first character `/`, the name up to the first whitespace, matched
exactly) was measured on the bundled CLI.

Design notes: docs/design/activation.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_COMMAND = re.compile(r"/(\S+)(?:\s+(.*))?\Z", re.DOTALL)


@dataclass(frozen=True)
class SlashPrompt:
    name: str  # as written after the `/` (not yet resolved to a skill)
    args: str  # the rest of the prompt, stripped ("" when none)


def parse(prompt: str) -> SlashPrompt | None:
    """The command a prompt starts with, or None when it is not a slash command."""
    match = _COMMAND.match(prompt)
    if match is None:
        return None
    return SlashPrompt(name=match.group(1), args=(match.group(2) or "").strip())


def invoked_skill(prompt: str, names: Mapping[str, str]) -> str | None:
    """The skill a prompt invokes by hand, or None: a slash command whose name the host accepts for a skill.
    `names`: every such name -> the skill's folder name (its folder name and its frontmatter `name`:
    runner.corpus.library.names_of)."""
    command = parse(prompt)
    return names.get(command.name) if command is not None else None
