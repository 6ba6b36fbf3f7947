"""What a prompt that starts with `/` invokes, read the way Claude Code reads it.

Measured on the bundled CLI 2.1.332 against runner/testing/fake_anthropic.py (issue 29, item 1): a prompt is a
slash command when its FIRST character is `/` (a leading space or newline makes it plain text); the command's
name runs up to the first whitespace (space, tab or newline) and everything after it, stripped, is its
arguments — `/alpha summarise the notes`, `/alpha` on a line of its own followed by more lines, and
`/alpha args` followed by more lines all expand the skill `alpha`, with the rest as arguments. The name is
matched exactly (case-sensitive; `/alpha:x` is not `alpha`), against a skill's folder name or its frontmatter
`name`. A `/word` that names no skill is sent to the model as written.

The api host expands with it (runner.hosts.api), the classifier decides an explicit invocation with it
(runner.corpus.classify) and the plan lets an explicit invocation of a manual-only skill run (runner.plan.build):
one parse, so the three cannot disagree about what a prompt invokes.
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
