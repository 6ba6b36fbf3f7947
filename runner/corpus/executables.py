"""What of a library the host would run as a program, and what the floor says about it (docs/security.md).

Hooks, inline shell and MCP servers never run in an eval session (runner.hosts.wall); the floor warns where a
library has them. A case file that would land in `.claude/`, `.git/` or `.mcp.json` is an error
(`case-file-reserved`) that holds back its case.

Design notes: docs/design/session-isolation.md.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from runner.corpus import frontmatter
from runner.corpus.files import make_policy, read_text
from runner.corpus.findings import Finding, error, warning
from runner.corpus.library import Case, Library, Skill

# Claude Code's own patterns for inline shell in a skill (CLI 2.1.332): a ```! fenced block, and !`cmd` after the
# start of a line or a space, outside a code span. What the host shows in its place with disableSkillShellExecution.
FENCED_SHELL = re.compile(r"```!\s*\n?[\s\S]*?\n?```")
INLINE_SHELL = re.compile(r"(?<![^\s])!`[^`]+`", re.MULTILINE)
CODE_SPAN = re.compile(r"`[^`\n]+`")
SHELL_PLACEHOLDER = "[shell command execution disabled by policy]"

# Where a case's file may not go in the session's project folder: what the host reads as its own configuration.
RESERVED_TOP = (".claude", ".mcp.json")
# The other agent hosts' project configuration (runner.hosts' agent CLIs): plugins (OpenCode runs JavaScript from
# .opencode/), hooks and MCP servers (.gemini/settings.json, .github/hooks, .codex/config.toml), and the skills
# folders a session's library is placed in (.agents/skills). A case's files never go there either.
RESERVED_AGENT_TOP = (".opencode", "opencode.json", "opencode.jsonc", ".codex", ".gemini", ".github", ".agents")
RESERVED_ANYWHERE = (".git",)


def reserved_path(relative: str) -> str | None:
    """Why a case file at this path (relative to the session's project) would be host configuration; None when it
    is an ordinary file. Compared without case: a case-insensitive filesystem would make `.Claude` the same."""
    parts = [part.casefold() for part in posixpath.normpath(relative.replace("\\", "/")).split("/") if part not in
             ("", ".")]
    if not parts:
        return None
    if parts[0] in RESERVED_TOP:
        return (f"`{parts[0]}` in the session's project is Claude Code's own configuration (settings with hooks, "
                "helpers and environment; commands; agents; MCP servers)")
    if parts[0] in RESERVED_AGENT_TOP:
        return (f"`{parts[0]}` in the session's project is an agent host's own configuration (plugins, hooks, MCP "
                "servers, skills)")
    hit = next((part for part in parts if part in RESERVED_ANYWHERE), None)
    if hit is not None:
        return "a `.git` folder would make the project a repository whose configuration can run commands"
    return None


def check_case_files(case: Case) -> list[Finding]:
    out = []
    for name in case.files:
        why = reserved_path(name)
        if why is not None:
            out.append(error("case-file-reserved", case.file, case.lines.get("files", case.line),
                             f"case {case.id}: file {name!r} would be copied to {name} in the session's project, "
                             f"but {why}; a case's files never go there, so the case does not run. Move the file "
                             "elsewhere in the case's folder", skill=case.skill, uid=case.uid))
    return out


def _masked(text: str) -> str:
    """`text` with the inside of each code span blanked (same length), as the CLI does before it looks for inline
    shell: `!` inside `code` is text. A span right after `!` or a backtick is the command itself and stays."""
    def blank(match: re.Match[str]) -> str:
        before = text[match.start() - 1] if match.start() else ""
        return match.group(0) if before in ("!", "`") else "`" + " " * (len(match.group(0)) - 2) + "`"
    return CODE_SPAN.sub(blank, text)


def without_shell(body: str) -> str:
    """A skill body as Claude Code shows it with disableSkillShellExecution: each inline command replaced by
    SHELL_PLACEHOLDER (what the api host sends, so both hosts show the model the same text)."""
    body = FENCED_SHELL.sub(SHELL_PLACEHOLDER, body)
    if "!`" not in body:
        return body
    for match in reversed(list(INLINE_SHELL.finditer(_masked(body)))):
        body = body[:match.start()] + SHELL_PLACEHOLDER + body[match.end():]
    return body


def first_shell(body: str) -> int | None:
    """The offset of the body's first inline command, or None."""
    starts = [m.start() for m in (FENCED_SHELL.search(body), INLINE_SHELL.search(_masked(body))) if m is not None]
    return min(starts) if starts else None


def _first_line(text: str, start: int, offset: int) -> int:
    return start + text.count("\n", 0, offset)


def check_skill(skill: Skill) -> list[Finding]:
    out = []
    if skill.frontmatter_ok and skill.fields.get("hooks"):
        out.append(warning("skill-hooks-not-run", skill.skill_md, skill.key_lines.get("hooks", 2),
                           "the skill's `hooks` never run in eval sessions (every session runs with Claude Code's "
                           "disableAllHooks, so no pull request can run a command through them): its evals measure "
                           "the skill without its hooks", skill=skill.name))
    offset = first_shell(skill.body)
    if offset is not None:
        out.append(warning("skill-inline-shell", skill.skill_md, _first_line(skill.body, skill.body_line, offset),
                           "the skill's inline shell (!`...` or a ```! block) is not run in eval sessions: the model "
                           "sees \"[shell command execution disabled by policy]\" in its place, as Claude Code shows "
                           "it with disableSkillShellExecution", skill=skill.name))
    return out


def check_agents(library: Library, max_bytes: int) -> list[Finding]:
    """Subagents whose frontmatter has hooks or MCP servers. A file that cannot be read or parsed says nothing here
    (the host would not load its fields either)."""
    root = Path(library.root)
    policy = make_policy([root], root, max_bytes)
    out = []
    for name, path in sorted(library.agent_paths().items()):
        shown = library.agents[name].file if name in library.agents else str(path)
        text, problem = read_text(Path(path), policy)
        if text is None or problem is not None:
            continue
        parsed, _ = frontmatter.parse(text, shown)
        if parsed is None:
            continue
        if parsed.fields.get("hooks"):
            out.append(warning("agent-hooks-not-run", shown, parsed.key_lines.get("hooks", 2),
                               f"subagent {name}'s `hooks` never run in eval sessions (disableAllHooks): a case that "
                               "delegates to it measures it without them"))
        if parsed.fields.get("mcpServers"):
            out.append(warning("agent-mcp-not-started", shown, parsed.key_lines.get("mcpServers", 2),
                               f"subagent {name}'s `mcpServers` are never started in eval sessions (sessions run "
                               "with --strict-mcp-config and no server): its tools from them are absent"))
    return out


def check_library(library: Library, max_bytes: int) -> list[Finding]:
    out: list[Finding] = []
    for skill in library.skills.values():
        out += check_skill(skill)
    out += check_agents(library, max_bytes)
    for case in library.cases:
        out += check_case_files(case)
    return out
