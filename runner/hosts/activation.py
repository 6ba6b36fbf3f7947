"""One activation recogniser for every host (claude-code, api, replay): which tool call is an activation, of what,
and whether the host's answer rejected it.

A host calls `recognise` per tool_use block and `apply_result` with its `is_error`; tool names and the skills folder
come from HostTraits.activation. A call answered with an error is rejected and never counts as fired.

Design notes: docs/design/activation.md.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import PurePosixPath

from runner.core.host_traits import DEFAULT_HOST, ActivationNames, traits
from runner.core.observation import Activation, Mechanism
from runner.corpus.classify import SUBAGENT_SUFFIX

# The tool and folder names are the host's (HostTraits.activation); a caller that names no host (the replay of a
# recorded run, which every registered host records alike) reads the default host's.
DEFAULT_NAMES = traits(DEFAULT_HOST).activation
# A prompt that starts with `/name` of a user-invocable skill (runner.corpus.slash: the name up to the first
# whitespace): the host expands the command itself (no Skill tool call); Claude Code (with --replay-user-messages)
# echoes this tag as the first user message, the api host sends it. An unknown `/name` is passed on as plain text,
# without the tag.
COMMAND_NAME = re.compile(r"<command-name>/([^<\s]+)</command-name>")


def skill_name(raw: str, aliases: Mapping[str, str] | None = None) -> str:
    """The skill a Skill call's `skill` names ("" when none)."""
    whole = raw.strip().lstrip("/").strip()
    if whole in (aliases or {}):  # a `plugin:skill` name the library has (two plugins ship `skill`)
        return (aliases or {})[whole]
    name = whole.split(":")[-1].strip()
    return (aliases or {}).get(name, name)


def skill_md_name(file_path: str, names: ActivationNames = DEFAULT_NAMES) -> str | None:
    """The skill whose SKILL.md this path is (`.../<skills folder>/<name>/SKILL.md`), or None."""
    if not file_path.strip():
        return None
    parts = PurePosixPath(posixpath.normpath(file_path.strip())).parts
    folder = names.skills_folder_parts
    if len(parts) >= len(folder) + 2 and parts[-len(folder) - 2:-2] == folder and parts[-1] == "SKILL.md":
        return parts[-2]
    return None


def recognise(tool: str, tool_input: object, tool_use_id: str | None, turn: int, is_error: bool | None = None,
              aliases: Mapping[str, str] | None = None, names: ActivationNames = DEFAULT_NAMES) -> Activation | None:
    """The activation a tool_use block is, or None. `is_error`: its tool_result's, when the host already knows it
    (None: no result yet, or none came; `apply_result` sets it later). `names`: the host's tools and skills folder
    (HostTraits.activation)."""
    if not isinstance(tool_input, dict):
        return None
    name: str | None = None
    mechanism: Mechanism | None = None
    if tool == names.skill_tool and isinstance(tool_input.get(names.skill_input), str):
        name, mechanism = skill_name(tool_input[names.skill_input], aliases), "skill-tool"
    elif tool == names.read_tool and isinstance(tool_input.get(names.read_input), str):
        name, mechanism = skill_md_name(tool_input[names.read_input], names), "skill-md-read"
    elif tool in names.subagent_tools and isinstance(tool_input.get("subagent_type"), str) \
            and tool_input["subagent_type"].strip():
        name, mechanism = f"{tool_input['subagent_type']}{SUBAGENT_SUFFIX}", "subagent"
    if not name or mechanism is None:
        return None
    activation = Activation(name=name, mechanism=mechanism, turn=turn, tool_use_id=tool_use_id)
    apply_result(activation, is_error)
    return activation


def apply_result(activation: Activation, is_error: bool | None) -> None:
    """Mark an activation by its call's tool_result: an error result rejects it, for every mechanism (see the
    docs/design/activation.md: a refused call loaded no instructions and started no subagent)."""
    activation.rejected = bool(is_error)


def slash_command(text: str) -> Activation | None:
    """The skill a `/name` prompt expanded, from the first user message's text (turn 0), or None."""
    match = COMMAND_NAME.search(text)
    return Activation(name=match.group(1), mechanism="slash-command", turn=0) if match else None


def decided(sets: Sequence[Sequence[str]], fired: Collection[str]) -> list[str] | None:
    """The first set of SessionSpec.decide_when of which every name fired (runner.corpus.decide), or None."""
    for names in sets:
        if names and all(name in fired for name in names):
            return list(names)
    return None


class Turns:
    """Turn numbers: one per model reply, in order of first appearance. Claude Code streams a reply as one message
    per content block, all with the reply's id, so a turn is keyed by the message id; a message without one is a
    turn of its own."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def of(self, message_id: str | None) -> int:
        key = message_id or f"anon-{len(self.ids)}"
        if key not in self.ids:
            self.ids.append(key)
        return self.ids.index(key)

    @property
    def count(self) -> int:
        return len(self.ids)
